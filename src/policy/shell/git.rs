//! Git: read-only subcommands, local writes, and the options and keys that make git run a program.

use super::*;

/// Git configuration keys (lower case, matched as substrings) that name a program git will run.
#[rustfmt::skip]
pub(super) const GIT_KEYS_THAT_RUN_PROGRAMS: &[&str] = &[
    "alias", "pager", "editor", "sshcommand", "hookspath", "fsmonitor", "gitproxy", "askpass",
    "credential", "external", "filter.", "textconv", "driver", "program", "tool.", "uploadpack",
    "receivepack", "include", "command",
];

/// Git configuration forced on every command ([`git_hardening_environment`]).
#[rustfmt::skip]
pub(super) const GIT_HARDENING: &[(&str, &str)] = &[
    ("safe.bareRepository", "explicit"),
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("protocol.ext.allow", "never"),
];

/// Git configuration that every shell command should run with, as environment variables
/// (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`: command scope, above the
/// repository's own configuration): git refuses a bare repository it was not pointed at (a
/// planted `HEAD`, `config`, `objects/` in the workspace would otherwise load), and runs no
/// fsmonitor and no hooks. A read-only `git status` in a planted directory then runs nothing.
pub fn git_hardening_environment() -> Vec<(String, String)> {
    let mut environment = vec![(
        "GIT_CONFIG_COUNT".to_string(),
        GIT_HARDENING.len().to_string(),
    )];
    for (index, (key, value)) in GIT_HARDENING.iter().enumerate() {
        environment.push((format!("GIT_CONFIG_KEY_{index}"), key.to_string()));
        environment.push((format!("GIT_CONFIG_VALUE_{index}"), value.to_string()));
    }
    environment
}

/// Git subcommands that only read the repository: L0.
#[rustfmt::skip]
pub(super) const GIT_READ_ONLY: &[&str] = &[
    "status", "log", "diff", "show", "blame", "annotate", "shortlog", "describe", "rev-parse",
    "rev-list", "ls-files", "ls-tree", "ls-remote", "cat-file", "grep", "reflog", "whatchanged",
    "help", "version", "count-objects", "check-ignore", "check-attr", "name-rev", "merge-base",
    "show-ref", "for-each-ref", "show-branch", "verify-commit", "verify-tag", "cherry",
    "range-diff", "diff-tree", "diff-files", "diff-index", "var", "fsck",
];

/// Git subcommands that record work in the local repository and are easy to undo: L1.
/// Everything else (`push`, `reset`, `clean`, `checkout`, `merge`, `rebase`, …) is L2.
#[rustfmt::skip]
pub(super) const GIT_LOCAL_WRITES: &[&str] = &["add", "commit", "init", "fetch", "notes", "format-patch"];

/// Git options that name a program git will run, whatever the subcommand.
#[rustfmt::skip]
pub(super) const GIT_OPTIONS_THAT_RUN_PROGRAMS: &[&str] = &[
    "--upload-pack", "--receive-pack", "--exec", "--exec-path=", "ext::",
];
// ---------------------------------------------------------------------------------------------
// Git.
// ---------------------------------------------------------------------------------------------

/// Classifies `git …`: an option that names a program is L3, otherwise the subcommand decides,
/// and an override of git's configuration makes it at least L2.
pub(super) fn classify_git(arguments: &[Word]) -> Verdict {
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    if let Some(verdict) = classify_git_option_that_runs_a_program(&texts) {
        return verdict;
    }
    let global_options = match read_git_global_options(&texts) {
        Ok(global_options) => global_options,
        Err(verdict) => return verdict,
    };
    let Some(subcommand) = texts.get(global_options.subcommand_index).copied() else {
        return Verdict::new(RiskLevel::L0, "`git` without a subcommand prints help");
    };
    let rest = texts
        .get(global_options.subcommand_index + 1..)
        .unwrap_or(&[]);
    let mut verdict = classify_git_subcommand(subcommand, rest);
    if let Some((level, reason)) = global_options.configuration_override {
        verdict.raise_to(level, reason);
    }
    verdict
}

/// L3 when any argument is an option that names a program for git to run (`--upload-pack`).
fn classify_git_option_that_runs_a_program(texts: &[&str]) -> Option<Verdict> {
    let option = texts.iter().find(|text| {
        GIT_OPTIONS_THAT_RUN_PROGRAMS
            .iter()
            .any(|option| long_option_matches(text, option) || text.starts_with(option))
    })?;
    Some(Verdict::new(
        RiskLevel::L3,
        format!(
            "`git {}` runs a program named on the command line",
            quote_for_reason(option)
        ),
    ))
}

