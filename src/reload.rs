//! Reload planning: what a re-read of the config and agent files changes in a running daemon.
//!
//! Pure functions over two [`LoadedConfig`]s (the running one and the one just read), so that the
//! rules are tested without actors: [`environment`] rebuilds the environment the files are read
//! with (the daemon scrubbed its secret variables at start, so their boot values are put back),
//! [`validate`] refuses what boot would only hint at but a running daemon cannot fix (a new bot
//! whose token variable is not set, a provider the running daemon does not have, two bots on one
//! token), [`effective`] keeps the running settings that need a restart, [`needs_restart`] names
//! them (every key but the agent files, `[agents]` and `[[mcp.servers]]`), and [`plan`] lists the
//! agents, bots, WhatsApp and Signal accounts and services to add, remove or restart. [`Unapplied`] is what a reload could not
//! apply, for the next one to do again. `actors/reloader.rs` applies the plan.
//!
//! Secrets from the environment are read at start. A variable set later is read at a reload only
//! if the process environment has it, and is then not scrubbed (the report warns); every
//! boot-time environment secret stays in the running configuration until the restart, even if
//! the new files no longer name it ([`effective`]). Secrets from the secrets store
//! (`<data_dir>/secrets.toml`, Studio's Keys & tokens) follow the store at every reload: a new
//! value restarts the bots that use it and, through [`Plan::providers_changed`], the agents of a
//! provider whose key changed; a deleted one is gone (unless the environment sets it).
//!
//! Invariants:
//! - A refused reload changes nothing: validation runs on the whole set of files before anything
//!   is stopped or started.
//! - A setting that needs a restart is applied nowhere until the restart (new agents are built
//!   with the running settings), and the report names it (`studio.bind`).
//! - An agent or bot whose definition (and token) did not change is not in the plan, so it is not
//!   touched; a restarted bot keeps its offset (`bot_offsets`, by bot id), and a replaced agent's
//!   open runs resume at its next start (durable in SQLite).

use std::collections::{BTreeMap, BTreeSet};

use crate::config::{AgentSpec, Config, LoadedConfig};
use crate::secrets::Secret;

/// The settings read live at a reload: the agent files (and where they are), the MCP servers.
/// Every other key of the config file needs a restart.
/// (`nodes`: issue #34, applied like MCP servers; `node` is read only by `node serve`, which a
/// reload does not touch.)
const LIVE_SECTIONS: &[&str] = &["agents", "providers", "nodes", "node"];
/// In `[mcp]`, only the server list is applied live.
const LIVE_MCP_KEYS: &[&str] = &["servers"];

/// The environment to read the files with: the process's own, plus the secret variables the
/// daemon removed from it at start (their values as read then). Values read from the secrets
/// store are not put in: the next read takes them from the store as it is then.
pub fn environment(running: &LoadedConfig) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    for (var, secret) in &running.secrets {
        if running.secret_from_store(var) {
            continue;
        }
        env.entry(var.clone())
            .or_insert_with(|| secret.expose().to_string());
    }
    env
}

/// The agents of `loaded` that run a bot in this daemon, each with its token: those with a
/// `[telegram]` table whose token variable is set, when the daemon runs channels at all (`chat`
/// beside a running daemon does not). The one rule for this: boot (`root`), `/readyz`
/// and the reload plan use it.
pub fn bot_specs(loaded: &LoadedConfig, channels: bool) -> Vec<(AgentSpec, Secret)> {
    if !channels {
        return Vec::new();
    }
    loaded
        .agents
        .iter()
        .filter_map(|spec| {
            let token = loaded.secret(&spec.telegram.as_ref()?.token_env)?.clone();
            Some((spec.clone(), token))
        })
        .collect()
}

/// [`bot_specs`] by agent name, with the token's text (to compare two reads).
fn bots(loaded: &LoadedConfig, channels: bool) -> BTreeMap<String, (AgentSpec, String)> {
    bot_specs(loaded, channels)
        .into_iter()
        .map(|(spec, token)| (spec.name.clone(), (spec, token.expose().to_string())))
        .collect()
}

