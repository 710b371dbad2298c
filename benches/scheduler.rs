//! Issue 7: 10,000 scheduled jobs held by the real Scheduler (SQLite-backed, `synchronous = FULL`
//! as in production) and a stand-in agent that answers at once: how late each fire reaches its
//! agent (p50/p99; target p99 under 50 ms), the memory the jobs take, and what the scheduler
//! does while it waits (one timer, no wake-ups, CPU time).

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{SecondsFormat, TimeZone, Utc};
use clawvisor::actors::scheduler::{Scheduler, SchedulerArgs, SchedulerClock};
use clawvisor::config::{self, SchedulerConfig};
use clawvisor::domain::{ChatKey, InboundSource, OutEvent, Outbound};
use clawvisor::events::EventBus;
use clawvisor::jobs::{JobScope, NewJob};
use clawvisor::protocol::agent::AgentMsg;
use clawvisor::protocol::scheduler::SchedulerMsg;
use clawvisor::registry::Registry;
use clawvisor::store::schedules::{self, JobRow, JobStatus};
use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::harness::{agent_toml, config_toml};
use criterion::{Criterion, criterion_group, criterion_main};
use ractor::{Actor, ActorProcessingErr, ActorRef};

const JOBS: usize = 10_000;
/// The jobs fall due between this long after the scheduler starts …
const FIRST_FIRE: i64 = 8_000;
/// … spread over this long: a burst (10,000 in 10 s, 1,000 fires a second) and a steadier
/// minute (167 a second).
const SPREADS: [i64; 2] = [10_000, 60_000];
/// How long the scheduler is watched while it waits for the first fire.
const IDLE_WATCH: Duration = Duration::from_secs(3);

/// The stand-in agent: notes when each fire arrives (wall clock) and answers at once.
struct EchoAgent;

struct EchoState {
    registry: Registry,
    arrivals: Arc<Mutex<Vec<(i64, i64)>>>,
}

impl Actor for EchoAgent {
    type Msg = AgentMsg;
    type State = EchoState;
    type Arguments = EchoState;

    async fn pre_start(
        &self,
        _myself: ActorRef<AgentMsg>,
        state: EchoState,
    ) -> Result<EchoState, ActorProcessingErr> {
        Ok(state)
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        message: AgentMsg,
        state: &mut EchoState,
    ) -> Result<(), ActorProcessingErr> {
        let AgentMsg::Inbound(inbound) = message else {
            return Ok(());
        };
        let InboundSource::Schedule { job_id, .. } = inbound.source else {
            return Ok(());
        };
        state
            .arrivals
            .lock()
            .unwrap()
            .push((job_id, clawvisor::clock::now_ms()));
        if let Some(scheduler) = state.registry.lookup(&clawvisor::protocol::scheduler::NAME) {
            let _ = scheduler.cast(SchedulerMsg::Deliver(Outbound {
                agent: inbound.agent,
                chat: inbound.chat,
                run_id: None,
                correlation: inbound.correlation,
                event: OutEvent::Final {
                    text: "done".into(),
                    outbox_id: None,
                },
            }));
        }
        Ok(())
    }
}

fn at_job(at_ms: i64, now: i64) -> JobRow {
    JobRow {
        id: 0,
        agent: "bench".into(),
        name: format!("job at {at_ms}"),
        prompt: "Write the report.".into(),
        target_chat: None,
        kind: "at".into(),
        expression: Utc
            .timestamp_millis_opt(at_ms)
            .unwrap()
            .to_rfc3339_opts(SecondsFormat::Millis, true),
        timezone: "UTC".into(),
        anchor_ms: now,
        missed_policy: "run_once".into(),
        status: JobStatus::Active,
        next_run_ms: Some(at_ms),
        last_run_ms: None,
        last_outcome: None,
        consecutive_failures: 0,
        failing: false,
        created_by: "operator".into(),
        created_in: None,
        created_ms: now,
        updated_ms: now,
    }
}

/// User + system CPU time of this process, from /proc (Linux), in milliseconds.
fn cpu_ms() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command name (which may contain spaces) start at `) `.
    let Some(rest) = stat.rsplit_once(") ").map(|(_, rest)| rest) else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the state field.
    (ticks(11) + ticks(12)) * 10
}

/// What one run of 10,000 jobs showed.
struct Figures {
    lateness: Vec<Duration>,
    rss_delta_kib: u64,
    idle_wake_ups: u64,
    idle_timers: usize,
    idle_cpu_ms: u64,
}

