//! The deterministic shell risk classifier ([`classify_shell`]).
//!
//! Everything here is text processing. Nothing touches the file system, the environment or the
//! clock, so the same input always gives the same [`Assessment`], and no input makes it panic.
//! The reasons quote the command; they pass through [`crate::secrets::redact`] so that a registered
//! key never reaches the operator's screen or the audit log through them.
//!
//! # Shell commands ([`classify_shell`])
//!
//! 1. Refused outright (L3): an empty command, a NUL byte or another control character (only tab
//!    and newline pass), more than 10,000 bytes, unbalanced quotes, a fork bomb.
//! 2. The command is lexed the way bash reads it (the shell tool runs `bash -c`, so the classifier
//!    and the shell agree): single and double quotes, backslash escapes, `$'…'`, comments,
//!    here-documents and here-strings, redirections (`&>`, `>|`, `|&`), `;&`/`;;&`. Anything whose
//!    text the reviewer cannot see is L3: command substitution (`$(…)` and backticks, also inside
//!    double quotes and unquoted here-documents), process substitution, arithmetic evaluation (it
//!    can expand `a[$(…)]`). Bash syntax the lexer does not model is L3 with a reason naming it:
//!    `[[ … ]]`, `$[…]`, `$"…"`, `coproc`, `function`, `let`, parameter expansion operators
//!    (`${x@P}`, `${!x}`, `${a[i]}`, `${x:1}`, …; `${x}`, `${x:-w}`, `${#x}`, `${x%w}` are
//!    modelled), extglob patterns, brace sequences (`{a..z}`), a backslash-newline inside an
//!    operator or an expansion or in a here-document body, a NUL in `$'…'`, array subscripts (bash
//!    evaluates them as arithmetic), `set`/`shopt` options that change how later lines are read.
//!    History expansion is off in `bash -c` (and `set -H` is L3).
//! 3. The command is split on `&&`, `||`, `;`, `|`, `&`, newlines and parentheses; each simple
//!    command is classified on its own, the highest level wins and every part keeps its reasons.
//! 4. A part is unwrapped before it is looked up: variable assignments (`FOO=1 cmd`; an assignment
//!    to a variable that loads code, such as `LD_PRELOAD`, is L3), shell keywords (`if`, `then`, `{`),
//!    wrappers (`env`, `nice`, `timeout N`, `nohup`, `time`, `command`, `stdbuf`, …; `xargs cmd` and
//!    `find -exec cmd` are never below L2: their arguments come from input the reviewer cannot
//!    see). `/bin/rm` is `rm`; a program named by any other path (`./ls`) is at least L2. A program
//!    name the shell computes (`$CMD`, a glob) is L3.
//! 5. The program is looked up: dedicated rules first (`rm`, `git`, `find`, `sed`, `awk`,
//!    interpreters, …), then the command tables (L0 read-only, L1 project-local writes and
//!    formatters, L2 build tools and test runners — they run code the agent may have written —,
//!    other writes, network and system changes, L3 blocked); anything unknown is L2. Long options
//!    match by prefix, as `getopt_long` reads them (`options.rs`).
//! 6. Output redirections to a file are L2 (`/dev/null` and `2>&1` are harmless, a block device
//!    is L3). Paths a command writes that a program later runs or loads as configuration (the one
//!    list in `policy::paths`), or that lie outside the working directory, lift it to at least L2. A sensitive path (`.env`, `.ssh/`, keys, …) anywhere in the
//!    words or redirections then escalates the part by one level.
//! 7. After a `cd` out of the working directory (an absolute path, `~`, `..`, `-`), later L1 commands
//!    are L2: their relative paths no longer point into the project.
//!
//! 8. A word the shell computes (`$x`, `"$x"` first in a word, an unquoted expansion that word
//!    splitting may turn into several words, a glob that may match a file named `-rf`) where it
//!    can become an option is at least L2 "computed at run time" (`computed.rs`), except for
//!    programs whose every option only reads or prints; any expansion in an awk or sed program
//!    counts. awk programs are tokenized (`text_tools.rs`): strings and regular expressions do
//!    not end statements or redirect.
//! 9. Shell state that becomes code: setting a variable of the one table `SHELL_STATE_VARIABLES`
//!    in any way (`NAME=`, `export NAME`, `declare`, `printf -v`, `read`, `mapfile`, `for NAME
//!    in`, `getopts`) is at least L2 naming it (`state.rs`); `history -w`, `hash -p`, `fc`,
//!    `compgen -C`, `mapfile -C` the same or L3.
//! 10. What an approved command reaches (`reach.rs`): the network (network clients, remote git,
//!     package downloads; such a command is at least L2) and writes outside the workspace
//!     (installs, system changes, written paths outside the working directory, writes after a
//!     `cd` out of it). An unknown or computed command stays narrow.
//!
//! An interpreter is L3 when its program is not in the command line the reviewer sees: inline code
//! (`sh -c`, `python -c`, `perl -e`, `node -e`, …) or a program read from standard input (`curl … |
//! sh`, `python3 <<EOF`, a bare `bash`). Running a named script is L2.
//!
//! Files: `lexer` and `syntax` (reading the command as bash does), `expansions`, `builtins`,
//! `options`, `tables` and `subcommands` (the command tables), the per-command rules in `git`,
//! `interpreters`, `wrappers`, `files`, `text_tools` and `system`, `patterns`, `computed`,
//! `state` and `reach`.
//!

