//! `clawvisor init [dir]`, and the same on a first `clawvisor serve` with no config at all: a
//! directory ready to run from the binary alone.
//!
//! It writes the starter files compiled into the binary (`config::starter_config`,
//! `config::starter_agent`): `clawvisor.toml` (every key documented, data and agents beside it;
//! `init --data-dir <dir>` writes that directory into the file instead), `actors/assistant.toml`
//! (an example agent) — unless `actors/` already holds agent files, which are kept — and, for
//! `init`, the data directory. Then it prints three lines: what it wrote,
//! how to start the daemon and reach Studio, and what to do next. Every path it prints is
//! canonical. `serve` finds the files because the config lookup tries `clawvisor.toml` in the
//! working directory first (`config/starter.rs`).
//!
//! Invariant: nothing is overwritten. A directory that already has a config file
//! (`clawvisor.toml`, or `config/clawvisor.toml`, which `serve` there would read) gets nothing,
//! and the message names the file and what to do; each file is created with `create_new`, so a
//! file that appears meanwhile is not replaced either.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{
    self, CONFIG_FILE, LoadedConfig, Overrides, REPOSITORY_CONFIG_PATH, STARTER_ACTORS_DIR,
    STARTER_AGENT_FILE,
};
use crate::daemon::EXIT_CONFIG;

/// What the starter files ended up as.
#[derive(Debug, Clone)]
pub(super) struct Written {
    /// The directory that holds them (canonical).
    pub dir: PathBuf,
    /// The config file written.
    pub config: PathBuf,
    /// The agents' folder.
    pub actors_dir: PathBuf,
    /// The example agent, when it was written (`None`: the folder already held agent files).
    pub agent: Option<PathBuf>,
}

impl Written {
    /// What was written, after "Wrote" or "First run: wrote", and where the data is kept
    /// (`data_dir`, the directory the loaded config names).
    pub fn describe(&self, data_dir: &Path) -> String {
        let agents = match &self.agent {
            Some(agent) => format!("and {} (an example agent)", agent.display()),
            None => format!(
                "and kept the agents already in {}",
                self.actors_dir.display()
            ),
        };
        format!(
            "{} (the settings) {agents}; the data is kept in {}.",
            self.config.display(),
            data_dir.display()
        )
    }
}

