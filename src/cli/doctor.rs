//! `clawvisor doctor`: checks the config, the database and every external dependency (model
//! providers, bot tokens, web search, each MCP server with its tools, each webhook trigger's
//! secret), and says what to fix.

use std::path::Path;
use std::process::ExitCode;

use crate::config::LoadedConfig;
use crate::store::{self, Store};

/// Each bot token is checked with `getMe`: which bot serves which agent, or why it cannot.
async fn telegram_checks(loaded: &LoadedConfig) -> Vec<Check> {
    let mut checks = Vec::new();
    for agent in &loaded.agents {
        let Some(telegram) = &agent.telegram else {
            continue;
        };
        let what = format!("telegram ({})", agent.name);
        let Some(token) = loaded.secret(&telegram.token_env) else {
            checks.push(Check {
                ok: false,
                what,
                detail: format!("{} is not set", telegram.token_env),
            });
            continue;
        };
        let check = match crate::telegram::client::check_token(token, &telegram.api_url).await {
            Ok(username) => Check {
                ok: true,
                what,
                detail: format!("@{username} serves agent `{}`", agent.name),
            },
            Err(error) => Check {
                ok: false,
                what,
                detail: format!("{} ({})", error, telegram.token_env),
            },
        };
        checks.push(check);
    }
    checks
}

/// Each WhatsApp account's token and phone number id checked against the Graph API (the
/// number's verified name), or which variable is missing.
async fn whatsapp_checks(loaded: &LoadedConfig) -> Vec<Check> {
    use crate::channel::Adapter;
    let directory = crate::whatsapp::Directory::new(loaded, true);
    let mut checks = Vec::new();
    for agent in &loaded.agents {
        let Some(whatsapp) = &agent.whatsapp else {
            continue;
        };
        let what = format!("whatsapp ({})", agent.name);
        let Some(account) = directory.of_agent(&agent.name) else {
            let missing: Vec<&str> = whatsapp
                .secret_vars()
                .into_iter()
                .filter(|var| loaded.secret(var).is_none())
                .collect();
            checks.push(Check {
                ok: false,
                what,
                detail: format!(
                    "{} not set: set them, or add them in Studio's Keys & tokens",
                    missing.join(", ")
                ),
            });
            continue;
        };
        let adapter = crate::whatsapp::client::WhatsAppAdapter::new(account.clone());
        checks.push(match adapter.check().await {
            Ok(name) => Check {
                ok: true,
                what,
                detail: format!("{name} (phone number id {}) serves agent `{}`", whatsapp.phone_number_id, agent.name),
            },
            Err(error) => Check {
                ok: false,
                what,
                detail: format!(
                    "{error}: check {} and that phone number id {} is the one WhatsApp Manager shows",
                    whatsapp.access_token_env, whatsapp.phone_number_id
                ),
            },
        });
    }
    checks
}

/// Each Signal account's signal-cli asked whether it answers (`GET /api/v1/check`).
async fn signal_checks(loaded: &LoadedConfig) -> Vec<Check> {
    use crate::channel::Adapter;
    let mut checks = Vec::new();
    for agent in &loaded.agents {
        let Some(signal) = &agent.signal else {
            continue;
        };
        let adapter = crate::signal::adapter::SignalAdapter::new(signal);
        let what = format!("signal ({})", agent.name);
        checks.push(match adapter.check().await {
            Ok(number) => Check {
                ok: true,
                what,
                detail: format!(
                    "signal-cli at {} answers; {number} serves agent `{}`",
                    signal.rpc_url, agent.name
                ),
            },
            Err(error) => Check {
                ok: false,
                what,
                detail: format!(
                    "{error} Start it with `systemctl start signal-cli` (README \"Signal\")."
                ),
            },
        });
    }
    checks
}

/// Every provider asked for its model list, with what to do when it fails.
async fn provider_checks(loaded: &LoadedConfig) -> Vec<Check> {
    let providers =
        crate::llm::Providers::from_config_with_secrets(&loaded.config, &loaded.secrets);
    providers
        .probe_all()
        .await
        .into_iter()
        .map(|outcome| Check {
            ok: outcome.ok,
            what: format!("provider {}", outcome.provider),
            detail: outcome.detail,
        })
        .collect()
}