mod builtins;
mod computed;
mod expansions;
mod files;
mod git;
mod interpreters;
mod lexer;
mod loads;
mod options;
mod patterns;
mod reach;
mod state;
mod subcommands;
mod syntax;
mod system;
mod tables;
#[cfg(test)]
mod tests;
mod text_tools;
mod wrappers;

use crate::policy::paths::*;
use crate::policy::{Assessment, Reach, RiskLevel, Writes, quote_for_reason};
use builtins::*;
use computed::*;
use files::*;
pub use git::git_hardening_environment;
use git::*;
use interpreters::*;
use lexer::*;
use loads::*;
use options::*;
use patterns::*;
use reach::*;
use state::*;
use subcommands::*;
use syntax::*;
use system::*;
use tables::*;
use text_tools::*;
use wrappers::*;

/// Longer commands are refused: nobody reviews 10 kB of shell, and it bounds the classifier's work.
const MAX_COMMAND_BYTES: usize = 10_000;

/// Wrappers inside wrappers (`env nice timeout 5 xargs …`) deeper than this are refused.
const MAX_NESTED_WRAPPERS: usize = 8;

/// A brace expansion (`{a,b}{c,d}`) producing more words than this is refused.
const MAX_BRACE_EXPANSION_WORDS: usize = 64;

// ---------------------------------------------------------------------------------------------
// Public API.
// ---------------------------------------------------------------------------------------------

/// The simple commands of `command` as the classifier reads them: each one's words (assignments
/// included, redirections left out) after quote removal, in order. None when the lexer refuses
/// the text. For differential tests against another parser (`tests/shell_differential.rs`).
pub fn simple_command_words(command: &str) -> Option<Vec<Vec<String>>> {
    let lexed = lex(command).ok()?;
    let (commands, _) = split_into_simple_commands(lexed.tokens);
    Some(
        commands
            .into_iter()
            .filter(|command| !command.words.is_empty())
            .map(|command| command.words.into_iter().map(|word| word.text).collect())
            .collect(),
    )
}

