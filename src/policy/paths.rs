//! Path rules: file tool accesses ([`classify_file_access`]) and the sensitive, configuration and
//! device paths the shell rules look for.
//!
//! The path is resolved lexically against the workspace (`..` folded, no symlinks followed; the
//! file tool must still refuse to follow a symlink out of the workspace). A path starting with `~`
//! counts as outside.
//!
//! | access | inside the workspace | outside |
//! |--------|----------------------|---------|
//! | read   | L0                   | L2      |
//! | write  | L1                   | L3      |
//! | delete | L2                   | L3      |
//!
//! Writing or deleting a file that a program later runs or loads as configuration is at least L2:
//! git's configuration and hooks (the whole `.git/`, `.gitconfig`, `.config/`), build recipes and
//! manifests (`Makefile`, `Cargo.toml`, `build.rs`, `package.json`, `conftest.py`, …), Python
//! start-up files (`*.pth`, `sitecustomize.py`), login shells and tool start-up files (`.bashrc`,
//! `.inputrc`, `.npmrc`, `pip.conf`, `.curlrc`, `.netrc`, `.ssh/config`, …), CI files, systemd
//! units and workspace skills (`skills/`): otherwise the next harmless `git status` or build would
//! run what the agent wrote. The shell rules use the same list for redirections and the paths
//! `cp`, `touch`, `tar`, … write. A sensitive path then escalates by one. An empty path or one with
//! a NUL byte is L3.

use std::path::{Component, Path, PathBuf};

use crate::policy::shell::Verdict;
use crate::policy::{Assessment, FileAccess, RiskLevel, quote_for_reason};

/// Sensitive directories: anything inside them holds keys or tokens.
pub(super) const SENSITIVE_DIRECTORIES: &[&str] = &[".ssh", ".aws", ".gnupg"];

/// Sensitive file names.
pub(super) const SENSITIVE_FILE_NAMES: &[&str] = &[".env", ".netrc", ".git-credentials", ".pgpass"];

/// Sensitive file name prefixes (`.env.local`, private SSH keys, `secrets.yaml`).
#[rustfmt::skip]
pub(super) const SENSITIVE_FILE_NAME_PREFIXES: &[&str] = &[
    ".env.", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "secrets.",
];

/// Sensitive text anywhere in a file name (lower case).
pub(super) const SENSITIVE_FILE_NAME_PARTS: &[&str] = &["credentials"];

/// Sensitive extensions (lower case): certificates, private keys, key stores, password databases.
pub(super) const SENSITIVE_EXTENSIONS: &[&str] = &["pem", "key", "p12", "pfx", "kdbx"];

/// Sensitive system files.
#[rustfmt::skip]
pub(super) const SENSITIVE_SYSTEM_FILES: &[&str] =
    &["/etc/shadow", "/etc/gshadow", "/etc/passwd", "/etc/sudoers"];

/// Directories whose files configure CI, git hooks or builds.
#[rustfmt::skip]
pub(super) const CONFIGURATION_DIRECTORIES: &[&str] = &[
    // The whole repository directory: `config` (aliases, pagers, `core.fsmonitor`), hooks,
    // `info/attributes`; `git status` runs what they name.
    ".git",
    // XDG configuration: `git/config`, `pip/pip.conf`, shells, editors.
    ".config",
    ".github/workflows", ".circleci", ".husky", ".devcontainer", ".vscode", ".local/bin",
];

/// Configuration files named by their path's end.
#[rustfmt::skip]
pub(super) const CONFIGURATION_PATH_ENDS: &[&str] = &[
    ".git/config", ".cargo/config", ".cargo/config.toml", ".ssh/config", ".ssh/rc",
    ".pip/pip.conf", "git/config",
];

