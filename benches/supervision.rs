//! Issue 2: the cost of a message hop through an actor (against a bare tokio mpsc send) and of a
//! supervised restart (child panic → replacement ready), with the configured backoff set to zero
//! so the figure is the machinery alone. Prints median and p99.

mod support;

use std::time::{Duration, Instant};

use clawvisor::actors::supervise::spawn_child;
use clawvisor::actors::supervise::{ChildSpec, RestartPolicy};
use clawvisor::actors::supervisor::{StartMode, Supervisor, SupervisorArgs};
use clawvisor::events::EventBus;
use clawvisor::registry::{Registry, ServiceName};
use criterion::{Criterion, criterion_group, criterion_main};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

struct Echo;

enum EchoMsg {
    Ping(RpcReplyPort<()>),
    Tell,
    Panic,
}

#[derive(Clone)]
struct EchoArgs {
    ready: mpsc::UnboundedSender<Instant>,
}

impl Actor for Echo {
    type Msg = EchoMsg;
    type State = ();
    type Arguments = EchoArgs;

    async fn pre_start(
        &self,
        _: ActorRef<EchoMsg>,
        args: EchoArgs,
    ) -> Result<(), ActorProcessingErr> {
        let _ = args.ready.send(Instant::now());
        Ok(())
    }

    async fn handle(
        &self,
        _: ActorRef<EchoMsg>,
        message: EchoMsg,
        _: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        match message {
            EchoMsg::Ping(reply) => {
                let _ = reply.send(());
            }
            EchoMsg::Tell => {}
            EchoMsg::Panic => panic!("benchmark crash"),
        }
        Ok(())
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Round trip through an actor (send + handle + reply) versus the same through a bare mpsc task.
fn hop(c: &mut Criterion) {
    let rt = runtime();
    let (actor, mpsc_tx) = rt.block_on(async {
        let (ready, _) = mpsc::unbounded_channel();
        let (actor, _) = Actor::spawn(None, Echo, EchoArgs { ready }).await.unwrap();
        let (tx, mut rx) = mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
        tokio::spawn(async move {
            while let Some(reply) = rx.recv().await {
                let _ = reply.send(());
            }
        });
        (actor, tx)
    });

    let mut group = c.benchmark_group("hop");
    group.bench_function("actor_call_round_trip", |b| {
        b.to_async(&rt)
            .iter(|| async { ractor::call!(actor, EchoMsg::Ping).unwrap() })
    });
    group.bench_function("mpsc_round_trip", |b| {
        b.to_async(&rt).iter(|| async {
            let (reply, answer) = tokio::sync::oneshot::channel();
            mpsc_tx.send(reply).unwrap();
            answer.await.unwrap()
        })
    });
    group.bench_function("actor_cast", |b| {
        b.iter(|| actor.cast(EchoMsg::Tell).unwrap())
    });
    group.finish();

    // Percentiles of single round trips.
    let (actor_samples, mpsc_samples) = rt.block_on(async {
        let mut actor_samples = Vec::with_capacity(20_000);
        let mut mpsc_samples = Vec::with_capacity(20_000);
        for _ in 0..20_000 {
            let start = Instant::now();
            ractor::call!(actor, EchoMsg::Ping).unwrap();
            actor_samples.push(start.elapsed());
            let start = Instant::now();
            let (reply, answer) = tokio::sync::oneshot::channel();
            mpsc_tx.send(reply).unwrap();
            answer.await.unwrap();
            mpsc_samples.push(start.elapsed());
        }
        (actor_samples, mpsc_samples)
    });
    let (actor_median, actor_p99) =
        support::report("hop: actor round trip", &mut actor_samples.clone());
    let (mpsc_median, mpsc_p99) =
        support::report("hop: bare mpsc round trip", &mut mpsc_samples.clone());
    println!(
        "hop: actor / mpsc = {:.1}x at the median, {:.1}x at p99 (target: within 10x)",
        actor_median.as_secs_f64() / mpsc_median.as_secs_f64(),
        actor_p99.as_secs_f64() / mpsc_p99.as_secs_f64()
    );
}

/// Child panic → supervisor decides → replacement spawned and ready, with zero backoff.
fn restart(c: &mut Criterion) {
    // The daemon logs panics through tracing; here the default hook's printing would be measured.
    std::panic::set_hook(Box::new(|_| {}));
    let rt = runtime();
    let registry = Registry::new();
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let policy = RestartPolicy {
        max_restarts: u32::MAX,
        window: Duration::from_secs(1),
        backoff_min: Duration::ZERO,
        backoff_max: Duration::ZERO,
        backoff_factor: 1.0,
        jitter: 0.0,
        reset_after: Duration::from_secs(3600),
    };
    rt.block_on(async {
        let spec_registry = registry.clone();
        let args = EchoArgs { ready: ready_tx };
        let spec = ChildSpec::new("echo", policy, move |supervisor| {
            let registry = spec_registry.clone();
            let args = args.clone();
            async move {
                spawn_child(&registry, &ServiceName::new("echo"), Echo, args, supervisor).await
            }
        });
        let args = SupervisorArgs {
            name: "bench".into(),
            children: vec![spec],
            start: StartMode::Sequential,
            events: EventBus::new(),
        };
        Actor::spawn(None, Supervisor, args).await.unwrap();
        ready_rx.recv().await.unwrap();
    });
    let mut samples = Vec::new();
    c.bench_function("restart_to_ready_zero_backoff", |b| {
        b.iter_custom(|iterations| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let child: clawvisor::registry::Mailbox<EchoMsg> = registry
                        .wait_for(&ServiceName::<EchoMsg>::new("echo"), Duration::from_secs(5))
                        .await
                        .unwrap();
                    let start = Instant::now();
                    child.cast(EchoMsg::Panic).unwrap();
                    let ready_at = ready_rx.recv().await.unwrap();
                    let took = ready_at - start;
                    samples.push(took);
                    total += took;
                    // Let the registry see the new incarnation before the next crash.
                    while registry
                        .lookup(&ServiceName::<EchoMsg>::new("echo"))
                        .map(|c| c.get_id())
                        == Some(child.get_id())
                    {
                        tokio::task::yield_now().await;
                    }
                }
                total
            })
        })
    });
    support::report(
        "restart: panic -> replacement ready (backoff 0)",
        &mut samples,
    );
    println!("restart: target under 1 ms plus the configured backoff");
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(50).measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = hop, restart
}
criterion_main!(benches);
