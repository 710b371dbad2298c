//! Matching command-line options the way the programs read them.
//!
//! GNU `getopt_long`, git's parse-options, `ncat`, `gawk` and others accept any unambiguous
//! prefix of a long option: `tar --checkpoint-act=exec=…` is `--checkpoint-action`, and
//! `git grep --open-files-in-pag` is `--open-files-in-pager`. Every table of options is matched
//! through [`long_option_matches`], which treats a prefix (even an ambiguous one, which the
//! program might still resolve to the dangerous option) as the option itself. GNU `find` takes
//! no abbreviations (its primaries are looked up by exact name), Go and clap programs (`docker`,
//! `cargo`) take none either; matching a prefix there only errs on the safe side.

use super::*;

/// Whether `text` is a short-option cluster (`-la`), not `--long`, `-` or an operand.
pub(super) fn short_cluster(text: &str) -> Option<&str> {
    let cluster = text.strip_prefix('-')?;
    if cluster.is_empty() || cluster.starts_with('-') {
        return None;
    }
    Some(cluster)
}

/// Whether the word `text` (`--name` or `--name=value`) may name the long option `long`
/// (`--name`, written with its dashes): the name is a prefix of the option, or the option a
/// prefix of the name (which also catches the option glued to its value). A single-dash long
/// option (`-fprint`, `-Command`) matches only exactly or with a value after `=`.
pub(super) fn long_option_matches(text: &str, long: &str) -> bool {
    if let (Some(name), Some(option)) = (text.strip_prefix("--"), long.strip_prefix("--")) {
        let name = name.split('=').next().unwrap_or(name);
        return !name.is_empty() && (option.starts_with(name) || name.starts_with(option));
    }
    text == long
        || text
            .strip_prefix(long)
            .is_some_and(|rest| rest.starts_with('='))
}

/// Whether `text` is one of `options`: short options (`-o`) match exactly, long ones
/// (`--output`) by [`long_option_matches`].
pub(super) fn option_is_any_of(text: &str, options: &[&str]) -> bool {
    options.iter().any(|option| {
        if option.starts_with("--") {
            long_option_matches(text, option)
        } else {
            text == *option
        }
    })
}

/// Whether `text` is one of `options` given without an attached value, so that the value is
/// the next word (`--directory dir`, not `--directory=dir`).
pub(super) fn option_takes_next_word(text: &str, options: &[&str]) -> bool {
    !text.contains('=') && option_is_any_of(text, options)
}

pub(super) fn option_matches(text: &str, spelling: OptionSpelling) -> bool {
    match spelling {
        OptionSpelling::Short(letter) => {
            short_cluster(text).is_some_and(|cluster| cluster.contains(letter))
        }
        OptionSpelling::Long(long) => long_option_matches(text, long),
    }
}
