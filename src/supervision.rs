//! The pure restart policy: restart types, intensity and backoff, and the per-child tracker that
//! decides what happens after an exit. No actors here (so `config` may build a policy); the
//! supervisors' children table (`actors/supervise.rs`) drives it.

use std::collections::VecDeque;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

/// When a child that exited is brought back (Erlang/OTP's restart types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Always restarted, whatever the reason it stopped.
    Permanent,
    /// Restarted only when it failed (panic or error); a normal stop is final.
    Transient,
    /// Never restarted.
    Temporary,
}

/// What a supervisor does when a child has used up its restart budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExhausted {
    /// The supervisor fails too, handing the problem to its own parent.
    Escalate,
    /// The child is marked degraded and tried again after this long, with a fresh budget.
    /// Used for bots: one broken token must not take the daemon down.
    Degrade { retry_after: Duration },
}

/// Restart intensity and backoff. One value per child; usually cloned from `[supervision]`.
#[derive(Debug, Clone, PartialEq)]
pub struct RestartPolicy {
    /// At most this many restarts within `window`; one more exhausts the budget.
    pub max_restarts: u32,
    pub window: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub backoff_factor: f64,
    /// Fraction of the delay added or removed at random (0.2 = ±20 %).
    pub jitter: f64,
    /// A child that stayed up this long starts again from `backoff_min`.
    pub reset_after: Duration,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        Self {
            max_restarts: 5,
            window: Duration::from_secs(30),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            backoff_factor: 2.0,
            jitter: 0.2,
            reset_after: Duration::from_secs(60),
        }
    }
}

impl RestartPolicy {
    /// The delay before restart number `attempt` (0-based), before jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let factor = self.backoff_factor.max(1.0).powi(attempt.min(64) as i32);
        let secs = self.backoff_min.as_secs_f64() * factor;
        let capped = secs.min(self.backoff_max.as_secs_f64());
        Duration::from_secs_f64(capped.max(0.0))
    }

    pub fn jittered(&self, base: Duration) -> Duration {
        if self.jitter <= 0.0 || base.is_zero() {
            return base;
        }
        let spread = self.jitter.min(0.99);
        let factor = rand::rng().random_range((1.0 - spread)..=(1.0 + spread));
        Duration::from_secs_f64(base.as_secs_f64() * factor).min(self.backoff_max.max(base))
    }
}

/// How a child left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildExit {
    /// It panicked, returned an error, or failed to start.
    Failed(String),
    /// It stopped by itself, normally.
    Stopped(Option<String>),
    /// It was killed (also the case when its own subtree was torn down).
    Killed,
}

impl ChildExit {
    fn is_failure(&self) -> bool {
        !matches!(self, ChildExit::Stopped(_))
    }

    pub fn describe(&self) -> String {
        match self {
            ChildExit::Failed(error) => format!("failed: {error}"),
            ChildExit::Stopped(Some(reason)) => format!("stopped: {reason}"),
            ChildExit::Stopped(None) => "stopped".to_string(),
            ChildExit::Killed => "killed".to_string(),
        }
    }
}

/// The decision about one exit.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Restart {
        delay: Duration,
        attempt: u32,
    },
    /// Not restarted (temporary child, or transient child that stopped normally).
    Done,
    /// Budget exhausted and the policy says escalate.
    Escalate {
        reason: String,
    },
    /// Budget exhausted and the policy says degrade: try again much later.
    Degraded {
        retry_after: Duration,
    },
}

/// Restart bookkeeping for one child: a sliding window of restart instants and the backoff step.
#[derive(Debug, Default)]
pub struct RestartTracker {
    restarts: VecDeque<Instant>,
    consecutive: u32,
    started_at: Option<Instant>,
}

impl RestartTracker {
    pub fn on_started(&mut self, now: Instant) {
        self.started_at = Some(now);
    }

    /// Restarts counted in the current window.
    pub fn restarts_in_window(&self) -> usize {
        self.restarts.len()
    }

    pub fn on_exit(
        &mut self,
        policy: &RestartPolicy,
        restart: Restart,
        on_exhausted: OnExhausted,
        exit: &ChildExit,
        now: Instant,
    ) -> Verdict {
        let wanted = match restart {
            Restart::Permanent => true,
            Restart::Transient => exit.is_failure(),
            Restart::Temporary => false,
        };
        if !wanted {
            return Verdict::Done;
        }
        if let Some(started) = self.started_at.take()
            && now.saturating_duration_since(started) >= policy.reset_after
        {
            self.consecutive = 0;
        }
        while let Some(first) = self.restarts.front() {
            if now.saturating_duration_since(*first) > policy.window {
                self.restarts.pop_front();
            } else {
                break;
            }
        }
        if self.restarts.len() as u32 >= policy.max_restarts {
            self.restarts.clear();
            self.consecutive = 0;
            return match on_exhausted {
                OnExhausted::Escalate => Verdict::Escalate {
                    reason: format!(
                        "restarted {} times within {:?}; last exit {}",
                        policy.max_restarts,
                        policy.window,
                        exit.describe()
                    ),
                },
                OnExhausted::Degrade { retry_after } => Verdict::Degraded { retry_after },
            };
        }
        self.restarts.push_back(now);
        let attempt = self.consecutive;
        self.consecutive = self.consecutive.saturating_add(1);
        Verdict::Restart {
            delay: policy.jittered(policy.base_delay(attempt)),
            attempt: attempt + 1,
        }
    }
}

/// Commands a supervisor sends itself (or receives) about its children.
/// Every supervisor's `Msg` enum has a variant carrying this.
#[derive(Debug, Clone)]
pub enum ChildCmd {
    /// Start (or restart after a backoff) the child with this id.
    Start(String),
}

/// Status of a child as shown in Studio and the events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildStatus {
    Starting,
    Running,
    Restarting,
    Degraded,
    Stopped,
}

impl ChildStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ChildStatus::Starting => "starting",
            ChildStatus::Running => "running",
            ChildStatus::Restarting => "restarting",
            ChildStatus::Degraded => "degraded",
            ChildStatus::Stopped => "stopped",
        }
    }
}

/// Flattens an error and its sources into one line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let inner_text = inner.to_string();
        if !text.contains(&inner_text) {
            text.push_str(": ");
            text.push_str(&inner_text);
        }
        source = inner.source();
    }
    text
}
