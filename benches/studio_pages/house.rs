//! The full house of issue #28's benchmark: 10 agents, each with a bot on the fake Bot API and an
//! owner who claimed it, 1,000 finished runs (with their steps, transcripts, audit rows and cost
//! rows, as the runtime writes them), 10,000 memories and two schedules per agent — in the real
//! daemon's SQLite file.
//!
//! Everything is written through the store's own queries on its one writer (`store::runs`,
//! `store::sessions`, `store::memory`, `store::people`, `audit::append`), and the schedules
//! through Studio's API, so the rows are exactly what the daemon itself would have written. The
//! runs are spread over the last 28 days, so the Costs page's 30 days hold all of them.

use clawvisor::store::memory::NewFact;
use clawvisor::store::people::{Person, PersonStatus};
use clawvisor::store::runs::{CallSite, CallUsage, NewStep, RunStatus};
use clawvisor::store::sessions::{EventKindRow, NewEvent};
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::world::World;
use rusqlite::Connection;
use serde_json::json;

/// The agents, in the order their files are written.
pub const AGENTS: [&str; 10] = [
    "ada", "bo", "cyd", "dee", "eli", "fay", "gus", "hal", "ivy", "jo",
];
pub const RUNS: i64 = 1_000;
pub const MEMORIES: i64 = 10_000;
const SCHEDULES_PER_AGENT: usize = 2;
/// Minutes between two runs of the house: 1,000 runs cover the last ~28 days.
const RUN_SPACING_MS: i64 = 40 * 60_000;

/// The Telegram user who claimed `agent`'s bot (one owner per agent).
pub fn owner_id(agent_index: usize) -> i64 {
    700_000 + agent_index as i64
}

/// The chats an agent's runs happen in: its owner's private chat, the family group and the
/// operator's Studio conversation (the one Studio's Chat page opens by default).
fn chats(agent_index: usize) -> [String; 3] {
    [
        format!("tg:{}", owner_id(agent_index)),
        format!("tg:-100{}", 500 + agent_index),
        "studio:operator".to_string(),
    ]
}

/// Starts the daemon with the ten agents and their bots (Studio on loopback).
pub async fn start() -> World {
    let mut builder = World::builder(Script::new().rule(Rule::text("Done.")));
    for (index, agent) in AGENTS.iter().enumerate() {
        builder = builder.agent_with_bot(
            agent,
            "tools = [\"write_file\", \"read_file\"]\ndaily_budget_usd = 5.0",
            &format!("{}:AAH-full-house-bench-token-{index:04}", 5_000 + index),
            &[],
            &[],
        );
    }
    builder.start().await
}

/// Fills the house: owners, runs, memories (through the writer), schedules (through the API).
pub async fn seed(world: &World, base: &str, http: &reqwest::Client) {
    let now = clawvisor::clock::now_ms();
    world
        .store()
        .write(move |conn| seed_owners(conn, now))
        .await
        .expect("the owners are stored");
    // A transaction per agent keeps each writer job short (the daemon writes meanwhile too).
    for (index, agent) in AGENTS.iter().enumerate() {
        let agent = agent.to_string();
        world
            .store()
            .write(move |conn| seed_runs(conn, index, &agent, now))
            .await
            .expect("the runs are stored");
    }
    for first in (0..MEMORIES).step_by(1_000) {
        world
            .store()
            .write(move |conn| seed_memories(conn, first, (first + 1_000).min(MEMORIES), now))
            .await
            .expect("the memories are stored");
    }
    seed_schedules(base, http).await;
    // Each write above returned after its commit: the house is all there now.
    let counts = world
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM run_steps),
                        (SELECT COUNT(*) FROM memory_facts), (SELECT COUNT(*) FROM jobs)",
                [],
                |row| Ok([row.get::<_, i64>(0)?, row.get(1)?, row.get(2)?, row.get(3)?]),
            )?)
        })
        .await
        .expect("the house can be counted");
    let jobs = (AGENTS.len() * SCHEDULES_PER_AGENT) as i64;
    assert_eq!(
        counts,
        [RUNS, RUNS * 5, MEMORIES, jobs],
        "runs, steps, memories and jobs of the house"
    );
}