/// Loads 10,000 one-shot jobs due `FIRST_FIRE` ms from now over `spread` ms into a fresh
/// database, starts a scheduler on it, watches it idle, then lets every job fire.
fn measure(rt: &tokio::runtime::Runtime, agent: &config::AgentSpec, spread: i64) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bench.db"), StoreOptions::default()).unwrap();
    let registry = Registry::new();
    let arrivals: Arc<Mutex<Vec<(i64, i64)>>> = Arc::default();
    let start = clawvisor::clock::now_ms() + 2_000;
    let due: Vec<i64> = (0..JOBS as i64)
        .map(|i| start + FIRST_FIRE + (i * 7_919) % spread)
        .collect();
    let jobs: Vec<JobRow> = due.iter().map(|at| at_job(*at, start)).collect();
    let figures = rt.block_on(async {
        store
            .write(move |conn| {
                for job in &jobs {
                    schedules::insert_job(conn, job, start)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        Actor::spawn(
            Some(registry.name(clawvisor::protocol::agent::name("bench").local())),
            EchoAgent,
            EchoState {
                registry: registry.clone(),
                arrivals: arrivals.clone(),
            },
        )
        .await
        .unwrap();
        let rss_before = support::rss_kib();
        let (scheduler, _) = clawvisor::actors::supervise::spawn_unsupervised(
            &registry,
            &clawvisor::protocol::scheduler::NAME,
            Scheduler,
            SchedulerArgs {
                store: store.clone(),
                registry: registry.clone(),
                events: EventBus::new(),
                config: SchedulerConfig::default(),
                agents: vec![agent.clone()],
                clock: SchedulerClock::Wall,
            },
        )
        .await
        .unwrap();
        let scheduler = scheduler.get_derived::<SchedulerMsg>();
        let loaded = ractor::call!(scheduler, SchedulerMsg::Stats).unwrap();
        assert_eq!(loaded.jobs, JOBS);
        let rss_after = support::rss_kib();

        // Idle: nothing is due for a few seconds.
        let (ticks_before, cpu_before) = (loaded.ticks, cpu_ms());
        tokio::time::sleep(IDLE_WATCH).await;
        let idle = ractor::call!(scheduler, SchedulerMsg::Stats).unwrap();
        let idle_cpu_ms = cpu_ms().saturating_sub(cpu_before);

        // Then every job fires once, at its time.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while arrivals.lock().unwrap().len() < JOBS {
            assert!(tokio::time::Instant::now() < deadline, "every job fired");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let lateness: Vec<Duration> = arrivals
            .lock()
            .unwrap()
            .iter()
            .map(|(job_id, arrived)| {
                let due = due[(*job_id - 1) as usize];
                Duration::from_millis((arrived - due).max(0) as u64)
            })
            .collect();
        scheduler.stop(None);
        Figures {
            lateness,
            rss_delta_kib: rss_after.saturating_sub(rss_before),
            idle_wake_ups: idle.ticks - ticks_before,
            idle_timers: idle.timers_armed,
            idle_cpu_ms,
        }
    });
    store.stop_writer();
    figures
}

fn scheduler_bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let base = config::parse_file(&config_toml("http://127.0.0.1:9/v1", ""), "bench.toml").unwrap();
    let agent = config::parse_agent(&agent_toml("bench", ""), "bench.toml", &base).unwrap();
    for spread in SPREADS {
        let mut figures = measure(&rt, &agent, spread);
        support::report(
            &format!(
                "scheduler fire lateness, due time to the agent's mailbox (10,000 one-shot jobs over {} s, synchronous = FULL; target p99 under 50 ms)",
                spread / 1000
            ),
            &mut figures.lateness,
        );
        println!(
            "memory of a scheduler holding 10,000 jobs: {} KiB ({:.2} KiB per job)",
            figures.rss_delta_kib,
            figures.rss_delta_kib as f64 / JOBS as f64
        );
        println!(
            "idle with 10,000 jobs pending, watched for {IDLE_WATCH:?}: {} timer armed, {} wake-ups, {} ms CPU for the whole process",
            figures.idle_timers, figures.idle_wake_ups, figures.idle_cpu_ms
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("bench.db"), StoreOptions::default()).unwrap();
    // One task created through the scheduler (validated, stored, armed) and cancelled again.
    let registry = Registry::new();
    let scheduler = rt.block_on(async {
        clawvisor::actors::supervise::spawn_unsupervised(
            &registry,
            &clawvisor::protocol::scheduler::NAME,
            Scheduler,
            SchedulerArgs {
                store: store.clone(),
                registry: registry.clone(),
                events: EventBus::new(),
                config: SchedulerConfig {
                    max_jobs_per_agent: u32::MAX,
                    ..SchedulerConfig::default()
                },
                agents: vec![agent.clone()],
                clock: SchedulerClock::Wall,
            },
        )
        .await
        .unwrap()
        .0
        .get_derived::<SchedulerMsg>()
    });
    c.bench_function("scheduler_create_then_cancel_a_cron_task", |b| {
        b.iter_custom(|iterations| {
            rt.block_on(async {
                let started = std::time::Instant::now();
                for _ in 0..iterations {
                    let job = NewJob {
                        agent: "bench".into(),
                        name: "weekday briefing".into(),
                        prompt: "Summarise the day.".into(),
                        target: Some(ChatKey::cli("bench")),
                        kind: "cron".into(),
                        expression: "0 9 * * MON-FRI".into(),
                        timezone: "Europe/Berlin".into(),
                        missed_policy: String::new(),
                        created_by: "operator".into(),
                        created_in: None,
                    };
                    let view = ractor::call!(scheduler, SchedulerMsg::Create, job)
                        .unwrap()
                        .unwrap();
                    ractor::call!(scheduler, |reply| SchedulerMsg::Cancel {
                        scope: JobScope::Operator,
                        id: view.id,
                        reply
                    })
                    .unwrap()
                    .unwrap();
                }
                started.elapsed()
            })
        })
    });
    scheduler.stop(None);
    store.stop_writer();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(1)).warm_up_time(Duration::from_millis(100));
    targets = scheduler_bench
}
criterion_main!(benches);
