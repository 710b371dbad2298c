//! Studio's views of the config and agent files: the agents, time zones, people, the bill, the
//! bots `/readyz` waits for, where the files are that its editors change, the secret variables
//! (Keys & tokens) and the model providers. Built at boot, replaced as a whole by a reload,
//! shared by every clone of the Studio state.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::{AgentSpec, ConfigSource, LoadedConfig, ProviderConfig};
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
    pub files: Live<FileView>,
    /// The model providers as the daemon runs them (replaced when a reload changes one).
    pub providers: Live<Providers>,
    /// The secret variables the files name and where each value comes from (Keys & tokens).
    pub secrets: Live<super::secrets::SecretsView>,
    /// The WhatsApp accounts `/hooks/whatsapp` routes to.
    pub whatsapp: Live<crate::whatsapp::Directory>,
}

/// Where the files are that Studio's editors change, and what they define.
#[derive(Debug, Clone, Default)]
pub struct FileView {
    /// The daemon's config file (`None`: it runs on the built-in defaults).
    pub config_file: Option<PathBuf>,
    /// The agents' directory (`None`: the built-in example agent runs).
    pub agents_dir: Option<PathBuf>,
    /// Each agent's definition as the files say (name → spec).
    pub agents: BTreeMap<String, AgentSpec>,
    /// The model providers as the config file says them (no key: only the variable's name).
    pub providers: BTreeMap<String, ProviderConfig>,
    /// The daemon's time zone (the default of new schedules and agents).
    pub timezone: String,
    /// `[[nodes]]` (issue #34): the paired machines, as the config file says them.
    pub nodes: Vec<crate::config::NodeEntry>,
}

impl FileView {
    fn new(loaded: &LoadedConfig) -> Self {
        Self {
            config_file: match &loaded.source {
                ConfigSource::File(path) => Some(path.clone()),
                ConfigSource::BuiltIn => None,
            },
            agents_dir: loaded.agents_source.clone(),
            agents: loaded
                .agents
                .iter()
                .map(|spec| (spec.name.clone(), spec.clone()))
                .collect(),
            providers: loaded
                .config
                .providers
                .iter()
                .map(|(name, provider)| (name.clone(), provider.clone()))
                .collect(),
            timezone: loaded.timezone.zone.name().to_string(),
            nodes: loaded.config.nodes.clone(),
        }
    }

    /// The file that defines `agent`, when there is one to edit.
    pub fn agent_file(&self, agent: &str) -> Option<PathBuf> {
        crate::config::edit::find_agent_file(self.agents_dir.as_deref()?, agent)
    }
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
            files: Live::new(FileView::new(loaded)),
            providers: Live::from_arc(providers.clone()),
            secrets: Live::new(super::secrets::SecretsView::new(loaded)),
            whatsapp: Live::new(crate::whatsapp::Directory::new(loaded, options.channels)),
        }
    }

    /// Replaces every view with what `loaded` says (after a reload).
    pub fn refresh(
        &self,
        loaded: &LoadedConfig,
        prices: &Prices,
        providers: &Arc<Providers>,
        options: StartOptions,
    ) {
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
        self.files.set(FileView::new(loaded));
        self.providers.set_arc(providers.clone());
        self.secrets.set(super::secrets::SecretsView::new(loaded));
        // The webhook routes by the accounts the reload just started.
        self.whatsapp
            .set(crate::whatsapp::Directory::new(loaded, options.channels));
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

/// The actor ids `/readyz` waits for: every configured bot and channel account (WhatsApp, Signal).
/// (MCP servers are not listed: `/readyz` asks the MCP supervisor for its current servers at every
/// probe, so one a reload removed cannot hold readiness.)
fn ready_ids(loaded: &LoadedConfig, options: StartOptions) -> Vec<String> {
    let bots = crate::reload::bot_specs(loaded, options.channels)
        .into_iter()
        .map(|(spec, _)| telegram::name(&spec.name).local().to_string());
    let whatsapp = crate::whatsapp::Directory::new(loaded, options.channels)
        .accounts
        .into_values()
        .map(|account| {
            crate::protocol::channel::name("wa", &account.agent)
                .local()
                .to_string()
        });
    let signal = loaded
        .agents
        .iter()
        .filter(|spec| options.channels && spec.signal.is_some())
        .map(|spec| {
            crate::protocol::channel::name("sg", &spec.name)
                .local()
                .to_string()
        });
    bots.chain(whatsapp).chain(signal).collect()
}
