//! Issue 5: 10,000 pending approvals with TTLs held by the real ApprovalDesk (SQLite-backed):
//! how late each expiry fires (p50/p99; target p99 under 100 ms) and the memory they take.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use clawvisor::actors::approval_desk::{ApprovalDesk, ApprovalDeskArgs};
use clawvisor::domain::ChatKey;
use clawvisor::events::EventBus;
use clawvisor::policy::RiskLevel;
use clawvisor::protocol::approvals::{ApprovalDeskMsg, ApprovalRequest, Decider, Decision};
use clawvisor::registry::Registry;
use clawvisor::store::{Store, StoreOptions, Synchronous};
use criterion::{Criterion, criterion_group, criterion_main};
use ractor::Actor;

const PENDING: usize = 10_000;

fn expiry(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(
        &dir.path().join("bench.db"),
        StoreOptions {
            synchronous: Synchronous::Normal,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let events = EventBus::new();
    let args = ApprovalDeskArgs {
        store: store.clone(),
        registry: Registry::new(),
        events: events.clone(),
        approvers: BTreeMap::new(),
        studio: true,
    };
    let (lateness, rss_delta) = rt.block_on(async {
        let (desk, _) = Actor::spawn(None, ApprovalDesk, args).await.unwrap();
        let desk = desk.get_derived::<ApprovalDeskMsg>();

        let before = support::rss_kib();
        let mut waiting = Vec::with_capacity(PENDING);
        for i in 0..PENDING {
            // Deadlines spread over 3 to 13 seconds from now.
            let ttl = Duration::from_millis(3_000 + (i as u64 * 7_919) % 10_000);
            let request = ApprovalRequest {
                agent: "bench".into(),
                chat: ChatKey::cli("bench"),
                run_id: i as i64,
                call_id: format!("call-{i}"),
                tool: "write_file".into(),
                action: format!("write_file: notes-{i}.txt"),
                action_hash: format!("{i:064x}"),
                target: format!("notes-{i}.txt"),
                risk: RiskLevel::L2,
                reason: "benchmark".into(),
                ttl,
                screenshot: None,
            };
            let desk = desk.clone();
            waiting.push(tokio::spawn(async move {
                ractor::call!(desk, ApprovalDeskMsg::Request, request)
            }));
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = support::rss_kib();
        // Lateness is read from what the desk stored (decided_ms − expires_ms), once every request
        // has expired: the event stream is bounded and would drop samples under this burst.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let lateness: Vec<Duration> = loop {
            let rows: Vec<(i64, Option<i64>)> = store
                .read(|conn| {
                    let mut statement = conn.prepare(
                        "SELECT expires_ms, decided_ms FROM approvals WHERE status = 'denied_timeout'",
                    )?;
                    let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
                    Ok(rows.collect::<Result<Vec<_>, _>>()?)
                })
                .await
                .expect("read the approvals");
            if rows.len() >= PENDING {
                break rows
                    .into_iter()
                    .map(|(expires, decided)| {
                        Duration::from_millis((decided.unwrap_or(expires) - expires).max(0) as u64)
                    })
                    .collect();
            }
            assert!(tokio::time::Instant::now() < deadline, "expiries arrive");
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        for task in waiting {
            let _ = task.await;
        }
        (lateness, after.saturating_sub(before))
    });
    let mut lateness = lateness;
    support::report(
        "approval expiry lateness (10,000 pending; target p99 under 100 ms)",
        &mut lateness,
    );
    println!(
        "memory of 10,000 pending approvals: {rss_delta} KiB ({:.2} KiB each, including their waiting callers)",
        rss_delta as f64 / PENDING as f64
    );
    // One request stored and shown, then decided by the operator, until the waiting run hears it.
    let args = ApprovalDeskArgs {
        store: store.clone(),
        registry: Registry::new(),
        events: EventBus::new(),
        approvers: BTreeMap::new(),
        studio: true,
    };
    let desk = rt.block_on(async {
        let (desk, _) = Actor::spawn(None, ApprovalDesk, args).await.unwrap();
        desk.get_derived::<ApprovalDeskMsg>()
    });
    let mut next = 1_000_000i64;
    c.bench_function("approval_request_then_decision_round_trip", |b| {
        b.iter_custom(|iterations| {
            rt.block_on(async {
                let started = std::time::Instant::now();
                for _ in 0..iterations {
                    next += 1;
                    let request = ApprovalRequest {
                        agent: "bench".into(),
                        chat: ChatKey::cli("bench"),
                        run_id: next,
                        call_id: "call".into(),
                        tool: "write_file".into(),
                        action: "write_file: x".into(),
                        action_hash: "h".into(),
                        target: "x".into(),
                        risk: RiskLevel::L2,
                        reason: "benchmark".into(),
                        ttl: Duration::from_secs(300),
                        screenshot: None,
                    };
                    let waiter = desk.clone();
                    let verdict = tokio::spawn(async move {
                        ractor::call!(waiter, ApprovalDeskMsg::Request, request)
                    });
                    let id: String = loop {
                        let run_id = next;
                        let found = store
                            .read(move |conn| {
                                Ok(clawvisor::store::approvals::for_call(conn, run_id, "call")?
                                    .map(|row| row.id))
                            })
                            .await
                            .unwrap();
                        if let Some(id) = found {
                            break id;
                        }
                        tokio::task::yield_now().await;
                    };
                    let decider = Decider::Operator {
                        name: "bench".into(),
                    };
                    ractor::call!(desk, ApprovalDeskMsg::Decide, id, Decision::Deny, decider)
                        .unwrap();
                    verdict.await.unwrap().unwrap();
                }
                started.elapsed()
            })
        })
    });
    store.stop_writer();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).measurement_time(Duration::from_secs(1)).warm_up_time(Duration::from_millis(100));
    targets = expiry
}
criterion_main!(benches);
