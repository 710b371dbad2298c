//! Files that later commands load: an option that names a file (or directory) a program loads
//! as configuration or code raises the command to L2 when the file could have been planted (a
//! relative path, the workspace, `/tmp`), because `write_file` (L1) or an earlier command could
//! have written it ([`LOADED_FILE_OPTIONS`]). The same for git after a `cd` into another
//! directory (its repository configuration and hooks load) and for `python -m` without `-I`/`-P`
//! (a module in the working directory shadows the one meant).
//!
//! Invariant: only files under the system's own directories (`/usr`, `/etc`, …) count as not
//! plantable; everything else, including a computed path, is.

use super::*;

/// Directories whose files the agent cannot have written.
const SYSTEM_FILE_DIRECTORIES: &[&str] = &["/usr/", "/etc/", "/lib/", "/lib64/", "/bin/", "/sbin/"];

/// Raises the verdict for every option of [`LOADED_FILE_OPTIONS`] that names a plantable file.
pub(super) fn raise_for_loaded_files(program: &str, arguments: &[Word], verdict: &mut Verdict) {
    for (listed, option, what) in LOADED_FILE_OPTIONS {
        if *listed != program {
            continue;
        }
        let Some(file) = option_value(arguments, option) else {
            continue;
        };
        if could_be_planted(&file) {
            verdict.raise_to(
                RiskLevel::L2,
                format!(
                    "`{program} {option}` loads `{}` as {what}, a file the agent may have written",
                    quote_for_reason(&file)
                ),
            );
        }
    }
}

/// Whether a file the agent (or an earlier command) may have written: anything outside the
/// system's own directories.
pub(super) fn could_be_planted(path: &str) -> bool {
    !SYSTEM_FILE_DIRECTORIES
        .iter()
        .any(|directory| path.starts_with(directory))
}

/// The value of `option` among the arguments: `--long=value`, `--long value`, `-xvalue`,
/// `-x value`; None when the option is not given. Matching stops at a literal `--`.
fn option_value(arguments: &[Word], option: &str) -> Option<String> {
    for (index, word) in arguments.iter().enumerate() {
        let text = word.text.as_str();
        if text == "--" {
            return None;
        }
        let next = || arguments.get(index + 1).map(|word| word.text.clone());
        if option.starts_with("--") {
            if long_option_matches(text, option) && text.starts_with("--") {
                return text
                    .split_once('=')
                    .map(|(_, value)| value.to_string())
                    .or_else(next);
            }
        } else if text == option {
            return next();
        } else if let Some(value) = text.strip_prefix(option)
            && option.len() == 2
            && !text.starts_with("--")
        {
            return Some(value.trim_start_matches('=').to_string());
        }
    }
    None
}

/// After `cd dir` (anything but `.`), git loads the configuration and hooks of the repository
/// it finds there, which the agent may have planted (a bare repository needs no `.git`).
pub(super) fn raise_for_git_after_entering(
    simple_command: &SimpleCommand,
    entered_directory: &mut bool,
    verdict: &mut Verdict,
) {
    let words = &simple_command.words;
    let program = words
        .iter()
        .find(|word| split_assignment(word).is_none())
        .map(|word| word.text.as_str());
    if *entered_directory && words.iter().any(|word| word.text == "git") {
        verdict.raise_to(
            RiskLevel::L2,
            "git runs after a `cd` into another directory: the repository there (its configuration and hooks, which run programs) may have been planted",
        );
    }
    if matches!(program, Some("cd" | "pushd" | "popd")) {
        let target = words.get(1).map(|word| word.text.as_str());
        *entered_directory |= !matches!(target, Some("." | "./"));
    }
}

/// `python -m module` runs the first `module` on its path, and without `-I` (isolated) or `-P`
/// the working directory comes first: a planted `json/tool.py` runs instead of the standard one.
pub(super) fn raise_for_shadowed_module(
    interpreter: &str,
    module: &str,
    arguments: &[Word],
    verdict: &mut Verdict,
) {
    let isolated = arguments
        .iter()
        .take_while(|word| !word.text.starts_with("-m"))
        .filter_map(|word| short_cluster(&word.text))
        .any(|cluster| cluster.contains(['I', 'P']));
    if !isolated {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "`{interpreter} -m {}` runs a module the working directory may shadow (a planted `{}` would run); `{interpreter} -I -m …` does not",
                quote_for_reason(module),
                quote_for_reason(module.split('.').next().unwrap_or(module))
            ),
        );
    }
}