/// Refuses files a running daemon cannot apply. Load-time validation (`config::load`) has run.
pub fn validate(running: &LoadedConfig, new: &LoadedConfig) -> Result<(), String> {
    let mut tokens: BTreeMap<&str, &str> = BTreeMap::new();
    for spec in &new.agents {
        let before = running.agent(&spec.name);
        let touched = before != Some(spec);
        if let Some(telegram) = &spec.telegram {
            match new.secret(&telegram.token_env) {
                Some(token) => {
                    if let Some(other) = tokens.insert(token.expose(), &spec.name) {
                        return Err(format!(
                            "agents `{other}` and `{}` use the same Telegram bot token: one bot can be polled by one agent only",
                            spec.name
                        ));
                    }
                }
                None if touched => {
                    return Err(format!(
                        "agent `{}`: its bot token `{}` is not set: set it in Studio's Keys & tokens \
                         page (applied at once), or in the service's environment file and then \
                         `systemctl restart clawvisor` (a variable added to the environment after the \
                         daemon started needs a restart)",
                        spec.name, telegram.token_env
                    ));
                }
                None => {}
            }
        }
    }
    Ok(())
}

/// The configuration to run with after the reload: the running settings, with the new agent
/// files, agents directory, model providers and MCP server list (what [`LIVE_SECTIONS`] and [`LIVE_MCP_KEYS`] name).
///
/// Its secrets are the running environment ones plus those the new read found: the running
/// settings (a provider's or the embeddings' key, voice, web search) still need the variables
/// they were started with, and a scrubbed variable that is dropped here could never be put back
/// into the environment of a later reload (see [`environment`]). A boot-time environment secret
/// is dropped only by a restart, and where both name a variable, its running value is kept (it is
/// what the daemon read). A secret from the secrets store is the store's value now, or gone.
pub fn effective(running: &LoadedConfig, new: LoadedConfig) -> LoadedConfig {
    let mut config = running.config.clone();
    config.agents = new.config.agents.clone();
    config.providers = new.config.providers.clone();
    config.mcp.servers = new.config.mcp.servers.clone();
    // Issue #34: `[[nodes]]` are links of the MCP supervisor, applied like MCP servers.
    config.nodes = new.config.nodes.clone();
    let mut secrets = new.secrets;
    let mut secret_sources = new.secret_sources;
    for (var, secret) in &running.secrets {
        if running.secret_from_store(var) {
            continue;
        }
        secrets.insert(var.clone(), secret.clone());
        secret_sources.insert(var.clone(), crate::config::SecretSource::Environment);
    }
    LoadedConfig {
        config,
        timezone: running.timezone.clone(),
        secrets,
        secret_sources,
        ..new
    }
}

/// The settings whose value differs between two configs and that apply only at a restart, as
/// `section.key` (or `key` for a top-level value).
pub fn needs_restart(running: &Config, new: &Config) -> Vec<String> {
    let (Ok(before), Ok(after)) = (serde_json::to_value(running), serde_json::to_value(new)) else {
        return vec!["(the settings could not be compared; restart to apply them)".into()];
    };
    let empty = serde_json::Map::new();
    let before = before.as_object().unwrap_or(&empty);
    let after = after.as_object().unwrap_or(&empty);
    let mut changed = BTreeSet::new();
    for key in before.keys().chain(after.keys()) {
        if LIVE_SECTIONS.contains(&key.as_str()) {
            continue;
        }
        let (old, new) = (before.get(key), after.get(key));
        if old == new {
            continue;
        }
        match (
            old.and_then(serde_json::Value::as_object),
            new.and_then(serde_json::Value::as_object),
        ) {
            (Some(old), Some(new)) => {
                for sub in old.keys().chain(new.keys()) {
                    if key == "mcp" && LIVE_MCP_KEYS.contains(&sub.as_str()) {
                        continue;
                    }
                    if old.get(sub) != new.get(sub) {
                        changed.insert(format!("{key}.{sub}"));
                    }
                }
            }
            _ => {
                changed.insert(key.clone());
            }
        }
    }
    changed.into_iter().collect()
}

/// A seam channel's account (`wa`, `sg`) of one agent, as a reload sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeamAccount {
    pub channel: &'static str,
    pub agent: String,
}

