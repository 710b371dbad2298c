//! Lexing: the command text becomes words, operators and redirections, as the shell reads it.

use super::expansions::{parameter_expansion_is_modelled, starts_brace_sequence};

// ---------------------------------------------------------------------------------------------
// Lexing: the command text becomes words, operators and redirections, as a POSIX shell reads it.
// ---------------------------------------------------------------------------------------------

/// A word after quote removal.
#[derive(Debug, Clone, Default)]
pub(super) struct Word {
    pub(super) text: String,
    /// Byte offset in `text` of the first character that came from quotes or an escape.
    pub(super) first_quoted_at: Option<usize>,
    /// The word holds a `$` expansion, so its final text is only known when the shell runs it.
    pub(super) expands_variable: bool,
    /// Unquoted characters that drive glob and brace expansion (`*?[]{},`), in order.
    pub(super) unquoted_pattern_characters: String,
    /// Byte offset in `text` where the first `$` or backtick expansion begins.
    pub(super) first_expansion_at: Option<usize>,
    /// An expansion outside double quotes: the shell splits its value into words and globs them.
    pub(super) expands_unquoted: bool,
}

impl Word {
    /// Whether the shell would expand the word as a file name pattern.
    pub(super) fn globs(&self) -> bool {
        let pattern = &self.unquoted_pattern_characters;
        pattern.contains(['*', '?'])
            || pattern
                .find('[')
                .is_some_and(|open| pattern[open..].contains(']'))
    }

    /// The word as a wrapped program (`env`, `nice`, `xargs`, `find -exec`, …) receives it in
    /// its argv: the shell has removed the quotes, so quoting decides nothing any more —
    /// `env 'LD_PRELOAD=x' ls` sets `LD_PRELOAD` just as `env LD_PRELOAD=x ls` does.
    pub(super) fn as_argument(&self) -> Word {
        Word {
            first_quoted_at: None,
            ..self.clone()
        }
    }

    /// Whether the word holds a brace expansion (`{a,b}`).
    pub(super) fn has_brace_expansion(&self) -> bool {
        let pattern = &self.unquoted_pattern_characters;
        pattern.find('{').is_some_and(|open| {
            let after_open = &pattern[open..];
            after_open
                .find(',')
                .is_some_and(|comma| after_open[comma..].contains('}'))
        })
    }
}

/// What separates two simple commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Separator {
    And,
    Or,
    Sequence,
    Pipe,
    Background,
    Newline,
    /// `(` or `)`: a subshell or a function definition.
    Group,
}

/// Whether a here-document's lines may be indented with tabs (`<<-`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TabStripping {
    Keep,
    Strip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirectOperator {
    Input,
    Output,
    Append,
    ReadWrite,
    HereDocument(TabStripping),
    HereString,
    /// `>&N`, `>&-`, or `>&file` (bash: both streams into the file).
    DuplicateOutput,
    DuplicateInput,
}

impl RedirectOperator {
    pub(super) fn symbol(self) -> &'static str {
        match self {
            RedirectOperator::Input => "<",
            RedirectOperator::Output => ">",
            RedirectOperator::Append => ">>",
            RedirectOperator::ReadWrite => "<>",
            RedirectOperator::HereDocument(TabStripping::Keep) => "<<",
            RedirectOperator::HereDocument(TabStripping::Strip) => "<<-",
            RedirectOperator::HereString => "<<<",
            RedirectOperator::DuplicateOutput => ">&",
            RedirectOperator::DuplicateInput => "<&",
        }
    }
}

#[derive(Debug, Clone)]
pub(super) enum Token {
    Word(Word),
    Separator(Separator),
    Redirect(RedirectOperator),
}

/// Whether a character came from inside quotes (or an escape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Quoting {
    Quoted,
    Unquoted,
}

/// Why lexing stopped; the shell would read the command differently from us, so it is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LexError {
    UnbalancedQuotes,
    UnbalancedExpansion,
}

impl LexError {
    pub(super) fn reason(self) -> &'static str {
        match self {
            LexError::UnbalancedQuotes => "unbalanced quotes",
            LexError::UnbalancedExpansion => "unbalanced `$(`, `${` or backtick",
        }
    }
}

