//! Where the config file is looked for, and what a new directory starts with.
//!
//! The lookup, in order: `--config`, `CLAWVISOR_CONFIG`, `clawvisor.toml` in the working directory
//! (what `clawvisor init` writes), `config/clawvisor.toml` in the working directory (the
//! repository's layout, and setups made before `init` existed). With none of them, commands run on
//! the built-in defaults, which are exactly the starter files below read from the working
//! directory: the data in `./data`, the agents in `./actors` (the built-in `assistant` agent when
//! there is no such folder). `clawvisor serve` writes the starter files first (`cli/init.rs`).
//!
//! The starter files are the shipped ones, compiled into the binary (no checkout needed):
//! [`super::SHIPPED_CONFIG`] with its two paths made relative to a directory that holds the file,
//! its `actors/` folder and its data, and [`super::SHIPPED_AGENT`].
//!
//! Invariant: the built-in defaults and the files `init` writes describe the same setup, so a
//! first `serve` that writes them changes nothing but where the settings can be edited.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Overrides, SHIPPED_AGENT, SHIPPED_CONFIG, resolve};

/// The config file's name; `clawvisor init` writes it and the lookup tries it first.
pub const CONFIG_FILE: &str = "clawvisor.toml";
/// The repository's config file, looked for after [`CONFIG_FILE`].
pub const REPOSITORY_CONFIG_PATH: &str = "config/clawvisor.toml";
/// The folder of agent files next to the starter config.
pub const STARTER_ACTORS_DIR: &str = "actors";
/// The data directory next to the starter config.
pub const STARTER_DATA_DIR: &str = "data";
/// The example agent's file name in [`STARTER_ACTORS_DIR`].
pub const STARTER_AGENT_FILE: &str = "assistant.toml";

/// The shipped config's lines that name paths relative to the repository's `config/` folder, and
/// what they say in a directory that holds the config file itself.
const PATH_LINES: [(&str, &str); 2] = [
    ("data_dir = \"../data\"", "data_dir = \"data\""),
    ("dir = \"../actors\"", "dir = \"actors\""),
];

/// The starter config: the shipped one, every comment kept, with `data_dir` and `[agents] dir`
/// relative to the file's own directory.
pub fn starter_config() -> String {
    PATH_LINES
        .iter()
        .fold(SHIPPED_CONFIG.to_string(), |text, (shipped, starter)| {
            text.replacen(shipped, starter, 1)
        })
}

/// The starter config with `data_dir` set to `data_dir` (`clawvisor init --data-dir`), written
/// as a TOML string.
pub fn starter_config_with_data_dir(data_dir: &Path) -> String {
    let value = toml::Value::String(data_dir.display().to_string());
    starter_config().replacen(PATH_LINES[0].1, &format!("data_dir = {value}"), 1)
}

/// The example agent `init` writes: the shipped one.
pub fn starter_agent() -> &'static str {
    SHIPPED_AGENT
}

/// The config file a command would read: the one named by `--config` or `CLAWVISOR_CONFIG`
/// (relative to `cwd`), else [`CONFIG_FILE`], else [`REPOSITORY_CONFIG_PATH`] in `cwd` if it is
/// there; `None` means the built-in defaults.
pub fn config_file_in(
    overrides: &Overrides,
    env: &BTreeMap<String, String>,
    cwd: &Path,
) -> Option<PathBuf> {
    let explicit = overrides
        .config
        .clone()
        .or_else(|| env.get("CLAWVISOR_CONFIG").map(PathBuf::from));
    if let Some(path) = explicit {
        return Some(resolve(cwd, &path));
    }
    [CONFIG_FILE, REPOSITORY_CONFIG_PATH]
        .into_iter()
        .map(|name| cwd.join(name))
        .find(|path| path.is_file())
        .map(|path| resolve(cwd, &path))
}

/// The config file a command would read from the process's environment and working directory
/// (see [`config_file_in`]).
pub fn config_file(overrides: &Overrides) -> Option<PathBuf> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    config_file_in(overrides, &std::env::vars().collect(), &cwd)
}

/// Says when both default files are in `cwd` (the first one wins; the other is easy to miss).
pub(super) fn shadowed_config_warning(cwd: &Path) -> Option<String> {
    let first = cwd.join(CONFIG_FILE);
    let second = cwd.join(REPOSITORY_CONFIG_PATH);
    (first.is_file() && second.is_file()).then(|| {
        format!(
            "both {} and {} exist; {} is used and the other is ignored (move one aside)",
            first.display(),
            second.display(),
            first.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_config_keeps_its_data_and_agents_beside_it() {
        let text = starter_config();
        for (shipped, starter) in PATH_LINES {
            assert!(
                SHIPPED_CONFIG.contains(shipped),
                "the shipped config still has `{shipped}` (else the starter config keeps it)"
            );
            assert!(text.contains(starter), "{starter}");
            assert!(!text.contains(shipped), "{shipped}");
        }
        let parsed = super::super::parse_file(&text, "starter").expect("the starter config parses");
        assert_eq!(parsed.data_dir, PathBuf::from(STARTER_DATA_DIR));
        assert_eq!(parsed.agents.dir, PathBuf::from(STARTER_ACTORS_DIR));
        // Every comment of the shipped file is kept.
        assert_eq!(text.lines().count(), SHIPPED_CONFIG.lines().count());
        let elsewhere = starter_config_with_data_dir(Path::new("/srv/it's \"here\""));
        let parsed = super::super::parse_file(&elsewhere, "starter").expect("it parses");
        assert_eq!(parsed.data_dir, PathBuf::from("/srv/it's \"here\""));
    }

    #[test]
    fn the_file_init_writes_is_found_before_the_repositorys() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let none = config_file_in(&Overrides::default(), &BTreeMap::new(), dir.path());
        assert_eq!(none, None);
        std::fs::create_dir(dir.path().join("config")).expect("config/");
        std::fs::write(dir.path().join(REPOSITORY_CONFIG_PATH), "").expect("written");
        let found = config_file_in(&Overrides::default(), &BTreeMap::new(), dir.path());
        assert_eq!(found, Some(dir.path().join(REPOSITORY_CONFIG_PATH)));
        assert_eq!(shadowed_config_warning(dir.path()), None);
        std::fs::write(dir.path().join(CONFIG_FILE), "").expect("written");
        let found = config_file_in(&Overrides::default(), &BTreeMap::new(), dir.path());
        assert_eq!(found, Some(dir.path().join(CONFIG_FILE)));
        assert!(shadowed_config_warning(dir.path()).is_some());
        let env = BTreeMap::from([("CLAWVISOR_CONFIG".to_string(), "elsewhere.toml".to_string())]);
        let found = config_file_in(&Overrides::default(), &env, dir.path());
        assert_eq!(found, Some(dir.path().join("elsewhere.toml")));
    }
}
