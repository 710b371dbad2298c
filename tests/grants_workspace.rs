//! Grants and the workspace generation (issue #29, class 3: "nothing written without a decision
//! changes a later command"), end to end against the real daemon in-process, a scripted model and
//! the real shell tool, decided through Studio's API as an operator would:
//!
//! - a command approved with "Allow exactly this for 30 min" runs again without asking, also
//!   after its own run changed the workspace;
//! - a read-only command in between (approved once) does not make the grant lapse;
//! - the issue's scenario: the model plants a file with `write_file` (L1, runs without asking) that
//!   the granted command loads — the grant lapses (recorded with its reason, audited, shown as
//!   lapsed by `GET /api/v1/grants`) and the same command asks again; the planted code never runs;
//! - a writing shell command, approved once, makes it lapse too;
//! - a file sent in a Telegram chat and saved into the workspace makes it lapse; the prompt's
//!   button and text, and the decision's message, say when a grant lapses;
//! - the generation and the lapse hold across a daemon restart;
//! - a plant and the granted command in one model turn: the command asks, the plant never runs.

use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::ScratchDir;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
const AGENT: &str = "tools = [\"shell\", \"write_file\"]\nallow_shell = true\nautonomy = \"trust_first\"\napproval_ttl = \"5m\"\n";
const PLANT: &str =
    r#"{"path": "tool.sh", "content": "echo planted > pwned.txt\n", "mode": "overwrite"}"#;
const RUN_TOOL: &str = r#"{"command": "sh tool.sh"}"#;

