//! Interpreters: inline code or a program from standard input is L3, a named script is L2.

use super::*;

/// How an interpreter reads its options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InterpreterFamily {
    /// `-s` reads the program from standard input; `+o` options exist.
    Shell,
    /// `-m module` runs a module.
    Python,
    Other,
}

/// A program that runs code.
pub(super) struct Interpreter {
    pub(super) name: &'static str,
    pub(super) family: InterpreterFamily,
    /// Short-option letters whose argument is program text (`c` for `sh -c`, `e` for `perl -e`).
    pub(super) inline_code_letters: &'static str,
    /// Long options whose argument is program text (`--eval`).
    pub(super) inline_code_long_options: &'static [&'static str],
    /// Short-option letters that take the next word as their value (`python -W ignore`).
    pub(super) letters_with_value: &'static str,
    /// Options that only print the version or help.
    pub(super) informational: &'static [&'static str],
}

/// Interpreters: inline code or a program from standard input is L3, a named script is L2.
#[rustfmt::skip]
pub(super) const INTERPRETERS: &[Interpreter] = &[
    shell_interpreter("sh"),
    shell_interpreter("bash"),
    shell_interpreter("zsh"),
    shell_interpreter("dash"),
    shell_interpreter("ksh"),
    shell_interpreter("mksh"),
    shell_interpreter("ash"),
    shell_interpreter("yash"),
    shell_interpreter("csh"),
    shell_interpreter("tcsh"),
    Interpreter {
        name: "fish",
        family: InterpreterFamily::Shell,
        inline_code_letters: "cC",
        inline_code_long_options: &["--command", "--init-command"],
        letters_with_value: "",
        informational: &["--version", "--help", "-v", "-h"],
    },
    python_interpreter("python"),
    python_interpreter("python2"),
    python_interpreter("python3"),
    python_interpreter("pypy"),
    python_interpreter("pypy3"),
    Interpreter {
        name: "perl",
        family: InterpreterFamily::Other,
        inline_code_letters: "eE",
        inline_code_long_options: &[],
        letters_with_value: "",
        informational: &["-v", "-V", "--version", "--help", "-h"],
    },
    Interpreter {
        name: "ruby",
        family: InterpreterFamily::Other,
        inline_code_letters: "e",
        inline_code_long_options: &[],
        letters_with_value: "rIC",
        informational: &["-v", "--version", "--help", "-h"],
    },
    node_interpreter("node"),
    node_interpreter("nodejs"),
    node_interpreter("ts-node"),
    node_interpreter("tsx"),
    Interpreter {
        name: "php",
        family: InterpreterFamily::Other,
        inline_code_letters: "rBRE",
        inline_code_long_options: &[],
        letters_with_value: "cdz",
        informational: &["-v", "--version", "-h", "--help", "-m"],
    },
    other_interpreter("lua", "e"),
    other_interpreter("luajit", "e"),
    other_interpreter("Rscript", "e"),
    other_interpreter("R", "e"),
    other_interpreter("osascript", "e"),
    other_interpreter("tclsh", ""),
    other_interpreter("wish", ""),
    other_interpreter("irb", ""),
    other_interpreter("jshell", ""),
    // PowerShell options are words with one dash (`-Command`, `-EncodedCommand`).
    other_interpreter("pwsh", "cCeE"),
    other_interpreter("powershell", "cCeE"),
];

pub(super) const fn shell_interpreter(name: &'static str) -> Interpreter {
    Interpreter {
        name,
        family: InterpreterFamily::Shell,
        inline_code_letters: "c",
        inline_code_long_options: &[],
        letters_with_value: "oO",
        informational: &["--version", "--help"],
    }
}

pub(super) const fn python_interpreter(name: &'static str) -> Interpreter {
    Interpreter {
        name,
        family: InterpreterFamily::Python,
        inline_code_letters: "c",
        inline_code_long_options: &[],
        letters_with_value: "WX",
        informational: &["-V", "--version", "-h", "--help"],
    }
}

pub(super) const fn node_interpreter(name: &'static str) -> Interpreter {
    Interpreter {
        name,
        family: InterpreterFamily::Other,
        inline_code_letters: "ep",
        inline_code_long_options: &["--eval", "--print"],
        letters_with_value: "r",
        informational: &["-v", "--version", "-h", "--help"],
    }
}

pub(super) const fn other_interpreter(
    name: &'static str,
    inline_code_letters: &'static str,
) -> Interpreter {
    Interpreter {
        name,
        family: InterpreterFamily::Other,
        inline_code_letters,
        inline_code_long_options: &[],
        letters_with_value: "",
        informational: &["--version", "--help"],
    }
}