/// Classifies a shell command line (see the module documentation for the rules).
pub fn classify_shell(command: &str) -> Assessment {
    if command.contains('\0') {
        return Assessment::new(RiskLevel::L3, "the command contains a NUL byte");
    }
    if command.len() > MAX_COMMAND_BYTES {
        return Assessment::new(
            RiskLevel::L3,
            format!(
                "too long to review ({} bytes; the limit is {MAX_COMMAND_BYTES})",
                command.len()
            ),
        );
    }
    if command.trim().is_empty() {
        return Assessment::new(RiskLevel::L3, "empty command");
    }
    // A carriage return, escape or other control character shows one thing on the reviewer's
    // screen and is read as another by the shell.
    if let Some(control) = command
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Assessment::new(
            RiskLevel::L3,
            format!(
                "the command contains the control character U+{:04X}",
                u32::from(control)
            ),
        );
    }

    let mut assessment = Assessment::from_parts(RiskLevel::L0, Vec::new());
    // What the approved command needs beyond the workspace (network, writes elsewhere).
    let mut needs = Reach::READ_ONLY;
    let add = |assessment: &mut Assessment, level: RiskLevel, reason: String| {
        assessment.level = assessment.level.max(level);
        assessment.reasons.push(reason);
    };

    if looks_like_fork_bomb(command) {
        add(
            &mut assessment,
            RiskLevel::L3,
            "L3: a fork bomb (a function that pipes into itself)".to_string(),
        );
    }
    let lexed = match lex(command) {
        Ok(lexed) => lexed,
        Err(error) => return Assessment::new(RiskLevel::L3, error.reason()),
    };
    for construct in &lexed.unmodelled_constructs {
        add(
            &mut assessment,
            RiskLevel::L3,
            format!("L3: {construct} is bash syntax the classifier does not model"),
        );
    }
    for hidden in &lexed.hidden_commands {
        add(
            &mut assessment,
            RiskLevel::L3,
            format!("L3: {hidden} hides a command from review"),
        );
    }
    let (commands, syntax_problems) = split_into_simple_commands(lexed.tokens);
    for problem in syntax_problems {
        add(&mut assessment, RiskLevel::L3, format!("L3: {problem}"));
    }

    let mut left_working_directory = false;
    let mut entered_directory = false;
    for simple_command in &commands {
        let mut verdict = classify_simple_command(simple_command);
        raise_after_leaving(&mut verdict, &mut left_working_directory);
        raise_for_git_after_entering(simple_command, &mut entered_directory, &mut verdict);
        needs = needs.union(verdict.needs);
        add(
            &mut assessment,
            verdict.level,
            format!(
                "{} `{}`: {}",
                verdict.level,
                display_simple_command(simple_command),
                verdict.reasons.join("; ")
            ),
        );
    }
    if assessment.reasons.is_empty() {
        return Assessment::new(RiskLevel::L3, "empty command (only comments or separators)");
    }
    assessment.reach = Reach::for_level(assessment.level)
        .union(needs)
        .within(assessment.level);
    assessment
}

// ---------------------------------------------------------------------------------------------
// Classifying one simple command.
// ---------------------------------------------------------------------------------------------

/// What one simple command does: its level, the reasons for exactly that level, and the paths it
/// writes (for the configuration-file and working-directory rules).
#[derive(Debug, Clone)]
pub(super) struct Verdict {
    pub(super) level: RiskLevel,
    pub(super) reasons: Vec<String>,
    pub(super) written_paths: Vec<String>,
    /// Set by `cd`, `pushd` and `popd` to a place outside the working directory.
    pub(super) leaves_working_directory: bool,
    /// What the command needs to reach when approved: the network, writes outside the
    /// workspace. Only an L2/L3 command gets it ([`Reach::within`]).
    pub(super) needs: Reach,
}

impl Verdict {
    pub(super) fn new(level: RiskLevel, reason: impl Into<String>) -> Verdict {
        Verdict {
            level,
            reasons: vec![reason.into()],
            written_paths: Vec::new(),
            leaves_working_directory: false,
            needs: Reach::READ_ONLY,
        }
    }

    pub(super) fn writing(mut self, paths: impl IntoIterator<Item = String>) -> Verdict {
        self.written_paths.extend(paths);
        self
    }

    /// Lifts the level to at least `level`. The reasons always explain the final level: a higher
    /// level replaces them, an equal one adds to them, a lower one is ignored.
    pub(super) fn raise_to(&mut self, level: RiskLevel, reason: impl Into<String>) {
        match level.cmp(&self.level) {
            std::cmp::Ordering::Greater => {
                self.level = level;
                self.reasons = vec![reason.into()];
            }
            std::cmp::Ordering::Equal => self.reasons.push(reason.into()),
            std::cmp::Ordering::Less => {}
        }
    }

    /// One level up (L3 stays L3), keeping the reasons and adding this one.
    pub(super) fn escalate(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if self.level == RiskLevel::L3 {
            self.reasons.push(reason);
        } else {
            self.level = self.level.escalate();
            self.reasons
                .push(format!("escalated by one level: {reason}"));
        }
    }
}

/// Classifies one simple command: its program, then what its redirections and paths add.
fn classify_simple_command(command: &SimpleCommand) -> Verdict {
    let Some(words) = expand_braces_in(&command.words) else {
        return Verdict::new(
            RiskLevel::L3,
            "brace expansion produces too many words to review",
        );
    };
    let mut verdict = classify_words(&words, standard_input_of(command), 0);
    raise_for_output_redirections(&mut verdict, &command.redirections);
    raise_for_written_paths(&mut verdict);
    add_reach_for_paths(&mut verdict, &words);
    raise_for_network(&mut verdict);
    raise_for_working_elsewhere(&mut verdict, &words);
    raise_for_block_device_words(&mut verdict, &words);
    escalate_for_sensitive_paths(&mut verdict, &words, &command.redirections);
    verdict
}