impl SeamAccount {
    /// `ada's Signal account`, for the report.
    pub fn describe(&self) -> String {
        let channel = match self.channel {
            "wa" => "WhatsApp",
            "sg" => "Signal",
            other => other,
        };
        format!("{}'s {channel} account", self.agent)
    }
}

/// Each seam account `loaded` runs, with what it is built from (its agent's definition, with its
/// table, and its secrets, to compare two reads): WhatsApp accounts whose secrets are set, every
/// `[signal]` table; none when the daemon runs no channels.
fn seam_accounts(
    loaded: &LoadedConfig,
    channels: bool,
) -> BTreeMap<SeamAccount, (AgentSpec, Vec<String>)> {
    let mut accounts = BTreeMap::new();
    for spec in loaded.agents.iter().filter(|_| channels) {
        let Some(whatsapp) = &spec.whatsapp else {
            continue;
        };
        // As `whatsapp::Directory`: an account runs only with its three secrets set.
        let secrets: Option<Vec<String>> = whatsapp
            .secret_vars()
            .iter()
            .map(|var| loaded.secret(var).map(|secret| secret.expose().to_string()))
            .collect();
        if let Some(secrets) = secrets {
            let account = SeamAccount {
                channel: "wa",
                agent: spec.name.clone(),
            };
            accounts.insert(account, (spec.clone(), secrets));
        }
    }
    for spec in loaded
        .agents
        .iter()
        .filter(|spec| channels && spec.signal.is_some())
    {
        accounts.insert(
            SeamAccount {
                channel: "sg",
                agent: spec.name.clone(),
            },
            (spec.clone(), Vec::new()),
        );
    }
    accounts
}

/// What a reload changes, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub agents_added: Vec<String>,
    pub agents_removed: Vec<String>,
    pub agents_changed: Vec<String>,
    pub bots_added: Vec<String>,
    pub bots_removed: Vec<String>,
    pub bots_restarted: Vec<String>,
    /// WhatsApp and Signal accounts to start, to stop, and to start again (their table, secrets
    /// or agent changed): stopped before their agent changes, started after it.
    pub seam_added: Vec<SeamAccount>,
    pub seam_removed: Vec<SeamAccount>,
    pub seam_restarted: Vec<SeamAccount>,
    /// The MCP server list or the agents that may use a server changed.
    pub mcp_changed: bool,
    /// A model provider was added, removed or changed (its entry or its key): the providers
    /// are built again, and the agents that use a changed one restart with them.
    pub providers_changed: bool,
}

/// Compares the running agents and bots with the new ones. `channels`: whether this daemon runs
/// bots at all (`chat` beside a running daemon does not).
pub fn plan(running: &LoadedConfig, new: &LoadedConfig, channels: bool) -> Plan {
    let mut plan = Plan::default();
    let changed_providers = changed_providers(running, new);
    plan.providers_changed = !changed_providers.is_empty();
    for spec in &new.agents {
        let uses_changed = std::iter::once(&spec.provider)
            .chain(spec.fallback.iter().map(|fallback| &fallback.provider))
            .any(|provider| changed_providers.contains(provider));
        match running.agent(&spec.name) {
            None => plan.agents_added.push(spec.name.clone()),
            Some(before) if before != spec || uses_changed => {
                plan.agents_changed.push(spec.name.clone())
            }
            Some(_) => {}
        }
    }
    for spec in &running.agents {
        if new.agent(&spec.name).is_none() {
            plan.agents_removed.push(spec.name.clone());
        }
    }
    if channels {
        let (before, after) = (bots(running, channels), bots(new, channels));
        for (name, bot) in &after {
            match before.get(name) {
                None => plan.bots_added.push(name.clone()),
                Some(old) if old != bot => plan.bots_restarted.push(name.clone()),
                Some(_) => {}
            }
        }
        plan.bots_removed = before
            .keys()
            .filter(|name| !after.contains_key(*name))
            .cloned()
            .collect();
        let (before, after) = (
            seam_accounts(running, channels),
            seam_accounts(new, channels),
        );
        for (account, built_from) in &after {
            match before.get(account) {
                None => plan.seam_added.push(account.clone()),
                Some(old) if old != built_from => plan.seam_restarted.push(account.clone()),
                Some(_) => {}
            }
        }
        plan.seam_removed = before
            .keys()
            .filter(|account| !after.contains_key(*account))
            .cloned()
            .collect();
    }
    plan.mcp_changed = running.config.mcp.servers != new.config.mcp.servers
        || running.config.nodes != new.config.nodes
        || mcp_view(running) != mcp_view(new);
    plan
}