fn script() -> Script {
    Script::new()
        .rule(Rule::text("Refused.").when_last_tool_result_contains("Not run"))
        .rule(Rule::text("Ran it.").when_after_tool_result("shell"))
        .rule(Rule::text("Planted.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_calls([("write_file", PLANT), ("shell", RUN_TOOL)])
                .when_last_user_contains("plant and run"),
        )
        .rule(Rule::tool_call("write_file", PLANT).when_last_user_contains("plant"))
        .rule(Rule::tool_call("shell", RUN_TOOL).when_last_user_contains("run the tool"))
        .rule(Rule::tool_call("shell", r#"{"command": "ls"}"#).when_last_user_contains("look"))
        .rule(
            Rule::tool_call(
                "shell",
                r#"{"command": "echo 'echo planted > pwned.txt' > tool.sh"}"#,
            )
            .when_last_user_contains("rewrite"),
        )
}

/// Studio's API as a script on the server calls it (the daemon's local token).
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn of(world: &World) -> Api {
        let (base, http) = world.harness.studio_http().await;
        Api { base, http }
    }

    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "GET {path}");
        response.json().await.unwrap()
    }

    async fn decide(&self, id: &str, body: Value) {
        let response = self
            .http
            .post(format!("{}/api/v1/approvals/{id}/decision", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert_eq!(status, 200, "{}", response.text().await.unwrap());
    }

    /// The one pending approval, once there is one.
    async fn pending(&self) -> Value {
        wait_until(WAIT, "a pending approval", || async {
            let list = self.get("/api/v1/approvals?status=pending").await;
            list["approvals"]
                .as_array()
                .and_then(|all| all.first().cloned())
        })
        .await
    }
}

async fn count(world: &World, sql: &'static str) -> i64 {
    world
        .store()
        .read(move |conn| Ok(conn.query_row(sql, [], |row| row.get(0))?))
        .await
        .unwrap()
}

fn workspace(world: &World) -> std::path::PathBuf {
    world.harness.dir.path().join("data/workspaces/ada")
}

async fn start(dir: Option<ScratchDir>) -> World {
    let mut builder = World::builder(script()).agent("ada", AGENT);
    if let Some(dir) = dir {
        builder = builder.dir(dir);
    }
    let world = builder.start().await;
    std::fs::create_dir_all(workspace(&world)).unwrap();
    world
}

/// Says `text` in the operator's terminal chat and waits for the answer.
async fn say(world: &World, text: &str) -> String {
    let chat = ChatKey::cli("op");
    let mut outputs = world.harness.listen(&chat).await.unwrap();
    world.harness.send("ada", &chat, text).unwrap();
    clawvisor::testkit::harness::wait_reply(&mut outputs, WAIT)
        .await
        .unwrap()
        .text
}

/// Says `text` and answers the approval it raises with `decision`; answers the reply.
async fn say_and_decide(world: &World, api: &Api, text: &str, decision: Value) -> (Value, String) {
    let chat = ChatKey::cli("op");
    let mut outputs = world.harness.listen(&chat).await.unwrap();
    world.harness.send("ada", &chat, text).unwrap();
    let pending = api.pending().await;
    api.decide(pending["id"].as_str().unwrap(), decision).await;
    let reply = clawvisor::testkit::harness::wait_reply(&mut outputs, WAIT)
        .await
        .unwrap();
    (pending, reply.text)
}

async fn grant_tool_sh(world: &World, api: &Api) {
    std::fs::write(workspace(world).join("tool.sh"), "echo original\n").unwrap();
    let grant = json!({"decision": "approve", "grant_minutes": 30});
    let (asked, reply) = say_and_decide(world, api, "run the tool", grant).await;
    assert_eq!(reply, "Ran it.");
    let label = asked["grant"]["label"].as_str().unwrap_or_default();
    assert_eq!(
        label,
        "Allow exactly this for 30 min (until the workspace changes)"
    );
    assert!(
        asked["grant"]["scope"]
            .as_str()
            .unwrap_or_default()
            .contains("the grant lapses and the same action asks again"),
        "{asked}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_lapses_when_something_else_writes_in_the_workspace_and_stays_lapsed_after_a_restart()
 {
    let world = start(None).await;
    let api = Api::of(&world).await;
    grant_tool_sh(&world, &api).await;

    // Covered by the grant: no second prompt, also though its own run may write.
    assert_eq!(say(&world, "run the tool again").await, "Ran it.");
    assert_eq!(count(&world, "SELECT COUNT(*) FROM approvals").await, 1);
    assert_eq!(
        count(&world, "SELECT COUNT(*) FROM run_steps WHERE kind = 'decision' AND detail LIKE '%\"source\":\"grant:%'").await,
        1
    );

    // A read-only command in between does not make it lapse. `ls` runs without asking where the
    // kernel holds it to reading; elsewhere it is approved once.
    let sandboxed = clawvisor::sandbox::protections()
        .missing_for(clawvisor::policy::Reach::READ_ONLY)
        .is_empty();
    let reply = if sandboxed {
        say(&world, "look around").await
    } else {
        say_and_decide(&world, &api, "look around", json!({"decision": "approve"}))
            .await
            .1
    };
    assert_eq!(reply, "Ran it.");
    assert_eq!(say(&world, "run the tool once more").await, "Ran it.");
    let asked = if sandboxed { 1 } else { 2 };
    assert_eq!(count(&world, "SELECT COUNT(*) FROM approvals").await, asked);
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM grants WHERE lapsed_ms IS NULL"
        )
        .await,
        1
    );

    // The model plants a file the granted command loads; write_file runs without asking.
    assert_eq!(say(&world, "plant it").await, "Planted.");
    let grants = api.get("/api/v1/grants").await;
    let grant = &grants["grants"][0];
    assert_eq!(grant["status"], "lapsed", "{grants}");
    let reason = grant["lapsed_reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Something wrote in the workspace after it was given")
            && reason.contains("write_file in run"),
        "{reason}"
    );
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'grant.lapsed'"
        )
        .await,
        1
    );

    // The same command asks again; denied, the planted code never ran.
    let (asked, reply) =
        say_and_decide(&world, &api, "run the tool", json!({"decision": "deny"})).await;
    assert_eq!(reply, "Refused.");
    assert!(
        asked["action"]
            .as_str()
            .is_some_and(|action| action.starts_with("shell: sh tool.sh\nruns with network: no")),
        "{asked}"
    );
    let why = asked["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("for exactly this lapsed: Something wrote in the workspace"),
        "the prompt says why it asks again: {why}"
    );
    assert!(!workspace(&world).join("pwned.txt").exists());
    let generation = count(
        &world,
        "SELECT generation FROM workspace_generations WHERE agent = 'ada'",
    )
    .await;
    assert!(generation > 0);

    // After a restart the generation and the lapse hold: it asks again.
    let dir = world.harness.stop().await;
    let world = start(Some(dir)).await;
    let api = Api::of(&world).await;
    assert_eq!(
        count(
            &world,
            "SELECT generation FROM workspace_generations WHERE agent = 'ada'"
        )
        .await,
        generation
    );
    let (_, reply) =
        say_and_decide(&world, &api, "run the tool", json!({"decision": "deny"})).await;
    assert_eq!(reply, "Refused.");
    assert!(!workspace(&world).join("pwned.txt").exists());
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM grants WHERE lapsed_ms IS NOT NULL"
        )
        .await,
        1
    );
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_planted_in_the_same_turn_never_runs_under_the_grant() {
    let world = start(None).await;
    let api = Api::of(&world).await;
    grant_tool_sh(&world, &api).await;

    // One model turn: the plant, then the granted command. The command asks; denied, the plant
    // (which did run: write_file needs no approval) never runs.
    let (asked, reply) =
        say_and_decide(&world, &api, "plant and run", json!({"decision": "deny"})).await;
    assert_eq!(reply, "Refused.");
    assert!(
        asked["action"]
            .as_str()
            .is_some_and(|action| action.starts_with("shell: sh tool.sh\nruns with network: no")),
        "{asked}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace(&world).join("tool.sh")).unwrap(),
        "echo planted > pwned.txt\n"
    );
    assert!(!workspace(&world).join("pwned.txt").exists());
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writing_shell_command_approved_once_makes_the_grant_lapse() {
    let world = start(None).await;
    let api = Api::of(&world).await;
    grant_tool_sh(&world, &api).await;

    // A shell command that writes, approved once: the human decided that one, not what the
    // granted command does with the file it leaves.
    let (asked, reply) = say_and_decide(
        &world,
        &api,
        "rewrite the tool",
        json!({"decision": "approve"}),
    )
    .await;
    assert_eq!(reply, "Ran it.");
    assert!(
        asked["action"].as_str().unwrap().contains("> tool.sh"),
        "{asked}"
    );
    let grants = api.get("/api/v1/grants").await;
    assert_eq!(grants["grants"][0]["status"], "lapsed", "{grants}");
    assert!(
        grants["grants"][0]["lapsed_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("shell in run"),
        "{grants}"
    );
    let (asked, reply) =
        say_and_decide(&world, &api, "run the tool", json!({"decision": "deny"})).await;
    assert_eq!(reply, "Refused.");
    assert!(
        asked["action"]
            .as_str()
            .is_some_and(|action| action.starts_with("shell: sh tool.sh\nruns with network: no")),
        "{asked}"
    );
    assert!(!workspace(&world).join("pwned.txt").exists());
    world.harness.stop().await;
}

/// The store's rule on real SQLite: a write moves the agent's generation and lapses every live
/// grant of that agent given before (with the reason), except the writing action's own grant in
/// its chat, which moves on with it; other agents' grants are untouched; a grant without a
/// generation (given before generations were kept) is never honoured.
#[tokio::test]
async fn a_write_lapses_every_grant_of_the_agent_but_the_writing_actions_own() {
    use clawvisor::store::approvals::{NewGrant, create_grant, live_grant};
    use clawvisor::store::workspace::{WorkspaceWrite, generation, record_write};
    use clawvisor::store::{Store, StoreOptions};

    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("clawvisor.db"), StoreOptions::default()).unwrap();
    let answer = store
        .write(|conn| {
            let now = 1_000;
            let grant = |agent: &'static str, chat: &'static str, hash: &'static str| NewGrant {
                agent,
                chat,
                tool: "shell",
                target: "shell: x",
                action_hash: hash,
                expires_ms: now + 60_000,
                created_by: "test",
                approval_id: None,
            };
            let own = create_grant(conn, &grant("ada", "cli:a", "h1"), now)?.0;
            let other_action = create_grant(conn, &grant("ada", "cli:a", "h2"), now)?.0;
            let other_chat = create_grant(conn, &grant("ada", "cli:b", "h1"), now)?.0;
            let other_agent = create_grant(conn, &grant("bob", "cli:a", "h1"), now)?.0;
            conn.execute(
                "INSERT INTO grants (agent, chat, tool, target, created_ms, expires_ms, created_by, action_hash)
                 VALUES ('ada', 'cli:a', 'shell', 'old', 1, 99999, 'test', 'h9')",
                [],
            )?;
            let write = WorkspaceWrite {
                agent: "ada",
                what: "shell in run 1",
                action: Some(("h1", "cli:a")),
            };
            let lapsed: Vec<i64> = record_write(conn, &write, now + 1)?
                .into_iter()
                .map(|lapsed| lapsed.grant)
                .collect();
            let live = |chat: &str, hash: &str, agent: &str| live_grant(conn, agent, chat, "shell", hash, now + 2);
            let after_first = (
                lapsed,
                live("cli:a", "h1", "ada")?,
                live("cli:a", "h2", "ada")?,
                live("cli:b", "h1", "ada")?,
                live("cli:a", "h1", "bob")?,
                live("cli:a", "h9", "ada")?,
            );
            let file = WorkspaceWrite {
                agent: "ada",
                what: "a file sent in a chat was saved (update 7)",
                action: None,
            };
            let second = record_write(conn, &file, now + 3)?;
            let reason: String = conn.query_row(
                "SELECT lapsed_reason FROM grants WHERE id = ?1",
                [own],
                |row| row.get(0),
            )?;
            Ok((
                (own, other_action, other_chat, other_agent),
                after_first,
                second,
                reason,
                generation(conn, "ada")?,
                generation(conn, "bob")?,
            ))
        })
        .await
        .unwrap();
    let ((own, other_action, other_chat, other_agent), first, second, reason, ada, bob) = answer;
    assert_eq!(first.0, vec![other_action, other_chat]);
    assert_eq!(
        first.1,
        Some(own),
        "the writing action's own grant moves on"
    );
    assert_eq!((first.2, first.3), (None, None));
    assert_eq!(
        first.4,
        Some(other_agent),
        "another agent's workspace did not change"
    );
    assert_eq!(
        first.5, None,
        "a grant without a generation is never honoured"
    );
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].grant, own);
    assert!(
        reason.contains("a file sent in a chat was saved") && reason.contains("asks again"),
        "{reason}"
    );
    assert_eq!((ada, bob), (2, 0));
    store.stop_writer();
}

