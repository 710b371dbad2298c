//! A real daemon in-process, for tests, benchmarks and `clawvisor eval`: its own data directory,
//! a config pointing its agents at a loopback model (the scripted server, or anything
//! OpenAI-compatible), and helpers to talk to an agent through the local channel like a user would.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::config::{self, Overrides};
use crate::daemon::{self, Daemon, DaemonError};
use crate::domain::StartOptions;
use crate::domain::{ChatKey, Inbound, InboundSource, OutEvent, Outbound, Sender, SessionCommand};
use crate::protocol::agent::Agent;
use crate::protocol::local::LocalChannel;
use crate::store::Store;

/// A directory under the system temp dir, removed when dropped (unless kept for inspection).
pub struct ScratchDir {
    path: PathBuf,
    keep: bool,
}

impl ScratchDir {
    pub fn new(prefix: &str) -> std::io::Result<ScratchDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "{prefix}-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            crate::clock::now_ms()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(ScratchDir { path, keep: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Leaves the directory in place after drop (for a failing run's post-mortem).
    pub fn keep(&mut self) {
        self.keep = true;
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// What the harness starts.
#[derive(Clone)]
pub struct HarnessOptions {
    /// The model server's base URL (ending in `/v1`).
    pub model_url: String,
    /// Agent files (TOML text). Agents use `provider = "scripted"`.
    pub agents: Vec<String>,
    /// Extra TOML appended to the daemon's config.
    pub config_extra: String,
    pub start: StartOptions,
    /// Extra environment for config loading (bot tokens' variables, ...).
    pub env: BTreeMap<String, String>,
}

impl HarnessOptions {
    pub fn new(model_url: impl Into<String>) -> Self {
        Self {
            model_url: model_url.into(),
            agents: vec![agent_toml("ada", "")],
            config_extra: String::new(),
            start: StartOptions {
                studio: true,
                channels: true,
                scheduler: true,
            },
            env: BTreeMap::new(),
        }
    }
}

/// A minimal agent file for the scripted provider; `extra` is appended (tools, autonomy, ...).
/// The model is `scripted-model` (priced by [`config_toml`]) unless `extra` has its own
/// top-level `model = "..."` line (the scripted server answers any model name; one without a
/// price is "unpriced").
pub fn agent_toml(name: &str, extra: &str) -> String {
    let own_model = extra
        .lines()
        .take_while(|line| !line.trim_start().starts_with('['))
        .any(|line| {
            line.trim_start()
                .strip_prefix("model")
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        });
    let model = if own_model {
        ""
    } else {
        "model = \"scripted-model\"\n"
    };
    format!(
        "name = \"{name}\"\nprovider = \"scripted\"\n{model}instructions = \"You are {name}, a test agent.\"\n{extra}\n"
    )
}

/// An agent file's `[telegram]` table for a bot whose token is in `token_env`, served by the Bot
/// API at `api_url` (a fake's base URL). Goes last in an agent file (after `tools`, `autonomy`).
pub fn telegram_toml(
    token_env: &str,
    api_url: &str,
    allow_users: &[i64],
    approvers: &[i64],
) -> String {
    let list = |ids: &[i64]| {
        ids.iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "[telegram]\ntoken_env = \"{token_env}\"\napi_url = \"{api_url}\"\nallow_users = [{}]\napprovers = [{}]\n",
        list(allow_users),
        list(approvers)
    )
}

/// The daemon's config for a harness run. `extra` may bring its own `[telegram]` table.
pub fn config_toml(model_url: &str, extra: &str) -> String {
    let telegram = if extra.contains("[telegram]") {
        ""
    } else {
        "[telegram]\nboot_stagger = \"50ms\"\npoll_timeout = \"2s\"\nstale_grace = \"2m\"\n"
    };
    format!(
        r#"data_dir = "data"
[agents]
dir = "actors"
[studio]
bind = "127.0.0.1:0"
[supervision]
backoff_min = "50ms"
backoff_max = "2s"
{telegram}[providers.scripted]
kind = "openai"
base_url = "{model_url}"
max_retries = 2
[pricing."scripted-model"]
input_per_mtok = 1.0
output_per_mtok = 2.0
{extra}
"#
    )
}

/// Counts the work that could still make the daemon send something: Telegram updates not yet
/// dispatched, replies in the outbox not yet delivered, runs still going. Zero means settled:
/// after that nothing more reaches a chat unless something new arrives, so a test may assert
/// that something did not happen.
pub const OPEN_WORK_SQL: &str = "SELECT \
    (SELECT COUNT(*) FROM inbound_updates WHERE status IN ('pending', 'dispatched')) \
    + (SELECT COUNT(*) FROM outbox WHERE delivered_ms IS NULL) \
    + (SELECT COUNT(*) FROM runs WHERE status IN ('running', 'waiting_approval'))";

/// One answer of an agent, as a local chat sees it.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub text: String,
    pub run_id: Option<i64>,
    /// Streamed texts before the final one.
    pub partials: Vec<String>,
    pub notices: Vec<String>,
    /// Tool activity (`name status`).
    pub tools: Vec<String>,
}

pub struct Harness {
    pub daemon: Option<Daemon>,
    pub dir: ScratchDir,
}

impl Harness {
    /// Writes the config and agent files and starts the daemon.
    pub async fn start(options: HarnessOptions) -> Result<Harness, String> {
        let dir = ScratchDir::new("clawvisor-harness").map_err(|error| error.to_string())?;
        Self::start_in(dir, options).await
    }