pub(super) struct HereDocument {
    pub(super) delimiter: String,
    pub(super) stripping: TabStripping,
    /// An unquoted delimiter means the body is expanded, so `$(…)` in it runs.
    pub(super) expands: bool,
}

pub(super) struct Lexed {
    pub(super) tokens: Vec<Token>,
    /// Descriptions of the hidden commands found (command substitution and the like).
    pub(super) hidden_commands: Vec<&'static str>,
    /// Bash constructs the classifier does not model (each makes the command L3).
    pub(super) unmodelled_constructs: Vec<&'static str>,
}

pub(super) struct Lexer {
    pub(super) characters: Vec<char>,
    pub(super) position: usize,
    pub(super) tokens: Vec<Token>,
    pub(super) word: Word,
    pub(super) word_started: bool,
    pub(super) hidden_commands: Vec<&'static str>,
    pub(super) unmodelled_constructs: Vec<&'static str>,
    pub(super) here_document_delimiter_expected: Option<TabStripping>,
    pub(super) pending_here_documents: Vec<HereDocument>,
}

pub(super) fn lex(command: &str) -> Result<Lexed, LexError> {
    let mut lexer = Lexer {
        characters: command.chars().collect(),
        position: 0,
        tokens: Vec::new(),
        word: Word::default(),
        word_started: false,
        hidden_commands: Vec::new(),
        unmodelled_constructs: Vec::new(),
        here_document_delimiter_expected: None,
        pending_here_documents: Vec::new(),
    };
    lexer.run()?;
    Ok(Lexed {
        tokens: lexer.tokens,
        hidden_commands: lexer.hidden_commands,
        unmodelled_constructs: lexer.unmodelled_constructs,
    })
}

impl Lexer {
    pub(super) fn peek(&self, offset: usize) -> Option<char> {
        self.characters.get(self.position + offset).copied()
    }

    pub(super) fn run(&mut self) -> Result<(), LexError> {
        while let Some(character) = self.peek(0) {
            match character {
                ' ' | '\t' => {
                    self.finish_word();
                    self.position += 1;
                }
                '\n' => {
                    self.finish_word();
                    self.tokens.push(Token::Separator(Separator::Newline));
                    self.position += 1;
                    self.skip_here_document_bodies();
                }
                '\\' => self.lex_backslash(),
                '\'' => self.lex_single_quotes()?,
                '"' => self.lex_double_quotes()?,
                '`' => {
                    self.note_hidden("command substitution with backticks");
                    let raw = self.take_backticks()?;
                    self.mark_expansion(Quoting::Unquoted);
                    self.push_text(&raw, Quoting::Unquoted);
                }
                '$' => self.lex_dollar(Quoting::Unquoted)?,
                '#' if !self.word_started => self.skip_comment(),
                '&' => self.lex_ampersand(),
                '|' => self.lex_pipe(),
                ';' => self.lex_semicolon(),
                '(' => {
                    if self.peek(1) == Some('(') {
                        self.note_hidden("arithmetic evaluation `((…))`");
                    }
                    // `@(a|b)`, `!(x)`, `*(x)`, `+(x)`, `?(x)`: extglob patterns, or syntax
                    // errors when extglob is off; either way not what the lexer models.
                    if self.word_started && self.word.text.ends_with(['@', '!', '*', '+', '?']) {
                        self.note_unmodelled("an extended glob pattern such as `@(…)`");
                    }
                    self.finish_word();
                    self.tokens.push(Token::Separator(Separator::Group));
                    self.position += 1;
                }
                ')' => {
                    self.finish_word();
                    self.tokens.push(Token::Separator(Separator::Group));
                    self.position += 1;
                }
                '<' | '>' => self.lex_angle_bracket()?,
                '{' if starts_brace_sequence(&self.characters[self.position..]) => {
                    self.note_unmodelled("a brace sequence expression `{a..b}`");
                    self.word.unquoted_pattern_characters.push('{');
                    self.push_character('{', Quoting::Unquoted);
                    self.position += 1;
                }
                '*' | '?' | '[' | ']' | '{' | '}' | ',' => {
                    self.word.unquoted_pattern_characters.push(character);
                    self.push_character(character, Quoting::Unquoted);
                    self.position += 1;
                }
                other => {
                    self.push_character(other, Quoting::Unquoted);
                    self.position += 1;
                }
            }
        }
        self.finish_word();
        Ok(())
    }