/// Where `web_search` looks things up, asked once; or how to add a backend.
async fn web_search_check(loaded: &LoadedConfig) -> Check {
    let what = "web search".to_string();
    let Some(tool) = crate::tools::web_search::WebSearchTool::build(loaded) else {
        let listed = loaded.agents.iter().any(|agent| {
            agent
                .tools
                .iter()
                .any(|tool| tool == crate::tools::WEB_SEARCH)
        });
        return Check {
            ok: !listed,
            what: if listed { "next step".into() } else { what },
            detail: "no backend: the web_search tool is absent. Add [web_search] with backend = \"searxng\" and url = \"http://<your SearXNG>:8080\" (json enabled in its settings.yml), or backend = \"brave\" with api_key_env = \"BRAVE_API_KEY\", or backend = \"mcp\" with mcp_tool = \"<server>__<tool>\"".into(),
        };
    };
    let label = tool.backend_label();
    match tool.probe().await {
        Ok(Some(results)) => Check {
            ok: true,
            what,
            detail: format!("{label} answered a test search ({results} result(s))"),
        },
        Ok(None) => Check {
            ok: true,
            what,
            detail: format!(
                "{label} (its tool is checked when the daemon has connected the server)"
            ),
        },
        Err(error) => Check {
            ok: false,
            what,
            detail: format!("{label}: {error}"),
        },
    }
}

/// Issue #32: when an agent lists the `browser` tool, Chromium is found and starts (confined,
/// on a throw-away profile) and opens a blank page; each login's password is set.
async fn browser_check(loaded: &LoadedConfig) -> Vec<Check> {
    let listed = loaded.agents.iter().any(|agent| {
        agent
            .tools
            .iter()
            .any(|tool| tool == crate::tools::browser::NAME)
    });
    if !listed {
        return Vec::new();
    }
    let what = "browser".to_string();
    let mut checks = Vec::new();
    let configured = loaded.config.browser.chromium.trim();
    let chromium = (!configured.is_empty()).then(|| std::path::PathBuf::from(configured));
    let profile = match tempfile::tempdir() {
        Ok(profile) => profile,
        Err(error) => {
            return vec![Check {
                ok: false,
                what,
                detail: format!("cannot create a test profile: {error}"),
            }];
        }
    };
    let setup = crate::browser::BrowserSetup {
        agent: "doctor".into(),
        chromium,
        idle_timeout: std::time::Duration::from_secs(60),
        profile_dir: profile.path().to_path_buf(),
        protected: crate::sandbox::protected_paths(loaded),
        snapshot_max_chars: 2_000,
        page_timeout: std::time::Duration::from_secs(20),
        logins: Vec::new(),
        requests: crate::browser::guard::GuardRules {
            policy: crate::tool::address::AddressPolicy::PublicOnly,
            allow_private: Vec::new(),
        },
    };
    let started = std::time::Instant::now();
    checks.push(match crate::browser::BrowserSession::start(&setup).await {
        Ok(mut session) => {
            let opened = session
                .act(crate::browser::Action::Open {
                    url: "about:blank".into(),
                    new_tab: false,
                })
                .await;
            let confined = session.confined().to_string();
            session.stop().await;
            match opened {
                Ok(_) => Check {
                    ok: true,
                    what,
                    detail: format!(
                        "Chromium starts {confined} and opens a page ({} ms)",
                        started.elapsed().as_millis()
                    ),
                },
                Err(error) => Check {
                    ok: false,
                    what,
                    detail: format!("Chromium started but could not open a page: {error}"),
                },
            }
        }
        Err(error) => Check {
            ok: false,
            what,
            detail: error.to_string(),
        },
    });
    for login in &loaded.config.browser.logins {
        if loaded.secret(&login.password_env).is_none() {
            checks.push(Check {
                ok: false,
                what: "next step".into(),
                detail: format!(
                    "the browser's login for {} has no password: set `{}` in Keys & tokens (or the environment)",
                    login.site, login.password_env
                ),
            });
        }
    }
    checks
}

