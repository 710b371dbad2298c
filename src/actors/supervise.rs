//! The children table every supervisor uses, driving the one restart policy
//! (`crate::supervision`).
//!
//! ractor has no restart strategy of its own: by default a supervisor simply stops when a child
//! exits. Every supervisor in clawvisor therefore keeps its children in a [`Children`] table and
//! forwards its supervision events to [`Children::on_supervision_event`], which decides — with
//! [`RestartTracker`] — whether the child is restarted (and after which backoff), left down, marked
//! degraded, or whether the supervisor must escalate to its own parent.
//!
//! Invariants:
//! - Every supervisor overrides `handle_supervisor_evt` and keeps its children in [`Children`],
//!   except a Session over its temporary Run (a run is never restarted; its failure is recorded
//!   and reported).
//! - A restart is always scheduled with `send_after` (or cast at once when the backoff is zero),
//!   never slept inside a handler, so the supervisor's mailbox stays responsive while a child
//!   waits for its backoff.
//! - A child whose `pre_start` fails produces no supervision event in ractor; [`Children::start`]
//!   treats that spawn error exactly like a crash, so both paths share the same budget.
//! - A child stopped on purpose (removal, shutdown) is never restarted.

use std::any::TypeId;
use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef, Message, SpawnErr, SupervisionEvent};
use tokio::time::Instant;

use crate::events::{EventBus, EventKind};
use crate::registry::{Registry, ServiceName};
pub use crate::supervision::{
    ChildCmd, ChildExit, ChildStatus, OnExhausted, Restart, RestartPolicy, RestartTracker, Verdict,
    error_chain,
};

/// The future a spawn function returns: the new child's cell.
pub type SpawnFuture = Pin<Box<dyn Future<Output = Result<ActorCell, SpawnErr>> + Send>>;

/// Spawns (or re-spawns) one child linked to the given supervisor.
pub type SpawnFn = Arc<dyn Fn(ActorCell) -> SpawnFuture + Send + Sync>;

/// Everything a supervisor needs to know to run one child.
#[derive(Clone)]
pub struct ChildSpec {
    /// Stable id, unique among the supervisor's children (also used in events: `agent:assistant`).
    pub id: String,
    pub restart: Restart,
    pub policy: RestartPolicy,
    pub on_exhausted: OnExhausted,
    /// How long a graceful stop may take before the child is killed.
    pub shutdown: Duration,
    pub spawn: SpawnFn,
}

impl fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    pub fn new<F, Fut>(id: impl Into<String>, policy: RestartPolicy, spawn: F) -> Self
    where
        F: Fn(ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, SpawnErr>> + Send + 'static,
    {
        Self {
            id: id.into(),
            restart: Restart::Permanent,
            policy,
            on_exhausted: OnExhausted::Escalate,
            shutdown: Duration::from_secs(5),
            spawn: Arc::new(move |supervisor| Box::pin(spawn(supervisor))),
        }
    }

    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    pub fn on_exhausted(mut self, on_exhausted: OnExhausted) -> Self {
        self.on_exhausted = on_exhausted;
        self
    }

    pub fn shutdown(mut self, timeout: Duration) -> Self {
        self.shutdown = timeout;
        self
    }
}

/// Spawns one linked actor under its registered name and returns its cell. `name` is typed with
/// the messages others may send (`M`); when the actor's own enum wraps them with callbacks of its
/// own, the actor is registered with a mailbox for `M` ([`Registry::publish`]).
pub async fn spawn_child<A, M>(
    registry: &Registry,
    name: &ServiceName<M>,
    actor: A,
    args: A::Arguments,
    supervisor: ActorCell,
) -> Result<ActorCell, SpawnErr>
where
    A: Actor,
    A::Msg: From<M>,
    M: Message + TryFrom<A::Msg>,
{
    let (actor_ref, _) =
        Actor::spawn_linked(Some(registry.name(name.local())), actor, args, supervisor).await?;
    if TypeId::of::<M>() != TypeId::of::<A::Msg>() {
        registry.publish(name, actor_ref.get_derived());
    }
    Ok(actor_ref.get_cell())
}

/// Like [`spawn_child`], without a supervisor (tests and benches that run one service alone).
pub async fn spawn_unsupervised<A, M>(
    registry: &Registry,
    name: &ServiceName<M>,
    actor: A,
    args: A::Arguments,
) -> Result<(ActorRef<A::Msg>, tokio::task::JoinHandle<()>), SpawnErr>
where
    A: Actor,
    A::Msg: From<M>,
    M: Message + TryFrom<A::Msg>,
{
    let (actor_ref, handle) = Actor::spawn(Some(registry.name(name.local())), actor, args).await?;
    if TypeId::of::<M>() != TypeId::of::<A::Msg>() {
        registry.publish(name, actor_ref.get_derived());
    }
    Ok((actor_ref, handle))
}

