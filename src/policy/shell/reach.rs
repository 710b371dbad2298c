//! What an approved command needs to reach when it runs ([`crate::policy::Reach`]): the
//! network, or writes outside the workspace. The sandbox gives a command exactly this and no
//! more, and the approval prompt states it.
//!
//! Invariants: a command the classifier cannot place (unknown program, computed words) needs
//! nothing beyond the narrow profile, so a misread command fails instead of reaching further;
//! a command that needs the network is at least L2, because only an approved command gets it
//! (L0 and L1 run in an empty network namespace).

use super::*;

/// Adds to `verdict.needs` what `program` with these arguments reaches (network, writes
/// anywhere); the network also lifts the level to L2.
pub(super) fn add_reach(program: &str, arguments: &[Word], verdict: &mut Verdict) {
    let rules = SUBCOMMAND_RULES
        .iter()
        .find(|rules| rules.program == program);
    // Both readings when an unknown option may consume the next word.
    let subcommands: Vec<Option<&str>> = match rules {
        None => vec![None],
        Some(rules) => std::iter::once(find_subcommand(rules, arguments).unwrap_or(""))
            .chain(alternative_subcommand(rules, arguments))
            .map(Some)
            .collect(),
    };
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    for subcommand in subcommands {
        if reaches_network(program, subcommand, &texts) {
            verdict.needs.network = true;
        }
        if writes_system_wide(program, subcommand, &texts) {
            verdict.needs.writes = Writes::Anywhere;
        }
    }
    if let Some(path) = download_target(program, arguments) {
        verdict.written_paths.push(path);
    }
    if program == "git"
        && let Some(path) = git_clone_destination(&texts)
    {
        verdict.written_paths.push(path.to_string());
    }
}

/// The directory `git clone <repository> <directory>` creates.
fn git_clone_destination<'a>(texts: &[&'a str]) -> Option<&'a str> {
    let operands: Vec<&str> = texts
        .iter()
        .copied()
        .filter(|text| !text.starts_with('-'))
        .collect();
    match operands.as_slice() {
        ["clone", _, destination, ..] => Some(destination),
        _ => None,
    }
}

/// Lifts a command that needs the network to L2: L0 and L1 run without it.
pub(super) fn raise_for_network(verdict: &mut Verdict) {
    if verdict.needs.network {
        verdict.raise_to(
            RiskLevel::L2,
            "reaches the network, which only an approved command gets",
        );
    }
}

/// Whether the command talks to another machine.
fn reaches_network(program: &str, subcommand: Option<&str>, texts: &[&str]) -> bool {
    if matches!(
        find_group(APPROVAL_GROUPS, program),
        Some(NETWORK_GROUP | SOFTWARE_GROUP)
    ) {
        return true;
    }
    match program {
        "nc" | "ncat" | "netcat" | "socat" | "ping" | "ping6" => return true,
        // Network settings change the host's network namespace, which they must share.
        "iptables" | "ip6tables" | "nft" | "ufw" | "ip" | "ifconfig" | "route" => return true,
        // `rsync src host:dst`, `rsync rsync://host/…`: a local copy stays local.
        "rsync" => {
            return texts
                .iter()
                .any(|text| !text.starts_with('-') && names_remote_host(text));
        }
        "git" => return git_reaches_network(texts),
        _ => {}
    }
    let Some(subcommand) = subcommand else {
        return false;
    };
    table_lists(NETWORK_SUBCOMMANDS, program, subcommand)
}

/// Whether a git command line contacts a remote: the table's subcommands, and the forms of
/// `remote`, `submodule` and `archive` that do.
fn git_reaches_network(texts: &[&str]) -> bool {
    let mut words = texts.iter().copied().filter(|text| !text.starts_with('-'));
    let Some(subcommand) = words.next() else {
        return false;
    };
    let action = words.next().unwrap_or("");
    match subcommand {
        "remote" => matches!(action, "show" | "update" | "prune" | "set-head"),
        "submodule" => matches!(action, "update" | "add" | "foreach"),
        "archive" => texts
            .iter()
            .any(|text| long_option_matches(text, "--remote")),
        _ => table_lists(NETWORK_SUBCOMMANDS, "git", subcommand),
    }
}

