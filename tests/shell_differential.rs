//! Differential fuzzing of the shell classifier's lexer against a second bash parser,
//! `brush-parser`.
//!
//! Commands generated from shell-ish pieces (words, every kind of quoting including `$'…'` and
//! `$"…"`, escapes, operators, redirections, substitutions, comments, newlines) are read by our
//! lexer (`policy::shell::simple_command_words`) and by brush. For every command the classifier
//! does not refuse (below L3), both must find the same simple commands with the same words after
//! quote removal, wherever brush can say what a word is (a word with an expansion brush leaves
//! unexpanded is compared only by position). A disagreement fails the test unless it is one of
//! the documented exceptions in `KNOWN_DIFFERENCES`.
//!
//! Two more generators (issue #29): commands with a computed word (`$x`, `"$x"`, `-$x`, a glob)
//! in an option position must be at least L2 "computed at run time", and awk and sed programs
//! whose strings hold `;`, `>`, `|` must get the level their code (not their strings) gives.
//!
//! Cases per run: 2,000 (a few seconds); `CLAWVISOR_FUZZ_CASES` raises it, as for `tests/fuzz.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};

use brush_parser::ast;
use brush_parser::word::{WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestCaseError, TestRunner};

use clawvisor::policy::RiskLevel;
use clawvisor::policy::shell::{classify_shell, simple_command_words};

fn fuzz_cases(default: u32) -> u32 {
    match std::env::var("CLAWVISOR_FUZZ_CASES") {
        Ok(text) => text.trim().parse().unwrap_or_else(|_| {
            panic!("CLAWVISOR_FUZZ_CASES must be a whole number, not `{text}`")
        }),
        Err(_) => default,
    }
}

/// Bash's reading of the options brush offers: no extglob (off in `bash -c`), not POSIX mode.
fn brush_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        ..ParserOptions::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Brush's side: simple commands and their words after quote removal.

/// A word as brush reads it: its text after quote removal, or None where brush leaves an
/// expansion (parameter, command substitution, arithmetic, tilde, `$'…'`) for run time.
type BrushWord = Option<String>;

fn brush_simple_commands(command: &str) -> Option<Vec<Vec<BrushWord>>> {
    let mut parser = Parser::new(
        std::io::BufReader::new(command.as_bytes()),
        &brush_options(),
    );
    let program = parser.parse_program().ok()?;
    let mut commands = Vec::new();
    for complete in &program.complete_commands {
        for ast::CompoundListItem(and_or, _) in &complete.0 {
            let pipelines = std::iter::once(&and_or.first).chain(and_or.additional.iter().map(
                |next| match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => pipeline,
                },
            ));
            for pipeline in pipelines {
                // Bash's `time` keyword times the whole pipeline; our lexer reads it as the
                // `time` wrapper in front of the first command, which the classifier unwraps.
                // Both say the same commands run, so brush's keyword is written as that word.
                let timed = match &pipeline.timed {
                    None => None,
                    Some(ast::PipelineTimed::Timed(_)) => Some(vec![Some("time".to_string())]),
                    Some(ast::PipelineTimed::TimedWithPosixOutput(_)) => {
                        Some(vec![Some("time".to_string()), Some("-p".to_string())])
                    }
                };
                if let Some(keyword) = &timed
                    && pipeline.seq.is_empty()
                {
                    commands.push(keyword.clone());
                }
                for (position, command) in pipeline.seq.iter().enumerate() {
                    // Only simple commands are compared; anything compound is out of scope.
                    let ast::Command::Simple(simple) = command else {
                        return None;
                    };
                    let mut words = simple_words(simple)?;
                    if let (0, Some(keyword)) = (position, &timed) {
                        words.splice(0..0, keyword.iter().cloned());
                    }
                    if !words.is_empty() {
                        commands.push(words);
                    }
                }
            }
        }
    }
    Some(commands)
}