/// A child spec whose actor is spawned from cloned `args` at every (re)start.
pub fn actor_spec<A, M>(
    registry: &Registry,
    name: &ServiceName<M>,
    policy: RestartPolicy,
    make: fn() -> A,
    args: A::Arguments,
) -> ChildSpec
where
    A: Actor,
    A::Arguments: Clone + Sync,
    A::Msg: From<M>,
    M: Message + TryFrom<A::Msg>,
{
    let registry = registry.clone();
    let name = name.clone();
    let id = name.local().to_string();
    ChildSpec::new(id, policy, move |supervisor| {
        let registry = registry.clone();
        let name = name.clone();
        let args = args.clone();
        async move { spawn_child(&registry, &name, make(), args, supervisor).await }
    })
}

/// A read-only view of one child.
#[derive(Debug, Clone)]
pub struct ChildInfo {
    pub id: String,
    pub status: ChildStatus,
    pub restarts: u32,
    pub last_error: Option<String>,
}

struct Entry {
    spec: ChildSpec,
    cell: Option<ActorCell>,
    tracker: RestartTracker,
    status: ChildStatus,
    restarts: u32,
    last_error: Option<String>,
}

/// What the supervisor must do after an event, as decided by [`Children`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Nothing,
    Escalate(String),
}

/// The children of one supervisor, in start order.
pub struct Children {
    owner: String,
    events: EventBus,
    order: Vec<String>,
    entries: BTreeMap<String, Entry>,
    /// Minimum spacing between two (re)starts, so N restarting bots do not hit an API at once.
    spacing: Duration,
    next_slot: Option<Instant>,
}

impl Children {
    pub fn new(owner: impl Into<String>, events: EventBus) -> Self {
        Self {
            owner: owner.into(),
            events,
            order: Vec::new(),
            entries: BTreeMap::new(),
            spacing: Duration::ZERO,
            next_slot: None,
        }
    }

    /// Space (re)starts of children at least this far apart.
    pub fn with_spacing(mut self, spacing: Duration) -> Self {
        self.spacing = spacing;
        self
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub fn spacing(&self) -> Duration {
        self.spacing
    }

    /// Adds a child without starting it. Replaces the spec of an existing id without touching
    /// the running child: its next restart uses the new spec.
    pub fn insert(&mut self, spec: ChildSpec) {
        let id = spec.id.clone();
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.spec = spec;
            return;
        }
        self.order.push(id.clone());
        self.entries.insert(
            id,
            Entry {
                spec,
                cell: None,
                tracker: RestartTracker::default(),
                status: ChildStatus::Stopped,
                restarts: 0,
                last_error: None,
            },
        );
    }

    pub fn contains(&self, id: &str) -> bool {
        self.entries.contains_key(id)
    }

    pub fn ids(&self) -> Vec<String> {
        self.order.clone()
    }

    pub fn cell(&self, id: &str) -> Option<&ActorCell> {
        self.entries.get(id).and_then(|entry| entry.cell.as_ref())
    }

    pub fn info(&self) -> Vec<ChildInfo> {
        self.order
            .iter()
            .filter_map(|id| self.entries.get(id))
            .map(|entry| ChildInfo {
                id: entry.spec.id.clone(),
                status: entry.status,
                restarts: entry.restarts,
                last_error: entry.last_error.clone(),
            })
            .collect()
    }

    /// Schedules `ChildCmd::Start` for each id, `interval` apart, the first at once.
    pub fn start_staggered<M>(&mut self, myself: &ActorRef<M>, ids: &[String], interval: Duration)
    where
        M: Message + From<ChildCmd>,
    {
        for (index, id) in ids.iter().enumerate() {
            if let Some(entry) = self.entries.get_mut(id) {
                entry.status = ChildStatus::Starting;
            }
            let delay = interval * index as u32;
            let id = id.clone();
            if delay.is_zero() {
                let _ = myself.cast(M::from(ChildCmd::Start(id)));
            } else {
                myself.send_after(delay, move || M::from(ChildCmd::Start(id)));
            }
        }
    }

