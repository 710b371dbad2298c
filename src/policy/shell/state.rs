//! Shell state that becomes code: every way a command sets a variable from
//! [`SHELL_STATE_VARIABLES`] (`NAME=`, `export NAME`, `declare`, `printf -v`, `read`, `mapfile`,
//! `for NAME in`, `getopts`), and the built-ins that write or load shell state (`history -w`,
//! `hash -p`, `fc`, `compgen -C`, `mapfile -C`).
//!
//! Invariant: the table is the one list of such variables; every setter looks a name up with
//! [`shell_state_risk`], so a variable added there is covered by every way of setting it.

use super::*;

/// The level and reason for setting the variable `name`, if it is shell state that becomes code.
pub(super) fn shell_state_risk(name: &str, how: &str) -> Option<(RiskLevel, String)> {
    let (_, level, what) =
        SHELL_STATE_VARIABLES
            .iter()
            .find(|(pattern, _, _)| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => name == *pattern,
            })?;
    Some((*level, format!("{how} `{name}`, which {what}")))
}

/// The verdict for a built-in that sets variables or shell state, if `program` is one and the
/// command does more than the tables say.
pub(super) fn classify_shell_state_builtin(program: &str, arguments: &[Word]) -> Option<Verdict> {
    let names: Vec<&Word> = match program {
        "printf" => option_values(arguments, &["-v"], &[])?,
        "read" => read_names(arguments),
        "mapfile" | "readarray" => return Some(classify_mapfile(program, arguments)),
        "getopts" => arguments.iter().skip(1).take(1).collect(),
        "for" | "select" => arguments.iter().take(1).collect(),
        "history" => return classify_history(arguments),
        "hash" => return classify_hash(arguments),
        "fc" => {
            return Some(Verdict::new(
                RiskLevel::L3,
                "`fc` edits and runs commands from the shell history, which are not reviewed",
            ));
        }
        "compgen" | "complete" => return classify_completion(program, arguments),
        _ => return None,
    };
    let mut verdict = Verdict::new(
        RiskLevel::L0,
        format!("`{program}` only sets shell variables"),
    );
    raise_for_names(&mut verdict, program, &names);
    if verdict.level == RiskLevel::L0 {
        // Nothing to add: the command tables decide (`printf` prints, `read` reads).
        return None;
    }
    Some(verdict)
}

/// Raises the verdict for every name that is shell state; a computed name could be any.
fn raise_for_names(verdict: &mut Verdict, program: &str, names: &[&Word]) {
    for name in names {
        if name.expands_variable || name.globs() {
            verdict.raise_to(
                RiskLevel::L2,
                format!(
                    "`{program}` sets a variable whose name is {COMPUTED}: `{}`",
                    quote_for_reason(&name.text)
                ),
            );
        } else if let Some((level, reason)) =
            shell_state_risk(&name.text, &format!("`{program}` sets"))
        {
            verdict.raise_to(level.max(RiskLevel::L2), reason);
        }
    }
}

/// The values of the given options (`-v NAME`, `-vNAME`), or None when none is given. Options in
/// `flags` take no value.
fn option_values<'a>(
    arguments: &'a [Word],
    with_value: &[&str],
    flags: &[&str],
) -> Option<Vec<&'a Word>> {
    let mut values = Vec::new();
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        index += 1;
        if text == "--" || !text.starts_with('-') || flags.contains(&text) {
            if flags.contains(&text) {
                continue;
            }
            break;
        }
        if with_value.contains(&text) {
            values.extend(arguments.get(index));
            index += 1;
        }
    }
    (!values.is_empty()).then_some(values)
}

/// `read`'s variable names: its operands and the value of `-a`.
fn read_names(arguments: &[Word]) -> Vec<&Word> {
    const WITH_VALUE: &[&str] = &["-d", "-i", "-n", "-N", "-p", "-t", "-u"];
    let mut names = Vec::new();
    let mut index = 0;
    let mut options_ended = false;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        index += 1;
        if options_ended || !text.starts_with('-') {
            names.push(word);
            options_ended = true;
        } else if text == "--" {
            options_ended = true;
        } else if text.ends_with('a') {
            names.extend(arguments.get(index));
            index += 1;
        } else if WITH_VALUE.iter().any(|option| text.ends_with(&option[1..])) && text.len() == 2 {
            index += 1;
        }
    }
    // `read` alone sets `REPLY`, which is harmless.
    names
}

