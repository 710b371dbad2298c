//! Splitting tokens into simple commands.

use super::*;

// ---------------------------------------------------------------------------------------------
// Splitting tokens into simple commands.
// ---------------------------------------------------------------------------------------------

/// Where a simple command's standard input comes from, as far as the command line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StandardInput {
    Inherited,
    Pipe,
    HereDocument,
}

#[derive(Debug, Clone)]
pub(super) struct Redirection {
    pub(super) operator: RedirectOperator,
    pub(super) target: Word,
}

#[derive(Debug, Clone)]
pub(super) struct SimpleCommand {
    pub(super) words: Vec<Word>,
    pub(super) redirections: Vec<Redirection>,
    pub(super) input: StandardInput,
}

impl SimpleCommand {
    pub(super) fn new(input: StandardInput) -> SimpleCommand {
        SimpleCommand {
            words: Vec::new(),
            redirections: Vec::new(),
            input,
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.words.is_empty() && self.redirections.is_empty()
    }
}

/// Groups tokens into simple commands; also returns the syntax problems found.
pub(super) fn split_into_simple_commands(
    tokens: Vec<Token>,
) -> (Vec<SimpleCommand>, Vec<&'static str>) {
    let mut commands = Vec::new();
    let mut problems = Vec::new();
    let mut current = SimpleCommand::new(StandardInput::Inherited);
    let mut tokens = tokens.into_iter().peekable();
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(word) => current.words.push(word),
            Token::Redirect(operator) => {
                match tokens.next_if(|next| matches!(next, Token::Word(_))) {
                    Some(Token::Word(target)) => {
                        current.redirections.push(Redirection { operator, target })
                    }
                    _ => {
                        if !problems.contains(&"a redirection has no target") {
                            problems.push("a redirection has no target");
                        }
                    }
                }
            }
            Token::Separator(separator) => {
                let input = match separator {
                    Separator::Pipe => StandardInput::Pipe,
                    // `cat x | (sh)`: the subshell still reads the pipe.
                    Separator::Group if current.is_empty() => current.input,
                    _ => StandardInput::Inherited,
                };
                let finished = std::mem::replace(&mut current, SimpleCommand::new(input));
                if !finished.is_empty() {
                    commands.push(finished);
                }
            }
        }
    }
    if !current.is_empty() {
        commands.push(current);
    }
    (commands, problems)
}

pub(super) fn display_simple_command(command: &SimpleCommand) -> String {
    let mut pieces: Vec<String> = command.words.iter().map(|word| word.text.clone()).collect();
    for redirection in &command.redirections {
        pieces.push(format!(
            "{}{}",
            redirection.operator.symbol(),
            redirection.target.text
        ));
    }
    quote_for_reason(&pieces.join(" "))
}

pub(super) fn display_words(words: &[Word]) -> String {
    let texts: Vec<&str> = words.iter().map(|word| word.text.as_str()).collect();
    quote_for_reason(&texts.join(" "))
}
