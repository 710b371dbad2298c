//! The command line: `clawvisor init | import | serve | chat | doctor | migrate | config check | backup |
//! restore | reload | jobs | mcp | ...`.
//!
//! This module holds the clap types and the dispatch. `init` runs before any config is loaded (it
//! writes one), and a `serve` that would find no config file writes the same files first
//! (`init.rs`). Every other command loads the same layered config
//! (a configuration error exits with code 78 and a message naming the file, key and what is
//! expected), sets up logging, then does its work, in its own file per subcommand (`doctor.rs`,
//! `migrate.rs`, ...). Commands that change what a running daemon holds in memory (`jobs`,
//! `mcp call`, `reload`) decide in one place, `daemon_link.rs`, whether to go through its API or
//! work on the files. Only this module (and its children) and `main.rs` print to stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::config::{ConfigError, LoadedConfig, LogFormat, Overrides};
use crate::daemon::{self, EXIT_CONFIG};
use crate::store::Store;

mod approvals;
mod audit;
mod backup;
pub mod chat;
mod config;
mod daemon_link;
mod doctor;
#[cfg(feature = "testkit")]
pub mod eval;
mod import;
mod init;
mod jobs;
mod mcp;
mod memory;
mod migrate;
mod nodes;
mod reload;
mod serve;
mod skills;
mod studio_link;
mod triggers;

