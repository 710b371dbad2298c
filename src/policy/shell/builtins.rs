//! Bash built-ins whose effect depends on bash's own grammar: options that change how the lines
//! after them are read (`set -H`, `shopt -s extglob`), and names with array subscripts, which bash
//! evaluates as arithmetic (`printf -v 'a[$(id)]'` runs `id`).

use super::*;

/// `set` options that only change how errors and tracing behave (letters in `-euxo` clusters).
const HARMLESS_SET_LETTERS: &str = "euxvETfCnbhmBPp";

/// `set -o` names that only change how errors and tracing behave.
#[rustfmt::skip]
const HARMLESS_SET_OPTION_NAMES: &[&str] = &[
    "pipefail", "errexit", "nounset", "xtrace", "verbose", "errtrace", "functrace", "noclobber",
    "noglob", "noexec", "notify", "monitor", "braceexpand", "hashall", "physical", "privileged",
];

/// Built-ins that take variable names; a name with a subscript (`a[…]`) is arithmetic.
#[rustfmt::skip]
const BUILTINS_TAKING_NAMES: &[&str] = &[
    "printf", "read", "mapfile", "readarray", "unset", "getopts", "wait", "test", "[",
];

/// The verdict for a bash-only construct or built-in the classifier refuses to model, if
/// `program` is one.
pub(super) fn unmodelled_builtin(program: &str, arguments: &[Word]) -> Option<Verdict> {
    let reason = match program {
        "[[" | "]]" => {
            "bash's conditional expression `[[ … ]]` is not modelled (its operands may be evaluated as arithmetic, which can run commands)"
        }
        "coproc" => "`coproc` runs a command in the background with pipes; it is not modelled",
        "function" => {
            "a `function` definition is not modelled (define functions as `name() { …; }`)"
        }
        "let" => "`let` evaluates arithmetic, which can run commands through array subscripts",
        "enable" => "`enable` loads or switches shell built-ins",
        "hash" if arguments.iter().any(|word| word.text.starts_with("-p")) => {
            "`hash -p` binds a command name to another program"
        }
        "declare" | "typeset" | "local"
            if arguments.iter().any(|word| {
                short_cluster(&word.text).is_some_and(|cluster| cluster.contains(['i', 'n']))
            }) =>
        {
            "integer (`-i`) and name-reference (`-n`) variables evaluate their values, which can run commands"
        }
        _ if BUILTINS_TAKING_NAMES.contains(&program)
            && arguments
                .iter()
                .any(|word| word.text.contains('[') && word.text != "[") =>
        {
            "a name with an array subscript, which bash evaluates as arithmetic (it can run commands)"
        }
        _ => return None,
    };
    Some(Verdict::new(RiskLevel::L3, reason))
}

/// `set`: printing variables is L1, harmless options L0, anything that changes how later lines
/// are read (`-H` history expansion, `-k` assignments anywhere, `-o posix`, …) L3.
pub(super) fn classify_set(arguments: &[Word]) -> Verdict {
    if arguments.is_empty() {
        return Verdict::new(
            RiskLevel::L1,
            "`set` prints shell variables, which may hold secrets",
        );
    }
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        index += 1;
        if text == "--" || text == "-" {
            break;
        }
        let Some(cluster) = text.strip_prefix(['-', '+']) else {
            break;
        };
        // `-o name` (also at the end of a cluster: `-euo pipefail`) names an option.
        let (cluster, names_option) = match cluster.strip_suffix('o') {
            Some(rest) => (rest, true),
            None => (cluster, false),
        };
        if !cluster.chars().all(|c| HARMLESS_SET_LETTERS.contains(c)) {
            return Verdict::new(
                RiskLevel::L3,
                format!(
                    "`set {}` changes how bash reads the lines after it, which is not modelled",
                    quote_for_reason(text)
                ),
            );
        }
        if names_option {
            let name = arguments.get(index).map_or("", |word| word.text.as_str());
            index += 1;
            if name.is_empty() || HARMLESS_SET_OPTION_NAMES.contains(&name) {
                continue;
            }
            return Verdict::new(
                RiskLevel::L3,
                format!(
                    "`set -o {}` changes how bash reads the lines after it, which is not modelled",
                    quote_for_reason(name)
                ),
            );
        }
    }
    Verdict::new(RiskLevel::L0, "`set` only sets shell options")
}

/// `shopt`: listing is L0; setting or unsetting an option (`extglob`, `expand_aliases`, …)
/// changes how bash reads the lines after it, which is not modelled: L3.
pub(super) fn classify_shopt(arguments: &[Word]) -> Verdict {
    let changes = arguments
        .iter()
        .filter_map(|word| short_cluster(&word.text))
        .any(|cluster| cluster.contains(['s', 'u']));
    if changes {
        return Verdict::new(
            RiskLevel::L3,
            "`shopt -s`/`-u` changes how bash reads the lines after it, which is not modelled",
        );
    }
    Verdict::new(RiskLevel::L0, "`shopt` only lists shell options")
}