/// Whether a redirection feeds text written in the command line itself (`<<EOF`, `<<<`).
fn is_here_document(redirection: &Redirection) -> bool {
    matches!(
        redirection.operator,
        RedirectOperator::HereDocument(_) | RedirectOperator::HereString
    )
}

/// Where the program reads its standard input from; a here-document replaces the pipe.
fn standard_input_of(command: &SimpleCommand) -> StandardInput {
    if command.redirections.iter().any(is_here_document) {
        StandardInput::HereDocument
    } else {
        command.input
    }
}

/// Whether a redirection writes to the file it names.
fn redirection_writes_file(redirection: &Redirection) -> bool {
    let target = redirection.target.text.as_str();
    match redirection.operator {
        RedirectOperator::Output | RedirectOperator::Append | RedirectOperator::ReadWrite => true,
        // `>&2` and `>&-` only duplicate or close a descriptor; `>&file` writes the file.
        RedirectOperator::DuplicateOutput => {
            !(target == "-" || (!target.is_empty() && target.chars().all(|c| c.is_ascii_digit())))
        }
        RedirectOperator::Input
        | RedirectOperator::DuplicateInput
        | RedirectOperator::HereDocument(_)
        | RedirectOperator::HereString => false,
    }
}

/// Output into a file is L2 (and the file counts as written); into a block device it is L3.
fn raise_for_output_redirections(verdict: &mut Verdict, redirections: &[Redirection]) {
    for redirection in redirections {
        let target = redirection.target.text.as_str();
        if !redirection_writes_file(redirection) || is_harmless_device(target) {
            continue;
        }
        let quoted = quote_for_reason(target);
        if is_block_device(target) {
            verdict.raise_to(
                RiskLevel::L3,
                format!("redirects output to the block device `{quoted}`"),
            );
        } else {
            verdict.raise_to(RiskLevel::L2, format!("redirects output into `{quoted}`"));
            verdict.written_paths.push(target.to_string());
        }
    }
}

/// Writing a file that is later run or loaded as configuration, or one outside the working
/// directory, is at least L2.
fn raise_for_written_paths(verdict: &mut Verdict) {
    for path in verdict.written_paths.clone() {
        let quoted = quote_for_reason(&path);
        if let Some(label) = configuration_file_in(&path) {
            verdict.raise_to(
                RiskLevel::L2,
                format!("writes `{quoted}`, which a program later runs or loads as configuration ({label})"),
            );
        }
        if is_outside_working_directory(&path) {
            verdict.raise_to(
                RiskLevel::L2,
                format!("writes `{quoted}` outside the working directory"),
            );
        }
    }
}

/// An L1 command pointed at a directory outside the working directory (`make -C /etc`) is L2.
fn raise_for_working_elsewhere(verdict: &mut Verdict, words: &[Word]) {
    if verdict.level == RiskLevel::L1
        && let Some(directory) = directory_option_values(words)
            .into_iter()
            .find(|directory| is_outside_working_directory(directory))
    {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "works in `{}`, outside the working directory",
                quote_for_reason(&directory)
            ),
        );
    }
}

/// A command that changes something (L1 or above) and names a block device is L3.
fn raise_for_block_device_words(verdict: &mut Verdict, words: &[Word]) {
    if verdict.level >= RiskLevel::L1
        && let Some(device) = words.iter().find(|word| is_block_device(&word.text))
    {
        verdict.raise_to(
            RiskLevel::L3,
            format!(
                "writes the block device `{}`",
                quote_for_reason(&device.text)
            ),
        );
    }
}

/// A sensitive path in the words or the redirection targets escalates the command by one level.
fn escalate_for_sensitive_paths(
    verdict: &mut Verdict,
    words: &[Word],
    redirections: &[Redirection],
) {
    let examined_paths = words.iter().map(|word| word.text.as_str()).chain(
        redirections
            .iter()
            .filter(|redirection| !is_here_document(redirection))
            .map(|redirection| redirection.target.text.as_str()),
    );
    if let Some(label) = examined_paths.filter_map(sensitive_path_in).next() {
        verdict.escalate(format!("touches a sensitive path ({label})"));
    }
}