fn simple_words(simple: &ast::SimpleCommand) -> Option<Vec<BrushWord>> {
    let mut words = Vec::new();
    let items = |list: Option<&Vec<ast::CommandPrefixOrSuffixItem>>| {
        list.cloned().unwrap_or_default().into_iter()
    };
    let prefix = items(simple.prefix.as_ref().map(|prefix| &prefix.0));
    let suffix = items(simple.suffix.as_ref().map(|suffix| &suffix.0));
    let name = simple
        .word_or_name
        .clone()
        .map(ast::CommandPrefixOrSuffixItem::Word);
    for item in prefix.chain(name).chain(suffix) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(word)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                words.push(unquote(&word.value))
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(_) => {}
            // Our lexer reads `<(…)` as a word; it is L3 anyway.
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => return None,
        }
    }
    Some(words)
}

fn unquote(raw: &str) -> BrushWord {
    let pieces = brush_parser::word::parse(raw, &brush_options()).ok()?;
    let mut text = String::new();
    append_pieces(&pieces, false, &mut text)?;
    Some(text)
}

fn append_pieces(pieces: &[WordPieceWithSource], quoted: bool, text: &mut String) -> Option<()> {
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(literal) | WordPiece::SingleQuotedText(literal) => {
                text.push_str(literal)
            }
            WordPiece::EscapeSequence(escape) => {
                let escaped = escape.strip_prefix('\\').unwrap_or(escape);
                match escaped.chars().next() {
                    Some('\n') => {}
                    Some(c) if !quoted || "$`\"\\".contains(c) => text.push_str(escaped),
                    _ => text.push_str(escape),
                }
            }
            WordPiece::DoubleQuotedSequence(inner) => append_pieces(inner, true, text)?,
            // `$"…"`, `$'…'`, expansions: brush cannot say what the word becomes.
            _ => return None,
        }
    }
    Some(())
}

// ---------------------------------------------------------------------------------------------
// The generator.

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9._/=-]{1,6}",
        2 => "[a-z ;|&<>()#$\\\\\"*]{0,6}".prop_map(|inner| format!("'{inner}'")),
        2 => "[a-z ;|&<>()#'*]{0,6}".prop_map(|inner| format!("\"{inner}\"")),
        1 => "[a-z ;|&<>()#']{0,4}".prop_map(|inner| format!("\"\\\\{inner}\"")),
        1 => "[a-z ;|&#'\"]".prop_map(|escaped| format!("\\{escaped}")),
        2 => prop::collection::vec(
            prop_oneof![
                Just("\\'".to_string()),
                Just("\\x41".to_string()),
                Just("\\n".to_string()),
                Just("\\\\".to_string()),
                Just("\\t".to_string()),
                Just("\\101".to_string()),
                "[a-z ;|&\"]{1,3}",
            ],
            0..4
        )
        .prop_map(|parts| format!("$'{}'", parts.concat())),
        1 => "[a-z ]{0,4}".prop_map(|inner| format!("$\"{inner}\"")),
        1 => "[a-z]{1,3}".prop_map(|name| format!("${name}")),
        1 => "[a-z]{1,3}".prop_map(|name| format!("${{{name}}}")),
        1 => "[a-z ]{1,5}".prop_map(|inner| format!("$({inner})")),
        1 => "[a-z ]{1,5}".prop_map(|inner| format!("`{inner}`")),
        1 => Just("~".to_string()),
    ]
}

fn word() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 1..3).prop_map(|pieces| pieces.concat())
}

fn redirection() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,4}".prop_map(|target| format!(" > {target}")),
        "[a-z]{1,4}".prop_map(|target| format!(" >> {target}")),
        "[a-z]{1,4}".prop_map(|target| format!(" < {target}")),
        Just(" 2>&1".to_string()),
        Just(" 2>/dev/null".to_string()),
        word().prop_map(|word| format!(" <<< {word}")),
    ]
}

fn simple_command() -> impl Strategy<Value = String> {
    (
        "[a-z]{1,5}",
        prop::collection::vec(word(), 0..4),
        prop::option::of(redirection()),
        prop::option::of("[a-z ]{0,6}".prop_map(|comment| format!(" # {comment}"))),
    )
        .prop_map(|(program, arguments, redirection, comment)| {
            let mut text = program;
            for argument in arguments {
                text.push(' ');
                text.push_str(&argument);
            }
            text.push_str(&redirection.unwrap_or_default());
            if let Some(comment) = comment {
                text.push_str(&comment);
                text.push('\n');
            }
            text
        })
}