    /// Starts (or restarts) a daemon on an existing directory: the same data survives.
    pub async fn start_in(dir: ScratchDir, options: HarnessOptions) -> Result<Harness, String> {
        let root = dir.path().to_path_buf();
        std::fs::create_dir_all(root.join("actors")).map_err(|error| error.to_string())?;
        std::fs::write(
            root.join("clawvisor.toml"),
            config_toml(&options.model_url, &options.config_extra),
        )
        .map_err(|error| error.to_string())?;
        for (index, agent) in options.agents.iter().enumerate() {
            std::fs::write(
                root.join("actors").join(format!("agent{index}.toml")),
                agent,
            )
            .map_err(|error| error.to_string())?;
        }
        let overrides = Overrides {
            config: Some(root.join("clawvisor.toml")),
            ..Overrides::default()
        };
        // The daemon's zone is the test's choice, never the machine's: UTC unless the test
        // sets `TZ` (or `timezone` in the config).
        let mut env = options.env.clone();
        env.entry("TZ".to_string())
            .or_insert_with(|| "UTC".to_string());
        let loaded = config::load_in(&overrides, env, &root).map_err(|error| error.to_string())?;
        let daemon = daemon::start_with(loaded, options.start)
            .await
            .map_err(|error: DaemonError| error.to_string())?;
        Ok(Harness {
            daemon: Some(daemon),
            dir,
        })
    }

    /// Studio's base URL and an HTTP client that sends the daemon's local access token, as a
    /// script on the server would.
    pub async fn studio_http(&self) -> (String, reqwest::Client) {
        let addr = self
            .daemon()
            .studio_addr(Duration::from_secs(10))
            .await
            .expect("Studio is bound");
        let token = self.daemon().studio_token().expect("Studio runs");
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", token.expose())
                .parse()
                .expect("a token is plain ASCII"),
        );
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("a client with default headers builds");
        (format!("http://{addr}"), client)
    }

    pub fn daemon(&self) -> &Daemon {
        self.daemon
            .as_ref()
            .expect("the harness daemon runs until stop() or restart()")
    }

    pub fn store(&self) -> &Store {
        &self.daemon().store
    }

    /// How much work is still open (see [`OPEN_WORK_SQL`]); zero once the daemon has settled.
    pub async fn open_work(&self) -> i64 {
        self.store()
            .read(|conn| Ok(conn.query_row(OPEN_WORK_SQL, [], |row| row.get(0))?))
            .await
            .unwrap_or(i64::MAX)
    }