    pub(super) fn note_unmodelled(&mut self, description: &'static str) {
        if !self.unmodelled_constructs.contains(&description) {
            self.unmodelled_constructs.push(description);
        }
    }

    /// Bash removes a backslash-newline before it reads operators and expansions, so `$\⏎(` is
    /// `$(` and `>\⏎>` is `>>`. Joining words is modelled; joining anything else is not.
    fn check_line_continuation(&mut self) {
        let before = self
            .position
            .checked_sub(1)
            .and_then(|index| self.characters.get(index))
            .copied();
        let after = self.peek(2);
        let joins_syntax = before.is_some_and(|c| "$&|;<>(".contains(c))
            || after.is_some_and(|c| "&|;<>(){".contains(c));
        if joins_syntax {
            self.note_unmodelled("a backslash-newline inside an operator or an expansion");
        }
    }

    pub(super) fn note_hidden(&mut self, description: &'static str) {
        if !self.hidden_commands.contains(&description) {
            self.hidden_commands.push(description);
        }
    }

    /// Records that an expansion starts here, at the word's current end.
    pub(super) fn mark_expansion(&mut self, quoting: Quoting) {
        self.word.expands_variable = true;
        self.word
            .first_expansion_at
            .get_or_insert(self.word.text.len());
        self.word.expands_unquoted |= quoting == Quoting::Unquoted;
    }

    pub(super) fn push_character(&mut self, character: char, quoting: Quoting) {
        if quoting == Quoting::Quoted && self.word.first_quoted_at.is_none() {
            self.word.first_quoted_at = Some(self.word.text.len());
        }
        self.word.text.push(character);
        self.word_started = true;
    }

    pub(super) fn push_text(&mut self, text: &str, quoting: Quoting) {
        for character in text.chars() {
            self.push_character(character, quoting);
        }
        self.word_started = true;
    }

    /// Marks the word as started and quoted even when the quotes are empty (`''` is a word).
    pub(super) fn mark_quoted(&mut self) {
        if self.word.first_quoted_at.is_none() {
            self.word.first_quoted_at = Some(self.word.text.len());
        }
        self.word_started = true;
    }

    pub(super) fn finish_word(&mut self) {
        if !self.word_started {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.word_started = false;
        if let Some(stripping) = self.here_document_delimiter_expected.take() {
            self.pending_here_documents.push(HereDocument {
                delimiter: word.text.clone(),
                stripping,
                expands: word.first_quoted_at.is_none(),
            });
        }
        self.tokens.push(Token::Word(word));
    }

    pub(super) fn lex_backslash(&mut self) {
        match self.peek(1) {
            // A backslash before a newline joins the lines.
            Some('\n') => {
                self.check_line_continuation();
                self.position += 2
            }
            Some(next) => {
                self.push_character(next, Quoting::Quoted);
                self.position += 2;
            }
            None => {
                self.push_character('\\', Quoting::Unquoted);
                self.position += 1;
            }
        }
    }

    pub(super) fn lex_single_quotes(&mut self) -> Result<(), LexError> {
        let start = self.position + 1;
        let Some(length) = self.characters[start..].iter().position(|&c| c == '\'') else {
            return Err(LexError::UnbalancedQuotes);
        };
        self.mark_quoted();
        let content: String = self.characters[start..start + length].iter().collect();
        self.push_text(&content, Quoting::Quoted);
        self.position = start + length + 1;
        Ok(())
    }

    pub(super) fn lex_double_quotes(&mut self) -> Result<(), LexError> {
        self.mark_quoted();
        self.position += 1;
        loop {
            let Some(character) = self.peek(0) else {
                return Err(LexError::UnbalancedQuotes);
            };
            match character {
                '"' => {
                    self.position += 1;
                    return Ok(());
                }
                '\\' => match self.peek(1) {
                    Some('\n') => {
                        self.check_line_continuation();
                        self.position += 2
                    }
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        self.push_character(next, Quoting::Quoted);
                        self.position += 2;
                    }
                    _ => {
                        self.push_character('\\', Quoting::Quoted);
                        self.position += 1;
                    }
                },
                '`' => {
                    self.note_hidden("command substitution with backticks");
                    let raw = self.take_backticks()?;
                    self.mark_expansion(Quoting::Quoted);
                    self.push_text(&raw, Quoting::Quoted);
                }
                '$' => self.lex_dollar(Quoting::Quoted)?,
                other => {
                    self.push_character(other, Quoting::Quoted);
                    self.position += 1;
                }
            }
        }
    }

