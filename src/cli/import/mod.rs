//! `clawvisor import openclaw [path]`: moves an OpenClaw installation (default `~/.openclaw`, or
//! `OPENCLAW_STATE_DIR` as OpenClaw itself reads it)
//! into the config and data directory named by `--config` / `--data-dir`, like every other
//! command: providers (keys to the secrets store, or named as variables to set), agents (persona
//! files as instructions, Telegram bot and allowlist, skills, fallbacks), memories with their
//! dates (source `imported`), schedules in their zone, and skills (`<data dir>/skills`).
//!
//! It runs before any config is loaded (like `init`): with no config file it starts from the
//! starter config, in the current directory (or the `--config` path). The whole plan is made
//! first (`plan.rs`), validated by loading the config with the new files as an overlay (as
//! Studio's edits are), printed, and only then written (`apply.rs`); `--dry-run` stops after the
//! printing and writes nothing. Running it twice creates nothing twice (see `plan.rs` for how
//! each kind of thing is matched). Like every command that changes jobs, it never writes behind a
//! running daemon's back: while one runs on the data directory it refuses (after the plan is
//! printed) and says to stop it first.
//!
//! Memories are written without a vector (no model runs here, and the daemon, which owns the
//! vector index, is stopped); the daemon's next start embeds every memory without one with its
//! current embeddings (provider or local), as after a model change (`actors/memory/reembed.rs`).
//!
//! Invariant: no key or token value is ever printed; the report names the variable. Every run
//! that writes something appends the audit row `import.openclaw` (Overview's hint goes by it).

mod apply;
mod openclaw;
mod plan;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::edit::Overlay;
use crate::config::{self, LoadedConfig, Overrides};
use crate::daemon::EXIT_CONFIG;
use plan::{Existing, FilePlan};

/// What to import from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportSource {
    /// An OpenClaw state directory (`~/.openclaw`).
    Openclaw,
}

