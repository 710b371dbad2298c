//! The restart policy, exercised through real ractor actors under the generic supervisor,
//! with paused tokio time so that backoffs are checked to the millisecond.

use std::time::Duration;

use clawvisor::actors::supervise::spawn_child;
use clawvisor::actors::supervise::{ChildSpec, OnExhausted, Restart, RestartPolicy};
use clawvisor::actors::supervisor::{StartMode, Supervisor, SupervisorArgs, SupervisorMsg};
use clawvisor::events::{EventBus, EventKind};
use clawvisor::registry::{Registry, ServiceName};
use ractor::{Actor, ActorProcessingErr, ActorRef, ActorStatus};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// A child that reports each start and does what it is told.
struct Worker;

enum WorkerMsg {
    Panic,
    Fail,
    StopNormally,
}

#[derive(Clone)]
struct WorkerArgs {
    id: String,
    started: mpsc::UnboundedSender<(String, Instant)>,
}

impl Actor for Worker {
    type Msg = WorkerMsg;
    type State = ();
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        _me: ActorRef<WorkerMsg>,
        args: WorkerArgs,
    ) -> Result<(), ActorProcessingErr> {
        let _ = args.started.send((args.id, Instant::now()));
        Ok(())
    }

    async fn handle(
        &self,
        me: ActorRef<WorkerMsg>,
        message: WorkerMsg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Panic => panic!("the worker was told to panic"),
            WorkerMsg::Fail => Err("the worker was told to fail".into()),
            WorkerMsg::StopNormally => {
                me.stop(None);
                Ok(())
            }
        }
    }
}

fn policy(max_restarts: u32) -> RestartPolicy {
    RestartPolicy {
        max_restarts,
        window: Duration::from_secs(60),
        backoff_min: Duration::from_secs(1),
        backoff_max: Duration::from_secs(30),
        backoff_factor: 2.0,
        jitter: 0.0,
        reset_after: Duration::from_secs(600),
    }
}

struct Harness {
    registry: Registry,
    supervisor: ActorRef<SupervisorMsg>,
    supervisor_task: tokio::task::JoinHandle<()>,
    started: mpsc::UnboundedReceiver<(String, Instant)>,
    events: clawvisor::events::EventReceiver,
}

fn worker_spec(
    registry: &Registry,
    id: &str,
    policy: RestartPolicy,
    restart: Restart,
    started: &mpsc::UnboundedSender<(String, Instant)>,
) -> ChildSpec {
    let registry = registry.clone();
    let args = WorkerArgs {
        id: id.to_string(),
        started: started.clone(),
    };
    let name = ServiceName::<WorkerMsg>::new(id);
    ChildSpec::new(id, policy, move |supervisor| {
        let registry = registry.clone();
        let args = args.clone();
        let name = name.clone();
        async move { spawn_child(&registry, &name, Worker, args, supervisor).await }
    })
    .restart(restart)
}

async fn harness(children: &[(&str, Restart, u32)], start: StartMode) -> Harness {
    let registry = Registry::new();
    let bus = EventBus::new();
    let events = bus.subscribe();
    let (started_tx, started) = mpsc::unbounded_channel();
    let specs = children
        .iter()
        .map(|(id, restart, max)| worker_spec(&registry, id, policy(*max), *restart, &started_tx))
        .collect();
    let args = SupervisorArgs {
        name: "test-supervisor".into(),
        children: specs,
        start,
        events: bus,
    };
    let (supervisor, supervisor_task) = Actor::spawn(Some(registry.name("sup")), Supervisor, args)
        .await
        .expect("supervisor starts");
    Harness {
        registry,
        supervisor,
        supervisor_task,
        started,
        events,
    }
}

impl Harness {
    fn worker(&self, id: &str) -> clawvisor::registry::Mailbox<WorkerMsg> {
        self.registry
            .lookup(&ServiceName::new(id))
            .unwrap_or_else(|| panic!("worker {id} is registered"))
    }

    async fn next_start(&mut self) -> (String, Instant) {
        tokio::time::timeout(Duration::from_secs(600), self.started.recv())
            .await
            .expect("a start within 10 minutes of virtual time")
            .expect("the channel stays open")
    }