/// Files a tool later runs or loads as configuration, by name: CI, containers, build recipes and
/// scripts, package manifests, login shells, tool start-up files, Python start-up modules.
#[rustfmt::skip]
pub(super) const CONFIGURATION_FILE_NAMES: &[&str] = &[
    // CI and containers.
    ".gitlab-ci.yml", ".travis.yml", "Jenkinsfile", "Dockerfile", "Containerfile", "compose.yml",
    "compose.yaml", ".pre-commit-config.yaml",
    // Build recipes, build scripts and manifests whose scripts run on build, test or install.
    "Makefile", "makefile", "GNUmakefile", "justfile", "Justfile", ".justfile", "package.json",
    "Cargo.toml", "build.rs", "rust-toolchain", "rust-toolchain.toml", "pyproject.toml",
    "setup.py", "setup.cfg", "conftest.py", "noxfile.py", "tox.ini", "pytest.ini", "Rakefile",
    "Gemfile", "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts",
    "pom.xml", "CMakeLists.txt", "meson.build", "go.mod", "deno.json", "bunfig.toml",
    // Python loads these at start-up.
    "sitecustomize.py", "usercustomize.py", ".pythonrc", ".pythonrc.py",
    // Git.
    ".gitconfig", ".gitattributes", ".gitmodules",
    // Login shells and readline.
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases", ".profile",
    ".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout", ".kshrc", ".cshrc", ".tcshrc",
    ".login", ".logout", ".inputrc", ".envrc", ".xinitrc", ".xprofile", ".xsession",
    // Package managers and network tools.
    ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs", "pip.conf", "pip.ini", ".pypirc",
    ".condarc", ".curlrc", ".wgetrc", ".netrc", "_netrc",
    // Other tools' start-up files that can name programs to run.
    ".vimrc", ".exrc", ".gvimrc", ".nanorc", ".gdbinit", ".lldbinit", ".psqlrc", ".sqliterc",
    ".my.cnf", ".Rprofile", ".irbrc", ".pryrc", ".tmux.conf", ".screenrc", ".mailcap",
    ".lesskey", ".editrc",
];

/// Start of the names of configuration files written in a programming language (linters,
/// bundlers, test runners load and run them).
#[rustfmt::skip]
pub(super) const CONFIGURATION_FILE_NAME_PREFIXES: &[&str] = &[
    ".eslintrc", "eslint.config.", ".prettierrc", "prettier.config.", "jest.config.",
    "vitest.config.", "vite.config.", "webpack.config.", "rollup.config.", "babel.config.",
    ".babelrc", "next.config.", "nuxt.config.", "svelte.config.", "tailwind.config.",
    "postcss.config.", ".mocharc", "karma.conf.", "playwright.config.", "cypress.config.",
];

/// Extensions of systemd units, and of Python `.pth` files (the interpreter runs their `import`
/// lines at every start).
#[rustfmt::skip]
pub(super) const CONFIGURATION_EXTENSIONS: &[&str] = &[
    "service", "timer", "socket", "path", "mount", "automount", "pth",
];

/// Device files that discard or echo output: redirecting to them writes nothing.
#[rustfmt::skip]
pub(super) const HARMLESS_DEVICES: &[&str] = &[
    "/dev/null", "/dev/zero", "/dev/stdout", "/dev/stderr", "/dev/tty",
];

/// Block devices and raw memory: writing to them destroys file systems.
#[rustfmt::skip]
pub(super) const BLOCK_DEVICE_PREFIXES: &[&str] = &[
    "/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme", "/dev/mmcblk", "/dev/disk",
    "/dev/mapper/", "/dev/dm-", "/dev/md", "/dev/loop", "/dev/sr", "/dev/mem", "/dev/kmem",
    "/dev/port",
];

/// Top-level system directories: recursive changes on them (or on `/` and `~`) are L3.
#[rustfmt::skip]
pub(super) const SYSTEM_DIRECTORIES: &[&str] = &[
    "bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "opt", "proc", "root", "run",
    "sbin", "srv", "sys", "usr", "var",
];

