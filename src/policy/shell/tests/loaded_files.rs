//! Issue #29 class 3 (the option half): options that name a file a program loads as
//! configuration or code, git after a `cd`, `python -m` shadowing. Every table row is tested.

use super::*;

/// Each row of the table, with a file in the workspace, is at least L2 and names the file;
/// the same option pointing into `/usr/` does not raise the command by itself.
#[test]
fn every_loaded_file_option_with_a_plantable_file_is_at_least_l2() {
    let mut failures = Vec::new();
    for (program, option, _) in LOADED_FILE_OPTIONS {
        let spellings = if option.starts_with("--") {
            vec![
                format!("{program} {option}=planted/file x"),
                format!("{program} {option} planted/file x"),
            ]
        } else {
            vec![format!("{program} {option} planted/file x")]
        };
        for command in spellings {
            let assessment = classify_shell(&command);
            let named = assessment
                .reasons
                .iter()
                .any(|reason| reason.contains("planted/file"));
            if assessment.level < L2 || !named {
                failures.push(format!(
                    "{command:?}: {} {:?}",
                    assessment.level, assessment.reasons
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The instances named in the issue and their harmless neighbours.
#[rustfmt::skip]
const LOADED_FILE_CASES: &[(&str, RiskLevel)] = &[
    // A git directory named by an option or entered with `cd`.
    ("git --git-dir=planted log", L2),
    ("git --git-dir planted status", L2),
    ("git --work-tree=planted status", L2),
    ("git -C planted status", L2),
    ("git -C sub log --oneline", L2),
    ("cd planted && git status", L2),
    ("cd planted; git log", L2),
    ("pushd planted && git diff", L2),
    ("cd . && git status", L0),
    ("git status", L0),
    ("git log --oneline -n 5", L0),
    ("git --git-dir=/usr/share/repo log", L0),
    // A module that shadows `python3 -m X`.
    ("python3 -m json.tool data.json", L2),
    ("python3 -m venv .venv", L2),
    ("python3 -m py_compile x.py", L2),
    ("python3 -I -m json.tool data.json", L0),
    ("python3 -P -m json.tool data.json", L0),
    ("python3 -I -m venv .venv", L1),
    // A lesskey source.
    ("less --lesskey-src=keys README.md", L2),
    ("less --lesskey-src keys README.md", L2),
    ("less -k keys README.md", L2),
    ("less -kkeys README.md", L2),
    ("less --lesskey-file=keys README.md", L2),
    ("less README.md", L0),
    // An awk or sed program file.
    ("awk -f prog.awk data", L2),
    ("awk -fprog.awk data", L2),
    ("gawk --include=lib.awk 'BEGIN{}'", L2),
    ("sed -f script.sed data", L2),
    ("man -C planted.conf ls", L2),
    ("man ls", L0),
];

#[test]
fn files_that_later_commands_load_raise_the_level() {
    run_table(LOADED_FILE_CASES, |(command, level)| check(command, level));
}

/// The git configuration every command should run with (the executor sets it): implicit bare
/// repositories refused, no fsmonitor, no hooks.
#[test]
fn the_git_hardening_environment_forces_the_dangerous_keys_off() {
    let environment = crate::policy::shell::git_hardening_environment();
    let get = |name: &str| {
        environment
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    };
    let count: usize = get("GIT_CONFIG_COUNT")
        .and_then(|count| count.parse().ok())
        .expect("GIT_CONFIG_COUNT is a number");
    let pairs: Vec<(String, String)> = (0..count)
        .map(|index| {
            (
                get(&format!("GIT_CONFIG_KEY_{index}"))
                    .unwrap_or("")
                    .to_string(),
                get(&format!("GIT_CONFIG_VALUE_{index}"))
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    for (key, value) in [
        ("safe.bareRepository", "explicit"),
        ("core.fsmonitor", "false"),
        ("core.hooksPath", "/dev/null"),
    ] {
        assert!(
            pairs.iter().any(|(k, v)| k == key && v == value),
            "{key}={value} missing from {pairs:?}"
        );
    }
}
