//! What became of each request to `POST /hooks/trigger/<name>`, counted in memory for
//! `/metrics` (`clawvisor_trigger_requests_total{trigger, outcome}`): refusals are stored nowhere
//! (the hook's invariant), so these counters are the only trace of them besides the log.
//!
//! Invariants: counters only grow and start at zero with the process (Prometheus' `counter`
//! type; a restart is a reset its `rate()` handles); a request for a name no trigger has is
//! counted under [`UNKNOWN_TRIGGER`], never under the name it gave, so a stranger's guesses
//! cannot grow the label set.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// The `trigger` label of requests for a name no trigger has (not a valid trigger name, so it
/// cannot be confused with one).
pub const UNKNOWN_TRIGGER: &str = "(unknown)";

/// What became of one request to a trigger's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookOutcome {
    /// Stored and answered `202`.
    Accepted,
    /// A delivery id the trigger had stored already: answered `200`, not run again.
    Duplicate,
    /// Neither the signature nor the bearer token matched (`401`).
    BadSignature,
    /// The body was over `max_body` (`413`).
    TooLarge,
    /// No trigger has the name (`404`).
    Unknown,
    /// Over `per_minute` (`429`).
    RateLimited,
    /// The trigger's secret is not set, so it accepts nothing (`503`).
    NoSecret,
    /// The store could not take the delivery (`503`; the sender should retry).
    StoreFailed,
}

impl HookOutcome {
    /// Every outcome, in the order `/metrics` lists them.
    pub const ALL: [HookOutcome; 8] = [
        HookOutcome::Accepted,
        HookOutcome::Duplicate,
        HookOutcome::BadSignature,
        HookOutcome::TooLarge,
        HookOutcome::Unknown,
        HookOutcome::RateLimited,
        HookOutcome::NoSecret,
        HookOutcome::StoreFailed,
    ];

    /// The `outcome` label.
    pub fn as_str(self) -> &'static str {
        match self {
            HookOutcome::Accepted => "accepted",
            HookOutcome::Duplicate => "duplicate",
            HookOutcome::BadSignature => "bad_signature",
            HookOutcome::TooLarge => "too_large",
            HookOutcome::Unknown => "unknown",
            HookOutcome::RateLimited => "rate_limited",
            HookOutcome::NoSecret => "no_secret",
            HookOutcome::StoreFailed => "store_failed",
        }
    }
}

/// The counters, by (trigger, outcome).
#[derive(Debug, Default)]
pub struct HookCounts {
    counts: Mutex<BTreeMap<(String, HookOutcome), u64>>,
}

impl HookCounts {
    /// Counts one request to `trigger` (`None`: a name no trigger has) that ended in `outcome`.
    pub fn count(&self, trigger: Option<&str>, outcome: HookOutcome) {
        let trigger = trigger.unwrap_or(UNKNOWN_TRIGGER).to_string();
        // A panic while holding the lock leaves whole numbers: the counts stay usable.
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *counts.entry((trigger, outcome)).or_default() += 1;
    }

    /// How many requests to `trigger` ended in `outcome` so far.
    pub fn get(&self, trigger: &str, outcome: HookOutcome) -> u64 {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(trigger.to_string(), outcome))
            .copied()
            .unwrap_or(0)
    }

    /// Every (trigger, outcome, count), with a zero for each outcome of each of `triggers` that
    /// has none yet (so a rate starts from zero), by trigger then outcome.
    pub fn snapshot<'a>(
        &self,
        triggers: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(String, HookOutcome, u64)> {
        let mut all = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        for trigger in triggers {
            for outcome in HookOutcome::ALL
                .into_iter()
                .filter(|outcome| *outcome != HookOutcome::Unknown)
            {
                all.entry((trigger.to_string(), outcome)).or_default();
            }
        }
        all.into_iter()
            .map(|((trigger, outcome), count)| (trigger, outcome, count))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_grow_per_trigger_and_outcome_and_unknown_names_share_one_label() {
        let counts = HookCounts::default();
        counts.count(Some("bell"), HookOutcome::Accepted);
        counts.count(Some("bell"), HookOutcome::Accepted);
        counts.count(None, HookOutcome::Unknown);
        counts.count(None, HookOutcome::Unknown);
        assert_eq!(counts.get("bell", HookOutcome::Accepted), 2);
        assert_eq!(counts.get(UNKNOWN_TRIGGER, HookOutcome::Unknown), 2);
        let snapshot = counts.snapshot(["bell"]);
        assert_eq!(snapshot.len(), 8, "seven outcomes of bell and one unknown");
        assert!(snapshot.contains(&("bell".into(), HookOutcome::TooLarge, 0)));
    }
}