/// Each MCP server: connected (within `[mcp] connect_timeout`) with its tools listed, or its
/// error and what to fix; a disabled one says so. All at once, so that one slow server does not
/// hold up the others.
async fn mcp_checks(loaded: &LoadedConfig) -> Vec<Check> {
    let checks = loaded.config.mcp.servers.iter().map(|server| async move {
        let (ok, detail) = super::mcp::check_server(loaded, server).await;
        Check {
            ok,
            what: format!("mcp server {}", server.name),
            detail,
        }
    });
    futures::future::join_all(checks).await
}

/// Each `[[nodes]]` entry (issue #34): paired, answering its daemon over the pinned TLS link,
/// its version and whether its kernel enforces every protection; or what to fix.
async fn node_checks(loaded: &LoadedConfig) -> Vec<Check> {
    let checks = loaded.config.nodes.iter().map(|node| async move {
        let (ok, detail) =
            match crate::node::client::health(&loaded.config.data_dir, &node.name, &node.url).await
            {
                Ok((body, latency)) => (
                    true,
                    format!(
                        "answers in {} ms, version {}{}; {}",
                        latency.as_millis(),
                        body["version"].as_str().unwrap_or("?"),
                        crate::node::client::lends(&body),
                        if body["complete"].as_bool() == Some(true) {
                            "every protection enforced".to_string()
                        } else {
                            format!(
                                "not every protection is enforced there: {}",
                                body["protections"].as_str().unwrap_or("?")
                            )
                        }
                    ),
                ),
                Err(error) => (
                    false,
                    format!(
                        "does not answer at {}: {error} — is `clawvisor node serve` running \
                         there, and still paired (`clawvisor nodes list`)?",
                        node.url
                    ),
                ),
            };
        Check {
            ok,
            what: format!("node {}", node.name),
            detail,
        }
    });
    futures::future::join_all(checks).await
}

/// Whether every model of every agent's chain has a price; a line per unpriced model naming its
/// agents and the fix (not a failure: the daemon runs, but the bill is incomplete).
fn pricing_checks(loaded: &LoadedConfig) -> Vec<Check> {
    let prices = crate::llm::prices::Prices::from_config(&loaded.config);
    let unpriced = crate::llm::prices::unpriced_in_use(&prices, &loaded.agents);
    if unpriced.is_empty() {
        return vec![Check {
            ok: true,
            what: "pricing".into(),
            detail: "every model the agents use has a price ([pricing], the built-in table) or a free provider".into(),
        }];
    }
    unpriced
        .iter()
        .map(|model| Check {
            ok: false,
            what: "next step".into(),
            detail: format!("unpriced {}", model.describe()),
        })
        .collect()
}

/// One line per webhook trigger: its address and whether its secret is set (without one it
/// accepts nothing).
fn trigger_checks(loaded: &LoadedConfig) -> Vec<Check> {
    crate::triggers::TriggerBook::new(loaded)
        .entries()
        .map(|entry| {
            let config = &entry.config;
            let what = format!("trigger ({})", config.name);
            match &entry.secret {
                Some(_) => Check {
                    ok: true,
                    what,
                    detail: format!(
                        "POST /hooks/trigger/{} wakes agent `{}`; its secret {} is set",
                        config.name,
                        config.agent,
                        config.secret_var()
                    ),
                },
                None => Check {
                    ok: false,
                    what,
                    detail: format!(
                        "{} is not set, so the trigger accepts nothing: set it in the environment or Studio's Keys & tokens, then restart",
                        config.secret_var()
                    ),
                },
            }
        })
        .collect()
}

/// One line of the doctor's report.
struct Check {
    ok: bool,
    what: String,
    detail: String,
}

