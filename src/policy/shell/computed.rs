//! Arguments the shell computes: a word whose text comes from an expansion (`$x`, `${x}`,
//! `"$x"`, word splitting of an unquoted expansion) or a glob that may match a file named like
//! an option cannot be read by an option table. Such a word in a position where it can become an
//! option, or several words, makes the command at least L2 "computed at run time" — unless the
//! program is one whose every option only changes what it reads or prints
//! ([`COMPUTED_ARGUMENTS_ARE_HARMLESS`]).
//!
//! Invariant: a word counts as computed unless the classifier can show that it stays one
//! operand: quoted, after a literal `--`, with a literal first character that is not `-`.

use super::*;

/// The level and reason for a command with computed arguments, if it has one that matters.
pub(super) fn raise_for_computed_arguments(
    program: &str,
    arguments: &[Word],
    verdict: &mut Verdict,
) {
    if verdict.level >= RiskLevel::L2 && verdict.reasons.iter().any(|r| r.contains(COMPUTED)) {
        return;
    }
    if let Some(word) = first_computed_argument(program, arguments) {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "`{}` is {COMPUTED} (a variable, word splitting or a glob), so `{program}` may receive an option or a program text the reviewer cannot see",
                quote_for_reason(&word.text)
            ),
        );
    }
}

/// The phrase every reason of this rule carries.
pub(super) const COMPUTED: &str = "computed at run time";

/// The first argument of `program` whose computed text matters, if any.
fn first_computed_argument<'a>(program: &str, arguments: &'a [Word]) -> Option<&'a Word> {
    // A program text (`awk "{print $1}"`, `sed "s/$a/b/e"`) is code: any expansion in it counts.
    if PROGRAM_TEXT_TOOLS.contains(&program) {
        return arguments.iter().find(|word| word.expands_variable);
    }
    if SHELL_HEADERS.contains(&program) {
        return None;
    }
    if matches!(program, "test" | "[") {
        return computed_test_operand(arguments);
    }
    let candidates = match program {
        // Built-ins read options only before their first operand: `printf '%s' "$x"`.
        "printf" => options_before_first_literal_operand(arguments),
        _ if COMPUTED_ARGUMENTS_ARE_HARMLESS.contains(&program) => return None,
        _ => arguments_before_double_dash(arguments),
    };
    let declaration = matches!(
        program,
        "export" | "declare" | "typeset" | "local" | "readonly"
    );
    candidates
        .iter()
        .find(|word| may_become_an_option(word, declaration))
}

/// The arguments up to a literal `--` (after it, every word is an operand).
fn arguments_before_double_dash(arguments: &[Word]) -> &[Word] {
    let end = arguments
        .iter()
        .position(|word| word.text == "--" && !word.expands_variable)
        .unwrap_or(arguments.len());
    &arguments[..end]
}

/// The arguments of a built-in up to its first literal operand.
fn options_before_first_literal_operand(arguments: &[Word]) -> &[Word] {
    let end = arguments
        .iter()
        .position(|word| !word.expands_variable && !word.text.starts_with('-'))
        .unwrap_or(arguments.len());
    &arguments[..end]
}

/// Whether the shell may turn this word into an option or into several words: an unquoted
/// expansion (split and globbed), an expansion at its start (its value may begin with `-`), an
/// option whose letters or value are computed (`-"$x"`), or an unquoted glob at its start (a
/// file named `-rf` matches `*`). A declaration's `NAME=$value` is not split.
pub(super) fn may_become_an_option(word: &Word, declaration: bool) -> bool {
    let starts_with_glob =
        word.text.starts_with(['*', '?', '[']) && word.first_quoted_at != Some(0) && word.globs();
    if starts_with_glob {
        return true;
    }
    if !word.expands_variable {
        return false;
    }
    if declaration && split_assignment(word).is_some() {
        return false;
    }
    word.expands_unquoted
        || word.first_expansion_at == Some(0)
        || word.text.starts_with('-')
        || word.has_brace_expansion()
}

/// `test`/`[`: a computed operand is harmless only where it cannot be an operator: with at most
/// three operands, no splitting, no `-v`/`-R` (which evaluate an array subscript, which can run
/// commands), and the operator positions literal.
fn computed_test_operand(arguments: &[Word]) -> Option<&Word> {
    let operands: Vec<&Word> = arguments
        .iter()
        .filter(|word| word.text != "]" || word.expands_variable)
        .collect();
    let first_computed = operands
        .iter()
        .copied()
        .find(|word| word.expands_variable || word.globs())?;
    let splits = operands
        .iter()
        .any(|word| word.expands_unquoted || (word.globs() && word.first_quoted_at.is_none()));
    let evaluates_subscript = operands
        .iter()
        .any(|word| matches!(word.text.as_str(), "-v" | "-R"));
    let operator_computed = match operands.as_slice() {
        [_] => false,
        [operator, _] => operator.expands_variable,
        [_, operator, _] => operator.expands_variable,
        _ => true,
    };
    (splits || evaluates_subscript || operator_computed).then_some(first_computed)
}
