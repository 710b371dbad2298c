//! Where a Telegram reply's time goes: one histogram per stage of the reply path, for `/metrics`
//! (issue #30, "replies at the harness's floor").
//!
//! The stages of one message, each measured from the stage before it:
//! `stored` (the `getUpdates` answer arrived → its batch and offset committed), `run_started`
//! (→ the run that answers it began), `first_token` (→ the model's first streamed text, or its
//! whole answer when it does not stream), `queued` (→ the answer and its outbox row committed),
//! `sent` (→ Telegram accepted the reply's last part) and `confirmed` (→ the delivery recorded).
//! `clawvisor_reply_seconds` is the whole of it, from the `getUpdates` answer to Telegram
//! accepting the reply: what the person waits for, less the network between them and Telegram.
//!
//! Each stage also leaves a `debug` event (target `clawvisor::reply_latency`) with the update's row
//! id, the run and the stage's time, for following one message in the log.
//!
//! Invariants: memory is bounded — the histograms have fixed buckets, and at most [`TRACES`]
//! messages are followed at once (the oldest is forgotten first, so a message that never gets a
//! reply costs nothing for long). A stage is counted at most once per message. Nothing here
//! blocks for longer than a short critical section, and nothing fails: a stage of a message that
//! is not followed (a reply after a restart, a scheduled job's) is simply not counted.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many messages are followed at once.
pub const TRACES: usize = 256;

/// The buckets' upper bounds, in seconds (Prometheus `le`); `+Inf` follows.
pub const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0,
    5.0,
];

/// A stage of the reply path (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Stored,
    RunStarted,
    FirstToken,
    Queued,
    Sent,
    Confirmed,
}

impl Stage {
    /// Every stage, in the order a message passes them.
    pub const ALL: [Stage; 6] = [
        Stage::Stored,
        Stage::RunStarted,
        Stage::FirstToken,
        Stage::Queued,
        Stage::Sent,
        Stage::Confirmed,
    ];