/// Python modules run with `python -m` whose effect is known: (module, level, reason).
#[rustfmt::skip]
pub(super) const PYTHON_MODULES: &[(&str, RiskLevel, &str)] = &[
    ("json.tool", RiskLevel::L0, "only formats JSON"),
    ("pytest", RiskLevel::L2, "runs the project's tests, code the agent may have written"),
    ("unittest", RiskLevel::L2, "runs the project's tests, code the agent may have written"),
    ("doctest", RiskLevel::L2, "runs the project's tests, code the agent may have written"),
    ("venv", RiskLevel::L1, "creates a virtual environment"),
    ("py_compile", RiskLevel::L1, "compiles the project"),
    ("compileall", RiskLevel::L1, "compiles the project"),
];

// ---------------------------------------------------------------------------------------------
// Interpreters.
// ---------------------------------------------------------------------------------------------

/// Finds the interpreter for a program name; versioned names (`python3.12`) count as their base.
pub(super) fn find_interpreter(program: &str) -> Option<&'static Interpreter> {
    if let Some(interpreter) = INTERPRETERS
        .iter()
        .find(|interpreter| interpreter.name == program)
    {
        return Some(interpreter);
    }
    let unversioned = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    if unversioned.len() == program.len() {
        return None;
    }
    INTERPRETERS
        .iter()
        .find(|interpreter| interpreter.name == unversioned)
}

/// Classifies an interpreter by where its program comes from: the command line (L3), standard
/// input (L3), a named script (L2), or nowhere because it only prints its version (L0).
pub(super) fn classify_interpreter(
    interpreter: &Interpreter,
    arguments: &[Word],
    input: StandardInput,
) -> Verdict {
    let name = interpreter.name;
    match find_interpreter_program(interpreter, arguments) {
        InterpreterProgram::Script(script) => Verdict::new(
            RiskLevel::L2,
            format!(
                "`{name}` runs the script `{}`, whose code is not reviewed",
                quote_for_reason(script)
            ),
        ),
        InterpreterProgram::InlineCode(option) => Verdict::new(
            RiskLevel::L3,
            format!("`{name} {}` runs inline code", quote_for_reason(option)),
        ),
        InterpreterProgram::PythonModule {
            module,
            arguments: module_arguments,
        } => {
            let mut verdict = classify_python_module(name, module, module_arguments);
            raise_for_shadowed_module(name, module, arguments, &mut verdict);
            verdict
        }
        InterpreterProgram::StandardInput => reads_standard_input(name, input),
        InterpreterProgram::Unnamed {
            informational: true,
        } => Verdict::new(
            RiskLevel::L0,
            format!("`{name}` only prints its version or help"),
        ),
        InterpreterProgram::Unnamed {
            informational: false,
        } => reads_standard_input(name, input),
    }
}

/// Where an interpreter's program comes from, as its command line says.
enum InterpreterProgram<'a> {
    /// A script file named on the command line.
    Script(&'a str),
    /// The program text is the value of this option (`-c`, `--eval`).
    InlineCode(&'a str),
    /// `python -m module`, with the module's own arguments.
    PythonModule {
        module: &'a str,
        arguments: &'a [Word],
    },
    /// An option (`-`, `sh -s`) says the program is read from standard input.
    StandardInput,
    /// No program is named (standard input, then), and whether an option only asked for the
    /// version or help.
    Unnamed { informational: bool },
}

/// What one word of an interpreter's options tells.
enum OptionWord<'a> {
    /// An option that says nothing about the program: skip this many words (it and its value).
    Skip(usize),
    /// The word says where the program comes from.
    Names(InterpreterProgram<'a>),
}

/// Reads an interpreter's options up to the word that says where its program comes from.
fn find_interpreter_program<'a>(
    interpreter: &Interpreter,
    arguments: &'a [Word],
) -> InterpreterProgram<'a> {
    let mut informational = false;
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        let following = arguments.get(index + 1..).unwrap_or(&[]);
        if interpreter.informational.contains(&text) {
            informational = true;
            index += 1;
            continue;
        }
        if text == "--" {
            return match following.first() {
                Some(script) => InterpreterProgram::Script(script.text.as_str()),
                None => InterpreterProgram::Unnamed { informational },
            };
        }
        match read_interpreter_word(interpreter, text, following) {
            OptionWord::Skip(count) => index += count,
            OptionWord::Names(program) => return program,
        }
    }
    InterpreterProgram::Unnamed { informational }
}

