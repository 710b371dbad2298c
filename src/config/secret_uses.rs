//! Which secret variables the configuration names, and what for: every `*_env` key of the config
//! and the agent files (a provider's `api_key_env`, a bot's `token_env`, Studio's `token_env` and
//! `metrics_token_env`, an MCP server's `env_from` and `headers_env`, `[web_search].api_key_env`,
//! `[[browser.logins]].password_env`, a trigger's `secret_env`).
//!
//! One list serves loading (`layers::read_secrets` reads exactly these variables, from the
//! environment or the secrets store) and Studio's Keys & tokens page (where each is used, and
//! whether a new value applies at a reload or at the next restart).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{AgentSpec, Config};

/// What a secret variable is used by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretUseKind {
    /// A model provider's API key (`[providers.NAME].api_key_env`).
    Provider,
    /// An agent's Telegram bot token (`[telegram].token_env` of the agent's file).
    Bot,
    /// Studio's access token (`[studio].token_env`).
    StudioToken,
    /// The token `/metrics` requires (`[studio].metrics_token_env`).
    MetricsToken,
    /// An MCP server's environment or header (`env_from`, `headers_env`).
    McpServer,
    /// The web search backend's key (`[web_search].api_key_env`).
    WebSearch,
    /// A site's password for the browser tool (`[[browser.logins]].password_env`).
    BrowserLogin,
    /// A webhook trigger's secret (`[[triggers]].secret_env`).
    Trigger,
    /// An agent's WhatsApp account: its access token, app secret or verify token.
    WhatsApp,
}

/// One use of a secret variable: by what, and whether a new value applies at a reload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretUse {
    pub kind: SecretUseKind,
    /// The provider, agent or server (empty for Studio's and web search's keys).
    pub name: String,
}

impl SecretUse {
    /// A sentence part for people: "the Telegram bot of agent ada".
    pub fn describe(&self) -> String {
        let name = &self.name;
        match self.kind {
            SecretUseKind::Provider => format!("the API key of model provider {name}"),
            SecretUseKind::Bot => format!("the Telegram bot of agent {name}"),
            SecretUseKind::StudioToken => "Studio's access token".into(),
            SecretUseKind::MetricsToken => "the access token of /metrics".into(),
            SecretUseKind::McpServer => format!("tool server (MCP) {name}"),
            SecretUseKind::WebSearch => "the web search backend's key".into(),
            SecretUseKind::BrowserLogin => format!("the browser's password for {name}"),
            SecretUseKind::Trigger => format!("the secret of webhook trigger {name}"),
            SecretUseKind::WhatsApp => format!("the WhatsApp account of agent {name}"),
        }
    }

    /// Whether something stops working while the variable is unset. Studio's access token is
    /// optional: the login link and `<data_dir>/studio.token` work without it, and loading
    /// refuses a Studio bound off loopback without it.
    pub fn required(&self) -> bool {
        self.kind != SecretUseKind::StudioToken
    }

    /// Whether a changed value is applied by a reload (bots restart, the agents of a provider
    /// restart with the new key); otherwise it applies at the next restart of the daemon.
    pub fn applies_at_reload(&self) -> bool {
        matches!(
            self.kind,
            SecretUseKind::Provider | SecretUseKind::Bot | SecretUseKind::WhatsApp
        )
    }
}

/// Every secret variable the config and the agents name, with its uses, by variable name.
/// Blank names are left out.
pub fn secret_uses(config: &Config, agents: &[AgentSpec]) -> BTreeMap<String, Vec<SecretUse>> {
    let mut uses: BTreeMap<String, Vec<SecretUse>> = BTreeMap::new();
    let mut add = |var: &str, kind: SecretUseKind, name: &str| {
        let var = var.trim();
        if var.is_empty() {
            return;
        }
        let entry = uses.entry(var.to_string()).or_default();
        let new = SecretUse {
            kind,
            name: name.to_string(),
        };
        if !entry.contains(&new) {
            entry.push(new);
        }
    };
    for (name, provider) in &config.providers {
        add(&provider.api_key_env, SecretUseKind::Provider, name);
    }
    for agent in agents {
        if let Some(telegram) = &agent.telegram {
            add(&telegram.token_env, SecretUseKind::Bot, &agent.name);
        }
        if let Some(whatsapp) = &agent.whatsapp {
            for var in whatsapp.secret_vars() {
                add(var, SecretUseKind::WhatsApp, &agent.name);
            }
        }
    }
    add(&config.studio.token_env, SecretUseKind::StudioToken, "");
    add(
        &config.studio.metrics_token_env,
        SecretUseKind::MetricsToken,
        "",
    );
    for server in &config.mcp.servers {
        for var in server.secret_vars() {
            add(var, SecretUseKind::McpServer, &server.name);
        }
    }
    for var in config.web_search.secret_vars() {
        add(var, SecretUseKind::WebSearch, "");
    }
    for login in &config.browser.logins {
        add(
            &login.password_env,
            SecretUseKind::BrowserLogin,
            &login.site,
        );
    }
    for trigger in &config.triggers {
        add(&trigger.secret_var(), SecretUseKind::Trigger, &trigger.name);
    }
    uses
}