/// `mapfile`/`readarray NAME`: `-C` runs a callback; the name (default `MAPFILE`) is checked.
fn classify_mapfile(program: &str, arguments: &[Word]) -> Verdict {
    if arguments
        .iter()
        .any(|word| short_cluster(&word.text).is_some_and(|cluster| cluster.contains('C')))
    {
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "`{program} -C` runs a callback command for the lines it reads, which is not reviewed"
            ),
        );
    }
    const WITH_VALUE: &[&str] = &["-d", "-n", "-O", "-s", "-u", "-c"];
    let mut names = Vec::new();
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        index += 1;
        if WITH_VALUE.contains(&word.text.as_str()) {
            index += 1;
        } else if !word.text.starts_with('-') {
            names.push(word);
        }
    }
    let mut verdict = Verdict::new(
        RiskLevel::L0,
        format!("`{program}` only sets shell variables"),
    );
    raise_for_names(&mut verdict, program, &names);
    verdict
}

/// `history -w/-a/-r/-n [file]` writes or reads a history file (one a later shell loads, such as
/// `.bashrc`); `history -s` and listing are harmless here.
fn classify_history(arguments: &[Word]) -> Option<Verdict> {
    let file_option = arguments.iter().find(|word| {
        short_cluster(&word.text).is_some_and(|cluster| cluster.contains(['w', 'a', 'r', 'n']))
    })?;
    let path = arguments
        .iter()
        .rev()
        .find(|word| !word.text.starts_with('-'))
        .map(|word| word.text.clone());
    let target = path.clone().unwrap_or_else(|| "$HISTFILE".to_string());
    let verdict = Verdict::new(
        RiskLevel::L2,
        format!(
            "`history {}` writes or loads the shell history file `{}`",
            quote_for_reason(&file_option.text),
            quote_for_reason(&target)
        ),
    );
    Some(verdict.writing(path))
}

/// `hash -p path name` binds a command name to another program; `hash -t`/`-r`/listing do not.
fn classify_hash(arguments: &[Word]) -> Option<Verdict> {
    let binds = arguments
        .iter()
        .any(|word| short_cluster(&word.text).is_some_and(|cluster| cluster.contains('p')));
    binds.then(|| {
        Verdict::new(
            RiskLevel::L3,
            "`hash -p` binds a command name to another program",
        )
    })
}

/// `compgen -C cmd`/`-F func` (and `complete` with them) runs a command to produce completions.
fn classify_completion(program: &str, arguments: &[Word]) -> Option<Verdict> {
    let runs = arguments
        .iter()
        .any(|word| short_cluster(&word.text).is_some_and(|cluster| cluster.contains(['C', 'F'])));
    runs.then(|| {
        Verdict::new(
            RiskLevel::L3,
            format!(
                "`{program} -C`/`-F` runs a command to produce completions, which is not reviewed"
            ),
        )
    })
}

/// `export NAME` (no `=`) exports whatever `NAME` holds; `declare`, `local`, `readonly` and
/// `typeset` of a shell-state name change it too.
pub(super) fn raise_for_declared_names(program: &str, arguments: &[Word], verdict: &mut Verdict) {
    for word in arguments {
        let text = word.text.as_str();
        if text.starts_with(['-', '+']) || text.contains('=') {
            continue;
        }
        if word.expands_variable || word.globs() {
            verdict.raise_to(
                RiskLevel::L2,
                format!(
                    "`{program}` names a variable {COMPUTED}: `{}`",
                    quote_for_reason(text)
                ),
            );
        } else if let Some((level, reason)) = shell_state_risk(text, &format!("`{program}` marks"))
        {
            verdict.raise_to(level.max(RiskLevel::L2), reason);
        }
    }
}