/// Reads one word before the program: `-`, a long option, a cluster of short options, a shell's
/// `+o` option, or else the script. `following` are the words after it.
fn read_interpreter_word<'a>(
    interpreter: &Interpreter,
    text: &'a str,
    following: &'a [Word],
) -> OptionWord<'a> {
    if text == "-" {
        return OptionWord::Names(InterpreterProgram::StandardInput);
    }
    if let Some(long) = text.strip_prefix("--") {
        return read_interpreter_long_option(interpreter, text, long);
    }
    if let Some(cluster) = short_cluster(text) {
        return read_interpreter_short_options(interpreter, text, cluster, following);
    }
    // `bash +x script` turns an option off.
    if interpreter.family == InterpreterFamily::Shell && text.starts_with('+') && text.len() > 1 {
        let count = if matches!(text, "+o" | "+O") { 2 } else { 1 };
        return OptionWord::Skip(count);
    }
    OptionWord::Names(InterpreterProgram::Script(text))
}

/// Reads a long option (`text` is `--long`): inline code, or an option to skip (with the file a
/// shell's `--rcfile` names).
fn read_interpreter_long_option<'a>(
    interpreter: &Interpreter,
    text: &'a str,
    long: &str,
) -> OptionWord<'a> {
    let option_name = long.split('=').next().unwrap_or(long);
    if interpreter
        .inline_code_long_options
        .iter()
        .any(|option| long_option_matches(text, option))
    {
        return OptionWord::Names(InterpreterProgram::InlineCode(text));
    }
    if interpreter.family == InterpreterFamily::Shell
        && matches!(option_name, "rcfile" | "init-file")
        && !long.contains('=')
    {
        return OptionWord::Skip(2);
    }
    OptionWord::Skip(1)
}

/// Reads a cluster of short options (`text` is `-cluster`): inline code, `python -m`, a shell's
/// `-s`, or options to skip (with the value of the last letter when it takes one).
fn read_interpreter_short_options<'a>(
    interpreter: &Interpreter,
    text: &'a str,
    cluster: &'a str,
    following: &'a [Word],
) -> OptionWord<'a> {
    if cluster.contains(|letter| interpreter.inline_code_letters.contains(letter)) {
        return OptionWord::Names(InterpreterProgram::InlineCode(text));
    }
    if interpreter.family == InterpreterFamily::Python
        && let Some(module) = cluster.strip_prefix('m')
    {
        let module = if module.is_empty() {
            following.first().map_or("", |word| word.text.as_str())
        } else {
            module
        };
        let arguments = following.get(1..).unwrap_or(&[]);
        return OptionWord::Names(InterpreterProgram::PythonModule { module, arguments });
    }
    if interpreter.family == InterpreterFamily::Shell && cluster.contains('s') {
        return OptionWord::Names(InterpreterProgram::StandardInput);
    }
    if cluster
        .chars()
        .last()
        .is_some_and(|letter| interpreter.letters_with_value.contains(letter))
    {
        return OptionWord::Skip(2);
    }
    OptionWord::Skip(1)
}

/// The L3 verdict for an interpreter that reads its program from standard input.
fn reads_standard_input(name: &str, input: StandardInput) -> Verdict {
    let reason = match input {
        StandardInput::Pipe => format!("a pipe into `{name}`: it runs whatever code arrives"),
        StandardInput::HereDocument => format!("`{name}` runs code from a here-document"),
        StandardInput::Inherited => {
            format!("`{name}` reads its program from standard input, which the reviewer cannot see")
        }
    };
    Verdict::new(RiskLevel::L3, reason)
}

pub(super) fn classify_python_module(
    interpreter: &str,
    module: &str,
    arguments: &[Word],
) -> Verdict {
    if matches!(module, "pip" | "pip3")
        && let Some(rules) = SUBCOMMAND_RULES.iter().find(|rules| rules.program == "pip")
    {
        let mut verdict = classify_subcommand(rules, arguments);
        add_reach("pip", arguments, &mut verdict);
        return verdict;
    }
    if let Some((_, level, reason)) = PYTHON_MODULES.iter().find(|(known, _, _)| *known == module) {
        return Verdict::new(*level, format!("`{interpreter} -m {module}` {reason}"));
    }
    Verdict::new(
        RiskLevel::L2,
        format!(
            "`{interpreter} -m {}` runs a module whose code is not reviewed",
            quote_for_reason(module)
        ),
    )
}