/// Classifies a command given as words: assignments and keywords are skipped, then the program
/// is looked up. `depth` counts the wrappers already unwrapped.
fn classify_words(words: &[Word], input: StandardInput, depth: usize) -> Verdict {
    if depth > MAX_NESTED_WRAPPERS {
        return Verdict::new(RiskLevel::L3, "too many nested wrappers to review");
    }
    let mut index = 0;
    let mut assignment_findings = Vec::new();
    while let Some(word) = words.get(index) {
        if split_assignment(word).is_some() {
            if let Some(finding) = assignment_risk(word) {
                assignment_findings.push(finding);
            }
            index += 1;
            continue;
        }
        if word.first_quoted_at.is_none() && SHELL_KEYWORDS.contains(&word.text.as_str()) {
            index += 1;
            continue;
        }
        break;
    }
    let mut verdict = match words.get(index) {
        None if index == 0 => Verdict::new(RiskLevel::L0, "no program: shell syntax only"),
        None => Verdict::new(RiskLevel::L0, "only sets shell variables or shell syntax"),
        Some(program_word) => {
            let arguments = words.get(index + 1..).unwrap_or(&[]);
            classify_program_word(program_word, arguments, input, depth)
        }
    };
    for (level, reason) in assignment_findings {
        verdict.raise_to(level, reason);
    }
    verdict
}

fn classify_program_word(
    program_word: &Word,
    arguments: &[Word],
    input: StandardInput,
    depth: usize,
) -> Verdict {
    if program_word.expands_variable || program_word.globs() {
        return Verdict::new(
            RiskLevel::L3,
            format!(
                "the program name `{}` is computed by the shell (variable, substitution or glob), so what runs cannot be reviewed",
                quote_for_reason(&program_word.text)
            ),
        );
    }
    // Programs in the system's own directories are classified by their base name: `/bin/rm` is
    // `rm`. Any other path (`./ls`, `bin/make`, `/tmp/x/cat`) runs a file the agent may have
    // written, whatever its name: at least L2.
    let text = program_word.text.as_str();
    let Some((directory, program)) = text.rsplit_once('/') else {
        return classify_program(text, arguments, input, depth);
    };
    let mut verdict = classify_program(program, arguments, input, depth);
    if !SYSTEM_PROGRAM_DIRECTORIES.contains(&normalize_path_text(directory).as_str()) {
        verdict.raise_to(
            RiskLevel::L2,
            format!(
                "runs the program file `{}`, which is not a system program and may have been written by the agent",
                quote_for_reason(text)
            ),
        );
    }
    verdict
}

/// Looks a program up (see [`classify_program_by_rules`]) and adds what it reaches.
fn classify_program(
    program: &str,
    arguments: &[Word],
    input: StandardInput,
    depth: usize,
) -> Verdict {
    let mut verdict = classify_program_by_rules(program, arguments, input, depth);
    add_reach(program, arguments, &mut verdict);
    // A wrapper's own options are checked by `classify_wrapper`; the command it runs, here.
    if !WRAPPERS.iter().any(|wrapper| wrapper.name == program) {
        raise_for_computed_arguments(program, arguments, &mut verdict);
    }
    raise_for_loaded_files(program, arguments, &mut verdict);
    verdict
}

/// Looks a program up: dedicated rules first, then the tables; unknown programs are L2.
fn classify_program_by_rules(
    program: &str,
    arguments: &[Word],
    input: StandardInput,
    depth: usize,
) -> Verdict {
    if let Some(verdict) = unmodelled_builtin(program, arguments) {
        return verdict;
    }
    if let Some(wrapper) = WRAPPERS.iter().find(|wrapper| wrapper.name == program) {
        return classify_wrapper(wrapper, arguments, input, depth);
    }
    if let Some(verdict) = classify_by_dedicated_rule(program, arguments, depth) {
        return verdict;
    }
    if SHELL_HEADERS.contains(&program) {
        return Verdict::new(
            RiskLevel::L0,
            format!("`{program}` header: runs nothing by itself"),
        );
    }
    if let Some(interpreter) = find_interpreter(program) {
        return classify_interpreter(interpreter, arguments, input);
    }
    if let Some(rules) = SUBCOMMAND_RULES
        .iter()
        .find(|rules| rules.program == program)
    {
        return classify_program_with_subcommands(program, rules, arguments);
    }
    classify_by_command_tables(program, arguments)
}