/// The providers whose entry or key differs between two reads (added and removed ones too).
fn changed_providers(running: &LoadedConfig, new: &LoadedConfig) -> BTreeSet<String> {
    let key = |loaded: &LoadedConfig, env: &str| {
        loaded.secret(env).map(|secret| secret.expose().to_string())
    };
    let (before, after) = (&running.config.providers, &new.config.providers);
    before
        .keys()
        .chain(after.keys())
        .filter(|name| {
            let (old, fresh) = (before.get(*name), after.get(*name));
            old != fresh
                || old.is_some_and(|provider| {
                    key(running, &provider.api_key_env) != key(new, &provider.api_key_env)
                })
        })
        .cloned()
        .collect()
}

/// What a reload could not apply (its supervisor did not answer, or was not running), so that
/// the next reload does it again even though the files say the same by then.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Unapplied {
    /// Agents that were not added, replaced or removed.
    pub agents: BTreeSet<String>,
    /// Agents whose bot was not started, restarted or stopped.
    pub bots: BTreeSet<String>,
    /// WhatsApp and Signal accounts that were not started, restarted or stopped.
    pub seam: BTreeSet<SeamAccount>,
    /// Root services (by child id) that were not restarted with their new slice.
    pub services: BTreeSet<String>,
    /// The MCP supervisor was not given the new server list.
    pub mcp: bool,
}

impl Unapplied {
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
            && self.bots.is_empty()
            && self.seam.is_empty()
            && self.services.is_empty()
            && !self.mcp
    }
}

impl Plan {
    /// Adds to the plan what an earlier reload could not apply, as `new` now says it should be:
    /// an agent (or bot) still in the files is started again, one no longer there is stopped.
    pub fn retry(&mut self, unapplied: &Unapplied, new: &LoadedConfig, channels: bool) {
        fn add(list: &mut Vec<String>, name: &str) {
            if !list.iter().any(|other| other == name) {
                list.push(name.to_string());
            }
        }
        for name in &unapplied.agents {
            if new.agent(name).is_some() {
                if !self.agents_added.contains(name) {
                    add(&mut self.agents_changed, name);
                }
            } else {
                add(&mut self.agents_removed, name);
            }
        }
        if channels {
            let bots = bots(new, channels);
            for name in &unapplied.bots {
                if bots.contains_key(name) {
                    if !self.bots_added.contains(name) {
                        add(&mut self.bots_restarted, name);
                    }
                } else {
                    add(&mut self.bots_removed, name);
                }
            }
        }
        let accounts = seam_accounts(new, channels);
        for account in &unapplied.seam {
            let planned =
                self.seam_added.contains(account) || self.seam_restarted.contains(account);
            if accounts.contains_key(account) {
                if !planned {
                    self.seam_restarted.push(account.clone());
                }
            } else if !self.seam_removed.contains(account) {
                self.seam_removed.push(account.clone());
            }
        }
        self.mcp_changed |= unapplied.mcp;
    }
}