/// What the global options before git's subcommand tell.
struct GitGlobalOptions {
    /// Where the subcommand is among the arguments (past the end when there is none).
    subcommand_index: usize,
    /// The level and reason an override of git's configuration (`-c`, `--config-env`) sets at
    /// least.
    configuration_override: Option<(RiskLevel, String)>,
}

/// Reads the global options up to the subcommand. A `-c` setting that makes git run a program
/// decides the verdict on its own: that verdict is the error.
fn read_git_global_options(texts: &[&str]) -> Result<GitGlobalOptions, Verdict> {
    let mut configuration_override = None;
    let mut index = 0;
    while let Some(text) = texts.get(index) {
        if !text.starts_with('-') {
            break;
        }
        match *text {
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix"
            | "--attr-source" | "--list-cmds" => index += 2,
            "-c" => {
                let setting = texts.get(index + 1).copied().unwrap_or("");
                refuse_git_setting_that_runs_a_program(setting)?;
                configuration_override = Some((
                    RiskLevel::L2,
                    "`git -c` overrides git configuration".to_string(),
                ));
                index += 2;
            }
            "--config-env" => {
                configuration_override = Some((
                    RiskLevel::L2,
                    "`git --config-env` overrides git configuration".to_string(),
                ));
                index += 2;
            }
            _ => {
                if text.starts_with("--config-env=") {
                    configuration_override = Some((
                        RiskLevel::L2,
                        "`git --config-env` overrides git configuration".to_string(),
                    ));
                }
                index += 1;
            }
        }
    }
    Ok(GitGlobalOptions {
        subcommand_index: index,
        configuration_override,
    })
}

/// An L3 verdict (as the error) when a `git -c key=value` setting makes git run a program.
fn refuse_git_setting_that_runs_a_program(setting: &str) -> Result<(), Verdict> {
    let key = setting
        .split('=')
        .next()
        .unwrap_or(setting)
        .to_ascii_lowercase();
    if git_key_runs_programs(&key) {
        return Err(Verdict::new(
            RiskLevel::L3,
            format!(
                "`git -c {}` makes git run a program",
                quote_for_reason(&key)
            ),
        ));
    }
    Ok(())
}

/// Whether a git configuration key (lower case) names a program git will run.
fn git_key_runs_programs(key: &str) -> bool {
    GIT_KEYS_THAT_RUN_PROGRAMS
        .iter()
        .any(|part| key.contains(part))
}

/// Classifies a git subcommand by what it does to the repository; `rest` follows it.
fn classify_git_subcommand(subcommand: &str, rest: &[&str]) -> Verdict {
    let quoted = quote_for_reason(subcommand);
    match subcommand {
        "branch" => classify_git_branch_or_tag("branch", rest),
        "tag" => classify_git_branch_or_tag("tag", rest),
        "remote" => match rest.first().copied() {
            None | Some("-v" | "--verbose" | "show" | "get-url") => {
                Verdict::new(RiskLevel::L0, "`git remote` only lists remotes")
            }
            Some(_) => Verdict::new(RiskLevel::L2, "`git remote` changes the configured remotes"),
        },
        "stash" => match rest.first().copied() {
            Some("list" | "show") => Verdict::new(RiskLevel::L0, "`git stash list` only reads"),
            None | Some("push" | "save") => {
                Verdict::new(RiskLevel::L1, "`git stash` saves local changes")
            }
            Some(_) => Verdict::new(RiskLevel::L2, "`git stash` changes or drops saved changes"),
        },
        "worktree" => match rest.first().copied() {
            Some("list") => Verdict::new(RiskLevel::L0, "`git worktree list` only reads"),
            _ => Verdict::new(
                RiskLevel::L2,
                "`git worktree` adds or removes working trees",
            ),
        },
        "submodule" => match rest.first().copied() {
            None | Some("status" | "summary") => {
                Verdict::new(RiskLevel::L0, "`git submodule status` only reads")
            }
            Some("foreach") => Verdict::new(
                RiskLevel::L3,
                "`git submodule foreach` runs a shell command that is not reviewed",
            ),
            Some(_) => Verdict::new(RiskLevel::L2, "`git submodule` changes submodules"),
        },
        "config" => classify_git_config(rest),
        "reflog" if matches!(rest.first().copied(), Some("expire" | "delete")) => {
            Verdict::new(RiskLevel::L2, "`git reflog expire` deletes history")
        }
        _ if GIT_READ_ONLY.contains(&subcommand) => classify_git_read_only(subcommand, rest),
        _ if GIT_LOCAL_WRITES.contains(&subcommand) => Verdict::new(
            RiskLevel::L1,
            format!("`git {quoted}` records work in the local repository"),
        ),
        _ => Verdict::new(
            RiskLevel::L2,
            format!(
                "`git {quoted}` changes history, the working tree or a remote (or is an alias)"
            ),
        ),
    }
}

