//! Runs and chat that explain themselves, and approvals in words for people (issue #28), through
//! Studio's API against the real daemon in-process, a scripted model and the fake Bot API:
//!
//! - a call the policy refuses (an `rm -rf` in the agent's own workspace) is told to the Telegram
//!   user with the reason and what an operator could change, the run is marked as having a
//!   refused action, and its decision step says effect, risk, verdict, reason and who decided;
//! - a transcript carries each request for tools with its arguments and each answer, so no
//!   message is empty, and a run's tool result carries its whole output;
//! - a Telegram conversation is continued from Studio as the operator: the answer is delivered by
//!   the bot into the Telegram chat and streamed back to Studio;
//! - Stop ends a slow run (cancelled, "Stopped.");
//! - with `[policy] allow_l3_once`, a blocked action waits for the operator, who can allow exactly
//!   it once by typing it out: it runs once, is audited, and the next identical call asks again;
//! - an approval prompt leads with a plain sentence and words the grant the same way in Telegram
//!   and Studio; outcomes are in plain words.

use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::wait_reply;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::{Value, json};

const OWNER: i64 = 42;
const WAIT: Duration = Duration::from_secs(30);

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

    /// POSTs `body`; the status and the answer (JSON, or the raw text of an event stream).
    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// The error message of an error answer.
    fn message(answer: &Value) -> String {
        answer["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// The `final` event of an SSE answer, parsed.
fn final_event(stream: &Value) -> Value {
    let text = stream.as_str().expect("an event stream");
    let data = text
        .split("\n\n")
        .find(|block| block.lines().any(|line| line == "event: final"))
        .and_then(|block| block.lines().find_map(|line| line.strip_prefix("data: ")))
        .unwrap_or_else(|| panic!("no final event in: {text}"));
    serde_json::from_str(data).unwrap()
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

fn clean_up_script() -> Script {
    Script::new()
        .rule(Rule::text("I could not clean up.").when_last_tool_result_contains("Not run"))
        .rule(Rule::text("Cleaned up.").when_after_tool_result("shell"))
        .rule(
            Rule::tool_call("shell", r#"{"command": "rm -rf old"}"#)
                .when_last_user_contains("clean up"),
        )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_is_told_in_the_chat_marked_in_the_run_and_explained() {
    let world = World::builder(clean_up_script())
        .agent_with_bot(
            "ada",
            "tools = [\"shell\"]\nallow_shell = true\nautonomy = \"trust_first\"\n",
            "771:AAH-studio-runs-refused-token01",
            &[OWNER],
            &[OWNER],
        )
        .start()
        .await;
    let bot = world.bot("ada");
    std::fs::create_dir_all(workspace(&world).join("old")).unwrap();
    world
        .fake
        .push_message(bot, OWNER, OWNER, "please clean up");

    // The Telegram user is told what was not done, why, and what an operator could change.
    let told = world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("was not allowed to"),
            WAIT,
        )
        .await
        .expect("the chat is told about the refusal");
    for said in [
        "ada was not allowed to delete files in its workspace, so nothing was run",
        // (Telegram shows the backticks as code.)
        "Why: rm -rf old: rm -rf deletes a whole tree without asking",
        "allow_l3_once",
    ] {
        assert!(
            told.visible_text.contains(said),
            "`{said}` missing: {}",
            told.visible_text
        );
    }
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("I could not clean up."),
            WAIT,
        )
        .await
        .expect("the answer");
    assert!(
        workspace(&world).join("old").exists(),
        "nothing was deleted"
    );
    assert_eq!(
        count(&world, "SELECT COUNT(*) FROM approvals").await,
        0,
        "nobody was asked"
    );

    // The run is listed as having a refused action, not just "succeeded".
    let api = Api::of(&world).await;
    let runs = api.get("/api/v1/runs?agent=ada").await;
    let run = &runs["runs"][0];
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["refused"], 1, "{run}");
    let other = api.get("/api/v1/runs?limit=50").await;
    assert!(
        other["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["refused"].is_i64())
    );

    // Its decision step says what the call would do, effect, risk, verdict, reason, who decided.
    let detail = api.get(&format!("/api/v1/runs/{}", run["id"])).await;
    assert_eq!(detail["refused"], 1);
    let decision = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["kind"] == "decision")
        .map(|step| step["decision"].clone())
        .expect("a decision step");
    assert_eq!(
        decision["summary"],
        "ada wants to delete files in its workspace"
    );
    assert_eq!(
        decision["action"],
        "shell: rm -rf old\nruns with network: no · writes: workspace only"
    );
    assert_eq!(decision["effect"], "destructive");
    assert_eq!(decision["risk"], "L3");
    assert_eq!(decision["verdict"], "deny");
    assert!(
        decision["reason"].as_str().unwrap().contains("rm -rf"),
        "{decision}"
    );
    assert!(
        decision["decided_by"]
            .as_str()
            .unwrap()
            .contains("safety check"),
        "{decision}"
    );
    assert_eq!(decision["outcome"], "refused: it did not run");
    // The stored transcript keeps the notice the chat was shown.
    assert_eq!(
        count(&world, "SELECT COUNT(*) FROM session_events WHERE kind = 'notice' AND content LIKE '%was not allowed to delete files%'").await,
        1
    );
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_shows_tool_calls_with_their_arguments_and_answers() {
    let script = Script::new()
        .rule(
            Rule::text("**Done.** Written as <script>alert(1)</script>")
                .when_after_tool_result("write_file"),
        )
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "milk", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        );
    let world = World::builder(script)
        .agent(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"trust_first\"\n",
        )
        .start()
        .await;
    let reply = world
        .harness
        .ask("ada", &ChatKey::studio("t1"), "write the note")
        .await
        .unwrap();
    assert!(reply.text.starts_with("**Done.**"));
    let api = Api::of(&world).await;
    let sessions = api.get("/api/v1/sessions?agent=ada").await;
    let session = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["chat"] == "studio:t1")
        .expect("the session")
        .clone();
    assert_eq!(session["label"], "Studio: t1");
    assert_eq!(session["continuable"], true);
    let transcript = api
        .get(&format!("/api/v1/sessions/{}", session["id"]))
        .await;
    let events = transcript["events"].as_array().unwrap();
    let request = events
        .iter()
        .find(|event| event["tool_calls"].is_array())
        .expect("the request for tools");
    assert_eq!(request["tool_calls"][0]["name"], "write_file");
    assert_eq!(request["tool_calls"][0]["arguments"]["path"], "note.txt");
    let answer = events
        .iter()
        .find(|event| event["kind"] == "tool_result")
        .expect("the tool's answer");
    assert_eq!(answer["tool"]["name"], "write_file");
    assert_eq!(answer["tool"]["call_id"], request["tool_calls"][0]["id"]);
    // Every assistant event without tool calls has words: nothing would be an empty bubble.
    for event in events
        .iter()
        .filter(|e| e["kind"] == "assistant" && e["tool_calls"].is_null())
    {
        assert!(
            !event["content"].as_str().unwrap().trim().is_empty(),
            "{event}"
        );
    }
    // The run's tool result carries the whole output.
    let run = api
        .get(&format!("/api/v1/runs/{}", reply.run_id.unwrap()))
        .await;
    let result = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["kind"] == "tool_result")
        .expect("a tool result step");
    assert_eq!(result["output"], answer["content"]);
    assert_eq!(run["refused"], 0);
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_cards_never_show_a_secret() {
    const TOKEN: &str = "775:AAH-studio-runs-secret-token01";
    let script = Script::new()
        .rule(Rule::text("I read it.").when_after_tool_result("read_file"))
        .rule(
            Rule::tool_call("read_file", r#"{"path": "leak.txt"}"#).when_last_user_contains("read"),
        );
    let world = World::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"read_file\"]\nautonomy = \"trust_first\"\n",
            TOKEN,
            &[OWNER],
            &[OWNER],
        )
        .start()
        .await;
    std::fs::write(
        workspace(&world).join("leak.txt"),
        format!("the token is {TOKEN}\n"),
    )
    .unwrap();
    let reply = world
        .harness
        .ask("ada", &ChatKey::studio("s1"), "read the file")
        .await
        .unwrap();
    assert_eq!(reply.text, "I read it.");
    let api = Api::of(&world).await;
    let run = api
        .get(&format!("/api/v1/runs/{}", reply.run_id.unwrap()))
        .await;
    let output = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|step| step["kind"] == "tool_result")
        .map(|step| step["output"].as_str().unwrap().to_string())
        .expect("the tool's output");
    assert!(output.contains("the token is"), "{output}");
    let sessions = api.get("/api/v1/sessions?agent=ada").await;
    let transcript = api
        .get(&format!(
            "/api/v1/sessions/{}",
            sessions["sessions"][0]["id"]
        ))
        .await;
    for shown in [run.to_string(), transcript.to_string()] {
        assert!(!shown.contains(TOKEN), "a secret reached Studio: {shown}");
    }
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_conversation_is_continued_from_studio_as_the_operator() {
    let script = Script::new()
        .rule(Rule::text("Noted, operator: all is well.").when_last_user_contains("operator here"))
        .rule(Rule::text("Hello from ada."));
    let world = World::builder(script)
        .agent_with_bot(
            "ada",
            "",
            "772:AAH-studio-runs-continue-tok01",
            &[OWNER],
            &[OWNER],
        )
        .start()
        .await;
    let bot = world.bot("ada");
    world.fake.push_message(bot, OWNER, OWNER, "hi");
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("Hello from ada."),
            WAIT,
        )
        .await
        .expect("the first answer");
    let api = Api::of(&world).await;
    let sessions = api.get("/api/v1/sessions?agent=ada").await;
    let chat = format!("tg:{OWNER}");
    let session = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["chat"] == chat.as_str())
        .expect("the Telegram session")
        .clone();
    assert_eq!(session["label"], format!("Telegram chat {OWNER}"));
    assert_eq!(session["continuable"], true);

    // Continued from Studio: the answer is streamed back ...
    let (status, stream) = api
        .post(
            "/api/v1/agents/ada/chat",
            json!({"text": "operator here: how is it going?", "chat": chat}),
        )
        .await;
    assert_eq!(status, 200, "{stream}");
    let answer = final_event(&stream);
    assert_eq!(answer["text"], "Noted, operator: all is well.");
    assert_eq!(answer["delivered_to"], chat.as_str());
    // ... and delivered into the Telegram chat by the bot.
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("Noted, operator"),
            WAIT,
        )
        .await
        .expect("the bot delivers the answer to the Telegram chat");
    // The agent got it as the operator's message in that conversation.
    let transcript = api
        .get(&format!("/api/v1/sessions/{}", session["id"]))
        .await;
    assert!(
        transcript["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| {
                event["kind"] == "user"
                    && event["sender"] == "operator"
                    && event["content"] == "operator here: how is it going?"
            })
    );

    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'chat.operator_message'"
        )
        .await,
        1,
        "the operator writing into a person's chat is audited"
    );
    // A Telegram chat the agent has no conversation in cannot be written to.
    let (status, refused) = api
        .post(
            "/api/v1/agents/ada/chat",
            json!({"text": "hi", "chat": "tg:999"}),
        )
        .await;
    assert_eq!(status, 404);
    assert!(Api::message(&refused).contains("`chat`"), "{refused}");
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_ends_a_slow_run() {
    let script = Script::new()
        .rule(
            Rule::text("This took a very long time.")
                .delay(Duration::from_secs(120))
                .when_last_user_contains("slow"),
        )
        .rule(Rule::text("Quick answer."));
    let world = World::builder(script).agent("ada", "").start().await;
    let api = Api::of(&world).await;
    // Nothing runs yet: there is nothing to stop.
    let (status, answer) = api
        .post("/api/v1/agents/ada/chat/stop", json!({"chat": "operator"}))
        .await;
    assert_eq!(status, 409, "{answer}");

    let asking = {
        let (base, http) = (api.base.clone(), api.http.clone());
        tokio::spawn(async move {
            let client = Api { base, http };
            client
                .post(
                    "/api/v1/agents/ada/chat",
                    json!({"text": "something slow please", "chat": "operator"}),
                )
                .await
        })
    };
    wait_until(WAIT, "the slow run to be running", || async {
        count(&world, "SELECT COUNT(*) FROM runs WHERE status = 'running'").await == 1
    })
    .await;
    let (status, stopping) = api
        .post("/api/v1/agents/ada/chat/stop", json!({"chat": "operator"}))
        .await;
    assert_eq!(status, 200, "{stopping}");
    let (status, stream) = tokio::time::timeout(WAIT, asking)
        .await
        .expect("the answer ends soon")
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(final_event(&stream)["text"], "Stopped.");
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM runs WHERE status = 'cancelled'"
        )
        .await,
        1
    );
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_action_is_allowed_once_with_the_typed_confirmation_runs_once_and_is_audited() {
    let world = World::builder(clean_up_script())
        .agent("ada", "tools = [\"shell\"]\nallow_shell = true\nautonomy = \"trust_first\"\napproval_ttl = \"5m\"\n")
        .config_extra("[policy]\nallow_l3_once = true\n")
        .start()
        .await;
    let old = workspace(&world).join("old");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("junk.txt"), "junk").unwrap();
    let chat = ChatKey::cli("op");
    let mut outputs = world.harness.listen(&chat).await.unwrap();
    world.harness.send("ada", &chat, "please clean up").unwrap();

    let api = Api::of(&world).await;
    let pending = wait_until(
        WAIT,
        "the blocked action to wait for the operator",
        || async {
            let list = api
                .get("/api/v1/approvals?status=pending&agent=ada&chat=cli:op")
                .await;
            list["approvals"]
                .as_array()
                .and_then(|all| all.first().cloned())
        },
    )
    .await;
    assert_eq!(pending["blocked"], true);
    assert_eq!(pending["risk"], "L3");
    assert!(
        pending["grant"].is_null(),
        "no grant is ever offered for a blocked action"
    );
    assert_eq!(
        pending["summary"],
        "ada wants to delete files in its workspace"
    );
    let id = pending["id"].as_str().unwrap().to_string();
    let decide = format!("/api/v1/approvals/{id}/decision");

    // Neither a plain approval nor a grant can let it run; the confirmation must be typed exactly.
    let (status, answer) = api.post(&decide, json!({"decision": "approve"})).await;
    assert_eq!(status, 403, "{answer}");
    assert!(Api::message(&answer).contains("typing"), "{answer}");
    let (status, _) = api
        .post(&decide, json!({"decision": "approve", "grant_minutes": 30}))
        .await;
    assert_eq!(status, 403);
    let (status, answer) = api.post(&decide, json!({"decision": "allow_once"})).await;
    assert_eq!(status, 400);
    assert!(Api::message(&answer).contains("`confirmation`"), "{answer}");
    let (status, answer) = api
        .post(
            &decide,
            json!({"decision": "allow_once", "confirmation": "rm -rf"}),
        )
        .await;
    assert_eq!(status, 400);
    assert!(Api::message(&answer).contains("`confirmation`"), "{answer}");
    assert!(old.exists(), "nothing ran before the decision");
    let (status, answer) = api
        .post(
            &decide,
            json!({"decision": "allow_once", "confirmation": "shell: rm -rf old"}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");

    let reply = wait_reply(&mut outputs, WAIT).await.unwrap();
    assert_eq!(reply.text, "Cleaned up.");
    assert!(
        reply
            .notices
            .iter()
            .any(|n| n.contains("may not delete files in its workspace on its own")),
        "the chat was told it waits for the operator: {:?}",
        reply.notices
    );
    assert!(!old.exists(), "the allowed action ran");
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'approval.allowed_blocked_once'"
        )
        .await,
        1
    );
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'"
        )
        .await,
        1
    );
    assert_eq!(count(&world, "SELECT COUNT(*) FROM grants").await, 0);
    let decided = api.get("/api/v1/approvals?agent=ada").await;
    assert_eq!(decided["approvals"][0]["outcome"], "approved and done");

    // The same action again is not covered by anything: it asks again, and denied it stays undone.
    std::fs::create_dir_all(&old).unwrap();
    world.harness.send("ada", &chat, "clean up again").unwrap();
    let again = wait_until(WAIT, "the second request", || async {
        let list = api.get("/api/v1/approvals?status=pending&agent=ada").await;
        list["approvals"]
            .as_array()
            .and_then(|all| all.first().cloned())
    })
    .await;
    assert_ne!(again["id"], pending["id"]);
    let (status, _) = api
        .post(
            &format!(
                "/api/v1/approvals/{}/decision",
                again["id"].as_str().unwrap()
            ),
            json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(status, 200);
    let reply = wait_reply(&mut outputs, WAIT).await.unwrap();
    assert_eq!(reply.text, "I could not clean up.");
    assert!(old.exists());
    assert_eq!(
        count(
            &world,
            "SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'"
        )
        .await,
        1
    );
    world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_prompt_leads_with_a_sentence_and_words_the_grant_once_everywhere() {
    let script = Script::new()
        .rule(Rule::text("The note is written.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "milk", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        );
    let world = World::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"5m\"\n",
            "773:AAH-studio-runs-wording-token1",
            &[OWNER],
            &[OWNER],
        )
        .start()
        .await;
    let bot = world.bot("ada");
    world.fake.push_message(bot, OWNER, OWNER, "write the note");
    let prompt = world
        .fake
        .wait_for_sent(bot, |m| m.chat_id == OWNER && !m.buttons.is_empty(), WAIT)
        .await
        .expect("the approval prompt");
    let scope = clawvisor::protocol::approvals::grant_scope(30);
    assert!(
        prompt
            .visible_text
            .starts_with("Approval needed: ada wants to write a file in its workspace."),
        "{}",
        prompt.visible_text
    );
    assert!(
        prompt.visible_text.contains(&scope),
        "{}",
        prompt.visible_text
    );
    assert!(
        prompt
            .visible_text
            .contains("Details: tool write_file, risk"),
        "{}",
        prompt.visible_text
    );
    let labels: Vec<String> = prompt
        .buttons
        .iter()
        .flatten()
        .map(|b| b.text.clone())
        .collect();
    assert!(
        labels
            .iter()
            .any(|label| label
                .ends_with("Allow exactly this for 30 min (until the workspace changes)")),
        "{labels:?}"
    );

    // Studio says the grant in the same words, and the sentence first.
    let api = Api::of(&world).await;
    let pending = api.get("/api/v1/approvals?status=pending").await;
    let approval = &pending["approvals"][0];
    assert_eq!(approval["grant"]["scope"], scope.as_str());
    assert_eq!(
        approval["summary"],
        "ada wants to write a file in its workspace"
    );
    let (status, _) = api
        .post(
            &format!(
                "/api/v1/approvals/{}/decision",
                approval["id"].as_str().unwrap()
            ),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200);
    world
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("The note is written."),
            WAIT,
        )
        .await
        .expect("the answer");
    let decided = api.get("/api/v1/approvals").await;
    assert_eq!(decided["approvals"][0]["outcome"], "approved and done");
    assert_eq!(decided["approvals"][0]["status"], "consumed");
    world.harness.stop().await;
}
