//! Runtime events: the typed facts the daemon reports about itself.
//!
//! [`EventBus`] is a cheap handle (a broadcast sender) that every actor may publish to. Studio's
//! live stream and tests subscribe to it; the `Events` actor (src/actors/events.rs) subscribes too
//! and writes the events to the `runtime_events` table with bounded retention.
//!
//! Each event carries an [`EventData`]: plain Rust fields, one variant per payload shape. The
//! daemon's core never builds JSON for an event; only Studio does (`studio::event_json`), for its
//! live stream and for the `data` column the `Events` actor stores.
//!
//! Invariant: publishing never blocks and never fails. A slow subscriber lags and is told how many
//! events it missed; it never slows the publisher down.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::broadcast;

/// How many events a subscriber may fall behind before it starts missing some.
const BUS_CAPACITY: usize = 8192;

/// What a subscriber receives: the one shared copy of each event. The bus pre-allocates a slot
/// per event it can hold, so a slot holds a pointer (8 bytes) rather than the event (80), and
/// each subscriber reads the event instead of cloning its strings (issue #20: the slots went
/// from about 1.2 MiB of resident memory to 0.26 MiB).
pub type EventReceiver = broadcast::Receiver<Arc<RuntimeEvent>>;

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
    /// Who may talk to an agent changed: a bot claimed or given a claim code, a pairing approved
    /// or denied, a person revoked, blocked or unblocked.
    PeopleChanged,
    /// Rows were appended to the audit log (published after their transaction committed).
    AuditAppended,
    /// The config and agent files were reloaded (or the reload was refused): the report's summary.
    ConfigReloaded,
    /// The store's health changed (writes stopped committing, or commit again); entering a bad
    /// state is also published as a `Warning`.
    StoreHealth,
    /// A webhook trigger's delivery was stored, started or ended (Triggers page).
    TriggerDelivery,
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
            EventKind::PeopleChanged => "people_changed",
            EventKind::AuditAppended => "audit_appended",
            EventKind::ConfigReloaded => "config_reloaded",
            EventKind::StoreHealth => "store_health",
            EventKind::TriggerDelivery => "trigger_delivery",
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