    pub(super) fn lex_dollar(&mut self, quoting: Quoting) -> Result<(), LexError> {
        match self.peek(1) {
            Some('(') => {
                if self.peek(2) == Some('(') {
                    self.note_hidden("arithmetic expansion `$((…))`");
                } else {
                    self.note_hidden("command substitution `$(…)`");
                }
                let raw = self.take_balanced('(', ')')?;
                self.mark_expansion(quoting);
                self.push_text(&raw, quoting);
            }
            Some('{') => {
                let raw = self.take_balanced('{', '}')?;
                if raw.contains("$(") || raw.contains('`') {
                    self.note_hidden("command substitution `$(…)`");
                }
                if !parameter_expansion_is_modelled(&raw) {
                    self.note_unmodelled(
                        "a parameter expansion operator (`${x@P}`, `${!x}`, `${a[i]}`, …)",
                    );
                }
                self.mark_expansion(quoting);
                self.push_text(&raw, quoting);
            }
            Some('\'') if quoting == Quoting::Unquoted => {
                self.position += 2;
                self.mark_quoted();
                let decoded = self.take_ansi_c_quoted()?;
                self.push_text(&decoded, Quoting::Quoted);
            }
            // `$"…"` is a translated string: a message catalog may replace its text.
            Some('"') if quoting == Quoting::Unquoted => {
                self.note_unmodelled("a locale-translated string `$\"…\"`");
                self.position += 1
            }
            // `$[…]` is the old arithmetic expansion, which can run `a[$(…)]`.
            Some('[') => {
                self.note_unmodelled("arithmetic expansion `$[…]`");
                self.mark_expansion(quoting);
                self.push_character('$', quoting);
                self.position += 1;
            }
            Some(next) if next.is_ascii_alphanumeric() || "_@*#?-$!".contains(next) => {
                self.mark_expansion(quoting);
                self.push_character('$', quoting);
                self.position += 1;
            }
            _ => {
                self.push_character('$', quoting);
                self.position += 1;
            }
        }
        Ok(())
    }