    /// Lets the runtime settle without advancing virtual time past `d`.
    async fn quiet_for(&mut self, d: Duration) -> bool {
        tokio::time::timeout(d, self.started.recv()).await.is_err()
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_child_is_restarted_after_its_backoff() {
    let mut h = harness(&[("worker", Restart::Permanent, 5)], StartMode::Sequential).await;
    let (_, first) = h.next_start().await;

    let mut previous = first;
    for expected_backoff in [1u64, 2, 4] {
        h.worker("worker").cast(WorkerMsg::Panic).unwrap();
        let crashed_at = Instant::now();
        let (_, restarted) = h.next_start().await;
        let waited = restarted - crashed_at;
        assert!(
            waited >= Duration::from_secs(expected_backoff)
                && waited < Duration::from_secs(expected_backoff) + Duration::from_millis(50),
            "restart after {waited:?}, expected {expected_backoff}s"
        );
        assert!(restarted > previous);
        previous = restarted;
    }
    // A failure returned as an error is treated like a panic.
    h.worker("worker").cast(WorkerMsg::Fail).unwrap();
    let crashed_at = Instant::now();
    let (_, restarted) = h.next_start().await;
    assert!(restarted - crashed_at >= Duration::from_secs(8));

    let mut saw_failed = 0;
    let mut saw_restarting = 0;
    while let Ok(event) = h.events.try_recv() {
        match event.kind {
            EventKind::ActorFailed => saw_failed += 1,
            EventKind::ActorRestarting => saw_restarting += 1,
            _ => {}
        }
    }
    assert_eq!((saw_failed, saw_restarting), (4, 4));
    assert_eq!(h.supervisor.get_status(), ActorStatus::Running);
}

#[tokio::test(start_paused = true)]
async fn a_child_failing_past_its_budget_escalates_to_the_parent() {
    let mut h = harness(&[("fragile", Restart::Permanent, 2)], StartMode::Sequential).await;
    h.next_start().await;
    for _ in 0..2 {
        h.worker("fragile").cast(WorkerMsg::Panic).unwrap();
        h.next_start().await;
    }
    // The third failure within the window exhausts a budget of two restarts.
    h.worker("fragile").cast(WorkerMsg::Panic).unwrap();
    tokio::time::timeout(Duration::from_secs(5), &mut h.supervisor_task)
        .await
        .expect("the supervisor stops when it escalates")
        .expect("the supervisor task ends without panicking");
    assert_eq!(h.supervisor.get_status(), ActorStatus::Stopped);
    let escalated = std::iter::from_fn(|| h.events.try_recv().ok())
        .any(|event| event.kind == EventKind::ActorEscalated && event.subject == "fragile");
    assert!(escalated, "an escalation event names the child");
}

#[tokio::test(start_paused = true)]
async fn transient_children_stay_down_after_a_normal_stop_and_temporary_ones_always() {
    let mut h = harness(
        &[
            ("transient", Restart::Transient, 5),
            ("temporary", Restart::Temporary, 5),
        ],
        StartMode::Sequential,
    )
    .await;
    h.next_start().await;
    h.next_start().await;

    h.worker("transient").cast(WorkerMsg::StopNormally).unwrap();
    assert!(
        h.quiet_for(Duration::from_secs(120)).await,
        "a normally stopped transient child is not restarted"
    );

    h.worker("temporary").cast(WorkerMsg::Panic).unwrap();
    assert!(
        h.quiet_for(Duration::from_secs(120)).await,
        "a temporary child is never restarted"
    );
    assert_eq!(h.supervisor.get_status(), ActorStatus::Running);

    // A transient child that fails is restarted.
    let mut h = harness(
        &[("transient", Restart::Transient, 5)],
        StartMode::Sequential,
    )
    .await;
    h.next_start().await;
    h.worker("transient").cast(WorkerMsg::Panic).unwrap();
    let (id, _) = h.next_start().await;
    assert_eq!(id, "transient");
}

#[tokio::test(start_paused = true)]
async fn staggered_children_start_one_at_a_time_the_interval_apart() {
    let ids = ["bot-a", "bot-b", "bot-c", "bot-d", "bot-e"];
    let children: Vec<(&str, Restart, u32)> =
        ids.iter().map(|id| (*id, Restart::Permanent, 5)).collect();
    let began = Instant::now();
    let mut h = harness(&children, StartMode::Staggered(Duration::from_millis(1500))).await;
    let mut starts = Vec::new();
    for _ in ids {
        starts.push(h.next_start().await);
    }
    let order: Vec<&str> = starts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order, ids);
    for (index, (_, at)) in starts.iter().enumerate() {
        let offset = *at - began;
        let expected = Duration::from_millis(1500) * index as u32;
        assert!(
            offset >= expected && offset < expected + Duration::from_millis(50),
            "start {index} at {offset:?}, expected {expected:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn restarts_of_staggered_children_are_spaced_too() {
    let mut h = harness(
        &[
            ("bot-a", Restart::Permanent, 5),
            ("bot-b", Restart::Permanent, 5),
        ],
        StartMode::Staggered(Duration::from_secs(3)),
    )
    .await;
    h.next_start().await;
    h.next_start().await;
    // Both crash at the same instant; their 1 s backoffs must not land together.
    h.worker("bot-a").cast(WorkerMsg::Panic).unwrap();
    h.worker("bot-b").cast(WorkerMsg::Panic).unwrap();
    let (_, first) = h.next_start().await;
    let (_, second) = h.next_start().await;
    assert!(
        second - first >= Duration::from_secs(3),
        "restarts {:?} apart",
        second - first
    );
}

#[tokio::test(start_paused = true)]
async fn a_degrading_child_does_not_take_its_supervisor_down() {
    let registry = Registry::new();
    let bus = EventBus::new();
    let mut events = bus.subscribe();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let spec = worker_spec(&registry, "bot", policy(1), Restart::Permanent, &started_tx)
        .on_exhausted(OnExhausted::Degrade {
            retry_after: Duration::from_secs(300),
        });
    let args = SupervisorArgs {
        name: "channels".into(),
        children: vec![spec],
        start: StartMode::Sequential,
        events: bus,
    };
    let (supervisor, _) = Actor::spawn(Some(registry.name("sup")), Supervisor, args)
        .await
        .unwrap();
    started.recv().await.unwrap();
    let worker = |registry: &Registry| {
        registry
            .lookup(&ServiceName::<WorkerMsg>::new("bot"))
            .expect("bot registered")
    };
    worker(&registry).cast(WorkerMsg::Panic).unwrap();
    started.recv().await.unwrap();
    worker(&registry).cast(WorkerMsg::Panic).unwrap();
    let degraded_at = Instant::now();
    let (_, retried) = started.recv().await.unwrap();
    assert!(retried - degraded_at >= Duration::from_secs(300));
    assert_eq!(supervisor.get_status(), ActorStatus::Running);
    assert!(
        std::iter::from_fn(|| events.try_recv().ok()).any(|e| e.kind == EventKind::ActorDegraded)
    );
}
