//! Studio's views of the config and agent files: the agents, time zones, people, the bill, the
//! bots `/readyz` waits for, the secret variables (Keys & tokens) and the model providers (built
//! again by a reload that changes a key). Built at boot, replaced as a whole by a reload, shared
//! by every clone of the Studio state.

use std::sync::Arc;

use crate::config::LoadedConfig;
use crate::domain::StartOptions;
use crate::llm::Providers;
use crate::llm::prices::Prices;
use crate::protocol::telegram;

use super::Live;

/// Studio's views of the config and agent files (shared by every clone of the Studio state).
#[derive(Clone)]
pub struct StudioViews {
    pub agents: Live<Vec<super::AgentEntry>>,
    pub timezones: Live<super::timezones::Directory>,
    pub people: Live<Vec<super::people::FilePeople>>,
    pub bill: Live<super::costs::Bill>,
    pub ready: Live<Vec<String>>,
    pub secrets: Live<super::secrets::SecretsView>,
    /// Set by the reloader when it builds the providers again.
    pub providers: Live<Providers>,
}

impl StudioViews {
    pub fn new(
        loaded: &LoadedConfig,
        prices: &Prices,
        providers: &Arc<Providers>,
        options: StartOptions,
    ) -> Self {
        Self {
            agents: Live::new(agent_entries(loaded)),
            timezones: Live::new(super::timezones::Directory::new(
                &loaded.timezone,
                &loaded.agents,
            )),
            people: Live::new(super::people::FilePeople::from_specs(&loaded.agents)),
            bill: Live::new(super::costs::Bill::new(prices, &loaded.agents)),
            ready: Live::new(ready_ids(loaded, options)),
            secrets: Live::new(super::secrets::SecretsView::new(loaded)),
            providers: Live::shared(providers.clone()),
        }
    }

    /// Replaces every view with what `loaded` says (after a reload).
    pub fn refresh(&self, loaded: &LoadedConfig, prices: &Prices, options: StartOptions) {
        self.agents.set(agent_entries(loaded));
        self.timezones.set(super::timezones::Directory::new(
            &loaded.timezone,
            &loaded.agents,
        ));
        self.people
            .set(super::people::FilePeople::from_specs(&loaded.agents));
        self.bill
            .set(super::costs::Bill::new(prices, &loaded.agents));
        self.ready.set(ready_ids(loaded, options));
        self.secrets.set(super::secrets::SecretsView::new(loaded));
    }
}

fn agent_entries(loaded: &LoadedConfig) -> Vec<super::AgentEntry> {
    loaded
        .agents
        .iter()
        .map(|spec| super::AgentEntry {
            name: spec.name.clone(),
            telegram: spec.telegram.is_some(),
        })
        .collect()
}

/// The actor ids `/readyz` waits for: every configured bot. (MCP servers are not listed: `/readyz`
/// asks the MCP supervisor for its current servers at every probe, so one a reload removed
/// cannot hold readiness.)
fn ready_ids(loaded: &LoadedConfig, options: StartOptions) -> Vec<String> {
    crate::reload::bot_specs(loaded, options.channels)
        .iter()
        .map(|(spec, _)| telegram::name(&spec.name).local().to_string())
        .collect()
}