/// Each bot claimed by its owner.
fn seed_owners(conn: &Connection, now: i64) -> clawvisor::store::Result<()> {
    for (index, agent) in AGENTS.iter().enumerate() {
        clawvisor::store::people::set_person(
            conn,
            &Person {
                agent: agent.to_string(),
                user_id: owner_id(index),
                name: format!("Owner of {agent}"),
                status: PersonStatus::Owner,
                changed_ms: now - 30 * 86_400_000,
                changed_by: "claim".to_string(),
            },
        )?;
    }
    Ok(())
}

/// The agent's share of the 1,000 runs (every tenth run of the house), each as the runtime
/// records one: the user's message, a model call asking for `write_file`, the gate's decision,
/// the call and its result (audited), a second model call, the answer; cost rows for both calls.
/// Every 50th run failed at the tool.
fn seed_runs(
    conn: &Connection,
    agent_index: usize,
    agent: &str,
    now: i64,
) -> clawvisor::store::Result<()> {
    let agents = AGENTS.len() as i64;
    let chats = chats(agent_index);
    for number in (agent_index as i64..RUNS).step_by(AGENTS.len()) {
        let started = now - (RUNS - number) * RUN_SPACING_MS;
        let chat = &chats[((number / agents) % 3) as usize];
        let session = clawvisor::store::sessions::active_or_create(conn, agent, chat, started)?.id;
        let question = format!("Please note down item {number} of the shopping list.");
        event(
            conn,
            session,
            EventKindRow::User,
            &question,
            None,
            None,
            started,
        )?;
        let run =
            clawvisor::store::runs::create(conn, session, agent, chat, "message", None, started)?;
        let failed = number % 50 == 49;
        model_call(conn, run, agent, started + 200, true)?;
        tool_steps(conn, session, run, agent, number, failed, started + 300)?;
        model_call(conn, run, agent, started + 700, false)?;
        let answer = if failed {
            "I could not write the note: the disk is full."
        } else {
            "Noted. The list is in **note.txt**."
        };
        event(
            conn,
            session,
            EventKindRow::Assistant,
            answer,
            None,
            Some(run),
            started + 900,
        )?;
        let status = if failed {
            RunStatus::Failed
        } else {
            RunStatus::Succeeded
        };
        clawvisor::store::runs::finish(conn, run, status, answer, started + 900)?;
    }
    Ok(())
}

/// A transcript event of `session`.
fn event(
    conn: &Connection,
    session: i64,
    kind: EventKindRow,
    content: &str,
    data: Option<&str>,
    run_id: Option<i64>,
    at_ms: i64,
) -> clawvisor::store::Result<()> {
    clawvisor::store::sessions::append(
        conn,
        session,
        &NewEvent {
            kind,
            sender: None,
            content,
            data,
            run_id,
            inbound_id: None,
        },
        at_ms,
    )?;
    Ok(())
}

/// A model call's step, the run's usage and its cost row, as `agent::run::model` records them.
fn model_call(
    conn: &Connection,
    run: i64,
    agent: &str,
    at_ms: i64,
    asks_for_tool: bool,
) -> clawvisor::store::Result<()> {
    let usage = CallUsage {
        input_tokens: 1_200,
        output_tokens: 150,
        cost_usd: 0.0015,
        unpriced: false,
    };
    let step = NewStep {
        kind: "llm",
        name: Some("scripted/scripted-model".to_string()),
        detail: json!({
            "prompt_tokens_estimated": 1_180,
            "dropped_layers": [],
            "finish": if asks_for_tool { "ToolCalls" } else { "Stop" },
            "tool_calls": if asks_for_tool { vec!["write_file"] } else { vec![] },
            "unpriced": false,
        }),
        tokens_in: Some(usage.input_tokens),
        tokens_out: Some(usage.output_tokens),
        cost_usd: Some(usage.cost_usd),
        duration_ms: Some(180),
    };
    clawvisor::store::runs::add_step(conn, run, &step, at_ms)?;
    clawvisor::store::runs::add_usage(conn, run, "scripted-model", &usage)?;
    clawvisor::store::runs::record_cost(
        conn,
        &CallSite {
            at_ms,
            agent,
            provider: "scripted",
            model: "scripted-model",
            run_id: Some(run),
        },
        &usage,
    )
}

