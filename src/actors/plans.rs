//! Agent plans: each agent's runtime (providers, prices, tools, workspace, skills), built from the
//! loaded files at boot and again by a reload for the agents it adds or restarts.

use std::sync::Arc;

use super::agent_supervisor::AgentPlan;
use crate::agent::AgentRuntime;
use crate::config::LoadedConfig;
use crate::events::EventBus;
use crate::llm::Providers;
use crate::registry::Registry;
use crate::store::Store;

/// Builds each agent's runtime: its providers, prices, tools and workspace (`only`: just the
/// agents named, for a reload); the providers, prices and model-call turns are the boot's, shared.
pub fn agent_plans(
    loaded: &Arc<LoadedConfig>,
    only: Option<&[String]>,
    store: &Store,
    registry: &Registry,
    events: &EventBus,
    scheduler: bool,
    (providers, prices, model_calls): (
        &Arc<Providers>,
        &Arc<crate::llm::prices::Prices>,
        &crate::agent::ModelCalls,
    ),
) -> Vec<AgentPlan> {
    let config = &loaded.config;
    let all_agents = Arc::new(loaded.agents.clone());
    let web_search = crate::tools::web_search::WebSearchTool::from_config(loaded);
    loaded
        .agents
        .iter()
        .filter(|spec| only.is_none_or(|names| names.contains(&spec.name)))
        .map(|spec| {
            let workspace = spec
                .workspace
                .clone()
                .unwrap_or_else(|| config.data_dir.join("workspaces").join(&spec.name));
            let skill_catalogue = Arc::new(agent_skills(loaded, spec, &workspace));
            let skills = Arc::new(crate::skills::usable(&skill_catalogue, &spec.skills));
            let (mut tools, unknown) =
                crate::tools::tools_for_agent(spec, &skills, web_search.as_ref());
            if web_search.is_none() && spec.tools.iter().any(|tool| tool == crate::tools::WEB_SEARCH) {
                tracing::warn!(agent = %spec.name, "the agent lists web_search but no [web_search] backend is configured; the tool is absent (`clawvisor doctor` says how to add one)");
            }
            if !scheduler {
                // Without the scheduler (a terminal chat beside a running daemon) its tools could
                // only fail.
                tools.retain(|tool| !crate::tools::schedule::TOOL_NAMES.contains(&tool.name()));
            }
            for tool in unknown {
                tracing::warn!(agent = %spec.name, %tool, "unknown tool in the agent file; ignored");
            }
            AgentPlan {
                runtime: Arc::new(AgentRuntime {
                    spec: spec.clone(),
                    providers: providers.clone(),
                    prices: prices.clone(),
                    tool_settings: Arc::new(crate::tool::ToolSettings {
                        protected_paths: crate::sandbox::protected_paths(loaded),
                        web_fetch_allow: config
                            .tools
                            .web_fetch_allow
                            .iter()
                            .chain(&spec.web_fetch_allow)
                            .cloned()
                            .collect(),
                        ..crate::tool::ToolSettings::from_config(config, spec.allow_shell)
                    }),
                    workspace,
                    store: store.clone(),
                    registry: registry.clone(),
                    events: events.clone(),
                    limits: crate::agent::RuntimeLimits::from(config),
                    all_agents: all_agents.clone(),
                    skill_catalogue,
                    daemon_timezone: loaded.timezone.clone(),
                    model_calls: model_calls.clone(),
                }),
                tools,
                browser: browser_setup(loaded, spec),
            }
        })
        .collect()
}

/// The agent's browser, when it lists the `browser` tool (issue #32): `[browser]` with the
/// logins' passwords from the secrets, the profile under the data directory (never the
/// workspace), and the paths Chromium must never reach.
fn browser_setup(
    loaded: &LoadedConfig,
    spec: &crate::config::AgentSpec,
) -> Option<crate::browser::BrowserSetup> {
    if !spec
        .tools
        .iter()
        .any(|tool| tool == crate::tools::browser::NAME)
    {
        return None;
    }
    let browser = &loaded.config.browser;
    Some(crate::browser::BrowserSetup {
        agent: spec.name.clone(),
        chromium: (!browser.chromium.trim().is_empty())
            .then(|| std::path::PathBuf::from(browser.chromium.trim())),
        idle_timeout: browser.idle_timeout.0,
        profile_dir: loaded.config.data_dir.join("browser").join(&spec.name),
        protected: crate::sandbox::protected_paths(loaded),
        snapshot_max_chars: browser.snapshot_max_chars as usize,
        page_timeout: browser.page_timeout.0,
        requests: crate::browser::guard::GuardRules {
            policy: if loaded.config.tools.web_fetch_allow_private {
                crate::tool::address::AddressPolicy::AllowPrivate
            } else {
                crate::tool::address::AddressPolicy::PublicOnly
            },
            allow_private: browser.allow_private.clone(),
        },
        logins: browser
            .logins
            .iter()
            .map(|login| crate::browser::LoginCredentials {
                site: login.site.clone(),
                username: login.username.clone(),
                password: loaded.secret(&login.password_env).cloned(),
                password_env: login.password_env.clone(),
            })
            .collect(),
    })
}

/// Every skill the agent could see, each with whether it can use it (the reasons are logged for
/// the skills its file enables, and for every shadowed workspace skill).
fn agent_skills(
    loaded: &LoadedConfig,
    spec: &crate::config::AgentSpec,
    workspace: &std::path::Path,
) -> Vec<crate::skills::AgentSkill> {
    let catalogue = crate::skills::discover(&crate::skills::levels(loaded, workspace));
    let servers: Vec<String> = loaded
        .config
        .mcp
        .servers
        .iter()
        .filter(|server| server.enabled)
        .map(|server| server.name.clone())
        .collect();
    // Secret variables were removed from the environment at start; they are in `loaded.secrets`.
    let has_env =
        |name: &str| loaded.secrets.contains_key(name) || std::env::var_os(name).is_some();
    let context = crate::skills::AgentContext {
        agent: &spec.name,
        tools: &spec.tools,
        mcp_servers: &servers,
        env: &has_env,
        bin: &crate::skills::on_path,
    };
    let skills = crate::skills::for_agent(catalogue, &spec.skills, &context);
    for skill in &skills {
        if let Err(reason) = &skill.available
            && (spec.skills.contains(&skill.entry.name) || skill.entry.shadowed.is_some())
        {
            tracing::warn!(agent = %spec.name, skill = %skill.entry.name, %reason, "skill unavailable");
        }
    }
    skills
}