/// The programs with a rule of their own (`rm`, `git`, `sed`, …); None for the others.
fn classify_by_dedicated_rule(program: &str, arguments: &[Word], depth: usize) -> Option<Verdict> {
    if let Some(verdict) = classify_shell_state_builtin(program, arguments) {
        return Some(verdict);
    }
    let verdict = match program {
        "xargs" => classify_xargs(arguments, depth),
        "find" => classify_find(arguments, depth),
        "rm" => classify_rm(arguments),
        "chmod" | "chown" | "chgrp" => classify_permission_change(program, arguments),
        "cp" => classify_copy(arguments),
        "git" => classify_git(arguments),
        "sed" => classify_sed(arguments),
        "awk" | "gawk" | "mawk" | "nawk" => classify_awk(arguments),
        "tar" => classify_tar(arguments),
        "unzip" => classify_unzip(arguments),
        "crontab" => classify_crontab(arguments),
        "nc" | "ncat" | "netcat" => classify_netcat(arguments),
        "socat" => classify_socat(arguments),
        "iptables" | "ip6tables" | "nft" | "ufw" => classify_firewall(program, arguments),
        "ping" | "ping6" => classify_ping(arguments),
        "service" => classify_service(arguments),
        "dpkg" => classify_dpkg(arguments),
        "cd" | "pushd" | "popd" => classify_change_directory(program, arguments),
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            classify_declaration(program, arguments)
        }
        "set" => classify_set(arguments),
        "shopt" => classify_shopt(arguments),
        "alias" => classify_alias(arguments),
        "trap" => classify_trap(arguments),
        _ => return None,
    };
    Some(verdict)
}

/// `alias name=command` stores a command to run later; a bare `alias` only lists.
fn classify_alias(arguments: &[Word]) -> Verdict {
    if arguments.iter().any(|word| word.text.contains('=')) {
        Verdict::new(
            RiskLevel::L3,
            "`alias` stores a command to run later, which is not reviewed",
        )
    } else {
        Verdict::new(RiskLevel::L0, "`alias` only lists aliases")
    }
}

/// `trap command signal` stores a command to run later; `trap`, `trap -p` and `trap -l` only list.
fn classify_trap(arguments: &[Word]) -> Verdict {
    let lists_only = arguments.len() < 2
        || matches!(
            arguments.first().map(|word| word.text.as_str()),
            Some("-p" | "-l")
        );
    if lists_only {
        Verdict::new(RiskLevel::L0, "`trap` only lists traps")
    } else {
        Verdict::new(
            RiskLevel::L3,
            "`trap` stores a command to run later, which is not reviewed",
        )
    }
}

/// A program with subcommands (`cargo`, `docker`, …), plus the options that let a container
/// take over the host or make `bun` run inline code.
fn classify_program_with_subcommands(
    program: &str,
    rules: &SubcommandRules,
    arguments: &[Word],
) -> Verdict {
    let mut verdict = classify_subcommand(rules, arguments);
    if matches!(program, "docker" | "podman")
        && let Some(reason) = container_takes_over_host(arguments)
    {
        verdict.raise_to(RiskLevel::L3, reason);
    }
    if program == "bun"
        && arguments
            .iter()
            .any(|word| matches!(word.text.as_str(), "-e" | "--eval" | "-p" | "--print"))
    {
        verdict.raise_to(RiskLevel::L3, "`bun --eval` runs inline code");
    }
    verdict
}

/// Looks a program up in the command tables, most dangerous first; unknown programs are L2.
fn classify_by_command_tables(program: &str, arguments: &[Word]) -> Verdict {
    if let Some(reason) = find_group(BLOCKED_GROUPS, program) {
        return Verdict::new(RiskLevel::L3, format!("`{program}` {reason}"));
    }
    if BLOCKED_PREFIXES
        .iter()
        .any(|prefix| program.starts_with(prefix))
    {
        return Verdict::new(RiskLevel::L3, format!("`{program}` formats a file system"));
    }
    if let Some(reason) = find_group(READ_ONLY_GROUPS, program) {
        return classify_read_only(program, reason, arguments);
    }
    if let Some(reason) = find_group(ENVIRONMENT_PRINTERS, program) {
        return Verdict::new(RiskLevel::L1, format!("`{program}` {reason}"));
    }
    if program == "zip" && zip_runs_a_command(arguments) {
        return Verdict::new(
            RiskLevel::L3,
            "`zip -TT` runs a command named on the command line",
        );
    }
    if let Some(reason) = find_group(WORKING_DIRECTORY_WRITES, program) {
        return classify_working_directory_write(program, reason, arguments);
    }
    if let Some(reason) = find_group(RUNS_PROJECT_CODE, program) {
        return Verdict::new(RiskLevel::L2, format!("`{program}` {reason}"));
    }
    if let Some(reason) = find_group(BUILD_AND_TEST_TOOLS, program) {
        return Verdict::new(RiskLevel::L1, format!("`{program}` {reason}"));
    }
    if let Some(reason) = find_group(APPROVAL_GROUPS, program) {
        // What these reach (network, writes anywhere) is added by `add_reach`.
        let verdict = Verdict::new(RiskLevel::L2, format!("`{program}` {reason}"));
        return match reason {
            FILE_CHANGES_GROUP => verdict.writing(operands(arguments)),
            _ => verdict,
        };
    }
    Verdict::new(
        RiskLevel::L2,
        format!(
            "unknown command `{}`: not in the reviewed lists",
            quote_for_reason(program)
        ),
    )
}