/// The structured fields of an event, for Studio. One variant per payload shape that is
/// published; `studio::event_json::data_json` turns each into the JSON object Studio's pages read.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum EventData {
    /// The event says all there is in its subject and detail (lifecycle, boot, warnings).
    #[default]
    None,
    /// `message_in`: a message reached an agent's session.
    MessageIn {
        agent: String,
        chat: String,
        sender: String,
    },
    /// `message_out` from the local channel (CLI, Studio chat); `run_id` when a run answered.
    MessageOut {
        agent: String,
        chat: String,
        run_id: Option<i64>,
    },
    /// `message_out`: a reply reached Telegram, in `parts` messages.
    TelegramReplySent {
        agent: String,
        chat: String,
        parts: usize,
    },
    RunStarted {
        run_id: i64,
        agent: String,
        chat: String,
        resume: bool,
    },
    /// `run_step`: `kind` is the step kind (`tool_call`, `tool_result`, ...), `name` the tool.
    RunStep {
        run_id: i64,
        agent: String,
        kind: String,
        name: String,
    },
    RunFinished {
        run_id: i64,
        agent: String,
        chat: String,
        status: String,
    },
    CostRecorded {
        agent: String,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        cost_usd: f64,
    },
    ApprovalRequested {
        id: String,
        agent: String,
        chat: String,
        tool: String,
        risk: String,
        action: String,
        reason: String,
        expires_ms: i64,
        run_id: i64,
    },
    /// `approval_decided` by a person or by the system (`by`), with the stored status.
    ApprovalDecided {
        id: String,
        status: String,
        by: String,
        agent: String,
    },
    /// `approval_decided`: nobody decided before `expires_ms`, so it was denied at `expired_ms`.
    ApprovalExpired {
        id: String,
        agent: String,
        expires_ms: i64,
        expired_ms: i64,
    },
    /// `bot_status`: the bot knows its username and is polling.
    BotOnline { agent: String, username: String },
    /// `bot_status`: the poller's status changed (`polling`, `conflict`, `rate_limited`, ...).
    BotPolling {
        agent: String,
        state: String,
        detail: String,
        at_ms: i64,
    },
    /// `bot_status`: Telegram refused the token; the bot stopped.
    BotUnauthorized { agent: String },
    /// `bot_status`: an unknown user asked to pair with code `code`.
    BotPairingRequested {
        agent: String,
        code: String,
        user_id: i64,
    },
    McpHealth {
        server: String,
        transport: String,
        trust: String,
        state: String,
        last_error: Option<String>,
        restarts: u32,
        last_latency_ms: Option<u64>,
        tool_count: usize,
    },
    ScheduleFired {
        job_id: i64,
        job_run_id: i64,
        agent: String,
        fire_ms: i64,
        started_ms: i64,
        attempt: i64,
    },
    /// `schedule_outcome` for the job itself: `created`, `paused`, `resumed`, `cancelled`, `broken`.
    JobChanged {
        job_id: i64,
        agent: String,
        outcome: String,
    },
    /// `trigger_delivery`: delivery `delivery` of webhook trigger `trigger` is now `status`.
    TriggerDelivery {
        trigger: String,
        delivery: i64,
        agent: String,
        status: String,
    },
    /// `schedule_outcome` of one run of a job; `retry_at_ms` when another attempt is queued.
    JobRunFinished {
        job_id: i64,
        job_run_id: i64,
        agent: String,
        outcome: String,
        run_id: Option<i64>,
        retry_at_ms: Option<i64>,
    },
    /// `schedule_outcome`: `count` fire times were `missed` or `skipped` (`busy`: the job was
    /// still running).
    FiresNotRun {
        job_id: i64,
        agent: String,
        outcome: String,
        count: i64,
        busy: bool,
    },
    /// `schedule_outcome`: `count` missed fire times are run late (outcome `caught_up`).
    FiresCaughtUp {
        job_id: i64,
        agent: String,
        count: usize,
    },
    HandoffChanged {
        id: String,
        status: String,
        change: String,
        owner: String,
        delegate: String,
    },
    /// `memory_changed`: memory `id` was `saved`, or governed (`change` names the operation).
    MemoryChanged { id: i64, change: String },
    /// `memory_changed`: memories are being embedded with a new model (`done` of `total`), or
    /// that ended (`running` false; `error` when it stopped early).
    MemoryReindex {
        model: String,
        done: u64,
        total: u64,
        running: bool,
        error: Option<String>,
    },
    /// `agent_changed`: the tools from `source` (an MCP server, ...) changed.
    AgentToolsChanged { agent: String, source: String },
    /// `agent_changed`: a skill was turned on or off.
    AgentSkillToggled {
        agent: String,
        skill: String,
        enabled: bool,
    },
    /// `agent_changed`: the runtime settings after an update.
    AgentSettingsChanged {
        agent: String,
        autonomy: String,
        model: String,
        paused: bool,
    },
    /// `policy_changed`: grant `grant` was revoked.
    GrantRevoked { grant: i64 },
    /// `policy_changed`: grant `grant` lapsed: something wrote in the workspace after it was given.
    GrantLapsed { grant: i64 },
    /// `policy_changed`: rule `rule` was added.
    RuleAdded { rule: i64 },
    /// `policy_changed`: rule `rule` was disabled.
    RuleDisabled { rule: i64 },
    /// `people_changed`: `change` (`claim_code`, `claimed`, `paired`, `pairing_denied`,
    /// `revoked`, `blocked`, `unblocked`) for `agent`, about `user_id` when a person.
    PeopleChanged {
        agent: String,
        user_id: Option<i64>,
        change: String,
    },
    /// `audit_appended`: a row with this action and subject was committed.
    AuditAppended { action: String, subject: String },
}

/// One event. `subject` names what it is about (an actor id such as `agent:assistant`,
/// a run id, an approval id); `detail` is a human sentence; `data` carries structured fields
/// for Studio ([`EventData::None`] when there are none).
#[derive(Debug, Clone)]
pub struct RuntimeEvent {
    pub seq: u64,
    pub at_ms: i64,
    pub kind: EventKind,
    pub subject: String,
    pub detail: String,
    /// Boxed: keeps the event small for the subscribers that buffer it.
    pub data: Box<EventData>,
}

/// The publishing handle. Clone it freely.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<RuntimeEvent>>,
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

    pub fn subscribe(&self) -> EventReceiver {
        self.sender.subscribe()
    }

    pub fn publish(&self, kind: EventKind, subject: &str, detail: &str) {
        self.publish_data(kind, subject, detail, EventData::None);
    }

    pub fn publish_data(&self, kind: EventKind, subject: &str, detail: &str, data: EventData) {
        let event = RuntimeEvent {
            seq: self.seq.fetch_add(1, Ordering::Relaxed),
            at_ms: crate::clock::now_ms(),
            kind,
            subject: subject.to_string(),
            detail: crate::secrets::redact(detail).into_owned(),
            data: Box::new(data),
        };
        // No receiver is not an error: nobody is watching right now.
        let _ = self.sender.send(Arc::new(event));
    }
}