    /// The stage's label in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Stored => "stored",
            Stage::RunStarted => "run_started",
            Stage::FirstToken => "first_token",
            Stage::Queued => "queued",
            Stage::Sent => "sent",
            Stage::Confirmed => "confirmed",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One fixed-bucket histogram: counts per bucket (not cumulative), the `+Inf` count last, and
/// the sum in microseconds.
struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    const fn new() -> Histogram {
        Histogram {
            counts: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Writes the family's samples for `labels` (`stage="…"`, or empty).
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (index, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let bound = BUCKETS
                .get(index)
                .map_or_else(|| "+Inf".to_string(), |bound| bound.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1_000_000.0;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

static STAGES: [Histogram; 6] = [const { Histogram::new() }; 6];
static TOTAL: Histogram = Histogram::new();

/// One followed message: its update row, the run answering it, when it arrived and when it
/// passed its last stage, and which stages it passed (a bit per stage).
struct Trace {
    update_row: i64,
    run_id: Option<i64>,
    received: Instant,
    last: Instant,
    passed: u8,
}

impl Trace {
    /// Counts `stage` for this message unless it was counted already.
    fn pass(&mut self, stage: Stage, now: Instant) {
        let bit = 1u8 << stage.index();
        if self.passed & bit != 0 {
            return;
        }
        self.passed |= bit;
        let spent = now.saturating_duration_since(self.last);
        self.last = now;
        STAGES[stage.index()].observe(spent);
        if stage == Stage::Sent {
            TOTAL.observe(now.saturating_duration_since(self.received));
        }
        tracing::debug!(
            update_row = self.update_row,
            run_id = self.run_id,
            stage = stage.as_str(),
            micros = spent.as_micros() as u64,
            "reply stage"
        );
    }
}

static FOLLOWED: Mutex<VecDeque<Trace>> = Mutex::new(VecDeque::new());

/// Runs `change` on the followed messages. A poisoned lock only means a panic inside one of the
/// short sections below; the queue is still consistent, so it is used as it is.
fn with_followed(change: impl FnOnce(&mut VecDeque<Trace>)) {
    let mut followed = FOLLOWED.lock().unwrap_or_else(|poison| poison.into_inner());
    change(&mut followed);
}

/// The update stored as row `update_row` arrived (its `getUpdates` answer) at `received` and is
/// now committed: starts following it.
pub fn stored(update_row: i64, received: Instant) {
    let now = Instant::now();
    with_followed(|followed| {
        if followed.iter().any(|trace| trace.update_row == update_row) {
            return;
        }
        if followed.len() >= TRACES {
            followed.pop_front();
        }
        let mut trace = Trace {
            update_row,
            run_id: None,
            received,
            last: received,
            passed: 0,
        };
        trace.pass(Stage::Stored, now);
        followed.push_back(trace);
    });
}

/// Run `run_id` started to answer the updates stored as `update_rows`.
pub fn run_started(run_id: i64, update_rows: &[i64]) {
    let now = Instant::now();
    with_followed(|followed| {
        for trace in followed
            .iter_mut()
            .filter(|trace| trace.run_id.is_none() && update_rows.contains(&trace.update_row))
        {
            trace.run_id = Some(run_id);
            trace.pass(Stage::RunStarted, now);
        }
    });
}

/// Run `run_id`'s messages reached `stage`; after [`Stage::Confirmed`] they are no longer
/// followed.
pub fn run_reached(run_id: i64, stage: Stage) {
    let now = Instant::now();
    with_followed(|followed| {
        for trace in followed
            .iter_mut()
            .filter(|trace| trace.run_id == Some(run_id))
        {
            trace.pass(stage, now);
        }
        if stage == Stage::Confirmed {
            followed.retain(|trace| trace.run_id != Some(run_id));
        }
    });
}

/// Appends the histograms to a Prometheus text exposition.
pub fn write_prometheus(out: &mut String) {
    let _ = writeln!(
        out,
        "# HELP clawvisor_reply_stage_seconds Time a Telegram message spent in each stage of its reply, from the stage before (stored: from the getUpdates answer).\n# TYPE clawvisor_reply_stage_seconds histogram"
    );
    for stage in Stage::ALL {
        STAGES[stage.index()].write(
            out,
            "clawvisor_reply_stage_seconds",
            &format!("stage=\"{}\"", stage.as_str()),
        );
    }
    let _ = writeln!(
        out,
        "# HELP clawvisor_reply_seconds Time from a Telegram message's getUpdates answer to Telegram accepting its reply.\n# TYPE clawvisor_reply_seconds histogram"
    );
    TOTAL.write(out, "clawvisor_reply_seconds", "");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_passes_each_stage_once_and_the_followed_are_bounded() {
        // Row and run ids far from any other test's (the histograms are the process's).
        let (row, run) = (-7_001, -7_001);
        let received = Instant::now() - Duration::from_millis(3);
        let before = STAGES[Stage::FirstToken.index()]
            .counts
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum::<u64>();
        stored(row, received);
        run_started(run, &[row]);
        run_reached(run, Stage::FirstToken);
        run_reached(run, Stage::FirstToken);
        let after = STAGES[Stage::FirstToken.index()]
            .counts
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum::<u64>();
        assert!(after > before, "the first token was counted");
        run_reached(run, Stage::Confirmed);
        with_followed(|followed| {
            assert!(followed.iter().all(|trace| trace.update_row != row));
        });
        // However many messages never get a reply, only the last `TRACES` are kept.
        let received = Instant::now();
        for row in 0..(TRACES as i64 + 50) {
            stored(-100_000 - row, received);
        }
        with_followed(|followed| assert!(followed.len() <= TRACES));
    }

    #[test]
    fn the_exposition_has_cumulative_buckets_for_every_stage() {
        TOTAL.observe(Duration::from_millis(12));
        let mut out = String::new();
        write_prometheus(&mut out);
        for stage in Stage::ALL {
            assert!(out.contains(&format!(
                "clawvisor_reply_stage_seconds_bucket{{stage=\"{}\",le=\"+Inf\"}}",
                stage.as_str()
            )));
        }
        let le = |bound: &str| -> u64 {
            let prefix = format!("clawvisor_reply_seconds_bucket{{le=\"{bound}\"}} ");
            out.lines()
                .find_map(|line| line.strip_prefix(&prefix))
                .and_then(|value| value.parse().ok())
                .expect("bucket present")
        };
        assert!(le("0.015") >= 1);
        assert!(le("+Inf") >= le("0.015"));
        assert!(le("0.01") <= le("0.015"));
    }
}