    /// Starts one child now. A spawn failure counts as a crash (same budget, same backoff).
    pub async fn start<M>(&mut self, myself: &ActorRef<M>, id: &str) -> Action
    where
        M: Message + From<ChildCmd>,
    {
        let Some(entry) = self.entries.get_mut(id) else {
            return Action::Nothing;
        };
        if entry
            .cell
            .as_ref()
            .is_some_and(|cell| cell.get_status() != ractor::ActorStatus::Stopped)
        {
            return Action::Nothing;
        }
        entry.status = ChildStatus::Starting;
        let spawn = entry.spec.spawn.clone();
        match spawn(myself.get_cell()).await {
            Ok(cell) => {
                let now = Instant::now();
                // The entry is looked up again: `spawn` awaited, but we hold `&mut self`.
                if let Some(entry) = self.entries.get_mut(id) {
                    entry.cell = Some(cell);
                    entry.status = ChildStatus::Running;
                    entry.tracker.on_started(now);
                }
                self.events.publish(EventKind::ActorStarted, id, "");
                Action::Nothing
            }
            Err(error) => {
                let error = crate::secrets::redact(&error_chain(&error)).into_owned();
                self.after_exit(myself, id, ChildExit::Failed(error))
            }
        }
    }

    /// Stops one child on purpose (it is not restarted) and forgets it.
    pub async fn remove(&mut self, id: &str) {
        if let Some(entry) = self.entries.remove(id) {
            self.order.retain(|other| other != id);
            if let Some(cell) = entry.cell {
                stop_child(&cell, entry.spec.shutdown).await;
            }
            self.events
                .publish(EventKind::ActorStopped, id, "removed by its supervisor");
        }
    }

    /// Replaces a child's spec and restarts it on purpose with the new one (a reload changed what
    /// it is built from). The old child's exit is not a crash: it costs no budget and is not
    /// restarted by the policy, because its cell is forgotten before it stops.
    pub async fn replace<M>(&mut self, myself: &ActorRef<M>, spec: ChildSpec) -> Action
    where
        M: Message + From<ChildCmd>,
    {
        let id = spec.id.clone();
        if let Some(entry) = self.entries.get_mut(&id) {
            let cell = entry.cell.take();
            let shutdown = entry.spec.shutdown;
            entry.status = ChildStatus::Stopped;
            entry.tracker = RestartTracker::default();
            if let Some(cell) = cell {
                stop_child(&cell, shutdown).await;
                self.events
                    .publish(EventKind::ActorStopped, &id, "replaced by a reload");
            }
        }
        self.insert(spec);
        self.start(myself, &id).await
    }

    /// Stops and forgets one child without publishing a removal (idle sessions).
    pub async fn remove_quietly(&mut self, id: &str) {
        if let Some(entry) = self.entries.remove(id) {
            self.order.retain(|other| other != id);
            if let Some(cell) = entry.cell {
                stop_child(&cell, entry.spec.shutdown).await;
            }
        }
    }

    /// Stops every child at once (children that do not depend on each other, such as sessions),
    /// waiting at most `timeout` in total before killing the rest.
    pub async fn stop_all_parallel(&mut self, timeout: Duration) {
        let cells: Vec<ActorCell> = self
            .entries
            .values_mut()
            .filter_map(|entry| {
                entry.status = ChildStatus::Stopped;
                entry.cell.take()
            })
            .collect();
        let stops = cells.iter().map(|cell| stop_child(cell, timeout));
        futures::future::join_all(stops).await;
    }

    /// Stops every child in reverse start order, each within its shutdown timeout.
    pub async fn stop_all(&mut self) {
        for id in self.order.clone().into_iter().rev() {
            let Some(entry) = self.entries.get_mut(&id) else {
                continue;
            };
            entry.status = ChildStatus::Stopped;
            if let Some(cell) = entry.cell.take() {
                stop_child(&cell, entry.spec.shutdown).await;
                tracing::info!(supervisor = %self.owner, actor = %id, "actor stopped");
                self.events
                    .publish(EventKind::ActorStopped, &id, "shutdown");
            }
        }
    }