    /// Takes `$(…)`, `${…}`, `<(…)` from the current position (the `$`, `<` or `>`) through the
    /// matching close, skipping quoted text; returns the raw text.
    pub(super) fn take_balanced(&mut self, open: char, close: char) -> Result<String, LexError> {
        let start = self.position;
        let mut index = self.position + 1;
        let mut depth = 0usize;
        loop {
            let Some(&character) = self.characters.get(index) else {
                return Err(LexError::UnbalancedExpansion);
            };
            match character {
                '\\' => {
                    index += 2;
                    continue;
                }
                '\'' => {
                    let Some(length) = self
                        .characters
                        .get(index + 1..)
                        .and_then(|rest| rest.iter().position(|&c| c == '\''))
                    else {
                        return Err(LexError::UnbalancedQuotes);
                    };
                    index += length + 2;
                    continue;
                }
                '"' => {
                    index = self.closing_double_quote(index + 1)? + 1;
                    continue;
                }
                '`' => {
                    index = self.closing_backtick(index + 1)? + 1;
                    continue;
                }
                _ if character == open => depth += 1,
                _ if character == close => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            index += 1;
        }
        let raw = self.characters[start..=index].iter().collect();
        self.position = index + 1;
        Ok(raw)
    }

    pub(super) fn closing_double_quote(&self, from: usize) -> Result<usize, LexError> {
        let mut index = from;
        loop {
            match self.characters.get(index) {
                None => return Err(LexError::UnbalancedQuotes),
                Some('\\') => index += 2,
                Some('"') => return Ok(index),
                Some(_) => index += 1,
            }
        }
    }

    pub(super) fn closing_backtick(&self, from: usize) -> Result<usize, LexError> {
        let mut index = from;
        loop {
            match self.characters.get(index) {
                None => return Err(LexError::UnbalancedExpansion),
                Some('\\') => index += 2,
                Some('`') => return Ok(index),
                Some(_) => index += 1,
            }
        }
    }

    pub(super) fn take_backticks(&mut self) -> Result<String, LexError> {
        let start = self.position;
        let end = self.closing_backtick(start + 1)?;
        let raw = self.characters[start..=end].iter().collect();
        self.position = end + 1;
        Ok(raw)
    }

    /// Decodes `$'…'` (ANSI-C quoting) from just after the opening quote: `$'\x72m'` is `rm`.
    pub(super) fn take_ansi_c_quoted(&mut self) -> Result<String, LexError> {
        let mut decoded = String::new();
        loop {
            let Some(character) = self.peek(0) else {
                return Err(LexError::UnbalancedQuotes);
            };
            self.position += 1;
            match character {
                '\'' => return Ok(decoded),
                '\\' => {
                    let Some(escaped) = self.peek(0) else {
                        return Err(LexError::UnbalancedQuotes);
                    };
                    self.position += 1;
                    match escaped {
                        'a' => decoded.push('\x07'),
                        'b' => decoded.push('\x08'),
                        'e' | 'E' => decoded.push('\x1b'),
                        'f' => decoded.push('\x0c'),
                        'n' => decoded.push('\n'),
                        'r' => decoded.push('\r'),
                        't' => decoded.push('\t'),
                        'v' => decoded.push('\x0b'),
                        '\\' | '\'' | '"' | '?' => decoded.push(escaped),
                        'x' => self.push_numeric_escape(&mut decoded, 16, 2, "\\x"),
                        'u' => self.push_numeric_escape(&mut decoded, 16, 4, "\\u"),
                        'U' => self.push_numeric_escape(&mut decoded, 16, 8, "\\U"),
                        '0'..='7' => {
                            self.position -= 1;
                            self.push_numeric_escape(&mut decoded, 8, 3, "\\");
                        }
                        'c' => {
                            if let Some(control) = self.peek(0) {
                                self.position += 1;
                                let code = u32::from(control) & 0x1f;
                                decoded.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            }
                        }
                        other => {
                            decoded.push('\\');
                            decoded.push(other);
                        }
                    }
                }
                other => decoded.push(other),
            }
        }
    }

    pub(super) fn push_numeric_escape(
        &mut self,
        decoded: &mut String,
        radix: u32,
        max_digits: usize,
        literal: &str,
    ) {
        let mut value: u32 = 0;
        let mut digits = 0;
        while digits < max_digits {
            let Some(digit) = self.peek(0).and_then(|c| c.to_digit(radix)) else {
                break;
            };
            value = value.saturating_mul(radix).saturating_add(digit);
            digits += 1;
            self.position += 1;
        }
        if digits == 0 {
            decoded.push_str(literal);
        } else if value == 0 {
            // Bash cuts the string at a NUL; what follows would be read differently.
            self.note_unmodelled("a NUL byte in `$'…'`");
        } else {
            decoded.push(char::from_u32(value).unwrap_or('\u{fffd}'));
        }
    }

    pub(super) fn skip_comment(&mut self) {
        while let Some(character) = self.peek(0) {
            if character == '\n' {
                break;
            }
            self.position += 1;
        }
    }

    pub(super) fn lex_ampersand(&mut self) {
        self.finish_word();
        match (self.peek(1), self.peek(2)) {
            (Some('&'), _) => {
                self.tokens.push(Token::Separator(Separator::And));
                self.position += 2;
            }
            (Some('>'), Some('>')) => {
                self.tokens.push(Token::Redirect(RedirectOperator::Append));
                self.position += 3;
            }
            (Some('>'), _) => {
                self.tokens.push(Token::Redirect(RedirectOperator::Output));
                self.position += 2;
            }
            _ => {
                self.tokens.push(Token::Separator(Separator::Background));
                self.position += 1;
            }
        }
    }

    pub(super) fn lex_pipe(&mut self) {
        self.finish_word();
        match self.peek(1) {
            Some('|') => {
                self.tokens.push(Token::Separator(Separator::Or));
                self.position += 2;
            }
            // `|&` pipes standard error too.
            Some('&') => {
                self.tokens.push(Token::Separator(Separator::Pipe));
                self.position += 2;
            }
            _ => {
                self.tokens.push(Token::Separator(Separator::Pipe));
                self.position += 1;
            }
        }
    }

    pub(super) fn lex_semicolon(&mut self) {
        self.finish_word();
        let length = match (self.peek(1), self.peek(2)) {
            (Some(';'), Some('&')) => 3,
            (Some(';' | '&'), _) => 2,
            _ => 1,
        };
        self.tokens.push(Token::Separator(Separator::Sequence));
        self.position += length;
    }

    pub(super) fn lex_angle_bracket(&mut self) -> Result<(), LexError> {
        let Some(character) = self.peek(0) else {
            return Ok(());
        };
        if self.peek(1) == Some('(') {
            self.note_hidden("process substitution `<(…)`");
            self.finish_word();
            let raw = self.take_balanced('(', ')')?;
            self.mark_expansion(Quoting::Unquoted);
            self.push_text(&raw, Quoting::Unquoted);
            return Ok(());
        }
        // A word made only of digits right before the operator names a file descriptor (`2>`).
        let names_descriptor = self.word_started
            && self.word.first_quoted_at.is_none()
            && !self.word.text.is_empty()
            && self.word.text.chars().all(|c| c.is_ascii_digit());
        if names_descriptor {
            self.word = Word::default();
            self.word_started = false;
        } else {
            self.finish_word();
        }
        let (operator, length) = match (character, self.peek(1), self.peek(2)) {
            ('<', Some('<'), Some('<')) => (RedirectOperator::HereString, 3),
            ('<', Some('<'), Some('-')) => (RedirectOperator::HereDocument(TabStripping::Strip), 3),
            ('<', Some('<'), _) => (RedirectOperator::HereDocument(TabStripping::Keep), 2),
            ('<', Some('>'), _) => (RedirectOperator::ReadWrite, 2),
            ('<', Some('&'), _) => (RedirectOperator::DuplicateInput, 2),
            ('<', _, _) => (RedirectOperator::Input, 1),
            (_, Some('>'), _) => (RedirectOperator::Append, 2),
            (_, Some('|'), _) => (RedirectOperator::Output, 2),
            (_, Some('&'), _) => (RedirectOperator::DuplicateOutput, 2),
            _ => (RedirectOperator::Output, 1),
        };
        if let RedirectOperator::HereDocument(stripping) = operator {
            self.here_document_delimiter_expected = Some(stripping);
        }
        self.tokens.push(Token::Redirect(operator));
        self.position += length;
        Ok(())
    }

    /// Skips the bodies of the here-documents opened on the line that just ended. Their text is
    /// data, not commands, but an unquoted delimiter means `$(…)` inside still runs.
    pub(super) fn skip_here_document_bodies(&mut self) {
        let documents = std::mem::take(&mut self.pending_here_documents);
        for document in documents {
            while self.position < self.characters.len() {
                let line_end = self.characters[self.position..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.characters.len(), |offset| self.position + offset);
                let line: String = self.characters[self.position..line_end].iter().collect();
                self.position = (line_end + 1).min(self.characters.len());
                let compared = match document.stripping {
                    TabStripping::Strip => line.trim_start_matches('\t'),
                    TabStripping::Keep => line.as_str(),
                };
                if compared == document.delimiter {
                    break;
                }
                if document.expands && (line.contains("$(") || line.contains('`')) {
                    self.note_hidden("command substitution in a here-document");
                }
                if document.expands && line.ends_with('\\') {
                    // Bash joins the next line before looking for the delimiter.
                    self.note_unmodelled("a backslash-newline in a here-document body");
                }
                if document.expands
                    && (line.contains("$[")
                        || line
                            .match_indices("${")
                            .any(|(at, _)| !parameter_expansion_is_modelled(&line[at..])))
                {
                    self.note_unmodelled("a parameter expansion operator in a here-document");
                }
            }
        }
    }
}