fn command_line() -> impl Strategy<Value = String> {
    (
        simple_command(),
        prop::collection::vec(
            (
                prop_oneof![
                    Just(" && "),
                    Just(" || "),
                    Just("; "),
                    Just(" | "),
                    Just(" |& "),
                    Just(" & "),
                    Just("\n"),
                ],
                simple_command(),
            ),
            0..3,
        ),
    )
        .prop_map(|(first, rest)| {
            let mut text = first;
            for (operator, command) in rest {
                if text.ends_with('\n') && operator != "\n" {
                    text.push(':');
                }
                text.push_str(operator);
                text.push_str(&command);
            }
            text
        })
}

/// A word the shell computes, in a position where it can become an option (issue #29).
fn computed_option_word() -> impl Strategy<Value = String> {
    let name = "[a-z]{1,3}";
    prop_oneof![
        name.prop_map(|name| format!("${name}")),
        name.prop_map(|name| format!("\"${name}\"")),
        name.prop_map(|name| format!("${{{name}}}")),
        name.prop_map(|name| format!("-${name}")),
        name.prop_map(|name| format!("-\"${name}\"")),
        name.prop_map(|name| format!("--output=${name}")),
        name.prop_map(|name| format!("x${name}")),
        Just("*".to_string()),
        Just("?x".to_string()),
    ]
}

/// A command whose options include a computed word: a program with options that write or run
/// something, literal words around the computed one.
fn command_with_computed_option() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![
            "sort", "git", "tar", "rg", "find", "cp", "date", "tree", "xxd", "man", "cargo",
            "less", "file",
        ]),
        prop::collection::vec("-[a-z]{1,2}|[a-z.]{1,5}", 0..2),
        computed_option_word(),
        prop::collection::vec("[a-z.]{1,5}", 0..2),
    )
        .prop_map(|(program, before, computed, after)| {
            let mut words = vec![program.to_string()];
            words.extend(before);
            words.push(computed);
            words.extend(after);
            words.join(" ")
        })
}

/// Text for an awk or sed string: letters, blanks and the characters a program splitter could
/// mistake for syntax.
fn program_string() -> impl Strategy<Value = String> {
    "[a-z ;>|&{}]{0,8}"
}

/// An awk or sed program with strings holding `;`, `>`, `|`, and the level it must get: the
/// strings never change it; a redirection or pipe outside them does.
fn awk_or_sed_program() -> impl Strategy<Value = (String, RiskLevel)> {
    prop_oneof![
        program_string()
            .prop_map(|text| (format!("awk '{{ print \"{text}\" }}' data"), RiskLevel::L0)),
        (program_string(), program_string()).prop_map(|(a, b)| (
            format!("awk '{{ x = \"{a}\"; print x, \"{b}\" }}' data"),
            RiskLevel::L0
        )),
        program_string().prop_map(|text| (
            format!("awk '{{ print \"{text}\" > \"out\" }}' data"),
            RiskLevel::L2
        )),
        program_string().prop_map(|text| (
            format!("awk '{{ print \"{text}\" | \"sh\" }}' data"),
            RiskLevel::L3
        )),
        program_string().prop_map(|text| (
            format!("awk 'BEGIN {{ s = \"{text}\"; system(s) }}'"),
            RiskLevel::L3
        )),
        (program_string(), program_string())
            .prop_map(|(a, b)| (format!("sed 's/{a}/{b}/g' data"), RiskLevel::L0)),
        (program_string(), program_string())
            .prop_map(|(a, b)| (format!("sed 's/{a}/{b}/w out' data"), RiskLevel::L2)),
        (program_string(), program_string())
            .prop_map(|(a, b)| (format!("sed 's/{a}/{b}/e' data"), RiskLevel::L3)),
    ]
}

// ---------------------------------------------------------------------------------------------
// The comparison.

/// Documented differences between the two readings: (command, why the difference is safe).
/// Empty: none found so far (the comparison skips L3 commands, compound commands, and words
/// brush leaves for run time, such as `$'…'`, which the unit tests of `policy::shell` cover).
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[];

/// How many generated commands were compared, and how many of their words brush could say.
static COMPARED_COMMANDS: AtomicUsize = AtomicUsize::new(0);
static COMPARED_WORDS: AtomicUsize = AtomicUsize::new(0);