/// A read-only subcommand is L0, unless an option makes it write a file or run a program.
fn classify_git_read_only(subcommand: &str, rest: &[&str]) -> Verdict {
    let quoted = quote_for_reason(subcommand);
    let mut verdict = Verdict::new(RiskLevel::L0, format!("`git {quoted}` only reads"));
    if rest.iter().any(|text| {
        ["--output", "--ext-diff", "--open-files-in-pager"]
            .iter()
            .any(|option| long_option_matches(text, option))
            || text.starts_with("-O")
            || (subcommand == "ls-remote" && *text == "-u")
    }) {
        verdict.raise_to(
            RiskLevel::L2,
            format!("`git {quoted}` writes a file or runs an external program"),
        );
    }
    verdict
}

pub(super) fn classify_git_branch_or_tag(kind: &str, rest: &[&str]) -> Verdict {
    pub(super) const DESTRUCTIVE: &[&str] = &[
        "-d",
        "-D",
        "--delete",
        "-m",
        "-M",
        "--move",
        "-c",
        "-C",
        "--copy",
        "-f",
        "--force",
        "-u",
        "--set-upstream-to",
        "--unset-upstream",
        "--edit-description",
    ];
    pub(super) const LISTING: &[&str] = &[
        "-l",
        "--list",
        "-a",
        "--all",
        "-r",
        "--remotes",
        "-v",
        "-vv",
        "--verbose",
        "--show-current",
        "--contains",
        "--no-contains",
        "--merged",
        "--no-merged",
        "--points-at",
        "-n",
        "--sort",
        "--format",
        "--column",
    ];
    if rest.iter().any(|text| option_is_any_of(text, DESTRUCTIVE)) {
        return Verdict::new(
            RiskLevel::L2,
            format!("`git {kind}` deletes, moves or rewrites a {kind}"),
        );
    }
    let lists = rest.is_empty()
        || rest.iter().any(|text| {
            LISTING.contains(text) || text.starts_with("--sort=") || text.starts_with("--format=")
        });
    if lists || rest.iter().all(|text| text.starts_with('-')) {
        return Verdict::new(RiskLevel::L0, format!("`git {kind}` only lists"));
    }
    Verdict::new(RiskLevel::L1, format!("`git {kind}` creates a {kind}"))
}

pub(super) fn classify_git_config(rest: &[&str]) -> Verdict {
    pub(super) const READS: &[&str] = &[
        "--get",
        "--get-all",
        "--get-regexp",
        "--get-urlmatch",
        "--list",
        "-l",
        "--show-origin",
        "--show-scope",
    ];
    pub(super) const WRITES: &[&str] = &[
        "--unset",
        "--unset-all",
        "--add",
        "--replace-all",
        "--edit",
        "-e",
        "--rename-section",
        "--remove-section",
    ];
    let positionals: Vec<&str> = rest
        .iter()
        .copied()
        .filter(|text| !text.starts_with('-'))
        .collect();
    let reads = rest.iter().any(|text| READS.contains(text))
        || matches!(positionals.first().copied(), Some("get" | "list"));
    let writes = rest.iter().any(|text| option_is_any_of(text, WRITES))
        || matches!(
            positionals.first().copied(),
            Some("set" | "unset" | "edit" | "rename-section" | "remove-section")
        )
        || positionals.len() >= 2;
    if reads || !writes {
        return Verdict::new(RiskLevel::L0, "`git config` only reads configuration");
    }
    let key = match positionals.first().copied() {
        Some("set" | "unset") => positionals.get(1).copied().unwrap_or(""),
        other => other.unwrap_or(""),
    }
    .to_ascii_lowercase();
    if git_key_runs_programs(&key) {
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "`git config {}` makes git run a program",
                quote_for_reason(&key)
            ),
        );
    }
    Verdict::new(RiskLevel::L2, "`git config` changes git configuration")
}
