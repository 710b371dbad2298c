//! The agent's daily budgets: `daily_budget_usd` (dollars, so priced models only) and
//! `daily_token_budget` (input plus output tokens of every model, priced or not, so that a
//! model without a price cannot run up an unbounded bill). Both are per agent and per UTC day,
//! summed from `cost_events`. A new run is checked before it starts; a running run before each
//! further model call, so a long tool loop stops once the day's budget is spent. Either way the
//! run ends `budget_stopped` and the user is told which budget, and when it resets.

use serde_json::json;

use super::{Ending, RunCtx};
use crate::config::AgentSpec;
use crate::store::StoreError;
use crate::store::runs::{self, DayUsage, NewStep, RunStatus};

/// When the check runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum When {
    /// Before a new run calls the model at all.
    BeforeRun,
    /// Before a further model call of a run under way.
    MidRun,
}

/// The budget that is used up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Exceeded {
    Usd { spent: f64, limit: f64 },
    Tokens { used: i64, limit: u64 },
}

/// The first used-up budget of `spec` given what the agent used today (dollars first).
pub(super) fn exceeded(spec: &AgentSpec, today: DayUsage) -> Option<Exceeded> {
    if spec.daily_budget_usd > 0.0 && today.cost_usd >= spec.daily_budget_usd {
        return Some(Exceeded::Usd {
            spent: today.cost_usd,
            limit: spec.daily_budget_usd,
        });
    }
    let limit = spec.daily_token_budget;
    (limit > 0 && today.tokens >= i64::try_from(limit).unwrap_or(i64::MAX)).then_some(
        Exceeded::Tokens {
            used: today.tokens,
            limit,
        },
    )
}

/// Until the next midnight UTC (when `cost_events.day` changes), in words: `5 h 12 min`.
pub(super) fn until_reset(now_ms: i64) -> String {
    let left_ms = runs::next_day_start_ms(now_ms) - now_ms;
    let minutes = (left_ms + 59_999) / 60_000;
    match (minutes / 60, minutes % 60) {
        (0, minutes) => format!("{minutes} min"),
        (hours, 0) => format!("{hours} h"),
        (hours, minutes) => format!("{hours} h {minutes} min"),
    }
}

/// `1234567` as `1,234,567`.
pub(super) fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

impl Exceeded {
    /// The key in the agent file that sets this budget.
    pub(super) fn key(self) -> &'static str {
        match self {
            Exceeded::Usd { .. } => "daily_budget_usd",
            Exceeded::Tokens { .. } => "daily_token_budget",
        }
    }

    /// What the user is told.
    pub(super) fn message(self, agent: &str, when: When, now_ms: i64) -> String {
        let what = match self {
            Exceeded::Usd { spent, limit } => {
                format!("today's budget for {agent} (${limit:.2}) is used up (${spent:.2} spent)")
            }
            Exceeded::Tokens { used, limit } => format!(
                "today's token budget for {agent} ({} tokens) is used up ({} used)",
                thousands(limit),
                thousands(u64::try_from(used).unwrap_or(0))
            ),
        };
        let reset = format!(
            "It resets at midnight UTC (in {}), or the operator can raise {}.",
            until_reset(now_ms),
            self.key()
        );
        match when {
            When::BeforeRun => {
                let mut what = what;
                if let Some(first) = what.get(..1) {
                    what.replace_range(..1, &first.to_uppercase());
                }
                format!("{what}, so I cannot answer now. {reset}")
            }
            When::MidRun => format!("I stopped before finishing: {what}. {reset}"),
        }
    }

    /// The recorded step's detail.
    pub(super) fn detail(self, when: When) -> serde_json::Value {
        let midway = when == When::MidRun;
        match self {
            Exceeded::Usd { spent, limit } => json!({
                "budget": self.key(), "spent_usd": spent, "budget_usd": limit, "mid_run": midway,
            }),
            Exceeded::Tokens { used, limit } => json!({
                "budget": self.key(), "used_tokens": used, "budget_tokens": limit, "mid_run": midway,
            }),
        }
    }
}

