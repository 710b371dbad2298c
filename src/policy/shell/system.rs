//! System and network commands, and programs driven by a subcommand (`cargo build`).

use super::*;

// ---------------------------------------------------------------------------------------------
// System and network commands.
// ---------------------------------------------------------------------------------------------

pub(super) fn classify_crontab(arguments: &[Word]) -> Verdict {
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    let only_lists = texts.contains(&"-l")
        && texts
            .iter()
            .all(|text| matches!(*text, "-l" | "-u") || !text.starts_with('-'))
        && texts.len() <= 3;
    if only_lists {
        return Verdict::new(RiskLevel::L0, "`crontab -l` only lists scheduled jobs");
    }
    Verdict::new(RiskLevel::L3, "`crontab` replaces or edits scheduled jobs")
}

pub(super) fn classify_netcat(arguments: &[Word]) -> Verdict {
    let executes = arguments.iter().any(|word| {
        let text = word.text.as_str();
        text == "-c"
            || ["--exec", "--sh-exec", "--lua-exec"]
                .iter()
                .any(|option| long_option_matches(text, option))
            || short_cluster(text).is_some_and(|cluster| cluster.contains('e'))
    });
    if executes {
        return Verdict::new(RiskLevel::L3, "`nc -e` connects a program to the network");
    }
    Verdict::new(RiskLevel::L2, "`nc` reaches the network")
}

pub(super) fn classify_socat(arguments: &[Word]) -> Verdict {
    let executes = arguments.iter().any(|word| {
        let lower = word.text.to_ascii_lowercase();
        lower.contains("exec:") || lower.contains("system:")
    });
    if executes {
        return Verdict::new(RiskLevel::L3, "`socat` connects a program to the network");
    }
    Verdict::new(RiskLevel::L2, "`socat` reaches the network")
}

pub(super) fn classify_firewall(program: &str, arguments: &[Word]) -> Verdict {
    let disables = arguments.iter().any(|word| {
        let text = word.text.as_str();
        match program {
            "iptables" | "ip6tables" => text == "-F" || long_option_matches(text, "--flush"),
            "nft" => text == "flush",
            _ => matches!(text, "disable" | "reset"),
        }
    });
    if disables {
        return Verdict::new(
            RiskLevel::L3,
            format!("`{program}` removes the firewall rules"),
        );
    }
    Verdict::new(RiskLevel::L2, format!("`{program}` changes the firewall"))
}

pub(super) fn classify_ping(arguments: &[Word]) -> Verdict {
    let bounded = arguments.iter().any(|word| {
        word.text.starts_with("-c") || word.text.starts_with("-w") || word.text == "--count"
    });
    if bounded {
        Verdict::new(RiskLevel::L0, "`ping -c` sends a bounded number of probes")
    } else {
        Verdict::new(
            RiskLevel::L1,
            "`ping` without `-c` runs until it is stopped",
        )
    }
}

pub(super) fn classify_service(arguments: &[Word]) -> Verdict {
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    if matches!(texts.as_slice(), ["--status-all"] | [_, "status"]) {
        return Verdict::new(RiskLevel::L0, "`service … status` only reports");
    }
    Verdict::new(
        RiskLevel::L2,
        "`service` starts, stops or changes a service",
    )
}

pub(super) fn classify_dpkg(arguments: &[Word]) -> Verdict {
    pub(super) const QUERIES: &[&str] = &[
        "-l",
        "-L",
        "-s",
        "-S",
        "-p",
        "--list",
        "--listfiles",
        "--status",
        "--search",
        "--print-avail",
        "--get-selections",
        "--print-architecture",
        "--version",
        "--help",
    ];
    let only_queries = !arguments.is_empty()
        && arguments
            .iter()
            .filter(|word| word.text.starts_with('-'))
            .all(|word| QUERIES.contains(&word.text.as_str()))
        && arguments.iter().any(|word| word.text.starts_with('-'));
    if only_queries {
        return Verdict::new(RiskLevel::L0, "`dpkg` only queries installed packages");
    }
    Verdict::new(RiskLevel::L2, "`dpkg` installs or removes software")
}

pub(super) fn classify_change_directory(program: &str, arguments: &[Word]) -> Verdict {
    let target = arguments
        .iter()
        .map(|word| word.text.as_str())
        .find(|text| !text.starts_with('-') || *text == "-");
    let computed = arguments
        .iter()
        .any(|word| word.expands_variable || word.globs());
    let leaves = match (program, target) {
        // `popd`, `cd` alone, `cd -` and `cd "$d"` go somewhere the command line does not say.
        ("popd", _) | (_, None | Some("-")) => true,
        _ if computed => true,
        (_, Some(target)) => is_outside_working_directory(target),
    };
    let mut verdict = Verdict::new(
        RiskLevel::L0,
        format!("`{program}` changes the current directory"),
    );
    verdict.leaves_working_directory = leaves;
    verdict
}