/// `clawvisor import openclaw [path] [--dry-run]`.
pub(super) fn run(path: Option<PathBuf>, dry_run: bool, overrides: &Overrides) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let source = path.map_or_else(default_source, |path| cwd.join(path));
    let installation = match openclaw::read(&source) {
        Ok(installation) => installation,
        Err(error) => {
            eprintln!("clawvisor import: {error}");
            return ExitCode::FAILURE;
        }
    };
    let target = match Target::find(overrides, &cwd) {
        Ok(target) => target,
        Err(code) => return code,
    };
    let file_plan = plan::plan_files(&installation, &target.existing());
    let loaded = match target.validate(&file_plan, overrides) {
        Ok(loaded) => loaded,
        Err(message) => {
            eprintln!(
                "clawvisor import: nothing was written: the imported settings would not load: \
                 {message}"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let data_plan = apply::plan_data(&installation, &file_plan, &loaded);
    print_plan(
        &installation,
        &target,
        &loaded,
        &file_plan,
        &data_plan,
        dry_run,
    );
    if dry_run {
        println!("Dry run: nothing was written. Run it again without --dry-run to import.");
        return ExitCode::SUCCESS;
    }
    if let Some(pid) = running_daemon(&loaded) {
        eprintln!(
            "clawvisor import: nothing was written: a daemon (pid {pid}) runs on this data \
             directory, and its scheduler and memory must not be changed behind its back. Stop it, \
             run the import again, then start it (`--dry-run` works while it runs)."
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("clawvisor import: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(apply::apply(&target, overrides, file_plan, data_plan)) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("clawvisor import: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The process id of a `serve` daemon running on the data directory (see `daemon_link.rs`).
fn running_daemon(loaded: &LoadedConfig) -> Option<u32> {
    let path = loaded.config.db_path();
    if !path.exists() {
        return None;
    }
    crate::store::running_boot(&path)
        .ok()
        .flatten()
        .filter(|boot| boot.kind == crate::store::events::BootKind::Serve)
        .map(|boot| boot.pid)
}

/// OpenClaw's own rule: `OPENCLAW_STATE_DIR`, else `.openclaw` in `OPENCLAW_HOME` or `HOME` (the
/// directory Studio's Overview finds, so its hint's command imports what it saw).
fn default_source() -> PathBuf {
    crate::studio::import_hint::openclaw_state_dir(|name| std::env::var_os(name))
}

/// Where the import goes: the config file (existing or to be written) and the agents' folder.
pub(super) struct Target {
    pub config_path: PathBuf,
    /// The config's text now (the starter config when there is no file yet).
    pub config_text: String,
    pub config_exists: bool,
    pub actors_dir: PathBuf,
    /// The data directory of the existing config, or of the flags and the starter config.
    pub data_dir: PathBuf,
}

impl Target {
    fn find(overrides: &Overrides, cwd: &Path) -> Result<Target, ExitCode> {
        let config_path =
            config::config_file(overrides).unwrap_or_else(|| cwd.join(config::CONFIG_FILE));
        let config_path = if config_path.is_absolute() {
            config_path
        } else {
            cwd.join(config_path)
        };
        if config_path.is_file() {
            let overrides = Overrides {
                config: Some(config_path.clone()),
                ..overrides.clone()
            };
            let loaded = config::load(&overrides).map_err(|error| {
                eprintln!("clawvisor import: the config to import into does not load: {error}");
                ExitCode::from(EXIT_CONFIG)
            })?;
            let text = std::fs::read_to_string(&config_path).map_err(|error| {
                eprintln!(
                    "clawvisor import: cannot read {}: {error}",
                    config_path.display()
                );
                ExitCode::FAILURE
            })?;
            return Ok(Target {
                config_path,
                config_text: text,
                config_exists: true,
                actors_dir: loaded.config.agents.dir.clone(),
                data_dir: loaded.config.data_dir.clone(),
            });
        }
        let beside = config_path.parent().unwrap_or(cwd).to_path_buf();
        // As `init` does: a data directory named on the command line goes into the file.
        let data_dir = overrides
            .data_dir
            .as_ref()
            .map(|dir| config::canonical(&cwd.join(dir)));
        let config_text = match &data_dir {
            Some(dir) => config::starter_config_with_data_dir(dir),
            None => config::starter_config(),
        };
        Ok(Target {
            actors_dir: overrides.actors_dir.as_ref().map_or_else(
                || beside.join(config::STARTER_ACTORS_DIR),
                |dir| cwd.join(dir),
            ),
            data_dir: data_dir.unwrap_or_else(|| beside.join(config::STARTER_DATA_DIR)),
            config_path,
            config_text,
            config_exists: false,
        })
    }

    fn existing(&self) -> Existing<'_> {
        let secret_names: BTreeSet<String> = config::secrets_file::read(&self.data_dir)
            .map(|stored| stored.values.keys().cloned().collect())
            .unwrap_or_default();
        Existing {
            config_text: &self.config_text,
            actors_dir: &self.actors_dir,
            secret_names,
            skills_dir: self.data_dir.join("skills"),
        }
    }

    /// Loads the config as it will be after the import (the new texts as an overlay), so that
    /// nothing is written that the daemon would refuse.
    fn validate(&self, plan: &FilePlan, overrides: &Overrides) -> Result<LoadedConfig, String> {
        let mut overlay = Overlay::one(
            self.config_path.clone(),
            Some(
                plan.config_text
                    .clone()
                    .unwrap_or_else(|| self.config_text.clone()),
            ),
        );
        for (path, text) in &plan.agent_files {
            overlay.files.insert(path.clone(), Some(text.clone()));
        }
        let overrides = Overrides {
            config: Some(self.config_path.clone()),
            ..overrides.clone()
        };
        config::load_with_overlay(&overrides, std::env::vars().collect(), &overlay)
            .map_err(|error| error.to_string())
    }
}

fn print_plan(
    installation: &openclaw::Installation,
    target: &Target,
    loaded: &LoadedConfig,
    files: &FilePlan,
    data: &apply::DataPlan,
    dry_run: bool,
) {
    println!(
        "{} OpenClaw{} at {} into {} (agents in {}, data in {}).",
        if dry_run { "Would import" } else { "Importing" },
        installation
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default(),
        installation.dir.display(),
        target.config_path.display(),
        target.actors_dir.display(),
        loaded.config.data_dir.display()
    );
    if !target.config_exists {
        println!(
            "  + config file {} (the starter settings)",
            target.config_path.display()
        );
    }
    for line in files.lines.iter().chain(&data.lines) {
        println!("  {} {}", if line.created { "+" } else { "=" }, line.text);
    }
    let skipped: Vec<&String> = files.skipped.iter().chain(&data.skipped).collect();
    let unreadable = installation.unreadable.iter();
    if !skipped.is_empty() || !installation.unreadable.is_empty() {
        println!("Not carried over:");
        for line in skipped {
            println!("  - {line}");
        }
        for (what, why) in unreadable {
            println!("  - {what}: cannot be read ({why})");
        }
    }
    if !files.env_to_set.is_empty() {
        println!(
            "Set these in the daemon's environment (or on Studio's Keys & tokens page): {}.",
            files
                .env_to_set
                .iter()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
