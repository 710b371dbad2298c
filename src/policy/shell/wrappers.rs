//! Variable assignments, wrappers (`env`, `nice`, `timeout`, …), `xargs` and `find`.

use super::*;

// ---------------------------------------------------------------------------------------------
// Variable assignments.
// ---------------------------------------------------------------------------------------------

/// Splits `NAME=value` (also `NAME+=value` and `NAME[i]=value`) into name and value; the name
/// must be unquoted, as the shell requires for an assignment.
pub(super) fn split_assignment(word: &Word) -> Option<(&str, &str)> {
    let equals = word.text.find('=')?;
    if word
        .first_quoted_at
        .is_some_and(|quoted_at| quoted_at < equals)
    {
        return None;
    }
    let target = &word.text[..equals];
    let name = target.strip_suffix('+').unwrap_or(target);
    let name = match name.find('[') {
        Some(bracket) if name.ends_with(']') => &name[..bracket],
        _ => name,
    };
    let mut characters = name.chars();
    let first = characters.next()?;
    if !(first.is_ascii_alphabetic() || first == '_')
        || !characters.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return None;
    }
    Some((name, &word.text[equals + 1..]))
}

pub(super) fn assignment_risk(word: &Word) -> Option<(RiskLevel, String)> {
    let (name, value) = split_assignment(word)?;
    if word.text[..word.text.find('=').unwrap_or(0)].contains('[') {
        return Some((
            RiskLevel::L3,
            format!(
                "assigns to an element of `{name}`: bash evaluates the subscript as arithmetic, which can run commands"
            ),
        ));
    }
    if let Some(risk) = shell_state_risk(name, "sets") {
        return Some(risk);
    }
    if value.contains("$(") || value.contains('`') {
        return Some((
            RiskLevel::L3,
            format!("stores a command substitution in `{name}`, which a later expansion may run"),
        ));
    }
    None
}

pub(super) fn classify_declaration(program: &str, arguments: &[Word]) -> Verdict {
    let prints_everything = arguments.is_empty() || arguments.iter().all(|word| word.text == "-p");
    if prints_everything {
        return Verdict::new(
            RiskLevel::L1,
            format!("`{program}` prints variables, which may hold secrets"),
        );
    }
    let mut verdict = Verdict::new(
        RiskLevel::L0,
        format!("`{program}` only sets shell variables"),
    );
    // The builtin reads `NAME=value` from its arguments after quote removal:
    // `export 'LD_PRELOAD=x'` sets `LD_PRELOAD` as surely as `export LD_PRELOAD=x`.
    for word in arguments {
        if let Some((level, reason)) = assignment_risk(&word.as_argument()) {
            verdict.raise_to(level, reason);
        }
    }
    raise_for_declared_names(program, arguments, &mut verdict);
    verdict
}

// ---------------------------------------------------------------------------------------------
// Wrappers, `xargs`, `find`.
// ---------------------------------------------------------------------------------------------

pub(super) fn classify_wrapper(
    wrapper: &Wrapper,
    arguments: &[Word],
    input: StandardInput,
    depth: usize,
) -> Verdict {
    let name = wrapper.name;
    let mut timing_file = None;
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            index += 1;
            break;
        }
        // `env -` is `env -i`; for the others a lone `-` is an operand.
        if text == "-" && name == "env" {
            index += 1;
            continue;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        if name == "env"
            && (short_cluster(text).is_some_and(|cluster| cluster.contains('S'))
                || long_option_matches(text, "--split-string"))
        {
            return Verdict::new(
                RiskLevel::L3,
                "`env -S` splits a string into a command line, which is not reviewed",
            );
        }
        if name == "command" && matches!(text, "-v" | "-V") {
            return Verdict::new(RiskLevel::L0, "`command -v` only looks a program up");
        }
        if name == "ionice" && matches!(text, "-p" | "-P" | "-u") {
            return Verdict::new(
                RiskLevel::L2,
                "`ionice` changes the I/O priority of running processes",
            );
        }
        if name == "time" && (text == "-o" || long_option_matches(text, "--output")) {
            let target = match text.split_once('=') {
                Some((_, value)) => value.to_string(),
                None => arguments
                    .get(index + 1)
                    .map_or_else(String::new, |word| word.text.clone()),
            };
            timing_file = Some(target);
        }
        index += if option_takes_next_word(text, wrapper.options_with_value) {
            2
        } else {
            1
        };
    }
    let mut verdict = classify_wrapped(wrapper, arguments, index, input, depth);
    // An option the table does not know may take the next word as its value (`env -a ls rm …`
    // runs `rm`): the command after it is classified too, and the higher level wins.
    let unknown_option_before = index
        .checked_sub(1)
        .and_then(|before| arguments.get(before))
        .is_some_and(|word| {
            let text = word.text.as_str();
            text.starts_with('-')
                && text != "--"
                && text != "-"
                && !text.contains('=')
                && !option_takes_next_word(text, wrapper.options_with_value)
        });
    if unknown_option_before && arguments.len() > index + 1 {
        let other = classify_wrapped(wrapper, arguments, index + 1, input, depth);
        if other.level > verdict.level {
            verdict = other;
        }
    }
    let own_words = arguments
        .get(..index + wrapper.leading_operands)
        .unwrap_or(arguments);
    raise_for_computed_arguments(name, own_words, &mut verdict);
    if let Some(target) = timing_file {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "`time -o` writes its timing into `{}`",
                quote_for_reason(&target)
            ),
        );
        verdict.written_paths.push(target);
    }
    verdict
}