    /// Waits until the daemon has settled (see [`OPEN_WORK_SQL`]); panics after `timeout`.
    pub async fn wait_settled(&self, timeout: Duration) {
        crate::testkit::wait_until(timeout, "the daemon to settle (no open work)", || async {
            match self.open_work().await {
                0 => Ok(()),
                open => Err(format!("{open} open")),
            }
        })
        .await
    }

    /// Stops the daemon gracefully and hands back the directory (to restart on the same data).
    pub async fn stop(mut self) -> ScratchDir {
        if let Some(daemon) = self.daemon.take() {
            daemon.stop().await;
        }
        self.dir
    }

    fn inbound(agent: &str, chat: &ChatKey, text: &str) -> Inbound {
        Inbound {
            agent: agent.to_string(),
            chat: chat.clone(),
            sender: Sender::new("tester", "Tester"),
            text: text.to_string(),
            attachments: Vec::new(),
            source: InboundSource::Local,
            received_ms: crate::clock::now_ms(),
            context: None,
            correlation: None,
        }
    }

    fn agent(&self, agent: &str) -> Agent {
        Agent::new(&self.daemon().registry, agent)
    }

    /// Sends a message without waiting.
    pub fn send(&self, agent: &str, chat: &ChatKey, text: &str) -> Result<(), String> {
        self.agent(agent)
            .inbound(Self::inbound(agent, chat, text))
            .map_err(|error| error.to_string())
    }

    pub fn command(
        &self,
        agent: &str,
        chat: &ChatKey,
        command: SessionCommand,
    ) -> Result<(), String> {
        self.agent(agent)
            .command(chat.clone(), command)
            .map_err(|error| error.to_string())
    }

    /// Subscribes to a local chat's output (subscribe before sending to miss nothing).
    pub async fn listen(
        &self,
        chat: &ChatKey,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<Outbound>, String> {
        LocalChannel::new(&self.daemon().registry)
            .subscribe(chat)
            .await
            .ok_or_else(|| "the local channel is not running".into())
    }

    /// The names of the tools `agent` offers its model right now (empty while it is not running
    /// or does not answer within 2 s).
    pub async fn agent_tools(&self, agent: &str) -> Vec<String> {
        let agent = self.agent(agent);
        match tokio::time::timeout(Duration::from_secs(2), agent.view()).await {
            Ok(Ok(view)) => view.tools,
            _ => Vec::new(),
        }
    }

    /// Sends a message and waits for the final answer.
    pub async fn ask(&self, agent: &str, chat: &ChatKey, text: &str) -> Result<Reply, String> {
        let mut outputs = self.listen(chat).await?;
        self.send(agent, chat, text)?;
        wait_reply(&mut outputs, Duration::from_secs(60)).await
    }
}

/// Collects output until the next final answer.
pub async fn wait_reply(
    outputs: &mut tokio::sync::mpsc::UnboundedReceiver<Outbound>,
    timeout: Duration,
) -> Result<Reply, String> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut reply = Reply::default();
    loop {
        let outbound = match tokio::time::timeout_at(deadline, outputs.recv()).await {
            Ok(Some(outbound)) => outbound,
            Ok(None) => return Err("the local channel closed".into()),
            Err(_) => {
                return Err(format!(
                    "no final answer within {timeout:?}; so far: {reply:?}"
                ));
            }
        };
        match outbound.event {
            OutEvent::Partial { text } => reply.partials.push(text),
            OutEvent::Notice { text } => reply.notices.push(text),
            OutEvent::Tool { name, status } => reply.tools.push(format!("{name} {status}")),
            OutEvent::Final { text, .. } => {
                reply.text = text;
                reply.run_id = outbound.run_id;
                return Ok(reply);
            }
            OutEvent::Working | OutEvent::Silent { .. } => {}
        }
    }
}