pub(super) fn container_takes_over_host(arguments: &[Word]) -> Option<&'static str> {
    let texts: Vec<&str> = arguments.iter().map(|word| word.text.as_str()).collect();
    for (index, text) in texts.iter().enumerate() {
        let next = texts.get(index + 1).copied().unwrap_or("");
        let privileged = *text == "--privileged"
            || matches!(
                *text,
                "--pid=host" | "--userns=host" | "--cap-add=ALL" | "--cap-add=SYS_ADMIN"
            )
            || (matches!(*text, "--pid" | "--userns") && next == "host")
            || (*text == "--cap-add" && matches!(next, "ALL" | "SYS_ADMIN"));
        let mounts_host = text.contains("docker.sock")
            || text.starts_with("/:")
            || text.starts_with("-v/:")
            || text.starts_with("--volume=/:")
            || (matches!(*text, "-v" | "--volume") && next.starts_with("/:"))
            || (text.starts_with("--mount")
                && (text.contains("source=/,") || text.contains("src=/,")));
        if privileged || mounts_host {
            return Some(
                "the container gets control of the host (privileged, host namespaces or the host's root or Docker socket mounted)",
            );
        }
    }
    None
}

/// The subcommand: the first word that is neither an option nor an option's value (`+nightly`
/// selects a toolchain).
pub(super) fn find_subcommand<'a>(
    rules: &SubcommandRules,
    arguments: &'a [Word],
) -> Option<&'a str> {
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        if !text.starts_with('-') && !text.starts_with('+') {
            return Some(text);
        }
        index += if option_takes_next_word(text, rules.options_with_value) {
            2
        } else {
            1
        };
    }
    None
}

/// The word that is the subcommand if the option just before [`find_subcommand`]'s answer takes
/// a value the tables do not know of (`pip --log list install x` installs): an unknown option
/// without `=` may consume the next word, so both readings are classified.
pub(super) fn alternative_subcommand<'a>(
    rules: &SubcommandRules,
    arguments: &'a [Word],
) -> Option<&'a str> {
    let subcommand = find_subcommand(rules, arguments)?;
    let index = arguments.iter().position(|word| word.text == subcommand)?;
    let before = arguments.get(index.checked_sub(1)?)?.text.as_str();
    let unknown_option = before.starts_with('-')
        && !before.contains('=')
        && !option_takes_next_word(before, rules.options_with_value);
    if !unknown_option {
        return None;
    }
    arguments
        .get(index + 1)
        .map(|word| word.text.as_str())
        .filter(|text| !text.starts_with('-'))
}

pub(super) fn classify_subcommand(rules: &SubcommandRules, arguments: &[Word]) -> Verdict {
    let mut verdict = classify_named_subcommand(rules, find_subcommand(rules, arguments));
    if let Some(alternative) = alternative_subcommand(rules, arguments) {
        let other = classify_named_subcommand(rules, Some(alternative));
        if other.level > verdict.level {
            verdict.raise_to(
                other.level,
                format!(
                    "if the option before it takes a value, the subcommand is `{}`: {}",
                    quote_for_reason(alternative),
                    other.reasons.join("; ")
                ),
            );
        }
    }
    raise_for_options_needing_approval(rules, arguments, &mut verdict);
    verdict
}

/// The verdict for one reading of the subcommand (None: the program alone).
fn classify_named_subcommand(rules: &SubcommandRules, subcommand: Option<&str>) -> Verdict {
    let program = rules.program;
    match subcommand {
        None => Verdict::new(rules.bare, format!("`{program}` without a subcommand")),
        Some(subcommand) => {
            let quoted = quote_for_reason(subcommand);
            if rules.blocked.contains(&subcommand) {
                Verdict::new(
                    RiskLevel::L3,
                    format!(
                        "`{program} {quoted}` stops the machine or runs code that is not reviewed"
                    ),
                )
            } else if rules.read_only.contains(&subcommand) {
                Verdict::new(RiskLevel::L0, format!("`{program} {quoted}` only reads"))
            } else if rules.runs_project_code.contains(&subcommand) {
                Verdict::new(
                    RiskLevel::L2,
                    format!(
                        "`{program} {quoted}` runs the project's code (build scripts, tests or package scripts the agent may have written)"
                    ),
                )
            } else if rules.project_local.contains(&subcommand) {
                Verdict::new(
                    RiskLevel::L1,
                    format!("`{program} {quoted}` builds, tests or runs project scripts"),
                )
            } else {
                Verdict::new(
                    RiskLevel::L2,
                    format!(
                        "`{program} {quoted}` installs software or changes the system or the network"
                    ),
                )
            }
        }
    }
}

/// Options that need approval whatever the subcommand (`cargo --config`).
fn raise_for_options_needing_approval(
    rules: &SubcommandRules,
    arguments: &[Word],
    verdict: &mut Verdict,
) {
    let program = rules.program;
    if let Some(option) = arguments.iter().find(|word| {
        rules
            .options_needing_approval
            .iter()
            .any(|option| long_option_matches(&word.text, option) || word.text.starts_with(option))
    }) {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "`{program} {}` changes configuration",
                quote_for_reason(&option.text)
            ),
        );
    }
}