pub(super) async fn run(loaded: &LoadedConfig) -> ExitCode {
    let mut checks = vec![
        Check {
            ok: true,
            what: "config".into(),
            detail: format!("{} with {} agent(s)", loaded.source, loaded.agents.len()),
        },
        memory_check(loaded),
        voice_check(loaded),
        speech_check(loaded),
        database_check(loaded).await,
        store_space_check(loaded),
    ];
    checks.extend(provider_checks(loaded).await);
    checks.extend(pricing_checks(loaded));
    checks.extend(telegram_checks(loaded).await);
    checks.extend(whatsapp_checks(loaded).await);
    checks.extend(signal_checks(loaded).await);
    checks.push(web_search_check(loaded).await);
    checks.extend(browser_check(loaded).await);
    checks.extend(mcp_checks(loaded).await);
    checks.extend(node_checks(loaded).await);
    checks.extend(trigger_checks(loaded));
    let protections = crate::sandbox::protections();
    checks.push(Check {
        ok: protections.bash.is_some(),
        what: "shell sandbox".into(),
        detail: protections.summary(),
    });
    checks.extend(profile_checks(&protections));
    for hint in &loaded.hints {
        checks.push(Check {
            ok: false,
            what: "next step".into(),
            detail: hint.clone(),
        });
    }
    print_report(&checks)
}

/// One line per sandbox profile: what it allows and which protections are active here.
fn profile_checks(protections: &crate::sandbox::Protections) -> Vec<Check> {
    crate::sandbox::PROFILES
        .iter()
        .map(|(name, reach)| {
            let layers = protections.of_profile(*reach);
            let listed: Vec<String> = layers
                .iter()
                .map(|layer| {
                    let state = if layer.active { "on" } else { "OFF" };
                    format!("{} {state}", layer.name)
                })
                .collect();
            Check {
                ok: layers.iter().all(|layer| layer.active),
                what: format!("shell profile {name}"),
                detail: format!("{}; {}", reach.describe(), listed.join(", ")),
            }
        })
        .collect()
}

/// How memory is searched and why: a provider's or a local model's embeddings, or full text;
/// a local model directory without its files is a failure naming the missing file.
fn memory_check(loaded: &LoadedConfig) -> Check {
    let (choice, why) = crate::memory::embeddings_choice(&loaded.config, &loaded.secrets);
    let (ok, detail) = match &choice {
        None => (true, format!("full-text search only — {why}")),
        Some(crate::memory::EmbeddingsChoice::Provider(config)) => (
            true,
            format!(
                "semantic search with embeddings model `{}` — {why}",
                config.model
            ),
        ),
        Some(crate::memory::EmbeddingsChoice::Local(settings)) => {
            match crate::memory::local::model::check_dir(&settings.dir) {
                Ok(()) => (
                    true,
                    format!(
                        "semantic search with the local model `{}` — {why}; loaded on first use, \
                         unloaded after {} idle",
                        crate::memory::local::model_name(&settings.dir),
                        crate::config::Dur(settings.idle_unload)
                    ),
                ),
                Err(error) => (false, format!("local embeddings cannot start: {error}")),
            }
        }
    };
    Check {
        ok,
        what: "memory".into(),
        detail,
    }
}

/// Who transcribes voice notes, or why they are only saved.
fn voice_check(loaded: &LoadedConfig) -> Check {
    let voice = crate::voice::VoiceSettings::from_config(&loaded.config, &loaded.secrets);
    Check {
        ok: true,
        what: "voice notes".into(),
        detail: match &voice.transcriber {
            Ok(transcriber) => format!(
                "transcribed by provider `{}` with `{}` (up to {})",
                transcriber.provider(),
                transcriber.model(),
                crate::voice::clock_text(voice.max_duration.as_secs())
            ),
            Err(unavailable) => format!("saved but not transcribed — {}", unavailable.reason),
        },
    }
}

/// Who speaks the spoken replies; a failure only when an agent wants them and none can.
fn speech_check(loaded: &LoadedConfig) -> Check {
    let speaking = loaded
        .agents
        .iter()
        .filter(|agent| agent.voice_replies != crate::config::VoiceReplies::Never)
        .count();
    let speech = crate::voice::speech::speech_config(&loaded.config, &loaded.secrets);
    Check {
        ok: speaking == 0 || matches!(speech, Ok(Some(_))),
        what: "speech".into(),
        detail: match speech {
            Ok(Some(config)) => format!(
                "spoken replies with `{}` (voice `{}`) from provider `{}`; {speaking} agent(s) use them",
                config.model, config.voice, config.provider
            ),
            Ok(None) => {
                "no speech provider (set `speech_model` on a provider for spoken replies)".into()
            }
            Err(reason) => reason,
        },
    }
}

