//! Issue 9: 100 concurrent handoff contracts, round trip through the real daemon with an instant
//! scripted model: each owner conversation delegates once and answers with the merged result.
//! Prints the round-trip p50/p99, the same for a plain answer (no delegation) as the baseline,
//! and the overhead a handoff adds (target: all returned, p99 overhead under 50 ms); then the
//! same one contract at a time, which separates what a handoff costs from the queueing of 100
//! contracts' extra turns on two cores.

mod support;

use std::time::{Duration, Instant};

use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use criterion::{Criterion, criterion_group, criterion_main};

const CONTRACTS: usize = 100;

async fn round_trips(harness: &Harness, prefix: &str, text: &str) -> Vec<Duration> {
    let mut tasks = Vec::with_capacity(CONTRACTS);
    for i in 0..CONTRACTS {
        let chat = ChatKey::cli(&format!("{prefix}-{i}"));
        let mut outputs = harness.listen(&chat).await.expect("listen");
        harness.send("lead", &chat, text).expect("send");
        let started = Instant::now();
        tasks.push(tokio::spawn(async move {
            clawvisor::testkit::harness::wait_reply(&mut outputs, Duration::from_secs(120))
                .await
                .map(|reply| (started.elapsed(), reply.text))
        }));
    }
    let mut samples = Vec::with_capacity(CONTRACTS);
    for task in tasks {
        let (elapsed, text) = task.await.expect("task").expect("an answer");
        assert!(text.starts_with("Merged") || text == "plain", "{text}");
        samples.push(elapsed);
    }
    samples
}

fn handoff(_c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let script = Script::new()
            .rule(
                Rule::text("Merged: done.")
                    .when_system_contains("You are lead")
                    .when_after_tool_result("handoff_task"),
            )
            .rule(
                Rule::tool_call("handoff_task", r#"{"agent": "worker", "task": "compute"}"#)
                    .when_system_contains("You are lead")
                    .when_last_user_contains("delegate"),
            )
            .rule(Rule::text("plain").when_system_contains("You are lead"))
            .rule(Rule::text("worker result").when_system_contains("You are worker"));
        let llm = ScriptedLlm::start(script).await.expect("model");
        let mut options = HarnessOptions::new(llm.base_url());
        options.agents = vec![
            agent_toml("lead", "tools = [\"handoff_task\"]"),
            agent_toml("worker", "reports_to = \"lead\""),
        ];
        options.config_extra = "[store]\nsynchronous = \"normal\"\n".into();
        let harness = Harness::start(options).await.expect("daemon");
        let mut plain = round_trips(&harness, "plain", "just answer").await;
        let mut delegated = round_trips(&harness, "handoff", "delegate it").await;
        let (plain_median, plain_p99) =
            support::report("handoff: plain answer round trip (baseline)", &mut plain);
        let (median, p99) = support::report(
            &format!("handoff: {CONTRACTS} concurrent contracts round trip"),
            &mut delegated,
        );
        let returned: i64 = harness
            .store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT COUNT(*) FROM handoff_contracts WHERE status = 'returned' AND delivered_ms IS NOT NULL",
                    [],
                    |r| r.get(0),
                )?)
            })
            .await
            .expect("count");
        println!(
            "    returned and delivered: {returned}/{CONTRACTS} (target: all); overhead of a handoff: \
             median {:?}, p99 {:?} (target p99 < 50 ms; it includes the delegate's own model call \
             and run, i.e. a second full turn)",
            median.saturating_sub(plain_median),
            p99.saturating_sub(plain_p99)
        );
        // One at a time: what a handoff adds to one conversation, without the queueing of 100
        // contracts' extra turns on two cores.
        let mut plain_alone = Vec::new();
        let mut delegated_alone = Vec::new();
        for i in 0..CONTRACTS {
            for (samples, prefix, text) in [
                (&mut plain_alone, "plain-alone", "just answer"),
                (&mut delegated_alone, "handoff-alone", "delegate it"),
            ] {
                let chat = ChatKey::cli(&format!("{prefix}-{i}"));
                let started = Instant::now();
                let reply = harness.ask("lead", &chat, text).await.expect("an answer");
                assert!(reply.text.starts_with("Merged") || reply.text == "plain");
                samples.push(started.elapsed());
            }
        }
        let (plain_median, plain_p99) =
            support::report("handoff: plain answer, one at a time", &mut plain_alone);
        let (median, p99) =
            support::report("handoff: one contract at a time", &mut delegated_alone);
        println!(
            "    overhead of a handoff alone: median {:?}, p99 {:?} (target p99 < 50 ms)",
            median.saturating_sub(plain_median),
            p99.saturating_sub(plain_p99)
        );
        harness.stop().await;
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = handoff
}
criterion_main!(benches);