/// Classifies a file tool's access to `path`, resolved lexically against `workspace`.
pub fn classify_file_access(path: &str, access: FileAccess, workspace: &Path) -> Assessment {
    if path.contains('\0') {
        return Assessment::new(RiskLevel::L3, "the path contains a NUL byte");
    }
    if path.trim().is_empty() {
        return Assessment::new(RiskLevel::L3, "empty path");
    }
    // A relative workspace cannot be placed lexically; failing closed, nothing is inside it.
    let workspace_is_absolute = workspace.is_absolute();
    let workspace = normalize_lexically(workspace);
    let resolved = if Path::new(path).is_absolute() {
        normalize_lexically(Path::new(path))
    } else {
        normalize_lexically(&workspace.join(path))
    };
    // `~` is not expanded by file APIs, but an agent writing it means the home directory.
    let inside =
        workspace_is_absolute && !path.starts_with('~') && resolved.starts_with(&workspace);
    let shown = if inside {
        let relative = resolved.strip_prefix(&workspace).unwrap_or(&resolved);
        relative.to_string_lossy().into_owned()
    } else if path.starts_with('~') {
        path.to_string()
    } else {
        resolved.to_string_lossy().into_owned()
    };
    let quoted = quote_for_reason(&shown);
    let verb = match access {
        FileAccess::Read => "reads",
        FileAccess::Write => "writes",
        FileAccess::Delete => "deletes",
    };
    let (level, location) = match (inside, access) {
        (true, FileAccess::Read) => (RiskLevel::L0, "inside"),
        (true, FileAccess::Write) => (RiskLevel::L1, "inside"),
        (true, FileAccess::Delete) => (RiskLevel::L2, "inside"),
        (false, FileAccess::Read) => (RiskLevel::L2, "outside"),
        (false, FileAccess::Write | FileAccess::Delete) => (RiskLevel::L3, "outside"),
    };
    let mut verdict = Verdict::new(level, format!("{verb} `{quoted}` {location} the workspace"));
    if !workspace_is_absolute {
        verdict.reasons.push(format!(
            "the workspace `{}` is not an absolute path, so no path counts as inside it",
            quote_for_reason(&workspace.to_string_lossy())
        ));
    }
    if access != FileAccess::Read
        && let Some(label) = configuration_file_in(&shown)
    {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "{verb} `{quoted}`, which a program later runs or loads as configuration ({label})"
            ),
        );
    }
    if let Some(label) = sensitive_path_in(&shown).or_else(|| sensitive_path_in(path)) {
        verdict.escalate(format!("a sensitive path ({label})"));
    }
    Assessment::from_parts(verdict.level, verdict.reasons)
}
// ---------------------------------------------------------------------------------------------
// Paths, read as text.
// ---------------------------------------------------------------------------------------------

/// Folds `.`, `..` and repeated separators without touching the file system.
pub(super) fn normalize_lexically(path: &Path) -> PathBuf {
    let mut kept: Vec<Component> = Vec::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match kept.last() {
                Some(Component::Normal(_)) => {
                    kept.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => kept.push(component),
            },
            Component::RootDir | Component::Prefix(_) | Component::Normal(_) => {
                kept.push(component)
            }
        }
    }
    kept.iter().collect()
}

/// The same folding on path text inside a shell word (`/etc//shadow`, `/etc/x/../shadow`).
pub(super) fn normalize_path_text(text: &str) -> String {
    let absolute = text.starts_with('/');
    let mut kept: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => match kept.last() {
                Some(&last) if last != ".." => {
                    kept.pop();
                }
                _ if absolute => {}
                _ => kept.push(".."),
            },
            other => kept.push(other),
        }
    }
    let joined = kept.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// The path-like fragments of a word: `--file=.env`, `@.env`, `host:~/.ssh/id_rsa` all hold one.
pub(super) fn path_fragments(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '=' | ':' | '@' | ',' | '\'' | '"' | '(' | ')' | '<' | '>' | '|' | ';'
            )
    })
    .filter(|fragment| !fragment.is_empty())
    .map(normalize_path_text)
}

/// The sensitive-path rule that `text` matches, if any.
pub(super) fn sensitive_path_in(text: &str) -> Option<&'static str> {
    path_fragments(text).find_map(|fragment| sensitive_fragment(&fragment))
}

pub(super) fn sensitive_fragment(path: &str) -> Option<&'static str> {
    let components: Vec<&str> = path.split('/').collect();
    let base = components.last().copied().unwrap_or("");
    let base_lower = base.to_ascii_lowercase();
    if let Some(directory) = SENSITIVE_DIRECTORIES
        .iter()
        .find(|directory| components.contains(directory))
    {
        return Some(directory);
    }
    if let Some(name) = SENSITIVE_FILE_NAMES.iter().find(|name| base == **name) {
        return Some(name);
    }
    if let Some(prefix) = SENSITIVE_FILE_NAME_PREFIXES
        .iter()
        .find(|prefix| base.starts_with(*prefix))
    {
        return Some(prefix);
    }
    if let Some(part) = SENSITIVE_FILE_NAME_PARTS
        .iter()
        .find(|part| base_lower.contains(*part))
    {
        return Some(part);
    }
    if let Some((_, extension)) = base_lower.rsplit_once('.')
        && let Some(known) = SENSITIVE_EXTENSIONS
            .iter()
            .find(|known| **known == extension)
    {
        return Some(known);
    }
    SENSITIVE_SYSTEM_FILES
        .iter()
        .find(|file| path == **file || path.ends_with(*file))
        .copied()
}

/// The configuration-file rule that `text` matches, if any.
pub(super) fn configuration_file_in(text: &str) -> Option<&'static str> {
    path_fragments(text).find_map(|fragment| configuration_fragment(&fragment))
}

