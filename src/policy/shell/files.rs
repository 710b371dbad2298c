//! File commands: `rm`, `chmod`, `cp`, `tar`, `unzip`.

use super::*;

// ---------------------------------------------------------------------------------------------
// File commands.
// ---------------------------------------------------------------------------------------------

pub(super) fn classify_rm(arguments: &[Word]) -> Verdict {
    let mut recursive = false;
    let mut force = false;
    let mut after_double_dash = false;
    let mut targets = Vec::new();
    for word in arguments {
        let text = word.text.as_str();
        if after_double_dash || !text.starts_with('-') || text == "-" {
            targets.push(text);
            continue;
        }
        if text == "--" {
            after_double_dash = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            // GNU accepts any unambiguous prefix of a long option (`--rec`, `--f`).
            let long = long.split('=').next().unwrap_or(long);
            if "recursive".starts_with(long) {
                recursive = true;
            } else if "force".starts_with(long) {
                force = true;
            } else if "no-preserve-root".starts_with(long) && long.len() > 1 {
                return Verdict::new(
                    RiskLevel::L3,
                    "`rm --no-preserve-root` can delete the whole system",
                );
            }
            continue;
        }
        recursive |= text.contains(['r', 'R']);
        force |= text.contains('f');
    }
    if recursive && force {
        return Verdict::new(
            RiskLevel::L3,
            "`rm -rf` deletes a whole tree without asking",
        );
    }
    if let Some(target) = targets.iter().find(|target| is_system_location(target)) {
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "`rm` targets the system location `{}`",
                quote_for_reason(target)
            ),
        );
    }
    Verdict::new(RiskLevel::L2, "`rm` deletes files")
        .writing(targets.into_iter().map(str::to_string))
}

pub(super) fn classify_permission_change(program: &str, arguments: &[Word]) -> Verdict {
    let recursive = arguments.iter().any(|word| {
        long_option_matches(&word.text, "--recursive")
            || short_cluster(&word.text).is_some_and(|cluster| cluster.contains('R'))
    });
    let targets = operands(arguments);
    if let Some(target) = targets.iter().find(|target| is_system_location(target)) {
        let how = if recursive { "recursively " } else { "" };
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "`{program}` {how}changes the system location `{}`",
                quote_for_reason(target)
            ),
        );
    }
    Verdict::new(
        RiskLevel::L2,
        format!("`{program}` changes permissions or ownership"),
    )
    .writing(targets)
}

pub(super) fn classify_copy(arguments: &[Word]) -> Verdict {
    let mut target_directory = None;
    let mut operands_found = Vec::new();
    let mut after_double_dash = false;
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        index += 1;
        if after_double_dash || !text.starts_with('-') || text == "-" {
            operands_found.push(text.to_string());
        } else if text == "--" {
            after_double_dash = true;
        } else if text == "-t" || long_option_matches(text, "--target-directory") {
            match text.split_once('=') {
                Some((_, directory)) => target_directory = Some(directory.to_string()),
                None => {
                    target_directory = arguments.get(index).map(|word| word.text.clone());
                    index += 1;
                }
            }
        }
    }
    let destination = target_directory.or_else(|| operands_found.last().cloned());
    Verdict::new(
        RiskLevel::L1,
        "`cp` copies files into the working directory",
    )
    .writing(destination)
}

pub(super) fn classify_tar(arguments: &[Word]) -> Verdict {
    pub(super) const RUNS_PROGRAMS: &[&str] = &[
        "--to-command",
        "--use-compress-program",
        "--checkpoint-action",
        "--info-script",
        "--new-volume-script",
        "--rsh-command",
        "--rmt-command",
    ];
    let mut mode_letters = String::new();
    let mut written = Vec::new();
    for (index, word) in arguments.iter().enumerate() {
        let text = word.text.as_str();
        let next = || arguments.get(index + 1).map(|word| word.text.clone());
        // `--checkpoint` alone is its own option (an exact name wins over a longer one).
        let exact_checkpoint = text == "--checkpoint" || text.starts_with("--checkpoint=");
        if !exact_checkpoint
            && RUNS_PROGRAMS
                .iter()
                .any(|option| long_option_matches(text, option))
        {
            return Verdict::new(
                RiskLevel::L3,
                "`tar` runs a program named on the command line",
            );
        }
        if text == "-C" || long_option_matches(text, "--directory") {
            written.extend(
                text.split_once('=')
                    .map(|(_, value)| value.to_string())
                    .or_else(next),
            );
        }
        if long_option_matches(text, "--file") {
            written.extend(
                text.split_once('=')
                    .map(|(_, value)| value.to_string())
                    .or_else(next),
            );
        }
        if text == "--list" {
            mode_letters.push('t');
        }
        if long_option_matches(text, "--extract") || long_option_matches(text, "--get") {
            mode_letters.push('x');
        }
        if long_option_matches(text, "--create") {
            mode_letters.push('c');
        }
        // The first word may be a cluster without a dash (`tar xzf a.tgz`).
        let cluster =
            short_cluster(text).or((index == 0 && !text.starts_with('-')).then_some(text));
        if let Some(cluster) = cluster {
            if cluster.contains(['I', 'F']) {
                return Verdict::new(
                    RiskLevel::L3,
                    "`tar` runs a program named on the command line",
                );
            }
            if cluster.contains('f') {
                written.extend(next());
            }
            mode_letters.push_str(cluster);
        }
    }
    let only_lists =
        mode_letters.contains('t') && !mode_letters.contains(['x', 'c', 'r', 'u', 'A']);
    if only_lists {
        return Verdict::new(RiskLevel::L0, "`tar` only lists an archive");
    }
    if mode_letters.contains('x') || !mode_letters.contains(['c', 'r', 'u', 'A']) {
        return Verdict::new(
            RiskLevel::L2,
            "`tar` extracts an archive: it may write any file, including configuration a later command loads",
        )
        .writing(written);
    }
    Verdict::new(
        RiskLevel::L1,
        "`tar` creates or updates an archive in the working directory",
    )
    .writing(written)
}

pub(super) fn classify_unzip(arguments: &[Word]) -> Verdict {
    let only_lists = arguments
        .iter()
        .filter_map(|word| short_cluster(&word.text))
        .any(|cluster| cluster.contains(['l', 't', 'v', 'Z', 'z']));
    if only_lists {
        return Verdict::new(RiskLevel::L0, "`unzip` only lists or tests an archive");
    }
    let written = arguments
        .iter()
        .position(|word| word.text == "-d")
        .and_then(|index| arguments.get(index + 1))
        .map(|word| word.text.clone());
    Verdict::new(
        RiskLevel::L2,
        "`unzip` extracts an archive: it may write any file, including configuration a later command loads",
    )
    .writing(written)
}
