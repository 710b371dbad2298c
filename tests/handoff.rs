//! Handoff contracts end to end with the scripted model: delegation and return, validation with
//! retries, deadlines, cancellation, refusals, Studio's view, and a kill -9 of the real daemon
//! while a contract is in progress.

use std::collections::BTreeMap;
use std::time::Duration;

use clawvisor::domain::{ChatKey, OutEvent};
use clawvisor::testkit::fake_telegram::FakeTelegram;
use clawvisor::testkit::harness::{
    Harness, HarnessOptions, ScratchDir, agent_toml, config_toml, telegram_toml, wait_reply,
};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;

/// The owner `lead` (may delegate to `researcher`, reviewed by `checker`); `loner` may not.
fn agents() -> Vec<String> {
    vec![
        agent_toml(
            "lead",
            "tools = [\"handoff_task\", \"handoff_status\", \"handoff_cancel\", \"spawn_subagent\"]",
        ),
        agent_toml(
            "researcher",
            "reports_to = \"lead\"\ntools = [\"handoff_task\", \"handoff_progress\"]",
        ),
        agent_toml("checker", ""),
        agent_toml("loner", "tools = [\"handoff_task\"]"),
    ]
}

async fn start(script: Script) -> (ScriptedLlm, Harness) {
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = agents();
    let harness = Harness::start(options).await.unwrap();
    (llm, harness)
}

