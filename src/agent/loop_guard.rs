//! The loop guard: stops a run that goes in circles.
//!
//! Three independent limits: the number of model turns (by autonomy mode, 50 / 15 / 8, never above
//! the ceiling of 60), tail repetition (the same set of tool calls three turns in a row, or the same
//! single call attempted a third time in a row), and consecutive errors (three turns in which every
//! tool call failed).

use std::collections::VecDeque;

use crate::config::Autonomy;
use crate::llm::ToolCall;

/// No run makes more model calls than this, whatever the configuration says.
pub const TURN_CEILING: u32 = 60;
const REPEAT_LIMIT: usize = 3;
const ERROR_LIMIT: u32 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardStop {
    TurnLimit(u32),
    Repetition(String),
    ConsecutiveErrors(u32),
}

impl GuardStop {
    /// What the user is told.
    pub fn explain(&self) -> String {
        match self {
            GuardStop::TurnLimit(limit) => format!(
                "I stopped after {limit} steps without reaching an answer (the limit for this agent's autonomy mode)."
            ),
            GuardStop::Repetition(what) => {
                format!(
                    "I stopped because I was repeating myself ({what}) without making progress."
                )
            }
            GuardStop::ConsecutiveErrors(count) => {
                format!("I stopped after {count} turns in a row in which every tool call failed.")
            }
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            GuardStop::TurnLimit(_) => "turn_limit",
            GuardStop::Repetition(_) => "repetition",
            GuardStop::ConsecutiveErrors(_) => "consecutive_errors",
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoopGuard {
    limit: u32,
    turns: u32,
    recent_turns: VecDeque<String>,
    last_call: Option<(String, usize)>,
    consecutive_errors: u32,
}

fn signature(call: &ToolCall) -> String {
    // Key order in the model's JSON should not hide a repetition: compare parsed values.
    let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| call.arguments.clone());
    format!("{}({arguments})", call.name)
}

impl LoopGuard {
    pub fn new(autonomy: Autonomy) -> LoopGuard {
        LoopGuard::with_limit(autonomy.turn_limit())
    }

    pub fn with_limit(limit: u32) -> LoopGuard {
        LoopGuard {
            limit: limit.clamp(1, TURN_CEILING),
            turns: 0,
            recent_turns: VecDeque::new(),
            last_call: None,
            consecutive_errors: 0,
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Called before each model call.
    pub fn before_turn(&mut self) -> Result<(), GuardStop> {
        if self.turns >= self.limit {
            return Err(GuardStop::TurnLimit(self.limit));
        }
        self.turns += 1;
        Ok(())
    }

    /// A reason to refuse this call, when it is the third identical attempt in a row.
    pub fn check_call(&self, call: &ToolCall) -> Option<String> {
        let sig = signature(call);
        match &self.last_call {
            Some((last, count)) if *last == sig && *count + 1 >= REPEAT_LIMIT => Some(format!(
                "`{}` was already called {count} times in a row with the same arguments",
                call.name
            )),
            _ => None,
        }
    }

    /// Called after a turn's tool calls ran, with how many of them failed.
    pub fn after_calls(&mut self, calls: &[ToolCall], failed: usize) -> Result<(), GuardStop> {
        for call in calls {
            let sig = signature(call);
            self.last_call = match self.last_call.take() {
                Some((last, count)) if last == sig => Some((last, count + 1)),
                _ => Some((sig, 1)),
            };
        }
        let turn_sig = calls.iter().map(signature).collect::<Vec<_>>().join(";");
        self.recent_turns.push_back(turn_sig.clone());
        if self.recent_turns.len() > REPEAT_LIMIT {
            self.recent_turns.pop_front();
        }
        if self.recent_turns.len() == REPEAT_LIMIT
            && self.recent_turns.iter().all(|t| *t == turn_sig)
        {
            let names: Vec<&str> = calls.iter().map(|call| call.name.as_str()).collect();
            return Err(GuardStop::Repetition(format!(
                "the same calls to {} {REPEAT_LIMIT} turns in a row",
                names.join(", ")
            )));
        }
        if !calls.is_empty() && failed == calls.len() {
            self.consecutive_errors += 1;
            if self.consecutive_errors >= ERROR_LIMIT {
                return Err(GuardStop::ConsecutiveErrors(self.consecutive_errors));
            }
        } else {
            self.consecutive_errors = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    #[test]
    fn limits_follow_autonomy_and_the_ceiling() {
        assert_eq!(LoopGuard::new(Autonomy::TrustFirst).limit(), 50);
        assert_eq!(LoopGuard::new(Autonomy::RequireApproval).limit(), 15);
        assert_eq!(LoopGuard::new(Autonomy::Supervised).limit(), 8);
        assert_eq!(LoopGuard::with_limit(500).limit(), TURN_CEILING);
        let mut guard = LoopGuard::with_limit(2);
        assert!(guard.before_turn().is_ok());
        assert!(guard.before_turn().is_ok());
        assert_eq!(guard.before_turn(), Err(GuardStop::TurnLimit(2)));
    }

    #[test]
    fn the_same_turn_three_times_stops_and_key_order_does_not_hide_it() {
        let mut guard = LoopGuard::with_limit(50);
        assert!(
            guard
                .after_calls(&[call("read_file", r#"{"a":1,"b":2}"#)], 0)
                .is_ok()
        );
        assert!(
            guard
                .after_calls(&[call("read_file", r#"{"b":2,"a":1}"#)], 0)
                .is_ok()
        );
        assert!(
            guard
                .check_call(&call("read_file", r#"{"a":1,"b":2}"#))
                .is_some()
        );
        assert!(matches!(
            guard.after_calls(&[call("read_file", r#"{"a":1,"b":2}"#)], 0),
            Err(GuardStop::Repetition(_))
        ));
    }

    #[test]
    fn progress_resets_the_error_count() {
        let mut guard = LoopGuard::with_limit(50);
        assert!(guard.after_calls(&[call("a", "1")], 1).is_ok());
        assert!(guard.after_calls(&[call("b", "2")], 1).is_ok());
        assert!(guard.after_calls(&[call("c", "3")], 0).is_ok());
        assert!(guard.after_calls(&[call("d", "4")], 1).is_ok());
        assert!(guard.after_calls(&[call("e", "5")], 1).is_ok());
        assert_eq!(
            guard.after_calls(&[call("f", "6")], 1),
            Err(GuardStop::ConsecutiveErrors(3))
        );
    }
}