/// The command a wrapper runs, from `index` (after the wrapper's own options).
fn classify_wrapped(
    wrapper: &Wrapper,
    arguments: &[Word],
    index: usize,
    input: StandardInput,
    depth: usize,
) -> Verdict {
    let name = wrapper.name;
    // `env NAME=value cmd`: the assignments are checked by `classify_words`.
    let start = index + wrapper.leading_operands;
    let wrapped: Vec<Word> = arguments
        .get(start..)
        .unwrap_or(&[])
        .iter()
        .map(Word::as_argument)
        .collect();
    if wrapped.iter().all(|word| split_assignment(word).is_some()) && name == "env" {
        return Verdict::new(
            RiskLevel::L1,
            "`env` prints environment variables, which may hold secrets",
        );
    }
    if wrapped.is_empty() {
        return Verdict::new(
            RiskLevel::L0,
            format!("`{name}` without a command only prints information"),
        );
    }
    classify_words(&wrapped, input, depth + 1)
}

pub(super) fn classify_xargs(arguments: &[Word], depth: usize) -> Verdict {
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        if text == "--" {
            index += 1;
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        index += if option_takes_next_word(text, XARGS_OPTIONS_WITH_VALUE) {
            2
        } else {
            1
        };
    }
    let wrapped: Vec<Word> = arguments
        .get(index..)
        .unwrap_or(&[])
        .iter()
        .map(Word::as_argument)
        .collect();
    if wrapped.is_empty() {
        return Verdict::new(
            RiskLevel::L0,
            "`xargs` without a command runs `echo`, which prints its input",
        );
    }
    let mut verdict = classify_words(&wrapped, StandardInput::Inherited, depth + 1);
    verdict.raise_to(
        RiskLevel::L2,
        "`xargs` runs a command on arguments read from its input (options, file names), which the reviewer cannot see",
    );
    verdict
}

pub(super) fn classify_find(arguments: &[Word], depth: usize) -> Verdict {
    let mut verdict = classify_find_expression(arguments, depth);
    // `find /srv -delete` or `-exec rm` changes files under its starting points.
    let starting_points = arguments
        .iter()
        .take_while(|word| !word.text.starts_with(['-', '(', '!']));
    if verdict.level >= RiskLevel::L2
        && starting_points
            .into_iter()
            .any(|word| is_outside_working_directory(&word.text))
    {
        verdict.needs.writes = Writes::Anywhere;
    }
    verdict
}

/// `find`'s expression: `-delete`, `-exec` and the primaries that write files.
fn classify_find_expression(arguments: &[Word], depth: usize) -> Verdict {
    let mut verdict = Verdict::new(RiskLevel::L0, "`find` only lists files");
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        match word.text.as_str() {
            "-delete" => verdict.raise_to(RiskLevel::L2, "`find -delete` deletes every match"),
            flag @ ("-exec" | "-execdir" | "-ok" | "-okdir") => {
                let start = index + 1;
                let rest = arguments.get(start..).unwrap_or(&[]);
                let end = rest
                    .iter()
                    .position(|word| word.text == ";" || word.text == "+")
                    .map_or(arguments.len(), |offset| start + offset);
                let executed: Vec<Word> = arguments
                    .get(start..end)
                    .unwrap_or(&[])
                    .iter()
                    .map(Word::as_argument)
                    .collect();
                let executed_verdict =
                    classify_words(&executed, StandardInput::Inherited, depth + 1);
                verdict.needs = verdict.needs.union(executed_verdict.needs);
                // The matches become arguments (a file named `--upload-pack=…` is an option).
                verdict.raise_to(
                    executed_verdict.level.max(RiskLevel::L2),
                    format!(
                        "`find {flag}` runs `{}` on every match, with file names the reviewer cannot see as arguments: {}",
                        display_words(&executed),
                        executed_verdict.reasons.join("; ")
                    ),
                );
                index = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                verdict.raise_to(RiskLevel::L2, "`find` writes its output to a file");
            }
            _ => {}
        }
        index += 1;
    }
    verdict
}