#[derive(Debug, Parser)]
#[command(
    name = "clawvisor",
    version,
    about = "A supervised home-server daemon for personal AI agents"
)]
pub struct Cli {
    /// Config file (default: clawvisor.toml, else config/clawvisor.toml, in the current
    /// directory; else built-in defaults, and `serve` writes the files of `init` first).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory for the database, workspaces and indexes (default: data/ next to the
    /// config).
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Directory of agent files (default: actors/ next to the config).
    #[arg(long, global = true, value_name = "DIR")]
    pub actors_dir: Option<PathBuf>,
    /// Studio address (default: 127.0.0.1:7070).
    #[arg(long, global = true, value_name = "ADDR")]
    pub studio_bind: Option<String>,
    /// Log filter, RUST_LOG style (default: info).
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// Log format.
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<CliLogFormat>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CliLogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write a commented clawvisor.toml, an example agent in actors/ and the data directory
    /// (never overwriting a file), and say how to start.
    Init {
        /// Where (default: the current directory; created if needed).
        dir: Option<PathBuf>,
    },
    /// Move in from another assistant: `import openclaw [path]` (default ~/.openclaw) writes its
    /// agents, providers, Telegram bots, memories, schedules and skills into this config and
    /// data directory (keys to the secrets store); running it again creates nothing twice.
    Import {
        /// What to import from.
        #[arg(value_enum)]
        from: import::ImportSource,
        /// Its state directory (default: ~/.openclaw).
        path: Option<PathBuf>,
        /// Print what would be created and what cannot be carried over; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Run the daemon until SIGINT/SIGTERM (SIGHUP reloads the files); with no config file at
    /// all, first write the files `init` writes, in the current directory.
    Serve,
    /// Check the config, the database and every external dependency, and say what to fix.
    Doctor,
    /// Apply pending database migrations (the daemon also does this at boot).
    Migrate {
        /// Only print the schema version of the database and of this binary.
        #[arg(long)]
        status: bool,
    },
    /// Talk to an agent in the terminal, through the same actors as every other channel.
    Chat {
        /// The agent's name (see `clawvisor config check`).
        agent: String,
    },
    /// Run the scenario files of a directory (scripted model; `--live` for a real one).
    Eval {
        /// Directory of `*.toml` scenarios.
        dir: PathBuf,
        /// Use a configured provider instead of each scenario's script.
        #[arg(long)]
        live: bool,
        /// Provider for `--live` (default: the first agent's).
        #[arg(long)]
        provider: Option<String>,
        /// Model for `--live` (default: the first agent's).
        #[arg(long)]
        model: Option<String>,
    },
    /// The tamper-evident audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Back up the data directory (database snapshot, workspaces, skills, memory index, audit
    /// anchors) into one archive; safe while the daemon runs.
    Backup {
        /// The archive to write (`.tar.gz`).
        file: PathBuf,
        /// Also archive the keys and tokens kept by Studio (`secrets.toml`); left out otherwise.
        #[arg(long)]
        include_secrets: bool,
    },
    /// Restore an archive into a stopped, empty data directory (`--data-dir`).
    Restore {
        /// The archive written by `clawvisor backup`.
        file: PathBuf,
        /// Replace a non-empty data directory (it is moved aside, not deleted).
        #[arg(long)]
        force: bool,
        /// Put the data in place even when its audit chain does not verify.
        #[arg(long)]
        accept_broken_audit: bool,
    },
    /// Pending approval requests (decide them in Studio or with /approve in Telegram).
    Approvals,
    /// Print a one-time link that logs a browser into Studio (works once, for 15 minutes).
    StudioLink,
    /// Make the running daemon re-read its config and agent files and apply them (like SIGHUP).
    Reload,
    /// Skills: the catalogue, one skill, or a skill folder to check.
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Memory: counts per owner, and the vector index.
    Memory {
        #[command(subcommand)]
        command: MemoryCommand,
    },
    /// Configuration commands.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Scheduled jobs: list, add, pause, resume, remove; preview a schedule (through the running
    /// daemon, or the database when it is stopped).
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// MCP servers: each one's state, a server's tools, calling a tool.
    Mcp {
        #[command(subcommand)]
        command: McpCommand,
    },
    /// Webhook triggers: list them with their last deliveries, send a test event.
    Triggers {
        #[command(subcommand)]
        command: TriggersCommand,
    },
    /// This machine as a tool node: `node serve`, `node pair` (issue #34).
    Node {
        #[command(subcommand)]
        command: nodes::NodeCommand,
    },
    /// The daemon's tool nodes: `nodes add | list | remove` (issue #34).
    Nodes {
        #[command(subcommand)]
        command: nodes::NodesCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum TriggersCommand {
    /// Every trigger: address, agent, where answers go, whether its secret is set, last deliveries.
    List,
    /// Sends a test event through the running daemon (stored, audited, run once).
    Test {
        /// The trigger's name.
        name: String,
        /// The event's body (default: a small JSON object saying it is a test).
        #[arg(long)]
        body: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Every live job: its schedule, next fire time in its zone, status and last result.
    List {
        /// Finished (done and cancelled) jobs too.
        #[arg(long)]
        all: bool,
    },
    /// Schedules a job: `jobs add ada "0 9 * * 1-5" Summarize my inbox`.
    Add {
        /// The agent that runs it.
        agent: String,
        /// A crontab line (`0 9 * * 1-5`, `@daily`), an interval (`15m`) or a time
        /// (`2026-12-01 09:00`).
        schedule: String,
        /// What the agent is asked at each fire.
        #[arg(required = true, num_args = 1..)]
        prompt: Vec<String>,
        /// Time zone of the schedule (default: the agent's, else the daemon's).
        #[arg(long, value_name = "ZONE")]
        tz: Option<String>,
        /// `cron`, `every` or `at` (default: guessed from the schedule).
        #[arg(long)]
        kind: Option<String>,
        /// A short label (default: the prompt's first words).
        #[arg(long)]
        name: Option<String>,
        /// Missed-run policy: `skip`, `run_once` (default), `catch_up [max_runs=N] [window=D]`.
        #[arg(long)]
        missed: Option<String>,
        /// Where answers go (`tg:<chat id>`, `studio:<id>`); default: nowhere (silent).
        #[arg(long, value_name = "CHAT")]
        target: Option<String>,
    },
    /// Pauses a job (it keeps its schedule).
    Pause { id: i64 },
    /// Resumes a paused job from its next time.
    Resume { id: i64 },
    /// Cancels a job (its history stays).
    Rm { id: i64 },
    /// What a schedule means and its next fire times (no daemon needed).
    Preview {
        /// A crontab line, an interval or a time, as for `add`.
        schedule: String,
        /// Time zone (default: the daemon's `timezone`).
        #[arg(long, value_name = "ZONE")]
        tz: Option<String>,
        /// `cron`, `every` or `at` (default: guessed from the schedule).
        #[arg(long)]
        kind: Option<String>,
        /// How many fire times (default 5, at most 50).
        #[arg(long)]
        count: Option<usize>,
    },
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Each configured server: transport, enabled, state, tool count.
    List,
    /// A server's tools: name, description, arguments.
    Tools { server: String },
    /// Calls a tool with a JSON object of arguments and prints its result (exit 1 on a tool
    /// error).
    Call {
        server: String,
        tool: String,
        /// The arguments as a JSON object, e.g. '{"text": "hi"}' (default: {}).
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the whole hash chain and its anchors; names the first broken row (exit 1 when
    /// broken). Reads only: it never writes a key, a head or a row.
    Verify,
    /// Replace the audit key and head after they were lost or no longer match (the daemon
    /// stopped); records what it found and who re-keyed as a row of the chain.
    Rekey {
        /// Required: re-keying accepts the log as it is now.
        #[arg(long)]
        confirm: bool,
        /// Who re-keys, as recorded (default: the account running the command).
        #[arg(long, value_name = "NAME")]
        by: Option<String>,
    },
    /// Write every entry as JSON Lines (to a file, or stdout).
    Export {
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config and agent files; print the effective settings.
    Check,
}

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Every skill found (bundled, installed, each agent's workspace) and, per agent, whether it
    /// is enabled and usable.
    List,
    /// One skill: where it comes from, what it needs, its instructions.
    Show { name: String },
    /// Check a skill folder (or its SKILL.md) and say what to fix.
    Validate { path: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Memories per owner, embedded or not, archived, redacted; semantic or full-text mode.
    Stats,
    /// Embed the memories that have no vector of the current model (after a model change),
    /// then rebuild the vector index (run it with the daemon stopped; the daemon does the
    /// same at start, with progress in Studio).
    Reindex,
    /// Download a known local embeddings model (checked by SHA-256) into <data dir>/models/.
    FetchModel {
        /// The model's name (all-MiniLM-L6-v2).
        name: String,
        /// Download from this mirror instead of the model's hub (`{url}/{file}`).
        #[arg(long, value_name = "URL")]
        from: Option<String>,
    },
}

impl Cli {
    fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            data_dir: self.data_dir.clone(),
            studio_bind: self.studio_bind.clone(),
            actors_dir: self.actors_dir.clone(),
            log_level: self.log_level.clone(),
            log_format: self.log_format.map(|format| match format {
                CliLogFormat::Text => LogFormat::Text,
                CliLogFormat::Json => LogFormat::Json,
            }),
        }
    }
}

/// Entry point used by `main`.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Init { dir } = &cli.command {
        return init::run(dir.clone(), &cli.overrides());
    }
    // Like `init`, before any config is loaded: it may write the first one.
    if let Command::Import { path, dry_run, .. } = &cli.command {
        return import::run(path.clone(), *dry_run, &cli.overrides());
    }
    let first_run = match cli.command {
        Command::Serve => init::before_first_serve(&cli.overrides()),
        _ => None,
    };
    let mut overrides = cli.overrides();
    if matches!(cli.command, Command::Node { .. }) && overrides.actors_dir.is_none() {
        // A node runs no agents: its config's agents are not read (issue #34).
        overrides.actors_dir = nodes::no_agents_dir();
    }
    let loaded = match crate::config::load(&overrides) {
        Ok(loaded) => loaded,
        Err(error) => return config_error(&error),
    };
    // Still single-threaded here (no logging thread, no runtime): the daemon's secrets leave its
    // environment before anything could start a thread or a tool.
    let protection = matches!(cli.command, Command::Serve | Command::Chat { .. })
        .then(|| crate::secrets::protect_daemon_process(loaded.secrets.keys().map(String::as_str)));
    if let Err(message) = crate::logging::init(&loaded.config.log.level, loaded.config.log.format) {
        eprintln!("configuration error: {message}");
        return ExitCode::from(EXIT_CONFIG);
    }
    if let Some(protection) = protection {
        protection.log();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let overrides = cli.overrides();
    runtime.block_on(run_command(cli.command, loaded, overrides, first_run))
}

/// Threads tokio may start for blocking work (file tools, the sandbox's waits, database reads,
/// which the store itself bounds to its readers). tokio's default of 512 lets a burst start
/// hundreds of threads, each with a 2 MiB stack of address space: under a memory cap
/// (`prlimit --as`, `MemoryMax=`) that aborted the process instead of making the work wait.
const BLOCKING_THREADS: usize = 64;

fn config_error(error: &ConfigError) -> ExitCode {
    eprintln!("configuration error: {error}");
    ExitCode::from(EXIT_CONFIG)
}

async fn run_command(
    command: Command,
    loaded: LoadedConfig,
    overrides: Overrides,
    first_run: Option<init::Written>,
) -> ExitCode {
    match command {
        // `main` runs it before loading a config; the same here.
        Command::Init { dir } => init::run(dir, &overrides),
        // `main` runs it before loading a config (it may write the first one).
        Command::Import { .. } => {
            eprintln!("clawvisor import runs before any config is loaded");
            ExitCode::FAILURE
        }
        Command::Serve => serve::run(loaded, overrides, first_run).await,
        Command::Reload => reload::run(&loaded).await,
        Command::Doctor => doctor::run(&loaded).await,
        Command::Chat { agent } => chat::run(loaded, &agent).await,
        Command::Migrate { status } => migrate::run(&loaded, status).await,
        Command::Config {
            command: ConfigCommand::Check,
        } => config::check(&loaded),
        Command::Audit { command } => audit::run(&loaded, command).await,
        #[cfg(feature = "testkit")]
        Command::Eval {
            dir,
            live,
            provider,
            model,
        } => eval::report::command(&loaded, &dir, live, provider, model).await,
        #[cfg(not(feature = "testkit"))]
        Command::Eval { .. } => {
            eprintln!(
                "this build has no eval runner (it needs the scripted model of the `testkit` \
                 feature): run `cargo run --features testkit -- eval <dir>`"
            );
            ExitCode::from(2)
        }
        Command::Approvals => approvals::run(&loaded).await,
        Command::Backup {
            file,
            include_secrets,
        } => backup::backup(&loaded, &file, include_secrets).await,
        Command::Restore {
            file,
            force,
            accept_broken_audit,
        } => {
            let options = crate::backup::RestoreOptions {
                force,
                accept_broken_audit,
            };
            backup::restore_command(&loaded, &file, options).await
        }
        Command::StudioLink => studio_link::run(&loaded).await,
        Command::Memory { command } => memory::run(&loaded, command).await,
        Command::Skills { command } => skills::run(&loaded, command),
        Command::Jobs { command } => jobs::run(&loaded, command).await,
        Command::Mcp { command } => mcp::run(&loaded, command).await,
        Command::Triggers { command } => triggers::run(&loaded, command).await,
        Command::Node { command } => nodes::run_node(&loaded, command).await,
        Command::Nodes { command } => nodes::run_nodes(&loaded, command).await,
    }
}

/// Opens the existing database for an operator command.
async fn open_existing(loaded: &LoadedConfig) -> Result<Store, ExitCode> {
    let path = loaded.config.db_path();
    if !path.exists() {
        eprintln!(
            "no database at {} yet (start the daemon once)",
            path.display()
        );
        return Err(ExitCode::FAILURE);
    }
    let options = crate::store::StoreOptions::from(&loaded.config);
    match tokio::task::spawn_blocking(move || Store::open(&path, options)).await {
        Ok(Ok(store)) => Ok(store),
        Ok(Err(error)) => {
            eprintln!("{error}");
            Err(ExitCode::from(
                daemon::DaemonError::Store(error).exit_code(),
            ))
        }
        Err(_) => Err(ExitCode::FAILURE),
    }
}