/// The gate's decision, the call, its result and its audit row, as `agent::dispatch` records them.
fn tool_steps(
    conn: &Connection,
    session: i64,
    run: i64,
    agent: &str,
    number: i64,
    failed: bool,
    at_ms: i64,
) -> clawvisor::store::Result<()> {
    let call_id = format!("call-{number}");
    let arguments =
        json!({"path": "note.txt", "content": format!("item {number}"), "mode": "append"});
    let steps = [
        (
            "decision",
            json!({
                "call_id": call_id,
                "action": "write_file note.txt",
                "effect": "write",
                "envelope": {"decision": "allow", "risk": "L1", "reason": "writes inside the agent's workspace",
                             "source": "autonomy", "next_step": "run", "requires_confirmation": false},
                "assessment": ["writes inside the agent's workspace"],
                "tightened_by_skills": [],
                "blocked_put_to_operator": false,
            }),
        ),
        (
            "tool_call",
            json!({"call_id": call_id, "arguments": arguments}),
        ),
        (
            "tool_result",
            json!({"call_id": call_id, "is_error": failed, "summary": if failed { "disk full" } else { "appended 7 bytes" }, "chars": 16}),
        ),
    ];
    for (kind, detail) in steps {
        let step = NewStep {
            kind,
            name: Some("write_file".to_string()),
            detail,
            duration_ms: (kind == "tool_result").then_some(3),
            ..NewStep::default()
        };
        clawvisor::store::runs::add_step(conn, run, &step, at_ms)?;
    }
    clawvisor::audit::append(
        conn,
        &format!("agent:{agent}"),
        "tool.executed",
        &format!("run:{run}"),
        &json!({"tool": "write_file", "call_id": call_id, "action_hash": format!("{number:064x}"),
                "approval": null, "is_error": failed, "duration_ms": 3}),
    )?;
    let data = json!({"call_id": call_id, "name": "write_file", "is_error": failed}).to_string();
    event(
        conn,
        session,
        EventKindRow::ToolResult,
        if failed {
            "disk full"
        } else {
            "appended 7 bytes"
        },
        Some(&data),
        Some(run),
        at_ms,
    )
}

/// Memories `first..end` of the house: a tenth belong to every agent (`platform`), the rest are
/// the agents' own, some personal, from their chats.
fn seed_memories(
    conn: &Connection,
    first: i64,
    end: i64,
    now: i64,
) -> clawvisor::store::Result<()> {
    const THINGS: [&str; 8] = [
        "plants",
        "bins",
        "dentist",
        "school run",
        "boiler",
        "passport",
        "car insurance",
        "piano",
    ];
    const WHEN: [&str; 6] = [
        "on Sundays",
        "every other Tuesday",
        "before the holidays",
        "in March",
        "after dinner",
        "on the first of the month",
    ];
    for number in first..end {
        let index = (number % (AGENTS.len() as i64 + 1)) as usize;
        let owner = AGENTS.get(index).copied().unwrap_or("platform");
        let thing = THINGS[(number % 8) as usize];
        let when = WHEN[(number % 6) as usize];
        let fact = NewFact {
            owner: owner.to_string(),
            class: "durable".to_string(),
            sensitivity: if number % 7 == 0 {
                "personal"
            } else {
                "normal"
            }
            .to_string(),
            source: if number % 3 == 0 {
                "user_said"
            } else {
                "agent_saved"
            }
            .to_string(),
            chat: (owner != "platform").then(|| format!("tg:{}", owner_id(index))),
            text: format!("Reminder about the {thing}: {when} (note {number})."),
            run_id: None,
            message_id: None,
            surprise: None,
            embedding: None,
        };
        clawvisor::store::memory::insert(conn, &fact, now - (MEMORIES - number) * 60_000)?;
    }
    Ok(())
}

/// Two jobs per agent, created as an operator does in Studio, delivering to the owner.
async fn seed_schedules(base: &str, http: &reqwest::Client) {
    for (index, agent) in AGENTS.iter().enumerate() {
        for (name, prompt, kind, expression) in [
            (
                "Morning briefing",
                "Give me the morning briefing.",
                "cron",
                "0 7 * * *",
            ),
            (
                "Check the house",
                "Anything I should know about?",
                "every",
                "6h",
            ),
        ]
        .into_iter()
        .take(SCHEDULES_PER_AGENT)
        {
            let body = json!({
                "agent": agent,
                "name": name,
                "prompt": prompt,
                "kind": kind,
                "expression": expression,
                "timezone": "Europe/Berlin",
                "target": format!("tg:{}", owner_id(index)),
            });
            let response = http
                .post(format!("{base}/api/v1/schedules"))
                .json(&body)
                .send()
                .await
                .expect("Studio answers");
            let status = response.status();
            assert!(
                status.is_success(),
                "creating a schedule for {agent} answered {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
    }
}