/// On Telegram: the prompt's grant button and text say when the grant lapses; the grant covers
/// the command until a file sent in the chat is saved into the workspace; then the same command
/// asks again, and the decision's message says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_sent_in_the_chat_makes_the_grant_lapse_on_telegram() {
    const OWNER: i64 = 42;
    let script = script().rule(Rule::text("Got the file.").when_last_user_contains("saved to"));
    let world = World::builder(script)
        .agent_with_bot(
            "ada",
            AGENT,
            "557:AAH-grants-test-token-abcdef01",
            &[OWNER],
            &[OWNER],
        )
        .studio(false)
        .start()
        .await;
    let bot = world.bot("ada");
    std::fs::create_dir_all(workspace(&world)).unwrap();
    std::fs::write(workspace(&world).join("tool.sh"), "echo original\n").unwrap();
    let fake = &world.fake;
    let sent_with = |needle: &'static str, after: i32| async move {
        fake.wait_for_sent(
            bot,
            |m| m.message_id > after && m.visible_text.contains(needle),
            WAIT,
        )
        .await
        .unwrap_or_else(|| panic!("a message containing `{needle}`"))
    };
    let prompt_after = |after: i32| async move {
        fake.wait_for_sent(
            bot,
            |m| m.message_id > after && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            WAIT,
        )
        .await
        .expect("an approval prompt")
    };
    fake.push_message(bot, OWNER, OWNER, "run the tool");
    let prompt = prompt_after(0).await;
    assert!(
        prompt
            .visible_text
            .contains("the grant lapses and the same action asks again"),
        "{}",
        prompt.visible_text
    );
    let grant_button = prompt
        .buttons
        .iter()
        .flatten()
        .find(|b| {
            b.callback_data
                .as_deref()
                .is_some_and(|d| d.starts_with("ag"))
        })
        .expect("a grant is offered")
        .clone();
    assert_eq!(
        grant_button.text,
        "✅ Allow exactly this for 30 min (until the workspace changes)"
    );
    let data = grant_button.callback_data.unwrap();
    fake.push_callback(bot, prompt.chat_id, OWNER, prompt.message_id, &data);
    let ran = sent_with("Ran it.", prompt.message_id).await;
    // The prompt is edited into the decision; the reply may come first, so wait for the edit.
    let decided = fake
        .wait_for_sent(
            bot,
            |m| {
                m.message_id == prompt.message_id
                    && m.visible_text
                        .contains("until something else writes in the workspace")
            },
            WAIT,
        )
        .await;
    assert!(
        decided.is_some(),
        "the decided prompt says when the grant lapses: {:?}",
        fake.sent(bot)
            .into_iter()
            .find(|m| m.message_id == prompt.message_id)
            .map(|m| m.visible_text)
    );
    fake.push_message(bot, OWNER, OWNER, "run the tool again");
    let again = sent_with("Ran it.", ran.message_id).await;
    assert_eq!(count(&world, "SELECT COUNT(*) FROM approvals").await, 1);

    // A file sent in the chat is saved into the workspace: the grant lapses.
    fake.push_document(bot, OWNER, OWNER, "notes.txt", b"hello".to_vec(), None);
    let got = sent_with("Got the file.", again.message_id).await;
    assert_eq!(
        count(&world, "SELECT COUNT(*) FROM grants WHERE lapsed_reason LIKE '%a file sent in a chat was saved%'").await,
        1
    );
    fake.push_message(bot, OWNER, OWNER, "run the tool");
    prompt_after(got.message_id).await;
    assert_eq!(count(&world, "SELECT COUNT(*) FROM approvals").await, 2);
    world.harness.stop().await;
}