    /// Feeds one supervision event through the policy. Restarts are scheduled on `myself`.
    pub fn on_supervision_event<M>(
        &mut self,
        myself: &ActorRef<M>,
        event: &SupervisionEvent,
    ) -> Action
    where
        M: Message + From<ChildCmd>,
    {
        let (cell, exit) = match event {
            SupervisionEvent::ActorFailed(cell, error) => (
                cell,
                ChildExit::Failed(crate::secrets::redact(&error.to_string()).into_owned()),
            ),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                let exit = match reason.as_deref() {
                    Some("killed") => ChildExit::Killed,
                    _ => ChildExit::Stopped(reason.clone()),
                };
                (cell, exit)
            }
            _ => return Action::Nothing,
        };
        let Some(id) = self.id_of(cell) else {
            return Action::Nothing;
        };
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.cell = None;
        }
        self.after_exit(myself, &id, exit)
    }

    fn id_of(&self, cell: &ActorCell) -> Option<String> {
        let wanted = cell.get_id();
        self.entries
            .iter()
            .find(|(_, entry)| entry.cell.as_ref().is_some_and(|c| c.get_id() == wanted))
            .map(|(id, _)| id.clone())
    }

    fn after_exit<M>(&mut self, myself: &ActorRef<M>, id: &str, exit: ChildExit) -> Action
    where
        M: Message + From<ChildCmd>,
    {
        let now = Instant::now();
        let Some(entry) = self.entries.get_mut(id) else {
            return Action::Nothing;
        };
        let detail = exit.describe();
        match &exit {
            ChildExit::Failed(error) => {
                entry.last_error = Some(error.clone());
                tracing::warn!(supervisor = %self.owner, actor = %id, error = %error, "actor failed");
                self.events.publish(EventKind::ActorFailed, id, &detail);
            }
            _ => {
                tracing::info!(supervisor = %self.owner, actor = %id, exit = %detail, "actor exited");
                self.events.publish(EventKind::ActorStopped, id, &detail);
            }
        }
        let verdict = entry.tracker.on_exit(
            &entry.spec.policy,
            entry.spec.restart,
            entry.spec.on_exhausted,
            &exit,
            now,
        );
        match verdict {
            Verdict::Done => {
                entry.status = ChildStatus::Stopped;
                Action::Nothing
            }
            Verdict::Restart { delay, attempt } => {
                entry.status = ChildStatus::Restarting;
                entry.restarts += 1;
                let delay = self.reserve_slot(now, delay);
                self.events.publish(
                    EventKind::ActorRestarting,
                    id,
                    &format!("attempt {attempt} in {} ms", delay.as_millis()),
                );
                schedule_start(myself, id, delay);
                Action::Nothing
            }
            Verdict::Degraded { retry_after } => {
                entry.status = ChildStatus::Degraded;
                tracing::error!(supervisor = %self.owner, actor = %id, retry_in = ?retry_after,
                    "actor exhausted its restart budget and is degraded");
                self.events.publish(
                    EventKind::ActorDegraded,
                    id,
                    &format!(
                        "restart budget exhausted; next try in {} s",
                        retry_after.as_secs()
                    ),
                );
                schedule_start(myself, id, retry_after);
                Action::Nothing
            }
            Verdict::Escalate { reason } => {
                entry.status = ChildStatus::Stopped;
                let reason = format!("{}: child {id} {reason}", self.owner);
                tracing::error!(supervisor = %self.owner, actor = %id, %reason, "escalating");
                self.events.publish(EventKind::ActorEscalated, id, &reason);
                Action::Escalate(reason)
            }
        }
    }

    /// Pushes a restart time back so that two (re)starts are at least `spacing` apart.
    fn reserve_slot(&mut self, now: Instant, delay: Duration) -> Duration {
        if self.spacing.is_zero() {
            return delay;
        }
        let wanted = now + delay;
        let at = match self.next_slot {
            Some(slot) if slot > wanted => slot,
            _ => wanted,
        };
        self.next_slot = Some(at + self.spacing);
        at.saturating_duration_since(now)
    }

    /// Handles a `ChildCmd` received by the supervisor.
    pub async fn handle_cmd<M>(&mut self, myself: &ActorRef<M>, cmd: ChildCmd) -> Action
    where
        M: Message + From<ChildCmd>,
    {
        match cmd {
            ChildCmd::Start(id) => self.start(myself, &id).await,
        }
    }
}

fn schedule_start<M>(myself: &ActorRef<M>, id: &str, delay: Duration)
where
    M: Message + From<ChildCmd>,
{
    let id = id.to_string();
    if delay.is_zero() {
        // tokio's timer has millisecond granularity; a zero backoff must not cost a tick.
        let _ = myself.cast(M::from(ChildCmd::Start(id)));
    } else {
        myself.send_after(delay, move || M::from(ChildCmd::Start(id)));
    }
}