async fn contract_rows(harness: &Harness) -> Vec<(String, String, i64, Option<i64>)> {
    harness
        .store()
        .read(|conn| {
            let mut statement = conn.prepare(
                "SELECT id, status, attempts, delivered_ms FROM handoff_contracts ORDER BY created_ms",
            )?;
            let rows = statement.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

/// Counts what could still make someone speak: contracts not finished or not yet delivered to
/// their owner, and runs still going. Zero means the conversation has settled.
const OPEN_WORK: &str = "SELECT (SELECT COUNT(*) FROM handoff_contracts \
     WHERE status IN ('created', 'accepted', 'in_progress') OR delivered_ms IS NULL) \
     + (SELECT COUNT(*) FROM runs WHERE status IN ('running', 'waiting_approval'))";

fn lead_delegates(validator: Option<&str>) -> Rule {
    let validator = validator
        .map(|name| format!(", \"validator\": \"{name}\""))
        .unwrap_or_default();
    Rule::tool_call(
        "handoff_task",
        format!(
            r#"{{"agent": "researcher", "task": "find the boiling point of water"{validator}}}"#
        ),
    )
    .when_system_contains("You are lead")
    .when_last_user_contains("boiling")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_delegates_gets_the_result_as_data_and_answers_once() {
    let script = Script::new()
        .rule(
            Rule::text("Merged answer: the delegate says 100 C.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(lead_delegates(None))
        .rule(
            Rule::text("RAW FINDINGS: 100 C at sea level")
                .when_system_contains("You are researcher"),
        );
    let (llm, harness) = start(script).await;
    let chat = ChatKey::cli("owner");
    let mut outputs = harness.listen(&chat).await.unwrap();
    harness
        .send("lead", &chat, "what is the boiling point?")
        .unwrap();
    let reply = wait_reply(&mut outputs, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(reply.text, "Merged answer: the delegate says 100 C.");
    // The user sees one answer, never the delegate's raw output. Once every contract is
    // delivered and no run is going, nothing more can reach the chat.
    wait_until(Duration::from_secs(20), "the handoff to settle", || async {
        harness
            .store()
            .read(|conn| Ok(conn.query_row(OPEN_WORK, [], |r| r.get::<_, i64>(0))?))
            .await
            .unwrap()
            == 0
    })
    .await;
    while let Ok(outbound) = outputs.try_recv() {
        if let OutEvent::Final { text, .. } | OutEvent::Notice { text } = outbound.event {
            panic!("a second message reached the user: {text}");
        }
    }
    assert!(!reply.partials.iter().any(|p| p.contains("RAW FINDINGS")));
    // The owner's model got the delegate's work as data.
    let owner_saw = llm
        .requests()
        .iter()
        .map(|r| r.to_string())
        .any(|r| r.contains("handoff_result") && r.contains("RAW FINDINGS"));
    assert!(owner_saw);
    let rows = contract_rows(&harness).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].1, "returned");
    assert!(rows[0].3.is_some(), "delivered");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validator_rejection_is_fixed_and_three_rejections_fail_the_contract() {
    // The checker rejects the first draft, approves the second.
    let script = Script::new()
        .rule(
            Rule::text("Lead: done.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(lead_delegates(Some("checker")))
        .rule(
            Rule::text("APPROVE")
                .when_system_contains("You are checker")
                .when_last_user_contains("draft two"),
        )
        .rule(Rule::text("REJECT: cite a source").when_system_contains("You are checker"))
        .rule(
            Rule::text("draft two, with a source")
                .when_system_contains("You are researcher")
                .when_last_user_contains("rejected"),
        )
        .rule(Rule::text("draft one").when_system_contains("You are researcher"));
    let (_llm, harness) = start(script).await;
    let reply = harness
        .ask("lead", &ChatKey::cli("v1"), "boiling point please")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: done.");
    let rows = contract_rows(&harness).await;
    assert_eq!((rows[0].1.as_str(), rows[0].2), ("returned", 1), "{rows:?}");
    let result: String = harness
        .store()
        .read(|conn| Ok(conn.query_row("SELECT result FROM handoff_contracts", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(result, "draft two, with a source");
    harness.stop().await;

    // A checker that always rejects: the third rejection fails the contract, and the owner is told.
    let script = Script::new()
        .rule(
            Rule::text("Lead: the research could not be validated.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(lead_delegates(Some("checker")))
        .rule(Rule::text("REJECT: still wrong").when_system_contains("You are checker"))
        .rule(Rule::text("another draft").when_system_contains("You are researcher"));
    let (llm, harness) = start(script).await;
    let reply = harness
        .ask("lead", &ChatKey::cli("v2"), "boiling point please")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: the research could not be validated.");
    let rows = contract_rows(&harness).await;
    assert_eq!((rows[0].1.as_str(), rows[0].2), ("failed", 3), "{rows:?}");
    let requests: Vec<String> = llm.requests().iter().map(|r| r.to_string()).collect();
    assert!(
        requests
            .iter()
            .any(|r| r.contains("rejected the work 3 times")),
        "{:?}",
        llm.requests()
            .iter()
            .filter_map(|r| r["messages"].as_array().and_then(|m| m.last()).cloned())
            .filter(|m| m["role"] == "tool")
            .collect::<Vec<_>>()
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passed_deadline_expires_the_contract_and_a_cancel_stops_the_delegate() {
    let script = Script::new()
        .rule(
            Rule::text("Lead: told about the outcome.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(
            Rule::tool_call(
                "handoff_task",
                r#"{"agent": "researcher", "task": "a slow study", "deadline_minutes": 1, "wait_seconds": 1}"#,
            )
            .when_system_contains("You are lead")
            .when_last_user_contains("slow"),
        )
        .rule(Rule::text("Lead: noted.").when_system_contains("You are lead"))
        .rule(
            Rule::text("too late")
                .delay(Duration::from_secs(20))
                .when_system_contains("You are researcher"),
        );
    let (_llm, harness) = start(script).await;
    // The owner does not wait long: its run ends, the contract stays open.
    let reply = harness
        .ask("lead", &ChatKey::cli("slow"), "start the slow study")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: told about the outcome.");
    let id = contract_rows(&harness).await[0].0.clone();
    // The operator cancels it through Studio: the delegate's run is stopped.
    // Scripts on the server send the daemon's local access token.
    let (studio, http) = harness.studio_http().await;
    let cancelled = http
        .post(format!("{studio}/api/v1/handoffs/{id}/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status().as_u16(), 200);
    let detail: serde_json::Value = http
        .get(format!("{studio}/api/v1/handoffs/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["contract"]["status"], "cancelled");
    let kinds: Vec<&str> = detail["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.starts_with(&["created", "accepted", "in_progress"]),
        "{kinds:?}"
    );
    assert!(
        kinds.contains(&"cancelled") && kinds.contains(&"delivered"),
        "{kinds:?}"
    );
    // The outcome reached the owner's conversation, and the owner answered it.
    let status = wait_until(
        Duration::from_secs(20),
        "the delegate's run stops",
        || async {
            let status: String = harness
                .store()
                .read(|conn| {
                    Ok(conn.query_row(
                        "SELECT status FROM runs WHERE agent = 'researcher' ORDER BY id DESC LIMIT 1",
                        [],
                        |r| r.get(0),
                    )?)
                })
                .await
                .unwrap();
            (status != "running").then_some(status)
        },
    )
    .await;
    assert_ne!(status, "succeeded", "the delegate's run was stopped");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_expires_an_open_contract_and_the_owner_hears_of_it() {
    let script = Script::new()
        .rule(
            Rule::text("Lead: the study expired, sorry.")
                .when_system_contains("You are lead")
                .when_last_user_contains("expired"),
        )
        .rule(
            Rule::text("Lead: waiting.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(
            Rule::tool_call(
                "handoff_task",
                r#"{"agent": "researcher", "task": "slow", "wait_seconds": 1}"#,
            )
            .when_system_contains("You are lead"),
        )
        .rule(
            Rule::text("too late")
                .delay(Duration::from_secs(30))
                .when_system_contains("You are researcher"),
        );
    let (_llm, harness) = start(script).await;
    let chat = ChatKey::cli("deadline");
    let mut outputs = harness.listen(&chat).await.unwrap();
    harness.send("lead", &chat, "go").unwrap();
    assert_eq!(
        wait_reply(&mut outputs, Duration::from_secs(30))
            .await
            .unwrap()
            .text,
        "Lead: waiting."
    );
    // Shorten the deadline in the database, then restart: the contract expires at once.
    harness
        .store()
        .write(|conn| {
            conn.execute("UPDATE handoff_contracts SET deadline_ms = 1", [])?;
            Ok(())
        })
        .await
        .unwrap();
    let dir: ScratchDir = harness.stop().await;
    let llm = _llm;
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = agents();
    let harness = Harness::start_in(dir, options).await.unwrap();
    // The owner may answer before a listener could be attached after the restart: the recorded
    // answer in its conversation is the proof.
    wait_until(
        Duration::from_secs(30),
        "the owner's answer about the expired contract",
        || async {
            harness
                .store()
                .read(|conn| {
                    Ok(conn.query_row(
                        "SELECT COUNT(*) FROM session_events e JOIN sessions s ON s.id = e.session_id
                         WHERE s.chat = 'cli:deadline' AND e.kind = 'assistant'
                           AND e.content = 'Lead: the study expired, sorry.'",
                        [],
                        |row| row.get::<_, i64>(0),
                    )?)
                })
                .await
                .unwrap()
                == 1
        },
    )
    .await;
    let rows = contract_rows(&harness).await;
    assert_eq!(rows[0].1, "expired");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegation_outside_the_allowed_set_and_delegation_by_a_delegate_are_refused() {
    let script = Script::new()
        .rule(
            Rule::text("Loner: refused.")
                .when_system_contains("You are loner")
                .when_after_tool_result("handoff_task"),
        )
        .rule(
            Rule::tool_call(
                "handoff_task",
                r#"{"agent": "researcher", "task": "help me"}"#,
            )
            .when_system_contains("You are loner"),
        )
        .rule(
            Rule::text("Lead: done.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(lead_delegates(None))
        .rule(
            Rule::text("Researcher: could not delegate, did it myself.")
                .when_system_contains("You are researcher")
                .when_after_tool_result("handoff_task"),
        )
        .rule(
            Rule::tool_call(
                "handoff_task",
                r#"{"agent": "checker", "task": "do it for me"}"#,
            )
            .when_system_contains("You are researcher"),
        );
    let (llm, harness) = start(script).await;
    let reply = harness
        .ask("loner", &ChatKey::cli("l"), "please delegate")
        .await
        .unwrap();
    assert_eq!(reply.text, "Loner: refused.");
    assert!(
        llm.requests().iter().any(|r| r
            .to_string()
            .contains("loner may not delegate to `researcher`")),
        "the refusal names who may be delegated to"
    );
    let reply = harness
        .ask("lead", &ChatKey::cli("r"), "boiling point?")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: done.");
    assert!(
        llm.requests()
            .iter()
            .any(|r| r.to_string().contains("a delegate cannot delegate further"))
    );
    let rows = contract_rows(&harness).await;
    assert_eq!(rows.len(), 1, "only the lead's contract exists: {rows:?}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_agents_run_in_parallel_and_report_into_the_parent_run() {
    let script = Script::new()
        .rule(
            Rule::text("Lead: both parts are in.")
                .when_system_contains("You are lead")
                .when_after_tool_result("spawn_subagent"),
        )
        .rule(
            Rule::tool_calls([
                ("spawn_subagent", r#"{"task": "part A of the report"}"#),
                ("spawn_subagent", r#"{"task": "part B of the report"}"#),
            ])
            .when_system_contains("You are lead")
            .when_last_user_contains("write the report"),
        )
        .rule(
            Rule::text("section A written")
                .delay(Duration::from_millis(600))
                .when_last_user_contains("part A"),
        )
        .rule(
            Rule::text("section B written")
                .delay(Duration::from_millis(600))
                .when_last_user_contains("part B"),
        );
    let (llm, harness) = start(script).await;
    let reply = harness
        .ask("lead", &ChatKey::cli("sub"), "write the report")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: both parts are in.");
    let last = llm.requests().last().unwrap().to_string();
    assert!(last.contains("section A written") && last.contains("section B written"));
    // In parallel: each child started before the other one returned.
    let (started_ms, returned_ms): (Vec<i64>, Vec<i64>) = harness
        .store()
        .read(|conn| {
            let times = |kind: &str| -> rusqlite::Result<Vec<i64>> {
                let mut statement = conn.prepare(
                    "SELECT at_ms FROM handoff_timeline WHERE kind = ?1 ORDER BY contract_id",
                )?;
                let rows = statement.query_map([kind], |r| r.get(0))?;
                rows.collect()
            };
            Ok((times("in_progress")?, times("returned")?))
        })
        .await
        .unwrap();
    assert_eq!((started_ms.len(), returned_ms.len()), (2, 2));
    assert!(
        started_ms[0] < returned_ms[1] && started_ms[1] < returned_ms[0],
        "the two sub-agents overlapped: started {started_ms:?}, returned {returned_ms:?}"
    );
    let delegates: Vec<String> = harness
        .store()
        .read(|conn| {
            let mut statement = conn.prepare("SELECT delegate FROM handoff_contracts")?;
            let rows = statement.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(delegates, ["lead", "lead"]);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_in_progress_survives_a_kill_and_its_result_reaches_the_owner_once() {
    let script = Script::new()
        .rule(
            Rule::text("Lead final: FINDINGS merged.")
                .when_system_contains("You are lead")
                .when_last_user_contains("FINDINGS"),
        )
        .rule(
            Rule::text("Lead: working on it.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(lead_delegates(None))
        .rule(
            Rule::text("FINDINGS: 100 C")
                .delay(Duration::from_secs(3))
                .when_system_contains("You are researcher"),
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let fake = FakeTelegram::start().await;
    let token = "901:AAH-handoff-crash-token-0123456789";
    let bot = fake.add_bot(token, "lead_bot");
    let dir = ScratchDir::new("clawvisor-handoff-crash").unwrap();
    let mut agents = agents();
    agents[0] = agent_toml(
        "lead",
        &format!(
            "tools = [\"handoff_task\"]\n{}",
            telegram_toml("LEAD_TOKEN", &fake.base_url(), &[42], &[])
        ),
    );
    write_config(
        dir.path(),
        &config_toml(
            &llm.base_url(),
            "[telegram]\npoll_timeout = \"2s\"\nboot_stagger = \"50ms\"\nstale_grace = \"5m\"\n",
        ),
        &agents,
    )
    .unwrap();
    let env = BTreeMap::from([("LEAD_TOKEN".to_string(), token.to_string())]);
    const BINARY: &str = env!("CARGO_BIN_EXE_clawvisor");
    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon starts");
    fake.push_message(bot, 42, 42, "what is the boiling point?");
    // Killed while the delegate works (its answer takes 3 s).
    let db = dir.path().join("data/clawvisor.db");
    let count = |sql: &str| {
        rusqlite::Connection::open(&db)
            .and_then(|conn| conn.query_row(sql, [], |r| r.get::<_, i64>(0)))
            .unwrap_or(-1)
    };
    wait_until(Duration::from_secs(30), "the contract started", || async {
        count("SELECT COUNT(*) FROM handoff_contracts WHERE status = 'in_progress'") == 1
    })
    .await;
    // The delegate's run is under way (its answer takes 3 s): kill it midway.
    wait_until(Duration::from_secs(30), "the delegate's run", || async {
        count("SELECT COUNT(*) FROM runs WHERE agent = 'researcher' AND status = 'running'") >= 1
    })
    .await;
    daemon.kill();
    let daemon = DaemonProcess::start(BINARY, dir.path(), &env).expect("the daemon restarts");
    fake.wait_for_sent(
        bot,
        |m| m.visible_text.contains("Lead final: FINDINGS merged."),
        Duration::from_secs(40),
    )
    .await
    .unwrap_or_else(|| {
        let conn = rusqlite::Connection::open(&db).unwrap();
        let rows: Vec<String> = conn
            .prepare("SELECT kind || ': ' || detail FROM handoff_timeline ORDER BY id")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        panic!(
            "the result never reached the owner; sent: {:?}; timeline: {rows:?}",
            fake.sent(bot)
                .iter()
                .map(|m| m.visible_text.clone())
                .collect::<Vec<_>>()
        )
    });
    // Once every contract is delivered and no run is going, nothing more can be sent.
    wait_until(Duration::from_secs(30), "the handoff to settle", || async {
        count(OPEN_WORK) == 0
    })
    .await;
    daemon.terminate(Duration::from_secs(30)).unwrap();
    let merged = fake
        .sent(bot)
        .iter()
        .filter(|m| m.visible_text.contains("Lead final: FINDINGS merged."))
        .count();
    assert_eq!(merged, 1, "exactly once");
    assert!(
        fake.sent(bot)
            .iter()
            .all(|m| !m.visible_text.starts_with("FINDINGS")),
        "the delegate never speaks to the user"
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (status, delivered): (String, Option<i64>) = conn
        .query_row(
            "SELECT status, delivered_ms FROM handoff_contracts",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(status, "returned");
    assert!(delivered.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_limits_the_tools_its_delegate_may_use() {
    let script = Script::new()
        .rule(
            Rule::text("Lead: done.")
                .when_system_contains("You are lead")
                .when_after_tool_result("handoff_task"),
        )
        .rule(
            Rule::tool_call(
                "handoff_task",
                r#"{"agent": "researcher", "task": "report progress then answer", "tools": []}"#,
            )
            .when_system_contains("You are lead"),
        )
        .rule(
            Rule::text("answered without tools")
                .when_system_contains("You are researcher")
                .when_after_tool_result("handoff_progress"),
        )
        .rule(
            Rule::tool_call("handoff_progress", r#"{"note": "halfway"}"#)
                .when_system_contains("You are researcher"),
        );
    let (llm, harness) = start(script).await;
    let reply = harness
        .ask("lead", &ChatKey::cli("limits"), "go")
        .await
        .unwrap();
    assert_eq!(reply.text, "Lead: done.");
    assert!(
        llm.requests()
            .iter()
            .any(|r| r.to_string().contains("allows only these tools: none")),
        "the delegate was told the tool is outside its contract"
    );
    let progress: i64 = harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*) FROM handoff_timeline WHERE kind = 'progress'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(progress, 0, "the refused call did not run");
    harness.stop().await;
}