/// Whether `zip`'s arguments ask it to run a command.
fn zip_runs_a_command(arguments: &[Word]) -> bool {
    // `zip -TT cmd` (`--unzip-command`) tests the archive by running a command.
    arguments.iter().any(|word| {
        word.text.starts_with("-TT") || long_option_matches(&word.text, "--unzip-command")
    })
}

/// A program that writes its operands in the working directory: L1, writing those paths.
fn classify_working_directory_write(program: &str, reason: &str, arguments: &[Word]) -> Verdict {
    // `gunzip .bashrc.gz` writes `.bashrc`: the name without its extension is written too.
    let written = operands(arguments).into_iter().flat_map(|operand| {
        let stem = operand
            .rsplit_once('.')
            .map(|(stem, _)| stem.to_string())
            .filter(|stem| !stem.is_empty() && !stem.ends_with('/'));
        std::iter::once(operand).chain(stem)
    });
    Verdict::new(RiskLevel::L1, format!("`{program}` {reason}")).writing(written)
}

fn find_group(groups: &[CommandGroup], program: &str) -> Option<&'static str> {
    groups
        .iter()
        .find(|(_, commands)| commands.contains(&program))
        .map(|(reason, _)| *reason)
}

/// The words that are not options (a lone `-` is standard input, an operand).
fn operands(arguments: &[Word]) -> Vec<String> {
    let mut after_double_dash = false;
    let mut found = Vec::new();
    for word in arguments {
        let text = word.text.as_str();
        if !after_double_dash && text == "--" {
            after_double_dash = true;
        } else if after_double_dash || !text.starts_with('-') || text == "-" {
            found.push(text.to_string());
        }
    }
    found
}

fn classify_read_only(program: &str, reason: &str, arguments: &[Word]) -> Verdict {
    let mut verdict = Verdict::new(RiskLevel::L0, format!("`{program}` {reason}"));
    for (command, spelling, level, why) in OPTIONS_THAT_WRITE_OR_RUN {
        if *command == program
            && arguments
                .iter()
                .any(|word| option_matches(&word.text, *spelling))
        {
            verdict.raise_to(*level, format!("`{program}` {why}"));
        }
    }
    // `less +!cmd` runs the pager's (and so the shell's) commands at start.
    if matches!(program, "less" | "more") && arguments.iter().any(|word| word.text.starts_with('+'))
    {
        verdict.raise_to(
            RiskLevel::L2,
            format!("`{program} +…` runs pager commands at start"),
        );
    }
    for (command, limit, why) in READ_ONLY_OPERAND_LIMITS {
        if *command == program && operands(arguments).len() > *limit {
            verdict.raise_to(RiskLevel::L2, format!("`{program}` {why}"));
        }
    }
    verdict
}

/// The values of options that point a command at another directory (`git -C dir`,
/// `make --directory=dir`, `cargo --manifest-path dir/Cargo.toml`).
fn directory_option_values(words: &[Word]) -> Vec<String> {
    let mut values = Vec::new();
    for (index, word) in words.iter().enumerate() {
        let text = word.text.as_str();
        if option_takes_next_word(text, DIRECTORY_OPTIONS) {
            values.extend(words.get(index + 1).map(|value| value.text.clone()));
        } else if let Some((_, value)) = text.split_once('=')
            && option_is_any_of(text, DIRECTORY_OPTIONS)
        {
            values.push(value.to_string());
        }
    }
    values
}
