//! The command line: `clawvisor serve | doctor | migrate | config check | ...`.
//!
//! Every command loads the same layered config (a configuration error exits with code 78 and a
//! message naming the file, key and what is expected), then does its work. Only this module and
//! `main.rs` print to stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::skills::Entry;

use crate::config::{self, ConfigError, LoadedConfig, LogFormat, Overrides};
use crate::daemon::{self, EXIT_CONFIG};
use crate::store::{self, Store};

#[derive(Debug, Parser)]
#[command(
    name = "clawvisor",
    version,
    about = "A supervised home-server daemon for personal AI agents"
)]
pub struct Cli {
    /// Config file (default: config/clawvisor.toml if present, else built-in defaults).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Data directory for the database, workspaces and indexes (default: ./data).
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
    /// Run the daemon until SIGINT/SIGTERM.
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
    /// Pending approval requests (decide them in Studio or with /approve in Telegram).
    Approvals,
    /// Print a one-time link that logs a browser into Studio (works once, for 15 minutes).
    StudioLink,
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
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the whole hash chain; names the first broken row (exit 1 when broken).
    Verify,
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
    let loaded = match config::load(&cli.overrides()) {
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
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run_command(cli.command, loaded))
}

fn config_error(error: &ConfigError) -> ExitCode {
    eprintln!("configuration error: {error}");
    ExitCode::from(EXIT_CONFIG)
}

async fn run_command(command: Command, loaded: LoadedConfig) -> ExitCode {
    match command {
        Command::Serve => match daemon::run(loaded, daemon::shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                tracing::error!("{error}");
                eprintln!("clawvisor: {error}");
                ExitCode::from(error.exit_code())
            }
        },
        Command::Doctor => doctor(&loaded).await,
        Command::Chat { agent } => crate::chat::run(loaded, &agent).await,
        Command::Migrate { status } => migrate(&loaded, status).await,
        Command::Config {
            command: ConfigCommand::Check,
        } => config_check(&loaded),
        Command::Audit { command } => audit(&loaded, command).await,
        Command::Eval {
            dir,
            live,
            provider,
            model,
        } => eval(&loaded, &dir, live, provider, model).await,
        Command::Approvals => approvals(&loaded).await,
        Command::StudioLink => studio_link(&loaded).await,
        Command::Memory { command } => memory(&loaded, command).await,
        Command::Skills { command } => skills(&loaded, command),
    }
}