/// What the MCP links are built from besides their server entries: each agent's tool list.
fn mcp_view(loaded: &LoadedConfig) -> BTreeMap<&str, &[String]> {
    loaded
        .agents
        .iter()
        .map(|spec| (spec.name.as_str(), spec.tools.as_slice()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes the files into `dir` (replacing the agent files) and loads them, as a reload would.
    fn loaded(
        dir: &std::path::Path,
        config: &str,
        agents: &[&str],
        env: &[(&str, &str)],
    ) -> LoadedConfig {
        let actors = dir.join("actors");
        let _ = std::fs::remove_dir_all(&actors);
        std::fs::create_dir_all(&actors).expect("the agents directory");
        for (index, agent) in agents.iter().enumerate() {
            std::fs::write(actors.join(format!("a{index}.toml")), agent).expect("an agent file");
        }
        std::fs::write(dir.join("clawvisor.toml"), config).expect("the config file");
        let overrides = crate::config::Overrides {
            config: Some(dir.join("clawvisor.toml")),
            ..Default::default()
        };
        let env = env
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        crate::config::load_in(&overrides, env, dir).expect("the config loads")
    }

    const CONFIG: &str = "data_dir = \"data\"\n[agents]\ndir = \"actors\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n";

    fn agent(name: &str, extra: &str) -> String {
        format!(
            "name = \"{name}\"\nprovider = \"local\"\nmodel = \"m\"\ninstructions = \"Be brief.\"\n{extra}"
        )
    }

    fn bot(variable: &str) -> String {
        format!("[telegram]\ntoken_env = \"{variable}\"\n")
    }

    #[test]
    fn signal_and_whatsapp_accounts_are_added_restarted_and_removed_live() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let signal = |account: &str, allow: &str| {
            format!("[signal]\naccount = \"{account}\"\nallow_users = [\"{allow}\"]\n")
        };
        let whatsapp = "[whatsapp]\nphone_number_id = \"1098765432\"\naccess_token_env = \"WA_TOKEN\"\napp_secret_env = \"WA_SECRET\"\nverify_token_env = \"WA_VERIFY\"\n";
        let env = [("WA_TOKEN", "t"), ("WA_SECRET", "s"), ("WA_VERIFY", "v")];
        let sg = |agent: &str| SeamAccount {
            channel: "sg",
            agent: agent.into(),
        };
        let running = loaded(
            dir.path(),
            CONFIG,
            &[
                &agent("ada", ""),
                &agent("bob", &signal("+4915100000002", "+4917200000001")),
            ],
            &env,
        );
        let added = loaded(
            dir.path(),
            CONFIG,
            &[
                &agent(
                    "ada",
                    &format!("{}{whatsapp}", signal("+4915100000001", "+4917200000001")),
                ),
                &agent("bob", &signal("+4915100000002", "+4917200000002")),
            ],
            &env,
        );
        let planned = plan(&running, &added, true);
        assert_eq!(
            planned.seam_added,
            vec![
                sg("ada"),
                SeamAccount {
                    channel: "wa",
                    agent: "ada".into()
                }
            ]
        );
        assert_eq!(planned.seam_restarted, vec![sg("bob")]);
        assert!(planned.seam_removed.is_empty());
        assert!(
            plan(&running, &added, false).seam_added.is_empty(),
            "no channels, no accounts"
        );
        let removed = plan(&added, &running, true);
        assert_eq!(
            removed.seam_removed,
            vec![
                sg("ada"),
                SeamAccount {
                    channel: "wa",
                    agent: "ada".into()
                }
            ]
        );
        assert_eq!(plan(&running, &running, true), Plan::default());
        assert_eq!(sg("ada").describe(), "ada's Signal account");
    }

    #[test]
    fn only_what_changed_is_planned() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let running = loaded(
            dir.path(),
            CONFIG,
            &[&agent("ada", &bot("ADA_TOKEN")), &agent("bob", "")],
            &[("ADA_TOKEN", "1:a")],
        );
        let new = loaded(
            dir.path(),
            CONFIG,
            &[
                &agent("ada", &bot("ADA_TOKEN")),
                &agent("cyd", &bot("CYD_TOKEN")),
            ],
            &[("ADA_TOKEN", "1:a"), ("CYD_TOKEN", "2:c")],
        );
        let plan = plan(&running, &new, true);
        assert_eq!(plan.agents_added, vec!["cyd"]);
        assert_eq!(plan.agents_removed, vec!["bob"]);
        assert!(plan.agents_changed.is_empty());
        assert_eq!(plan.bots_added, vec!["cyd"]);
        assert!(plan.bots_restarted.is_empty() && plan.bots_removed.is_empty());
        assert!(plan.mcp_changed, "the agents' tool view changed");
        assert!(validate(&running, &new).is_ok());
    }

    #[test]
    fn a_changed_agent_restarts_its_bot_and_a_new_token_restarts_the_bot() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let running = loaded(
            dir.path(),
            CONFIG,
            &[&agent("ada", &bot("ADA_TOKEN"))],
            &[("ADA_TOKEN", "1:a")],
        );
        let changed = loaded(
            dir.path(),
            CONFIG,
            &[&agent(
                "ada",
                &format!("autonomy = \"supervised\"\n{}", bot("ADA_TOKEN")),
            )],
            &[("ADA_TOKEN", "1:a")],
        );
        let plan_changed = plan(&running, &changed, true);
        assert_eq!(plan_changed.agents_changed, vec!["ada"]);
        assert_eq!(plan_changed.bots_restarted, vec!["ada"]);
        let new_token = loaded(
            dir.path(),
            CONFIG,
            &[&agent("ada", &bot("ADA_TOKEN"))],
            &[("ADA_TOKEN", "1:b")],
        );
        let plan_token = plan(&running, &new_token, true);
        assert!(plan_token.agents_changed.is_empty());
        assert_eq!(plan_token.bots_restarted, vec!["ada"]);
        assert!(plan(&running, &running, true) == Plan::default());
        assert!(
            plan(&running, &changed, false).bots_restarted.is_empty(),
            "no channels, no bots"
        );
    }

    #[test]
    fn files_a_running_daemon_cannot_apply_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let running = loaded(dir.path(), CONFIG, &[&agent("ada", "")], &[]);
        let missing_token = loaded(dir.path(), CONFIG, &[&agent("ada", &bot("ADA_TOKEN"))], &[]);
        let error = validate(&running, &missing_token).unwrap_err();
        assert!(
            error.contains("ADA_TOKEN") && error.contains("restart"),
            "{error}"
        );
        let shared = loaded(
            dir.path(),
            CONFIG,
            &[
                &agent("ada", &bot("ADA_TOKEN")),
                &agent("bob", &bot("BOB_TOKEN")),
            ],
            &[("ADA_TOKEN", "1:same"), ("BOB_TOKEN", "1:same")],
        );
        let error = validate(&running, &shared).unwrap_err();
        assert!(error.contains("same Telegram bot token"), "{error}");
        let other_provider = format!(
            "{CONFIG}[providers.other]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
        );
        let new_provider = loaded(
            dir.path(),
            &other_provider,
            &[&agent("ada", "").replace("\"local\"", "\"other\"")],
            &[],
        );
        // Model providers are live: an agent may move to a provider added in the same edit.
        assert_eq!(validate(&running, &new_provider), Ok(()));
    }

    #[test]
    fn a_reload_keeps_every_boot_secret_until_the_restart() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let keyed = |variable: &str| {
            CONFIG.replace(
                "kind = \"openai\"\n",
                &format!("kind = \"openai\"\napi_key_env = \"{variable}\"\n"),
            )
        };
        let running = loaded(
            dir.path(),
            &keyed("LOCAL_KEY"),
            &[&agent("ada", "")],
            &[("LOCAL_KEY", "sk-boot")],
        );
        assert!(running.secret("LOCAL_KEY").is_some());
        // The new files name another variable (providers are live, so this applies at once);
        // the boot's variable was scrubbed from the environment, so the new read does not see it.
        let new = loaded(
            dir.path(),
            &keyed("OTHER_KEY"),
            &[&agent("ada", "")],
            &[("OTHER_KEY", "sk-new")],
        );
        assert!(needs_restart(&running.config, &new.config).is_empty());
        let applied = effective(&running, new);
        assert_eq!(
            applied.secret("LOCAL_KEY").map(|key| key.expose()),
            Some("sk-boot"),
            "a boot secret stays until the restart"
        );
        assert_eq!(
            applied.secret("OTHER_KEY").map(|key| key.expose()),
            Some("sk-new")
        );
        // And the reload after this one still reads the files with the boot's value.
        assert_eq!(
            environment(&applied).get("LOCAL_KEY").map(String::as_str),
            Some("sk-boot")
        );
    }

    #[test]
    fn secrets_from_the_store_follow_the_store_and_rekey_their_providers() {
        use crate::config::secrets_file;
        let dir = tempfile::tempdir().expect("a scratch directory");
        let data = dir.path().join("data");
        let config = CONFIG.replace(
            "kind = \"openai\"\n",
            "kind = \"openai\"\napi_key_env = \"LOCAL_KEY\"\n",
        );
        let files =
            |dir: &std::path::Path| loaded(dir, &config, &[&agent("ada", &bot("ADA_TOKEN"))], &[]);
        secrets_file::set(&data, "LOCAL_KEY", "sk-stored-one-0001").unwrap();
        secrets_file::set(&data, "ADA_TOKEN", "1:stored-token-a").unwrap();
        let running = files(dir.path());
        assert!(running.secret_from_store("LOCAL_KEY"));
        assert!(
            !environment(&running).contains_key("LOCAL_KEY"),
            "a stored value is read from the store again, not put in the environment"
        );

        secrets_file::set(&data, "LOCAL_KEY", "sk-stored-two-0002").unwrap();
        secrets_file::set(&data, "ADA_TOKEN", "1:stored-token-b").unwrap();
        let new = effective(&running, files(dir.path()));
        assert_eq!(
            new.secret("LOCAL_KEY").map(|key| key.expose()),
            Some("sk-stored-two-0002")
        );
        let replaced = plan(&running, &new, true);
        assert!(replaced.providers_changed);
        assert_eq!(replaced.agents_changed, vec!["ada"]);
        assert_eq!(replaced.bots_restarted, vec!["ada"]);

        secrets_file::delete(&data, "ADA_TOKEN").unwrap();
        let after_delete = effective(&new, files(dir.path()));
        assert!(after_delete.secret("ADA_TOKEN").is_none());
        assert_eq!(plan(&new, &after_delete, true).bots_removed, vec!["ada"]);

        // The environment wins, and its boot value stays until the restart.
        let from_env = loaded(
            dir.path(),
            &config,
            &[&agent("ada", "")],
            &[("LOCAL_KEY", "sk-from-the-environment")],
        );
        assert!(!from_env.secret_from_store("LOCAL_KEY"));
        let next = effective(&from_env, files(dir.path()));
        assert_eq!(
            next.secret("LOCAL_KEY").map(|key| key.expose()),
            Some("sk-from-the-environment")
        );
        assert!(!plan(&from_env, &next, true).providers_changed);
    }

    #[test]
    fn what_a_reload_could_not_apply_is_planned_again() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let same = loaded(
            dir.path(),
            CONFIG,
            &[&agent("ada", &bot("ADA_TOKEN")), &agent("bob", "")],
            &[("ADA_TOKEN", "1:a")],
        );
        let mut retried = plan(&same, &same, true);
        assert_eq!(retried, Plan::default());
        let unapplied = Unapplied {
            agents: ["ada".to_string(), "gone".to_string()].into(),
            bots: ["ada".to_string(), "gone".to_string()].into(),
            services: BTreeSet::new(),
            seam: BTreeSet::new(),
            mcp: true,
        };
        retried.retry(&unapplied, &same, true);
        assert_eq!(retried.agents_changed, vec!["ada"]);
        assert_eq!(retried.agents_removed, vec!["gone"]);
        assert_eq!(retried.bots_restarted, vec!["ada"]);
        assert_eq!(retried.bots_removed, vec!["gone"]);
        assert!(retried.mcp_changed);
        let mut without_channels = Plan::default();
        without_channels.retry(&unapplied, &same, false);
        assert!(without_channels.bots_restarted.is_empty());
    }

    #[test]
    fn settings_that_need_a_restart_are_named_and_not_applied() {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let running = loaded(dir.path(), CONFIG, &[&agent("ada", "")], &[]);
        let moved = loaded(
            dir.path(),
            &format!("{CONFIG}[studio]\nbind = \"127.0.0.1:7999\"\n[mcp]\nping_every = \"5s\"\n"),
            &[&agent("ada", "")],
            &[],
        );
        assert_eq!(
            needs_restart(&running.config, &moved.config),
            vec!["mcp.ping_every", "studio.bind"]
        );
        let applied = effective(&running, moved);
        assert_eq!(applied.config.studio.bind, running.config.studio.bind);
        assert!(needs_restart(&running.config, &applied.config).is_empty());
    }
}