pub(super) fn configuration_fragment(path: &str) -> Option<&'static str> {
    let base = path.rsplit('/').next().unwrap_or(path);
    let wrapped = format!("/{path}/");
    if let Some(directory) = CONFIGURATION_DIRECTORIES
        .iter()
        .find(|directory| wrapped.contains(&format!("/{directory}/")))
    {
        return Some(directory);
    }
    // Workspace skills (`<workspace>/skills/<name>/…`): an enabled skill's text reaches the model
    // as instructions, and its scripts are run. Only the workspace's own top-level directory.
    if path == "skills" || path.starts_with("skills/") {
        return Some("skills/");
    }
    if let Some(end) = CONFIGURATION_PATH_ENDS
        .iter()
        .find(|end| path == **end || path.ends_with(&format!("/{end}")))
    {
        return Some(end);
    }
    if let Some(name) = CONFIGURATION_FILE_NAMES.iter().find(|name| base == **name) {
        return Some(name);
    }
    if let Some(prefix) = CONFIGURATION_FILE_NAME_PREFIXES
        .iter()
        .find(|prefix| base.starts_with(*prefix))
    {
        return Some(prefix);
    }
    if base.starts_with("Dockerfile.") || base.ends_with(".dockerfile") {
        return Some("Dockerfile");
    }
    if base.starts_with("docker-compose") && (base.ends_with(".yml") || base.ends_with(".yaml")) {
        return Some("docker-compose*.yml");
    }
    if let Some((_, extension)) = base.rsplit_once('.')
        && let Some(known) = CONFIGURATION_EXTENSIONS
            .iter()
            .find(|known| **known == extension)
    {
        return Some(known);
    }
    if path == "/etc" || path.starts_with("/etc/") {
        return Some("/etc/");
    }
    None
}

/// Whether a path a command writes may lie outside the working directory.
pub(super) fn is_outside_working_directory(path: &str) -> bool {
    path.starts_with('/')
        || path.starts_with('~')
        || path.contains('$')
        || path.split('/').any(|part| part == "..")
}

pub(super) fn is_harmless_device(path: &str) -> bool {
    let normalized = normalize_path_text(path);
    HARMLESS_DEVICES.contains(&normalized.as_str()) || normalized.starts_with("/dev/fd/")
}

pub(super) fn is_block_device(path: &str) -> bool {
    let normalized = normalize_path_text(path);
    BLOCK_DEVICE_PREFIXES
        .iter()
        .any(|prefix| normalized.starts_with(prefix))
}