/// Stops the run (recording why) when one of the agent's daily budgets is used up.
pub(super) async fn check(ctx: &RunCtx, when: When) -> Result<Option<Ending>, StoreError> {
    let spec = &ctx.runtime.spec;
    if spec.daily_budget_usd <= 0.0 && spec.daily_token_budget == 0 {
        return Ok(None);
    }
    let agent = spec.name.clone();
    let now = crate::clock::now_ms();
    let today = ctx
        .runtime
        .store
        .read(move |conn| runs::used_on_day(conn, &agent, now))
        .await?;
    let Some(exceeded) = exceeded(spec, today) else {
        return Ok(None);
    };
    ctx.record_step(NewStep {
        kind: "note",
        name: Some("budget".into()),
        detail: exceeded.detail(when),
        ..NewStep::default()
    })
    .await;
    Ok(Some(Ending::Stopped(
        RunStatus::BudgetStopped,
        exceeded.message(&spec.name, when, now),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(usd: f64, tokens: u64) -> AgentSpec {
        let config = crate::config::parse_file(
            "[providers.p]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
            "test",
        )
        .expect("a valid config");
        let text = format!(
            "name = \"ada\"\nprovider = \"p\"\nmodel = \"m\"\ninstructions = \"x\"\n\
             daily_budget_usd = {usd:?}\ndaily_token_budget = {tokens}\n"
        );
        crate::config::parse_agent(&text, "test", &config).expect("a valid agent file")
    }

    #[test]
    fn each_budget_trips_at_its_limit_and_zero_means_none() {
        let used = |cost_usd, tokens| DayUsage { cost_usd, tokens };
        assert_eq!(exceeded(&spec(0.0, 0), used(99.0, 99_999)), None);
        assert_eq!(exceeded(&spec(0.0, 1_000), used(0.0, 999)), None);
        assert_eq!(
            exceeded(&spec(0.0, 1_000), used(0.0, 1_000)),
            Some(Exceeded::Tokens {
                used: 1_000,
                limit: 1_000
            })
        );
        assert_eq!(
            exceeded(&spec(1.0, 1_000), used(1.5, 5_000)),
            Some(Exceeded::Usd {
                spent: 1.5,
                limit: 1.0
            }),
            "dollars are named first"
        );
        assert_eq!(
            exceeded(&spec(1.0, 1_000), used(0.5, 5_000)).map(Exceeded::key),
            Some("daily_token_budget")
        );
    }

    #[test]
    fn the_message_names_the_budget_and_when_it_resets() {
        // 2026-01-01T18:30:00Z: 5 h 30 min before midnight UTC.
        let now = 1_767_225_600_000 + (18 * 60 + 30) * 60_000;
        let tokens = Exceeded::Tokens {
            used: 12_345,
            limit: 10_000,
        };
        assert_eq!(
            tokens.message("ada", When::BeforeRun, now),
            "Today's token budget for ada (10,000 tokens) is used up (12,345 used), so I cannot \
             answer now. It resets at midnight UTC (in 5 h 30 min), or the operator can raise \
             daily_token_budget."
        );
        let midway = tokens.message("ada", When::MidRun, now);
        assert!(
            midway.starts_with("I stopped before finishing: today's token budget for ada"),
            "{midway}"
        );
        let usd = Exceeded::Usd {
            spent: 1.25,
            limit: 1.0,
        }
        .message("ada", When::BeforeRun, now);
        assert!(
            usd.starts_with("Today's budget for ada ($1.00) is used up ($1.25 spent)")
                && usd.contains("raise daily_budget_usd"),
            "{usd}"
        );
        assert_eq!(until_reset(1_767_225_600_000), "24 h");
        assert_eq!(until_reset(1_767_225_600_000 - 30_000), "1 min");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
