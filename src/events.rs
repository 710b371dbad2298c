//! Runtime events: the typed facts the daemon reports about itself.
//!
//! [`EventBus`] is a cheap handle (a broadcast sender) that every actor may publish to. Studio's
//! live stream and tests subscribe to it; the `Events` actor (src/actors/events.rs) subscribes too
//! and writes the events to the `runtime_events` table with bounded retention.
//!
//! Invariant: publishing never blocks and never fails. A slow subscriber lags and is told how many
//! events it missed; it never slows the publisher down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

/// How many events a subscriber may fall behind before it starts missing some.
const BUS_CAPACITY: usize = 8192;

/// What happened. Stored as its `as_str()` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    ActorStarted,
    ActorFailed,
    ActorRestarting,
    ActorStopped,
    ActorEscalated,
    ActorDegraded,
    BootComplete,
    ShutdownStarted,
    ShutdownComplete,
    /// A message entered the daemon from a channel.
    MessageIn,
    /// A reply (or part of one) left the daemon.
    MessageOut,
    RunStarted,
    RunStep,
    RunFinished,
    ApprovalRequested,
    ApprovalDecided,
    CostRecorded,
    /// A bot's polling status changed (polling, conflict, rate limited, unauthorized, ...).
    BotStatus,
    McpHealth,
    ScheduleFired,
    ScheduleOutcome,
    HandoffChanged,
    MemoryChanged,
    /// An agent's runtime settings (autonomy, model, paused), skill toggles or tool list changed.
    AgentChanged,
    /// Operator policy changed outside an approval: a grant revoked, a rule added or disabled.
    PolicyChanged,
    /// Rows were appended to the audit log (published after their transaction committed).
    AuditAppended,
    Warning,
}

impl EventKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::ActorStarted => "actor_started",
            EventKind::ActorFailed => "actor_failed",
            EventKind::ActorRestarting => "actor_restarting",
            EventKind::ActorStopped => "actor_stopped",
            EventKind::ActorEscalated => "actor_escalated",
            EventKind::ActorDegraded => "actor_degraded",
            EventKind::BootComplete => "boot_complete",
            EventKind::ShutdownStarted => "shutdown_started",
            EventKind::ShutdownComplete => "shutdown_complete",
            EventKind::MessageIn => "message_in",
            EventKind::MessageOut => "message_out",
            EventKind::RunStarted => "run_started",
            EventKind::RunStep => "run_step",
            EventKind::RunFinished => "run_finished",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalDecided => "approval_decided",
            EventKind::CostRecorded => "cost_recorded",
            EventKind::BotStatus => "bot_status",
            EventKind::McpHealth => "mcp_health",
            EventKind::ScheduleFired => "schedule_fired",
            EventKind::ScheduleOutcome => "schedule_outcome",
            EventKind::HandoffChanged => "handoff_changed",
            EventKind::MemoryChanged => "memory_changed",
            EventKind::AgentChanged => "agent_changed",
            EventKind::PolicyChanged => "policy_changed",
            EventKind::AuditAppended => "audit_appended",
            EventKind::Warning => "warning",
        }
    }

    /// Lifecycle events of the supervision tree (what the live tree view is built from).
    pub fn is_lifecycle(self) -> bool {
        matches!(
            self,
            EventKind::ActorStarted
                | EventKind::ActorFailed
                | EventKind::ActorRestarting
                | EventKind::ActorStopped
                | EventKind::ActorEscalated
                | EventKind::ActorDegraded
        )
    }
}

/// One event. `subject` names what it is about (an actor id such as `agent:assistant`,
/// a run id, an approval id); `detail` is a human sentence; `data` carries structured fields
/// for Studio (a JSON object, or `Null`).
#[derive(Debug, Clone)]
pub struct RuntimeEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub kind: EventKind,
    pub subject: String,
    pub detail: String,
    pub data: serde_json::Value,
}

/// The publishing handle. Clone it freely.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<RuntimeEvent>,
    seq: Arc<AtomicU64>,
}

impl std::fmt::Debug for EventBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBus").finish_non_exhaustive()
    }
}

impl Default for EventBus {
    fn default() -> Self {
        Self::new()
    }
}

impl EventBus {
    pub fn new() -> Self {
        let (sender, _) = broadcast::channel(BUS_CAPACITY);
        Self {
            sender,
            seq: Arc::new(AtomicU64::new(1)),
        }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<RuntimeEvent> {
        self.sender.subscribe()
    }

    pub fn publish(&self, kind: EventKind, subject: &str, detail: &str) {
        self.publish_data(kind, subject, detail, serde_json::Value::Null);
    }

    pub fn publish_data(
        &self,
        kind: EventKind,
        subject: &str,
        detail: &str,
        data: serde_json::Value,
    ) {
        let event = RuntimeEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            at_ms: crate::clock::now_ms(),
            kind,
            subject: subject.to_string(),
            detail: crate::secrets::redact(detail).into_owned(),
            data,
        };
        // No receiver is not an error: nobody is watching right now.
        let _ = self.sender.send(event);
    }
}