async fn eval(
    loaded: &LoadedConfig,
    dir: &std::path::Path,
    live: bool,
    provider: Option<String>,
    model: Option<String>,
) -> ExitCode {
    let scenarios = match crate::eval::load_dir(dir) {
        Ok(scenarios) => scenarios,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let source = if live {
        let first = loaded.agents.first();
        let provider = provider
            .or_else(|| first.map(|agent| agent.provider.clone()))
            .unwrap_or_default();
        let model = model
            .or_else(|| first.map(|agent| agent.model.clone()))
            .unwrap_or_default();
        let Some(config) = loaded.config.providers.get(&provider) else {
            eprintln!("--live: no provider `{provider}` in the config");
            return ExitCode::from(EXIT_CONFIG);
        };
        let mut table = toml::Table::new();
        let mut providers = toml::Table::new();
        providers.insert(
            provider.clone(),
            toml::Value::try_from(config).unwrap_or(toml::Value::Table(toml::Table::new())),
        );
        table.insert("providers".into(), toml::Value::Table(providers));
        // The model's price comes along, so that costs and daily budgets work live as configured.
        if let Some(price) = loaded.config.pricing.get(&model)
            && let Ok(price) = toml::Value::try_from(price)
        {
            let mut pricing = toml::Table::new();
            pricing.insert(model.clone(), price);
            table.insert("pricing".into(), toml::Value::Table(pricing));
        }
        let env = loaded
            .secrets
            .iter()
            .map(|(var, secret)| (var.clone(), secret.expose().to_string()))
            .collect();
        println!(
            "running {} scenario(s) live against {provider}/{model}",
            scenarios.len()
        );
        crate::eval::ModelSource::Live {
            provider_toml: toml::to_string(&table).unwrap_or_default(),
            provider,
            model,
            env,
        }
    } else {
        crate::eval::ModelSource::Scripted
    };
    let mut passed = 0;
    for (path, scenario) in &scenarios {
        let outcome = crate::eval::run(scenario, &source).await;
        if outcome.passed() {
            passed += 1;
            println!("PASS  {}  ({})", outcome.name, path.display());
        } else {
            println!("FAIL  {}  ({})", outcome.name, path.display());
            for failure in &outcome.failures {
                println!("      - {failure}");
            }
        }
    }
    let total = scenarios.len();
    println!(
        "{passed}/{total} scenarios passed ({:.0} %)",
        100.0 * passed as f64 / total.max(1) as f64
    );
    if passed == total {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
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
    let options = loaded.config.store_options();
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

async fn studio_link(loaded: &LoadedConfig) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let base = crate::studio::access::base_url(
        &loaded.config.studio.public_url,
        loaded.config.studio_addr(),
    );
    let result = crate::studio::access::login_link(&store, &base, "cli").await;
    store.stop_writer();
    match result {
        Ok(link) => {
            println!("{link}");
            eprintln!("Open it in a browser within 15 minutes; it works once.");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("could not create a login link: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn audit(loaded: &LoadedConfig, command: AuditCommand) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let code = match command {
        AuditCommand::Verify => match store
            .read(|conn| crate::audit::verify_report(conn, None))
            .await
        {
            Ok(report) => {
                report.lines().iter().for_each(|line| println!("{line}"));
                match report.verification {
                    crate::audit::Verification::Valid { .. } => ExitCode::SUCCESS,
                    crate::audit::Verification::Broken { .. } => ExitCode::FAILURE,
                }
            }
            Err(error) => {
                eprintln!("cannot read the audit log: {error}");
                ExitCode::FAILURE
            }
        },
        AuditCommand::Export { out } => {
            let result = store
                .read(move |conn| {
                    let mut sink: Box<dyn std::io::Write> = match &out {
                        Some(path) => Box::new(std::fs::File::create(path).map_err(|error| {
                            crate::store::StoreError::Invalid(format!(
                                "cannot create {}: {error}",
                                path.display()
                            ))
                        })?),
                        None => Box::new(std::io::stdout()),
                    };
                    crate::audit::export_jsonl(conn, &mut sink)
                })
                .await;
            match result {
                Ok(count) => {
                    eprintln!("exported {count} entries");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("export failed: {error}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    store.stop_writer();
    code
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

fn skills(loaded: &LoadedConfig, command: SkillsCommand) -> ExitCode {
    use crate::skills::{self, Level};
    let workspace = |spec: &crate::config::AgentSpec| {
        spec.workspace
            .clone()
            .unwrap_or_else(|| loaded.config.data_dir.join("workspaces").join(&spec.name))
    };
    match command {
        SkillsCommand::Validate { path } => {
            let dir = if path.is_file() {
                path.parent().map(PathBuf::from).unwrap_or_default()
            } else {
                path.clone()
            };
            let file = dir.join("SKILL.md");
            let result = std::fs::read_to_string(&file)
                .map_err(|error| format!("cannot read {}: {error}", file.display()))
                .and_then(|text| skills::parse(&text, &dir, Level::Installed));
            match result {
                Ok(skill) => {
                    println!("{}: valid skill `{}`", file.display(), skill.name);
                    let mut warnings = 0;
                    for tool in skill
                        .tools
                        .iter()
                        .filter(|tool| !crate::tools::is_known_tool(tool))
                    {
                        println!("  warning: requires unknown tool `{tool}`");
                        warnings += 1;
                    }
                    let servers: Vec<&str> = loaded
                        .config
                        .mcp
                        .servers
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect();
                    for server in skill
                        .mcp
                        .iter()
                        .filter(|server| !servers.contains(&server.as_str()))
                    {
                        println!(
                            "  warning: requires MCP server `{server}`, which is not configured ([[mcp.servers]])"
                        );
                        warnings += 1;
                    }
                    for variable in skill
                        .requires
                        .env
                        .iter()
                        .filter(|name| std::env::var_os(name).is_none())
                    {
                        println!(
                            "  warning: requires the environment variable {variable}, which is not set"
                        );
                        warnings += 1;
                    }
                    for binary in skill
                        .requires
                        .bins
                        .iter()
                        .filter(|name| !skills::on_path(name))
                    {
                        println!("  warning: requires the program `{binary}`, not found on PATH");
                        warnings += 1;
                    }
                    for key in skill.unknown.keys() {
                        println!("  note: key `{key}` is not used by clawvisor (kept)");
                    }
                    if warnings == 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(error) => {
                    println!("{}: invalid: {error}", file.display());
                    ExitCode::FAILURE
                }
            }
        }
        SkillsCommand::List | SkillsCommand::Show { .. } => {
            let first_workspace = loaded.agents.first().map(workspace).unwrap_or_default();
            let mut catalogue =
                skills::discover(&crate::daemon::skill_levels(loaded, &first_workspace));
            for spec in loaded.agents.iter().skip(1) {
                for entry in skills::load_level(&workspace(spec).join("skills"), Level::Workspace) {
                    if !catalogue.iter().any(|known| known.name == entry.name) {
                        catalogue.push(entry);
                    }
                }
            }
            if let SkillsCommand::Show { name } = command {
                let Some(entry) = catalogue.iter().find(|entry| entry.name == name) else {
                    eprintln!("no skill named `{name}`");
                    return ExitCode::FAILURE;
                };
                println!(
                    "{} ({}, {})",
                    entry.name,
                    entry.level.as_str(),
                    entry.dir.display()
                );
                match &entry.skill {
                    Ok(skill) => {
                        println!("{}", skill.description);
                        println!(
                            "tools: {:?}  mcp: {:?}  risk: {:?}",
                            skill.tools, skill.mcp, skill.risk
                        );
                        for (key, value) in &skill.unknown {
                            println!("{key}: {value} (not used, kept)");
                        }
                        println!(
                            "
{}",
                            skill.instructions
                        );
                    }
                    Err(error) => println!("invalid: {error}"),
                }
                return ExitCode::SUCCESS;
            }
            if catalogue.is_empty() {
                println!(
                    "no skills found (bundled: skills/ beside the config; installed: <data dir>/skills)"
                );
            }
            for entry in &catalogue {
                match (&entry.shadowed, &entry.skill) {
                    (Some(reason), _) => {
                        println!(
                            "{:<24} {:<9} NOT USED: {reason}",
                            entry.name,
                            entry.level.as_str()
                        )
                    }
                    (None, Ok(skill)) => println!(
                        "{:<24} {:<9} {}",
                        entry.name,
                        entry.level.as_str(),
                        skill.description
                    ),
                    (None, Err(error)) => println!(
                        "{:<24} {:<9} INVALID: {error}",
                        entry.name,
                        entry.level.as_str()
                    ),
                }
            }
            for spec in &loaded.agents {
                for name in &spec.skills {
                    let status = match catalogue.iter().find(|entry| entry.name == *name) {
                        None => "unavailable: not found".to_string(),
                        Some(Entry {
                            skill: Err(error), ..
                        }) => format!("unavailable: invalid ({error})"),
                        Some(Entry {
                            skill: Ok(skill), ..
                        }) => {
                            let servers: Vec<String> = loaded
                                .config
                                .mcp
                                .servers
                                .iter()
                                .filter(|s| s.enabled)
                                .map(|s| s.name.clone())
                                .collect();
                            let has_env = |name: &str| std::env::var_os(name).is_some();
                            let context = skills::AgentContext {
                                agent: &spec.name,
                                tools: &spec.tools,
                                mcp_servers: &servers,
                                env: &has_env,
                                bin: &skills::on_path,
                            };
                            match skills::availability(skill, &context) {
                                Ok(()) => "enabled".to_string(),
                                Err(reason) => format!("unavailable: {reason}"),
                            }
                        }
                    };
                    println!("agent {}: {name}: {status}", spec.name);
                }
            }
            ExitCode::SUCCESS
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Memories per owner, embedded or not, archived, redacted; semantic or full-text mode.
    Stats,
    /// Rebuild the vector index from the database (run it with the daemon stopped).
    Reindex,
}

async fn memory(loaded: &LoadedConfig, command: MemoryCommand) -> ExitCode {
    use crate::memory::index::{IndexParams, VectorIndex};
    use crate::store::memory as queries;
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let (embeddings, reason) = crate::memory::embeddings_config(&loaded.config, &loaded.secrets);
    let model = embeddings.map(|config| config.model).unwrap_or_default();
    let code = match command {
        MemoryCommand::Stats => match store.read(queries::stats).await {
            Ok(stats) => {
                if model.is_empty() {
                    println!("mode: full-text only ({reason})");
                } else {
                    println!("mode: semantic (embeddings model {model})");
                }
                println!(
                    "memories: {} live ({} embedded), {} archived, {} redacted",
                    stats.live, stats.embedded, stats.archived, stats.redacted
                );
                for (owner, count) in stats.by_owner {
                    println!("  {owner}: {count}");
                }
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("{error}");
                ExitCode::FAILURE
            }
        },
        MemoryCommand::Reindex if model.is_empty() => {
            println!("nothing to index: memory is in full-text mode ({reason})");
            ExitCode::SUCCESS
        }
        MemoryCommand::Reindex => {
            let query_model = model.clone();
            match store
                .read(move |conn| queries::embedded_vectors(conn, &query_model))
                .await
            {
                Ok(rows) if rows.is_empty() => {
                    println!("no memory has an embedding of {model} yet");
                    ExitCode::SUCCESS
                }
                Ok(rows) => {
                    let dir = loaded.config.data_dir.join("memory");
                    match reindex(rows, &model, &dir) {
                        Ok(count) => {
                            println!("indexed {count} memories into {}", dir.display());
                            ExitCode::SUCCESS
                        }
                        Err(error) => {
                            eprintln!("reindex failed: {error}");
                            ExitCode::FAILURE
                        }
                    }
                }
                Err(error) => {
                    eprintln!("{error}");
                    ExitCode::FAILURE
                }
            }
        }
    };
    store.stop_writer();

    /// Inserts one by one with a progress line, then dumps.
    fn reindex(
        rows: Vec<(i64, String, Vec<f32>)>,
        model: &str,
        dir: &std::path::Path,
    ) -> Result<usize, String> {
        use std::io::Write as _;
        let dimension = rows[0].2.len();
        let mut index =
            VectorIndex::new(dimension, IndexParams::default()).map_err(|e| e.to_string())?;
        let total = rows.len();
        for (done, (id, owner, vector)) in rows.into_iter().enumerate() {
            if let Err(error) = index.insert(id, &owner, &vector) {
                eprintln!("\nmemory {id} skipped: {error}");
            }
            if done % 500 == 0 || done + 1 == total {
                let width = 30;
                let filled = (done + 1) * width / total;
                eprint!(
                    "\r[{}{}] {}/{total}",
                    "#".repeat(filled),
                    " ".repeat(width - filled),
                    done + 1
                );
                let _ = std::io::stderr().flush();
            }
        }
        eprintln!();
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        index.dump(dir, model).map_err(|e| e.to_string())?;
        Ok(index.len())
    }
    code
}

async fn approvals(loaded: &LoadedConfig) -> ExitCode {
    let store = match open_existing(loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let pending = store.read(crate::store::approvals::pending).await;
    store.stop_writer();
    match pending {
        Ok(rows) if rows.is_empty() => println!("no pending approvals"),
        Ok(rows) => {
            for row in rows {
                let left = (row.expires_ms - crate::clock::now_ms()).max(0) / 1000;
                println!(
                    "{}  {}  {}  {}  ({} s left)  {}",
                    row.id, row.agent, row.risk, row.tool, left, row.action
                );
            }
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn config_check(loaded: &LoadedConfig) -> ExitCode {
    let config = &loaded.config;
    println!("config: {} (ok)", loaded.source);
    println!("data_dir: {}", config.data_dir.display());
    println!("studio: http://{}", config.studio.bind);
    match &loaded.agents_source {
        Some(dir) => println!("agents: {} from {}", loaded.agents.len(), dir.display()),
        None => println!("agents: 1 (the built-in assistant)"),
    }
    for agent in &loaded.agents {
        let bot = agent
            .telegram
            .as_ref()
            .map(|telegram| format!("telegram token from {}", telegram.token_env))
            .unwrap_or_else(|| "no telegram bot".into());
        println!(
            "  - {} ({}/{}, {}, {})",
            agent.name,
            agent.provider,
            agent.model,
            agent.autonomy.as_str(),
            bot
        );
    }
    for warning in &loaded.warnings {
        println!("warning: {warning}");
    }
    for hint in &loaded.hints {
        println!("next: {hint}");
    }
    ExitCode::SUCCESS
}

async fn migrate(loaded: &LoadedConfig, status_only: bool) -> ExitCode {
    let path = loaded.config.db_path();
    let latest = store::latest_version();
    if status_only {
        let current = if path.exists() {
            store::peek_version(&path).ok()
        } else {
            None
        };
        match current {
            Some(version) => println!(
                "database {}: schema {version}; binary knows {latest}",
                path.display()
            ),
            None => println!(
                "database {}: not created yet; binary knows {latest}",
                path.display()
            ),
        }
        return ExitCode::SUCCESS;
    }
    let before = if path.exists() {
        store::peek_version(&path).unwrap_or(0)
    } else {
        0
    };
    let options = loaded.config.store_options();
    let opened = tokio::task::spawn_blocking(move || {
        let store = Store::open(&path, options)?;
        store.stop_writer();
        Ok::<_, store::StoreError>(())
    })
    .await;
    match opened {
        Ok(Ok(())) => {
            println!(
                "migrated {} from schema {before} to {latest}",
                loaded.config.db_path().display()
            );
            ExitCode::SUCCESS
        }
        Ok(Err(error)) => {
            eprintln!("migrate: {error}");
            ExitCode::from(daemon::DaemonError::Store(error).exit_code())
        }
        Err(_) => ExitCode::FAILURE,
    }
}

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

/// One line of the doctor's report.
struct Check {
    ok: bool,
    what: String,
    detail: String,
}

async fn doctor(loaded: &LoadedConfig) -> ExitCode {
    let mut checks = vec![Check {
        ok: true,
        what: "config".into(),
        detail: format!("{} with {} agent(s)", loaded.source, loaded.agents.len()),
    }];
    let (embeddings, reason) = crate::memory::embeddings_config(&loaded.config, &loaded.secrets);
    checks.push(Check {
        ok: true,
        what: "memory".into(),
        detail: match embeddings {
            Some(config) => format!("semantic search with embeddings model `{}`", config.model),
            None => format!("full-text search only — {reason}"),
        },
    });
    let path = loaded.config.db_path();
    if path.exists() {
        let latest = store::latest_version();
        match store::peek_version(&path) {
            Ok(version) if version > latest => checks.push(Check {
                ok: false,
                what: "database".into(),
                detail: format!(
                    "schema {version} is newer than this binary ({latest}); run a newer clawvisor"
                ),
            }),
            Ok(version) => {
                let options = loaded.config.store_options();
                let opened = tokio::task::spawn_blocking({
                    let path = path.clone();
                    move || Store::open(&path, options)
                })
                .await;
                match opened {
                    Ok(Ok(store)) => {
                        let integrity = store.integrity_check().await;
                        store.stop_writer();
                        match integrity {
                            Ok(rows) if rows == ["ok"] => checks.push(Check {
                                ok: true,
                                what: "database".into(),
                                detail: format!(
                                    "{} schema {version}, integrity_check ok",
                                    path.display()
                                ),
                            }),
                            Ok(rows) => checks.push(Check {
                                ok: false,
                                what: "database".into(),
                                detail: format!("integrity_check reported: {}", rows.join("; ")),
                            }),
                            Err(error) => checks.push(Check {
                                ok: false,
                                what: "database".into(),
                                detail: error.to_string(),
                            }),
                        }
                    }
                    Ok(Err(error)) => checks.push(Check {
                        ok: false,
                        what: "database".into(),
                        detail: error.to_string(),
                    }),
                    Err(_) => checks.push(Check {
                        ok: false,
                        what: "database".into(),
                        detail: "opening the database panicked".into(),
                    }),
                }
            }
            Err(error) => checks.push(Check {
                ok: false,
                what: "database".into(),
                detail: error.to_string(),
            }),
        }
    } else {
        checks.push(Check {
            ok: true,
            what: "database".into(),
            detail: format!("{} does not exist yet; `serve` creates it", path.display()),
        });
    }
    checks.extend(telegram_checks(loaded).await);
    let protections = crate::sandbox::protections();
    checks.push(Check {
        ok: protections.bash.is_some(),
        what: "shell sandbox".into(),
        detail: protections.summary(),
    });
    for hint in &loaded.hints {
        checks.push(Check {
            ok: false,
            what: "next step".into(),
            detail: hint.clone(),
        });
    }
    let mut failed = false;
    for check in &checks {
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