/// Whether the command writes outside the workspace: installs, system changes, global options.
fn writes_system_wide(program: &str, subcommand: Option<&str>, texts: &[&str]) -> bool {
    if matches!(
        find_group(APPROVAL_GROUPS, program),
        Some(SOFTWARE_GROUP | SYSTEM_GROUP)
    ) {
        return true;
    }
    if matches!(
        program,
        "service" | "dpkg" | "iptables" | "ip6tables" | "nft" | "ufw" | "crontab"
    ) {
        return true;
    }
    let global_option = SYSTEM_WIDE_OPTIONS
        .iter()
        .filter(|(listed, _)| *listed == program)
        .any(|(_, options)| texts.iter().any(|text| option_is_any_of(text, options)));
    global_option
        || subcommand.is_some_and(|sub| table_lists(SYSTEM_WIDE_SUBCOMMANDS, program, sub))
}

/// Whether `table` lists `subcommand` (or `"*"`) for `program`.
fn table_lists(table: &[(&str, &[&str])], program: &str, subcommand: &str) -> bool {
    table
        .iter()
        .filter(|(listed, _)| *listed == program)
        .any(|(_, subcommands)| subcommands.contains(&subcommand) || subcommands.contains(&"*"))
}

/// Whether an rsync or scp operand names another machine (`host:path`, `user@host:path`,
/// `rsync://host/…`); a local path with a colon after a slash (`./a:b`) does not.
fn names_remote_host(text: &str) -> bool {
    if text.contains("://") {
        return true;
    }
    text.find(':')
        .is_some_and(|colon| colon > 0 && !text[..colon].contains('/'))
}

/// The file a downloader writes (`curl -o path`, `wget -O path`, `wget -P dir`), so that a
/// download outside the workspace needs writes there.
fn download_target(program: &str, arguments: &[Word]) -> Option<String> {
    let options: &[&str] = match program {
        "curl" => &["-o", "--output", "--output-dir"],
        "wget" => &["-O", "--output-document", "-P", "--directory-prefix"],
        _ => return None,
    };
    for (index, word) in arguments.iter().enumerate() {
        let text = word.text.as_str();
        if option_takes_next_word(text, options) {
            return arguments.get(index + 1).map(|value| value.text.clone());
        }
        if let Some((_, value)) = text.split_once('=')
            && text.starts_with("--")
            && option_is_any_of(text, options)
        {
            return Some(value.to_string());
        }
    }
    None
}

/// Whether a path a command writes (or works in) lies outside the workspace: then the command
/// needs writes anywhere when approved.
pub(super) fn add_reach_for_paths(verdict: &mut Verdict, words: &[Word]) {
    let writes_elsewhere = verdict
        .written_paths
        .iter()
        .any(|path| is_outside_working_directory(path))
        || (verdict.level >= RiskLevel::L1
            && directory_option_values(words)
                .iter()
                .any(|directory| is_outside_working_directory(directory)));
    if writes_elsewhere {
        verdict.needs.writes = Writes::Anywhere;
    }
}

/// After a `cd` out of the working directory, an L1 command is L2 (its relative paths point
/// elsewhere) and a command that writes writes outside the workspace. Updates whether the
/// commands so far left it.
pub(super) fn raise_after_leaving(verdict: &mut Verdict, left_working_directory: &mut bool) {
    if *left_working_directory && verdict.level == RiskLevel::L1 {
        verdict.raise_to(
            RiskLevel::L2,
            "runs after a `cd` out of the working directory, so its relative paths point elsewhere",
        );
    }
    if *left_working_directory && verdict.level >= RiskLevel::L1 {
        verdict.needs.writes = Writes::Anywhere;
    }
    *left_working_directory |= verdict.leaves_working_directory;
}