async fn stop_child(cell: &ActorCell, timeout: Duration) {
    if cell
        .stop_and_wait(Some("shutdown".into()), Some(timeout))
        .await
        .is_err()
    {
        tracing::warn!(actor = ?cell.get_name(), "actor did not stop in time; killing it");
        let _ = cell.kill_and_wait(Some(Duration::from_secs(1))).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 3,
            window: Duration::from_secs(10),
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            backoff_factor: 2.0,
            jitter: 0.0,
            reset_after: Duration::from_secs(30),
        }
    }

    fn failed() -> ChildExit {
        ChildExit::Failed("boom".into())
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_doubles_then_budget_escalates() {
        let policy = policy();
        let mut tracker = RestartTracker::default();
        let now = Instant::now();
        let delays: Vec<Verdict> = (0..4)
            .map(|_| {
                tracker.on_exit(
                    &policy,
                    Restart::Permanent,
                    OnExhausted::Escalate,
                    &failed(),
                    now,
                )
            })
            .collect();
        assert_eq!(
            delays[0],
            Verdict::Restart {
                delay: Duration::from_secs(1),
                attempt: 1
            }
        );
        assert_eq!(
            delays[1],
            Verdict::Restart {
                delay: Duration::from_secs(2),
                attempt: 2
            }
        );
        assert_eq!(
            delays[2],
            Verdict::Restart {
                delay: Duration::from_secs(4),
                attempt: 3
            }
        );
        assert!(matches!(delays[3], Verdict::Escalate { .. }));
    }

    #[tokio::test(start_paused = true)]
    async fn window_forgets_old_restarts_and_stable_child_resets_backoff() {
        let policy = policy();
        let mut tracker = RestartTracker::default();
        let start = Instant::now();
        for _ in 0..3 {
            tracker.on_exit(
                &policy,
                Restart::Permanent,
                OnExhausted::Escalate,
                &failed(),
                start,
            );
        }
        // Past the window: the budget is free again, but the backoff keeps growing
        // because the child never stayed up for `reset_after`.
        let later = start + Duration::from_secs(11);
        let verdict = tracker.on_exit(
            &policy,
            Restart::Permanent,
            OnExhausted::Escalate,
            &failed(),
            later,
        );
        assert_eq!(
            verdict,
            Verdict::Restart {
                delay: Duration::from_secs(8),
                attempt: 4
            }
        );
        tracker.on_started(later);
        let much_later = later + Duration::from_secs(31);
        let verdict = tracker.on_exit(
            &policy,
            Restart::Permanent,
            OnExhausted::Escalate,
            &failed(),
            much_later,
        );
        assert_eq!(
            verdict,
            Verdict::Restart {
                delay: Duration::from_secs(1),
                attempt: 1
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn restart_types_decide_which_exits_restart() {
        let policy = policy();
        let now = Instant::now();
        let normal = ChildExit::Stopped(None);
        let cases = [
            (Restart::Permanent, normal.clone(), true),
            (Restart::Permanent, failed(), true),
            (Restart::Transient, normal.clone(), false),
            (Restart::Transient, failed(), true),
            (Restart::Transient, ChildExit::Killed, true),
            (Restart::Temporary, failed(), false),
            (Restart::Temporary, normal, false),
        ];
        for (restart, exit, restarted) in cases {
            let mut tracker = RestartTracker::default();
            let verdict = tracker.on_exit(&policy, restart, OnExhausted::Escalate, &exit, now);
            assert_eq!(
                matches!(verdict, Verdict::Restart { .. }),
                restarted,
                "{restart:?} after {exit:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn exhausted_budget_can_degrade_instead_of_escalating() {
        let policy = RestartPolicy {
            max_restarts: 1,
            ..policy()
        };
        let mut tracker = RestartTracker::default();
        let now = Instant::now();
        let retry = OnExhausted::Degrade {
            retry_after: Duration::from_secs(600),
        };
        tracker.on_exit(&policy, Restart::Permanent, retry, &failed(), now);
        let verdict = tracker.on_exit(&policy, Restart::Permanent, retry, &failed(), now);
        assert_eq!(
            verdict,
            Verdict::Degraded {
                retry_after: Duration::from_secs(600)
            }
        );
    }

    #[test]
    fn jitter_stays_within_its_band() {
        let policy = RestartPolicy {
            jitter: 0.2,
            ..policy()
        };
        for _ in 0..200 {
            let delay = policy.jittered(Duration::from_secs(4)).as_secs_f64();
            assert!((3.2..=4.8).contains(&delay), "{delay}");
        }
    }
}