/// The database: not there yet, too new for this binary, or opened and integrity-checked.
async fn database_check(loaded: &LoadedConfig) -> Check {
    let path = loaded.config.db_path();
    if !path.exists() {
        return database(
            true,
            format!("{} does not exist yet; `serve` creates it", path.display()),
        );
    }
    let latest = store::latest_version();
    match store::peek_version(&path) {
        Ok(version) if version > latest => database(
            false,
            format!("schema {version} is newer than this binary ({latest}); run a newer clawvisor"),
        ),
        Ok(version) => check_integrity(loaded, &path, version).await,
        Err(error) => database(false, error.to_string()),
    }
}

/// Opens the database at `path` (schema `version`) and runs SQLite's `integrity_check`.
async fn check_integrity(loaded: &LoadedConfig, path: &Path, version: u32) -> Check {
    let options = crate::store::StoreOptions::from(&loaded.config);
    let opened = tokio::task::spawn_blocking({
        let path = path.to_path_buf();
        move || Store::open(&path, options)
    })
    .await;
    match opened {
        Ok(Ok(store)) => {
            let integrity = store.integrity_check().await;
            store.stop_writer();
            match integrity {
                Ok(rows) if rows == ["ok"] => database(
                    true,
                    format!("{} schema {version}, integrity_check ok", path.display()),
                ),
                Ok(rows) => database(
                    false,
                    format!("integrity_check reported: {}", rows.join("; ")),
                ),
                Err(error) => database(false, error.to_string()),
            }
        }
        Ok(Err(error)) => database(false, error.to_string()),
        Err(_) => database(false, "opening the database panicked".into()),
    }
}

/// Whether the database can be written here, and free space against `[store] min_free` (warn)
/// and `hold_free` (writes hold below it).
fn store_space_check(loaded: &LoadedConfig) -> Check {
    use crate::store::health::{check_file_system, free_bytes, human};
    let store = &loaded.config.store;
    let path = loaded.config.db_path();
    let watermarks = format!(
        "warns below {}, holds writes below {}",
        store.min_free, store.hold_free
    );
    let what = "database space".to_string();
    if let Some(trouble) = check_file_system(&path) {
        return Check {
            ok: false,
            what,
            detail: format!("{} ({watermarks})", trouble.sentence()),
        };
    }
    let directory = path.parent().unwrap_or(Path::new("."));
    match free_bytes(directory) {
        Some(free) if free < store.hold_free.0 => Check {
            ok: false,
            what,
            detail: format!(
                "database: only {} free at {} — writes hold until space is freed ({watermarks})",
                human(free),
                directory.display()
            ),
        },
        Some(free) if free < store.min_free.0 => Check {
            ok: false,
            what,
            detail: format!(
                "database: only {} free at {} — free space soon ({watermarks})",
                human(free),
                directory.display()
            ),
        },
        Some(free) => Check {
            ok: true,
            what,
            detail: format!(
                "writable, {} free at {} ({watermarks})",
                human(free),
                directory.display()
            ),
        },
        None => Check {
            ok: true,
            what,
            detail: format!(
                "{} does not exist yet; `serve` creates it ({watermarks})",
                directory.display()
            ),
        },
    }
}

/// A line about the database.
fn database(ok: bool, detail: String) -> Check {
    Check {
        ok,
        what: "database".into(),
        detail,
    }
}

/// Prints a line per check; fails when a check other than a next step failed.
fn print_report(checks: &[Check]) -> ExitCode {
    let mut failed = false;
    for check in checks {
        println!(
            "[{}] {}: {}",
            if check.ok { " ok " } else { "FAIL" },
            check.what,
            check.detail
        );
        failed |= !check.ok && check.what != "next step";
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
