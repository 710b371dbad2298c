//! Git: read-only subcommands, local writes, and the options and keys that make git run a program.

use super::*;

/// Git configuration keys (lower case, matched as substrings) that name a program git will run.
#[rustfmt::skip]
pub(super) const GIT_KEYS_THAT_RUN_PROGRAMS: &[&str] = &[
    "alias", "pager", "editor", "sshcommand", "hookspath", "fsmonitor", "gitproxy", "askpass",
    "credential", "external", "filter.", "textconv", "driver", "program", "tool.", "uploadpack",
    "receivepack", "include", "command",
];

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

pub(super) fn classify_git(arguments: &[Word]) -> Verdict {
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    if let Some(option) = texts.iter().find(|text| {
        GIT_OPTIONS_THAT_RUN_PROGRAMS
            .iter()
            .any(|option| long_option_matches(text, option) || text.starts_with(option))
    }) {
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "`git {}` runs a program named on the command line",
                quote_for_reason(option)
            ),
        );
    }
    let mut floor: Option<(RiskLevel, String)> = None;
    let mut index = 0;
    while let Some(text) = texts.get(index) {
        if !text.starts_with('-') {
            break;
        }
        match *text {
            "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--super-prefix" => index += 2,
            "-c" => {
                let setting = texts.get(index + 1).copied().unwrap_or("");
                let key = setting
                    .split('=')
                    .next()
                    .unwrap_or(setting)
                    .to_ascii_lowercase();
                if GIT_KEYS_THAT_RUN_PROGRAMS
                    .iter()
                    .any(|part| key.contains(part))
                {
                    return Verdict::new(
                        RiskLevel::L3,
                        format!(
                            "`git -c {}` makes git run a program",
                            quote_for_reason(&key)
                        ),
                    );
                }
                floor = Some((
                    RiskLevel::L2,
                    "`git -c` overrides git configuration".to_string(),
                ));
                index += 2;
            }
            "--config-env" => {
                floor = Some((
                    RiskLevel::L2,
                    "`git --config-env` overrides git configuration".to_string(),
                ));
                index += 2;
            }
            _ => {
                if text.starts_with("--config-env=") {
                    floor = Some((
                        RiskLevel::L2,
                        "`git --config-env` overrides git configuration".to_string(),
                    ));
                }
                index += 1;
            }
        }
    }
    let Some(subcommand) = texts.get(index).copied() else {
        return Verdict::new(RiskLevel::L0, "`git` without a subcommand prints help");
    };
    let rest = texts.get(index + 1..).unwrap_or(&[]);
    let quoted = quote_for_reason(subcommand);
    let mut verdict = match subcommand {
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
        _ if GIT_READ_ONLY.contains(&subcommand) => {
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
    };
    if let Some((level, reason)) = floor {
        verdict.raise_to(level, reason);
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
    if GIT_KEYS_THAT_RUN_PROGRAMS
        .iter()
        .any(|part| key.contains(part))
    {
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