fn compare(command: &str) -> Result<(), TestCaseError> {
    if classify_shell(command).level == RiskLevel::L3 {
        return Ok(());
    }
    let Some(brush) = brush_simple_commands(command) else {
        // Brush cannot parse it, or it is not a list of simple commands: nothing to compare.
        return Ok(());
    };
    COMPARED_COMMANDS.fetch_add(1, Ordering::Relaxed);
    COMPARED_WORDS.fetch_add(
        brush.iter().flatten().filter(|word| word.is_some()).count(),
        Ordering::Relaxed,
    );
    let ours = simple_command_words(command).ok_or_else(|| {
        TestCaseError::fail(format!(
            "{command:?}: rated below L3 but our lexer refuses it"
        ))
    })?;
    let agree = ours.len() == brush.len()
        && ours.iter().zip(&brush).all(|(our_words, brush_words)| {
            our_words.len() == brush_words.len()
                && our_words
                    .iter()
                    .zip(brush_words)
                    .all(|(ours, theirs)| theirs.as_ref().is_none_or(|theirs| ours == theirs))
        });
    if agree || KNOWN_DIFFERENCES.iter().any(|(known, _)| *known == command) {
        return Ok(());
    }
    Err(TestCaseError::fail(format!(
        "{command:?} (rated {}):\n  ours:  {ours:?}\n  brush: {brush:?}",
        classify_shell(command).level
    )))
}

#[test]
fn our_lexer_reads_simple_commands_as_brush_does() {
    let cases = fuzz_cases(2_000);
    let mut runner = TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&command_line(), |command| compare(&command))
        .unwrap_or_else(|failure| panic!("{failure}"));
    // The comparison must have had something to compare: most generated commands are below L3
    // and parse as simple commands.
    let commands = COMPARED_COMMANDS.load(Ordering::Relaxed);
    let words = COMPARED_WORDS.load(Ordering::Relaxed);
    eprintln!("compared {commands} of {cases} commands, {words} words");
    assert!(
        commands >= cases as usize / 10 && words >= commands,
        "only {commands} of {cases} commands ({words} words) were compared"
    );
}

/// A computed word in an option position is at least L2 and says "computed at run time"; both
/// lexers still read the command alike.
#[test]
fn computed_options_are_never_low() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: fuzz_cases(2_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&command_with_computed_option(), |command| {
            compare(&command)?;
            let assessment = classify_shell(&command);
            let says_why = assessment
                .reasons
                .iter()
                .any(|reason| reason.contains("computed at run time"));
            prop_assert!(
                assessment.level == RiskLevel::L3
                    || (assessment.level >= RiskLevel::L2 && says_why),
                "{command:?}: {} {:?}",
                assessment.level,
                assessment.reasons
            );
            Ok(())
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// awk and sed programs are read as programs: strings with `;`, `>`, `|` change nothing, a
/// redirection, pipe, `system` or `e` flag outside them does; both lexers read them alike.
#[test]
fn awk_and_sed_strings_do_not_split_programs() {
    let mut runner = TestRunner::new(ProptestConfig {
        cases: fuzz_cases(2_000),
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&awk_or_sed_program(), |(command, expected)| {
            compare(&command)?;
            let assessment = classify_shell(&command);
            prop_assert_eq!(
                assessment.level,
                expected,
                "{:?}: {:?}",
                command,
                assessment.reasons
            );
            Ok(())
        })
        .unwrap_or_else(|failure| panic!("{failure}"));
}

/// Hand-written cases: the quoting forms the fuzzer draws from, each compared once.
#[test]
fn fixed_cases_agree() {
    for command in [
        "echo 'a b' \"c d\" e\\ f",
        "ls -la | grep x && echo ok || echo no; pwd",
        "echo $'a\\x41\\'b' c",
        "echo \"a\\$b\" 'c\\d'",
        "cat < in > out 2>&1",
        "echo a # comment\necho b",
        "x=1 y='2 3' env",
        "echo a\\\nb",
        // Bash's `time` keyword, alone and in front of a pipeline (found by the fuzzer in CI).
        "a & time",
        "time -p ls | wc -l",
    ] {
        compare(command).unwrap_or_else(|error| panic!("{error}"));
    }
}