/// `/`, `~`, `$HOME` and the top-level system directories (also as `dir/*`).
pub(super) fn is_system_location(path: &str) -> bool {
    let trimmed = match path.strip_suffix("/*") {
        Some("") => "/",
        Some(rest) => rest,
        None => path,
    };
    if matches!(
        trimmed,
        "~" | "~/" | "$HOME" | "${HOME}" | "$HOME/" | "${HOME}/"
    ) {
        return true;
    }
    let normalized = normalize_path_text(trimmed);
    normalized == "/"
        || normalized
            .strip_prefix('/')
            .is_some_and(|rest| SYSTEM_DIRECTORIES.contains(&rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::run_table;
    use RiskLevel::{L0, L1, L2, L3};

    /// Classifies a file access inside the workspace `/work/ws`.
    fn check_file_access(
        (path, access, expected): (&str, FileAccess, RiskLevel),
    ) -> Result<(), String> {
        let assessment = classify_file_access(path, access, Path::new("/work/ws"));
        if assessment.level == expected {
            return Ok(());
        }
        Err(format!(
            "{path:?} {access:?}: expected {expected}, got {}\n    reasons: {:?}",
            assessment.level, assessment.reasons
        ))
    }

    const FILE_ACCESS_CASES: &[(&str, FileAccess, RiskLevel)] = &[
        ("src/main.rs", FileAccess::Read, L0),
        ("src/main.rs", FileAccess::Write, L1),
        ("src/main.rs", FileAccess::Delete, L2),
        ("/work/ws/src/lib.rs", FileAccess::Read, L0),
        ("/work/ws", FileAccess::Read, L0),
        ("./a/./b/../c.txt", FileAccess::Write, L1),
        ("src/../../ws/a.txt", FileAccess::Read, L0),
        ("../other/x", FileAccess::Read, L2),
        ("../other/x", FileAccess::Write, L3),
        ("../other/x", FileAccess::Delete, L3),
        ("..", FileAccess::Read, L2),
        ("/work/wsx/file", FileAccess::Read, L2),
        ("/work/ws/../ws2/x", FileAccess::Read, L2),
        ("/etc/hosts", FileAccess::Read, L2),
        ("/etc/hosts", FileAccess::Write, L3),
        ("/", FileAccess::Delete, L3),
        ("src/../../../etc/passwd", FileAccess::Read, L3),
        ("~/.ssh/id_rsa", FileAccess::Read, L3),
        ("~/notes.txt", FileAccess::Read, L2),
        (".env", FileAccess::Read, L1),
        (".env", FileAccess::Write, L2),
        (".env", FileAccess::Delete, L3),
        ("config/.env.production", FileAccess::Read, L1),
        ("keys/server.pem", FileAccess::Read, L1),
        ("secrets.yaml", FileAccess::Read, L1),
        ("notes/credentials.json", FileAccess::Write, L2),
        (".github/workflows/ci.yml", FileAccess::Read, L0),
        (".github/workflows/ci.yml", FileAccess::Write, L2),
        (".git/hooks/pre-commit", FileAccess::Write, L2),
        ("Makefile", FileAccess::Write, L2),
        ("Cargo.toml", FileAccess::Read, L0),
        ("Cargo.toml", FileAccess::Write, L2),
        ("crates/core/Cargo.toml", FileAccess::Write, L2),
        ("deploy/app.service", FileAccess::Write, L2),
        ("docker-compose.prod.yml", FileAccess::Write, L2),
        // Files a tool later runs or loads (issue #16, class 6): a write is never L1.
        (".config/git/config", FileAccess::Write, L2),
        (".gitconfig", FileAccess::Write, L2),
        (".git/config", FileAccess::Write, L2),
        (".git/info/attributes", FileAccess::Write, L2),
        (".git/hooks/post-checkout", FileAccess::Delete, L2),
        (
            "venv/lib/python3.12/site-packages/evil.pth",
            FileAccess::Write,
            L2,
        ),
        ("sitecustomize.py", FileAccess::Write, L2),
        ("lib/usercustomize.py", FileAccess::Write, L2),
        (".bashrc", FileAccess::Write, L2),
        (".profile", FileAccess::Write, L2),
        (".bash_profile", FileAccess::Write, L2),
        (".zshrc", FileAccess::Write, L2),
        (".inputrc", FileAccess::Write, L2),
        (".npmrc", FileAccess::Write, L2),
        (".pip/pip.conf", FileAccess::Write, L2),
        ("pip.conf", FileAccess::Write, L2),
        (".cargo/config", FileAccess::Write, L2),
        (".cargo/config.toml", FileAccess::Write, L2),
        ("makefile", FileAccess::Write, L2),
        ("GNUmakefile", FileAccess::Write, L2),
        (".envrc", FileAccess::Write, L2),
        (".ssh/config", FileAccess::Write, L3),
        (".curlrc", FileAccess::Write, L2),
        (".wgetrc", FileAccess::Write, L2),
        (".netrc", FileAccess::Write, L3),
        ("skills/x/SKILL.md", FileAccess::Write, L2),
        ("skills/x/helper.sh", FileAccess::Write, L2),
        ("build.rs", FileAccess::Write, L2),
        ("conftest.py", FileAccess::Write, L2),
        ("eslint.config.js", FileAccess::Write, L2),
        ("src/lib.rs", FileAccess::Write, L1),
        ("notes/skills.md", FileAccess::Write, L1),
        ("src/skills/mod.rs", FileAccess::Write, L1),
        ("/work/ws/skills/y/SKILL.md", FileAccess::Write, L2),
        (".git/config", FileAccess::Read, L0),
        ("", FileAccess::Read, L3),
        ("   ", FileAccess::Write, L3),
        ("a\0b", FileAccess::Read, L3),
    ];

    #[test]
    fn file_accesses_get_the_expected_level() {
        run_table(FILE_ACCESS_CASES, check_file_access);
    }

    #[test]
    fn a_relative_or_empty_workspace_contains_nothing() {
        for workspace in ["", "ws", "./ws"] {
            for path in ["a.txt", "../x", "/etc/hosts"] {
                let assessment = classify_file_access(path, FileAccess::Read, Path::new(workspace));
                assert_eq!(
                    assessment.level, L2,
                    "{workspace:?} {path:?}: {:?}",
                    assessment.reasons
                );
            }
        }
    }
}