/// Why nothing (or not everything) was written.
#[derive(Debug, thiserror::Error)]
pub(super) enum InitError {
    #[error(
        "{} already exists, so nothing was written: `clawvisor serve` in {} uses it. To start \
         over, move it aside and run `clawvisor init` again, or run `clawvisor init <another \
         directory>`.",
        path.display(),
        dir.display()
    )]
    Exists { path: PathBuf, dir: PathBuf },
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `clawvisor init [dir]`: writes the starter files and the data directory, then says how to go
/// on. Exit 0; 1 when a file exists or cannot be written; 78 when the files do not load with
/// this environment and flags.
pub(super) fn run(dir: Option<PathBuf>, overrides: &Overrides) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let target = dir.map_or_else(|| cwd.clone(), |dir| cwd.join(dir));
    // A data directory named on the command line goes into the file, so that every later command
    // finds it without the flag.
    let data_dir = overrides
        .data_dir
        .as_ref()
        .map(|data_dir| config::canonical(&cwd.join(data_dir)));
    let written = match write_starter_files(&target, data_dir.as_deref()) {
        Ok(written) => written,
        Err(error) => {
            eprintln!("clawvisor init: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Loaded as `serve` will load it (the environment's and the flags' layers included): the
    // data directory and Studio's address are the ones the daemon will use.
    let overrides = Overrides {
        config: Some(written.config.clone()),
        ..overrides.clone()
    };
    let loaded = match config::load(&overrides) {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!(
                "clawvisor init: wrote {}, but it does not load with this environment: {error}",
                written.config.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // Private: the data directory holds the conversations, the audit key and the access token.
    let created = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&loaded.config.data_dir);
    if let Err(error) = created {
        eprintln!(
            "clawvisor init: cannot create the data directory {}: {error}",
            loaded.config.data_dir.display()
        );
        return ExitCode::from(EXIT_CONFIG);
    }
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let start = start_command(&written, &cwd, &env);
    println!("Wrote {}", written.describe(&loaded.config.data_dir));
    println!(
        "Start it with `{start}`: Studio will be at {}, and `serve` prints a one-time login \
         link (`clawvisor studio-link` prints another).",
        studio_base(&loaded)
    );
    println!("Then {}", next_step(&loaded));
    ExitCode::SUCCESS
}

/// On a first `serve` with no config at all (none named, none in the working directory): writes
/// the starter files there, as `init` would (the daemon makes the data directory), and prints
/// nothing yet — `serve` says it with Studio's address. A directory that cannot be written keeps
/// the former behaviour: the daemon runs on the built-in defaults, with a warning.
pub(super) fn before_first_serve(overrides: &Overrides) -> Option<Written> {
    if config::config_file(overrides).is_some() {
        return None;
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    match write_starter_files(&cwd, None) {
        Ok(written) => Some(written),
        Err(error) => {
            eprintln!(
                "clawvisor: no config file, and the starter files could not be written ({error}); \
                 running on the built-in defaults. `clawvisor init <dir>` writes them elsewhere."
            );
            None
        }
    }
}

/// What to do next, after "Then" or "Next:": finish setting up in Studio while the config's
/// next steps (no model key, no bot) are open, else talk to the agents.
pub(super) fn next_step(loaded: &LoadedConfig) -> &'static str {
    if loaded.hints.is_empty() {
        "talk to your agents on Telegram or in Studio's Chat."
    } else {
        "open Studio to finish setting up: it asks for a model provider's key and a Telegram bot \
         token."
    }
}

/// Where Studio will be: `public_url`, else the bind address (a wildcard shown as loopback).
fn studio_base(loaded: &LoadedConfig) -> String {
    crate::studio::access::base_url(
        &loaded.config.studio.public_url,
        loaded.config.studio_addr(),
    )
}

/// The command that starts the daemon on `written`: `clawvisor serve` where the lookup finds the
/// file from `cwd`, a `cd` first where it finds it from the directory, else `--config`.
fn start_command(written: &Written, cwd: &Path, env: &BTreeMap<String, String>) -> String {
    let found_from = |dir: &Path| {
        config::config_file_in(&Overrides::default(), env, dir).as_ref() == Some(&written.config)
    };
    if found_from(cwd) {
        "clawvisor serve".to_string()
    } else if found_from(&written.dir) {
        format!("cd {} && clawvisor serve", shell_word(&written.dir))
    } else {
        format!("clawvisor --config {} serve", shell_word(&written.config))
    }
}

/// `path` as one shell word (single-quoted when it holds anything but plain characters).
fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    let plain = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:@%".contains(c));
    if plain {
        text
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// Writes the starter files into `dir` (created if needed), the config naming `data_dir` when
/// given; see the module's invariant.
pub(super) fn write_starter_files(
    dir: &Path,
    data_dir: Option<&Path>,
) -> Result<Written, InitError> {
    let dir = config::canonical(dir);
    std::fs::create_dir_all(&dir).map_err(|source| InitError::Io {
        path: dir.clone(),
        source,
    })?;
    for name in [CONFIG_FILE, REPOSITORY_CONFIG_PATH] {
        let path = dir.join(name);
        if path.exists() {
            return Err(InitError::Exists { path, dir });
        }
    }
    let actors_dir = dir.join(STARTER_ACTORS_DIR);
    let agent = if holds_agent_files(&actors_dir) {
        None
    } else {
        std::fs::create_dir_all(&actors_dir).map_err(|source| InitError::Io {
            path: actors_dir.clone(),
            source,
        })?;
        let agent = actors_dir.join(STARTER_AGENT_FILE);
        create_new(&agent, config::starter_agent(), &dir)?;
        Some(agent)
    };
    // The config last: a failure before it leaves no config, so `init` can simply run again.
    let config = dir.join(CONFIG_FILE);
    let text = match data_dir {
        Some(data_dir) => config::starter_config_with_data_dir(data_dir),
        None => config::starter_config(),
    };
    create_new(&config, &text, &dir)?;
    Ok(Written {
        dir,
        config,
        actors_dir,
        agent,
    })
}

/// Whether `dir` holds a `*.toml` file (agents an operator already wrote).
fn holds_agent_files(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|entry| entry.path().extension().is_some_and(|ext| ext == "toml"))
    })
}

/// Creates `path` with `text`; an existing file is an error, never replaced.
fn create_new(path: &Path, text: &str, dir: &Path) -> Result<(), InitError> {
    let mut file = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(InitError::Exists {
                path: path.to_path_buf(),
                dir: dir.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(InitError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|source| InitError::Io {
            path: path.to_path_buf(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_with_spaces_or_quotes_is_one_shell_word() {
        assert_eq!(shell_word(Path::new("/srv/claw-visor")), "/srv/claw-visor");
        assert_eq!(shell_word(Path::new("/home/a b")), "'/home/a b'");
        assert_eq!(shell_word(Path::new("/x/it's")), r"'/x/it'\''s'");
    }
}
