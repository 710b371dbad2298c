//! `sed` and `awk`: their scripts are read for the commands that run programs or write files.

use super::*;

pub(super) fn classify_sed(arguments: &[Word]) -> Verdict {
    let mut in_place = false;
    let mut script_from_file = false;
    let mut scripts: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let mut after_double_dash = false;
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        let text = word.text.as_str();
        index += 1;
        if after_double_dash || !text.starts_with('-') || text == "-" {
            if scripts.is_empty() && !script_from_file {
                scripts.push(text.to_string());
            } else {
                files.push(text.to_string());
            }
            continue;
        }
        if text == "--" {
            after_double_dash = true;
        } else if text.starts_with("--") {
            // GNU sed reads `--in`, `--exp=…`, `--fi` as `--in-place`, `--expression`, `--file`.
            if long_option_matches(text, "--in-place") {
                in_place = true;
            } else if long_option_matches(text, "--expression") {
                match text.split_once('=') {
                    Some((_, script)) => scripts.push(script.to_string()),
                    None => {
                        scripts.extend(arguments.get(index).map(|word| word.text.clone()));
                        index += 1;
                    }
                }
            } else if long_option_matches(text, "--file") {
                script_from_file = true;
                if !text.contains('=') {
                    index += 1;
                }
            }
        } else if let Some(cluster) = short_cluster(text) {
            for (offset, letter) in cluster.char_indices() {
                let rest = &cluster[offset + letter.len_utf8()..];
                match letter {
                    // `-i` takes an optional suffix attached to it: `-ie` is suffix `e`, not `-e`.
                    'i' => {
                        in_place = true;
                        break;
                    }
                    'e' => {
                        if rest.is_empty() {
                            scripts.extend(arguments.get(index).map(|word| word.text.clone()));
                            index += 1;
                        } else {
                            scripts.push(rest.to_string());
                        }
                        break;
                    }
                    'f' => {
                        script_from_file = true;
                        if rest.is_empty() {
                            index += 1;
                        }
                        break;
                    }
                    'l' => {
                        if rest.is_empty() {
                            index += 1;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
    }
    let mut verdict = Verdict::new(RiskLevel::L0, "`sed` only prints edited text");
    if script_from_file {
        verdict.raise_to(
            RiskLevel::L2,
            "`sed -f` runs a script from a file, which is not reviewed",
        );
    }
    for script in &scripts {
        if let Some((level, reason)) = sed_script_risk(script) {
            verdict.raise_to(level, reason);
        }
    }
    if in_place {
        verdict.raise_to(RiskLevel::L2, "`sed -i` edits files in place");
        verdict.written_paths.extend(files);
    }
    verdict
}

/// Reads a sed script for the commands that run programs (`e`, the `s///e` flag) or write
/// files (`w`, `W`, the `s///w` flag).
pub(super) fn sed_script_risk(script: &str) -> Option<(RiskLevel, &'static str)> {
    let characters: Vec<char> = script.chars().collect();
    let mut worst: Option<(RiskLevel, &'static str)> = None;
    let mut note = |level: RiskLevel, reason: &'static str| {
        if worst.is_none_or(|(known, _)| level > known) {
            worst = Some((level, reason));
        }
    };
    let mut index = 0;
    let skip_to = |index: usize, stops: &[char]| -> usize {
        characters
            .get(index..)
            .and_then(|rest| rest.iter().position(|c| stops.contains(c)))
            .map_or(characters.len(), |offset| index + offset)
    };
    while index < characters.len() {
        if matches!(characters[index], ' ' | '\t' | '\n' | ';' | '{' | '}' | '!') {
            index += 1;
            continue;
        }
        index = skip_sed_address(&characters, index);
        let Some(&command) = characters.get(index) else {
            break;
        };
        index += 1;
        match command {
            's' | 'y' => {
                let Some(&delimiter) = characters.get(index) else {
                    note(RiskLevel::L2, "the sed script is not understood");
                    break;
                };
                index += 1;
                for _ in 0..2 {
                    match skip_delimited(&characters, index, delimiter) {
                        Some(next) => index = next,
                        None => {
                            note(RiskLevel::L2, "the sed script is not understood");
                            return worst;
                        }
                    }
                }
                if command == 's' {
                    while let Some(&flag) = characters.get(index) {
                        if matches!(flag, ';' | '\n' | '}' | ' ' | '\t') {
                            break;
                        }
                        index += 1;
                        match flag {
                            'e' => note(
                                RiskLevel::L3,
                                "the sed `e` flag runs the result as a shell command",
                            ),
                            'w' => {
                                note(RiskLevel::L2, "the sed `w` flag writes a file");
                                index = skip_to(index, &['\n']);
                                break;
                            }
                            _ => {}
                        }
                    }
                }
            }
            'e' => {
                note(RiskLevel::L3, "the sed `e` command runs a shell command");
                index = skip_to(index, &['\n']);
            }
            'w' | 'W' => {
                note(RiskLevel::L2, "the sed `w` command writes a file");
                index = skip_to(index, &['\n']);
            }
            // Text, file names and comments run to the end of the line.
            'a' | 'i' | 'c' | 'r' | 'R' | '#' => index = skip_to(index, &['\n']),
            // Labels end at `;` or the end of the line.
            ':' | 'b' | 't' | 'T' | 'v' => index = skip_to(index, &[';', '\n']),
            'q' | 'Q' | 'l' | 'L' => {
                while characters
                    .get(index)
                    .is_some_and(|c| c.is_ascii_digit() || *c == ' ')
                {
                    index += 1;
                }
            }
            'p' | 'P' | 'd' | 'D' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | 'z' | '=' | 'F'
            | '{' | '}' => {}
            _ => {
                note(RiskLevel::L2, "the sed script is not understood");
                break;
            }
        }
    }
    worst
}

/// Skips a sed address (`3`, `$`, `/re/I`, `\,re,`, `1,5`, `0~2`, `addr!`) from `index`.
pub(super) fn skip_sed_address(characters: &[char], mut index: usize) -> usize {
    loop {
        match characters.get(index) {
            Some(c)
                if c.is_ascii_digit() || matches!(c, '$' | ',' | '~' | '+' | ' ' | '\t' | '!') =>
            {
                index += 1
            }
            Some('/') => match skip_delimited(characters, index + 1, '/') {
                Some(next) => {
                    index = next;
                    while matches!(characters.get(index), Some('I' | 'M')) {
                        index += 1;
                    }
                }
                None => return characters.len(),
            },
            Some('\\') => match characters.get(index + 1) {
                Some(&delimiter) => match skip_delimited(characters, index + 2, delimiter) {
                    Some(next) => index = next,
                    None => return characters.len(),
                },
                None => return characters.len(),
            },
            _ => return index,
        }
    }
}

/// From `index`, finds the unescaped `delimiter`; returns the index after it.
pub(super) fn skip_delimited(
    characters: &[char],
    mut index: usize,
    delimiter: char,
) -> Option<usize> {
    loop {
        match characters.get(index) {
            None => return None,
            Some('\\') => index += 2,
            Some(&c) if c == delimiter => return Some(index + 1),
            Some(_) => index += 1,
        }
    }
}

/// gawk's `-W name[=value]` is `--name[=value]` (`-W exec file`, `-Wexec=file`).
fn awk_arguments(arguments: &[Word]) -> Vec<String> {
    let mut texts = Vec::new();
    let mut index = 0;
    while let Some(word) = arguments.get(index) {
        index += 1;
        match word.text.strip_prefix("-W") {
            Some("") => {
                if let Some(next) = arguments.get(index) {
                    texts.push(format!("--{}", next.text));
                    index += 1;
                }
            }
            Some(name) => texts.push(format!("--{name}")),
            None => texts.push(word.text.clone()),
        }
    }
    texts
}

pub(super) fn classify_awk(arguments: &[Word]) -> Verdict {
    let texts = awk_arguments(arguments);
    let mut program_text: Option<&str> = None;
    let mut program_from_file = false;
    let mut writes_file = false;
    let mut index = 0;
    while let Some(text) = texts.get(index) {
        let text = text.as_str();
        index += 1;
        // gawk reads any unambiguous prefix of its long options (`--lo` is `--load`).
        let value_follows = !text.contains('=');
        match text {
            _ if option_is_any_of(text, &["-F", "-v", "--field-separator", "--assign"]) => {
                index += usize::from(value_follows);
            }
            _ if option_is_any_of(text, &["-f", "--file", "-i", "--include", "-E", "--exec"]) => {
                program_from_file = true;
                index += usize::from(value_follows);
            }
            _ if option_is_any_of(text, &["-l", "--load"]) => {
                return Verdict::new(RiskLevel::L3, "`awk --load` loads a compiled extension");
            }
            _ if option_is_any_of(text, &["-e", "--source"]) => {
                program_text = match text.split_once('=') {
                    Some((_, source)) => Some(source),
                    None => texts.get(index).map(String::as_str),
                };
                index += usize::from(value_follows);
            }
            _ if text.starts_with("-o")
                || text.starts_with("-p")
                || text.starts_with("-d")
                || option_is_any_of(text, &["--pretty-print", "--profile", "--dump-variables"]) =>
            {
                writes_file = true;
            }
            "--" => {
                if program_text.is_none() && !program_from_file {
                    program_text = texts.get(index).map(String::as_str);
                }
                break;
            }
            _ if text.starts_with('-') && text != "-" => {}
            _ => {
                if program_text.is_none() && !program_from_file {
                    program_text = Some(text);
                }
                break;
            }
        }
    }
    let mut verdict = Verdict::new(RiskLevel::L0, "`awk` only prints processed text");
    if writes_file {
        verdict.raise_to(
            RiskLevel::L2,
            "`awk -o`/`-p`/`-d` writes a pretty-printed program, a profile or variables to a file",
        );
    }
    if program_from_file {
        verdict.raise_to(
            RiskLevel::L2,
            "`awk -f` runs a program from a file, which is not reviewed",
        );
    }
    if let Some(program) = program_text
        && let Some((level, reason)) = awk_program_risk(program)
    {
        verdict.raise_to(level, reason);
    }
    verdict
}

/// Reads an awk program for shell commands (`system`, pipes to or from commands, coprocesses,
/// indirect calls, extensions) and for output redirected into files. The program is tokenized:
/// strings, regular expressions and comments are skipped, so a `;`, `>` or `|` inside them
/// neither ends a statement nor redirects; `>` and `|` redirect only at the top level of a
/// `print`/`printf` statement (inside parentheses `>` compares).
pub(super) fn awk_program_risk(program: &str) -> Option<(RiskLevel, &'static str)> {
    let tokens = match awk_tokens(program) {
        Some(tokens) => tokens,
        None => return Some((RiskLevel::L2, "the awk program is not understood")),
    };
    let mut worst: Option<(RiskLevel, &'static str)> = None;
    let mut in_print = false;
    let mut depth = 0usize;
    for (index, token) in tokens.iter().enumerate() {
        let next = tokens.get(index + 1).map(String::as_str);
        match token.as_str() {
            "system" => {
                return Some((
                    RiskLevel::L3,
                    "the awk program runs shell commands (`system`)",
                ));
            }
            "@load" => return Some((RiskLevel::L3, "the awk program loads a compiled extension")),
            "|&" => return Some((RiskLevel::L3, "the awk program starts a coprocess")),
            "|" if next == Some("getline") => {
                return Some((
                    RiskLevel::L3,
                    "the awk program reads the output of a shell command",
                ));
            }
            "|" if in_print && depth == 0 => {
                return Some((
                    RiskLevel::L3,
                    "the awk program pipes output into a shell command",
                ));
            }
            _ if token.starts_with('@') && token.len() > 1 && next == Some("(") => {
                return Some((
                    RiskLevel::L3,
                    "the awk program calls a function by name (it can be `system`)",
                ));
            }
            "@include" => {
                worst = Some((
                    RiskLevel::L2,
                    "the awk program includes a program file, which is not reviewed",
                ));
            }
            ">" | ">>" if in_print && depth == 0 => {
                worst = worst.max(Some((
                    RiskLevel::L2,
                    "the awk program writes files with `>`",
                )));
            }
            "print" | "printf" => {
                in_print = true;
                depth = 0;
            }
            "(" => depth += 1,
            ")" => depth = depth.saturating_sub(1),
            ";" | "\n" | "{" | "}" => in_print = false,
            _ => {}
        }
    }
    worst
}

/// Splits an awk program into tokens: names (`print`, `@load`), operators and punctuation, with
/// strings, regular expressions and comments replaced by `"…"` and `/…/`. None when a string
/// or regular expression does not end.
fn awk_tokens(program: &str) -> Option<Vec<String>> {
    let characters: Vec<char> = program.chars().collect();
    let mut tokens: Vec<String> = Vec::new();
    let mut index = 0;
    while let Some(&character) = characters.get(index) {
        let previous = tokens.last().map(String::as_str);
        match character {
            ' ' | '\t' | '\r' => index += 1,
            '\\' if characters.get(index + 1) == Some(&'\n') => index += 2,
            '\n' => {
                tokens.push("\n".to_string());
                index += 1;
            }
            '#' => {
                while characters.get(index).is_some_and(|&c| c != '\n') {
                    index += 1;
                }
            }
            '"' => {
                index = skip_delimited(&characters, index + 1, '"')?;
                tokens.push("\"…\"".to_string());
            }
            '/' if awk_operand_expected(previous) => {
                index = skip_awk_regex(&characters, index + 1)?;
                tokens.push("/…/".to_string());
            }
            _ if character.is_alphanumeric() || character == '_' || character == '@' => {
                let start = index;
                index += 1;
                while characters
                    .get(index)
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_')
                {
                    index += 1;
                }
                tokens.push(characters[start..index].iter().collect());
            }
            _ => {
                let pair: String = characters[index..characters.len().min(index + 2)]
                    .iter()
                    .collect();
                let operator = ["|&", "||", ">>", ">=", "&&", "==", "!=", "<="]
                    .into_iter()
                    .find(|operator| pair == *operator)
                    .map_or_else(|| character.to_string(), str::to_string);
                index += operator.chars().count();
                tokens.push(operator);
            }
        }
    }
    Some(tokens)
}

/// Whether a `/` after this token starts a regular expression (an operand is expected) rather
/// than a division.
fn awk_operand_expected(previous: Option<&str>) -> bool {
    match previous {
        None => true,
        Some(token) => {
            let ends_operand = token == ")"
                || token == "]"
                || token == "\"…\""
                || token == "/…/"
                || token
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
                    && !matches!(token, "print" | "printf" | "return" | "in");
            !ends_operand
        }
    }
}

/// From `index` (after the opening `/`), skips a regular expression through its closing `/`,
/// honouring escapes and bracket expressions (`/[/]/`).
fn skip_awk_regex(characters: &[char], mut index: usize) -> Option<usize> {
    let mut in_brackets = false;
    loop {
        match characters.get(index)? {
            '\\' => index += 2,
            '[' => {
                in_brackets = true;
                index += 1;
            }
            ']' => {
                in_brackets = false;
                index += 1;
            }
            '/' if !in_brackets => return Some(index + 1),
            '\n' => return None,
            _ => index += 1,
        }
    }
}
