//! Approvals end to end: an L2 write in `require_approval` mode asks through Telegram buttons (the
//! fake Bot API), runs exactly once when approved, never when denied, expired, replayed or pressed
//! by someone who is not an approver; scoped grants; the audit chain and its tamper detection.

use std::time::Duration;

use clawvisor::audit::{self, Verification};
use clawvisor::testkit::fake_telegram::{BotId, SentMessage};
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World as TestWorld;

const OWNER: i64 = 42;
const STRANGER: i64 = 99;

/// The testkit's world (agent `ada` with a bot) and that bot.
struct World {
    world: TestWorld,
    bot: BotId,
}

impl std::ops::Deref for World {
    type Target = TestWorld;
    fn deref(&self) -> &TestWorld {
        &self.world
    }
}

fn write_script() -> Script {
    Script::new()
        .rule(Rule::text("The file tool answered.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "notes.txt", "content": "hello", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write"),
        )
}

async fn world(ttl: &str, studio: bool) -> World {
    let world = TestWorld::builder(write_script())
        .agent_with_bot(
            "ada",
            &format!(
                "tools = [\"write_file\", \"read_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"{ttl}\"\n"
            ),
            "555:AAH-approvals-test-token-abcdef",
            &[OWNER, STRANGER],
            &[OWNER],
        )
        .studio(studio)
        .start()
        .await;
    let bot = world.bot("ada");
    World { world, bot }
}

impl World {
    fn notes(&self) -> Option<String> {
        std::fs::read_to_string(
            self.harness
                .dir
                .path()
                .join("data/workspaces/ada/notes.txt"),
        )
        .ok()
    }

    async fn approval_message(&self, after: usize) -> SentMessage {
        let found = self
            .fake
            .wait_for_sent(
                self.bot,
                |m| {
                    m.callback_data().iter().any(|d| d.starts_with("ap:"))
                        && m.message_id as usize > after
                },
                Duration::from_secs(30),
            )
            .await;
        found.expect("the approval request is posted with buttons")
    }

    fn id_of(message: &SentMessage) -> String {
        message
            .callback_data()
            .iter()
            .find_map(|d| d.strip_prefix("ap:"))
            .unwrap()
            .to_string()
    }

    async fn press(&self, user: i64, message: &SentMessage, data: &str) -> String {
        let before = self.fake.callback_answers(self.bot).len();
        self.fake
            .push_callback(self.bot, message.chat_id, user, message.message_id, data);
        wait_until(
            Duration::from_secs(20),
            "the button press is answered",
            || async {
                let answers = self.fake.callback_answers(self.bot);
                (answers.len() > before)
                    .then(|| answers.last().unwrap().text.clone().unwrap_or_default())
            },
        )
        .await
    }

    async fn reply(&self, needle: &str) -> SentMessage {
        self.fake
            .wait_for_sent(
                self.bot,
                |m| m.chat_id == OWNER && m.visible_text.contains(needle),
                Duration::from_secs(30),
            )
            .await
            .unwrap_or_else(|| panic!("a reply containing `{needle}`"))
    }

    async fn count(&self, sql: &'static str) -> i64 {
        self.harness
            .store()
            .read(move |conn| Ok(conn.query_row(sql, [], |r| r.get(0))?))
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_write_runs_exactly_once_and_replays_change_nothing() {
    let w = world("5m", false).await;
    w.fake
        .push_message(w.bot, OWNER, OWNER, "please write the note");
    let request = w.approval_message(0).await;
    assert!(
        request.visible_text.contains("write_file"),
        "the exact action is shown: {}",
        request.visible_text
    );
    assert!(w.notes().is_none(), "nothing runs before the decision");
    let id = World::id_of(&request);

    // Someone who may talk to the agent but is not an approver presses Approve: nothing happens.
    let answer = w.press(STRANGER, &request, &format!("ap:{id}")).await;
    assert!(answer.contains("approvers"), "{answer}");
    assert!(w.notes().is_none());

    let answer = w.press(OWNER, &request, &format!("ap:{id}")).await;
    assert!(answer.contains("Approved"), "{answer}");
    w.reply("The file tool answered.").await;
    assert_eq!(w.notes().as_deref(), Some("hello"));

    // A replayed press and an unknown id change nothing.
    let replay = w.press(OWNER, &request, &format!("ap:{id}")).await;
    assert!(replay.contains("already decided"), "{replay}");
    let unknown = w.press(OWNER, &request, "ap:zzzzzzzz").await;
    assert!(unknown.contains("expired or does not exist"), "{unknown}");
    assert_eq!(
        w.count("SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'")
            .await,
        1
    );
    assert_eq!(
        w.count("SELECT COUNT(*) FROM approvals WHERE status = 'consumed'")
            .await,
        1
    );
    // The request message now says who decided, and its buttons are gone.
    let resolved = w
        .fake
        .sent(w.bot)
        .into_iter()
        .find(|m| m.message_id == request.message_id)
        .unwrap();
    assert!(
        resolved.visible_text.contains("Approved by"),
        "{}",
        resolved.visible_text
    );
    assert!(resolved.buttons.is_empty());
    w.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_and_expired_requests_never_run_and_the_model_is_told() {
    let w = world("3s", false).await;
    w.fake.push_message(w.bot, OWNER, OWNER, "write it");
    let request = w.approval_message(0).await;
    let id = World::id_of(&request);
    let answer = w.press(OWNER, &request, &format!("dn:{id}")).await;
    assert!(answer.contains("Denied"), "{answer}");
    w.reply("The file tool answered.").await;
    assert!(w.notes().is_none());

    // The next one is left alone until it expires.
    let last = w
        .fake
        .sent(w.bot)
        .iter()
        .map(|m| m.message_id)
        .max()
        .unwrap() as usize;
    w.fake.push_message(w.bot, OWNER, OWNER, "write it again");
    let request = w.approval_message(last).await;
    let id = World::id_of(&request);
    // The desk's timer expires it after the 3 s TTL: wait for the stored denial.
    wait_until(
        Duration::from_secs(20),
        "the request to expire (a denied_timeout row)",
        || async {
            w.count("SELECT COUNT(*) FROM approvals WHERE status = 'denied_timeout'")
                .await
                >= 1
        },
    )
    .await;
    let late = w.press(OWNER, &request, &format!("ap:{id}")).await;
    assert!(late.contains("expired"), "{late}");
    // The run was told and answered again: the expiry has been reported in full.
    wait_until(
        Duration::from_secs(20),
        "the run's answer after the expiry",
        || async {
            w.fake
                .sent(w.bot)
                .iter()
                .filter(|m| {
                    m.chat_id == OWNER && m.visible_text.contains("The file tool answered.")
                })
                .count()
                >= 2
        },
    )
    .await;
    assert!(w.notes().is_none());
    assert_eq!(
        w.count("SELECT COUNT(*) FROM approvals WHERE status = 'denied_timeout'")
            .await,
        1
    );
    assert_eq!(
        w.count("SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'")
            .await,
        0
    );
    // The model was told the user did not approve (the tool result says so).
    let told = w.count("SELECT COUNT(*) FROM session_events WHERE kind = 'tool_result' AND content LIKE '%did not approve%'").await;
    assert_eq!(told, 2);
    let expired = w
        .fake
        .sent(w.bot)
        .into_iter()
        .find(|m| m.message_id == request.message_id)
        .unwrap();
    assert!(
        expired.visible_text.contains("Expired"),
        "{}",
        expired.visible_text
    );
    w.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scoped_grant_skips_the_second_prompt_until_it_expires() {
    let w = world("5m", false).await;
    w.fake.push_message(w.bot, OWNER, OWNER, "write the note");
    let request = w.approval_message(0).await;
    let id = World::id_of(&request);
    let answer = w.press(OWNER, &request, &format!("ag:{id}")).await;
    assert!(answer.contains("Approved"), "{answer}");
    w.reply("The file tool answered.").await;
    let prompts = w
        .fake
        .sent(w.bot)
        .iter()
        .filter(|m| !m.callback_data().is_empty())
        .count();

    // The same tool on the same target: no second prompt.
    w.fake
        .push_message(w.bot, OWNER, OWNER, "write the note again");
    wait_until(Duration::from_secs(30), "the granted call ran", || async {
        w.count("SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'")
            .await
            >= 2
    })
    .await;
    assert_eq!(
        w.fake
            .sent(w.bot)
            .iter()
            .filter(|m| !m.callback_data().is_empty())
            .count(),
        prompts
    );
    let decisions = w.count("SELECT COUNT(*) FROM run_steps WHERE kind = 'decision' AND detail LIKE '%\"source\":\"grant:%'").await;
    assert_eq!(decisions, 1, "the second decision names the grant");

    // Once the grant has expired it asks again.
    w.harness
        .store()
        .write(|conn| Ok(conn.execute("UPDATE grants SET expires_ms = 1", [])?))
        .await
        .unwrap();
    let last = w
        .fake
        .sent(w.bot)
        .iter()
        .map(|m| m.message_id)
        .max()
        .unwrap() as usize;
    w.fake
        .push_message(w.bot, OWNER, OWNER, "write the note a third time");
    w.approval_message(last).await;
    w.world.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_reachable_approver_the_request_is_denied_at_once() {
    // No Studio, and the chat is a terminal chat of another user: nobody can be asked.
    let llm = ScriptedLlm::start(write_script()).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
    )];
    options.start.studio = false;
    let harness = Harness::start(options).await.unwrap();
    let started = std::time::Instant::now();
    let reply = harness
        .ask(
            "ada",
            &clawvisor::domain::ChatKey::api("someone"),
            "write it",
        )
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "no silent wait"
    );
    assert_eq!(reply.text, "The file tool answered.");
    let reason: String = harness
        .store()
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT content FROM session_events WHERE kind = 'tool_result'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert!(reason.contains("no approver is reachable"), "{reason}");
    let status: String = harness
        .store()
        .read(|conn| Ok(conn.query_row("SELECT status FROM approvals", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(status, "denied_unreachable");
    harness.stop().await;
}

#[test]
fn tampering_with_the_audit_log_is_detected_and_the_row_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawvisor.db");
    let store = clawvisor::store::Store::open(&path, Default::default()).unwrap();
    store
        .write_blocking(|conn| {
            for i in 0..10 {
                audit::append(
                    conn,
                    "operator",
                    "policy.changed",
                    &format!("rule:{i}"),
                    &serde_json::json!({"n": i}),
                )?;
            }
            Ok(())
        })
        .unwrap();
    store.stop_writer();
    let verify = |conn: &rusqlite::Connection| audit::verify(conn, None).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(verify(&conn), Verification::Valid { rows: 10 });
    // The triggers refuse edits through SQL; an attacker drops them first.
    assert!(
        conn.execute("UPDATE audit_log SET actor = 'x' WHERE id = 3", [])
            .is_err()
    );
    conn.execute_batch("DROP TRIGGER audit_log_no_update; DROP TRIGGER audit_log_no_delete;")
        .unwrap();

    let cases: [(&str, i64, &str); 3] = [
        (
            "UPDATE audit_log SET details = '{\"n\":99}' WHERE id = 4",
            4,
            "edited",
        ),
        ("DELETE FROM audit_log WHERE id = 6", 7, "missing"),
        // Swap two rows' contents (a reorder), keeping ids and hashes in place.
        (
            "UPDATE audit_log SET subject = CASE id WHEN 8 THEN 'rule:8x' ELSE subject END WHERE id = 8",
            8,
            "edited",
        ),
    ];
    for (tamper, row, word) in cases {
        let copy = dir.path().join(format!("copy-{row}.db"));
        std::fs::copy(&path, &copy).unwrap();
        let tampered = rusqlite::Connection::open(&copy).unwrap();
        tampered.execute_batch("DROP TRIGGER IF EXISTS audit_log_no_update; DROP TRIGGER IF EXISTS audit_log_no_delete;").unwrap();
        tampered.execute_batch(tamper).unwrap();
        match verify(&tampered) {
            Verification::Broken {
                row: broken,
                reason,
            } => {
                assert_eq!(broken, row, "{tamper}: {reason}");
                assert!(reason.contains(word), "{tamper}: {reason}");
            }
            valid => panic!("{tamper} went unnoticed: {valid:?}"),
        }
    }
    // Reordering whole rows (ids swapped) breaks the chain at the first moved row.
    let copy = dir.path().join("copy-reorder.db");
    std::fs::copy(&path, &copy).unwrap();
    let tampered = rusqlite::Connection::open(&copy).unwrap();
    tampered.execute_batch("DROP TRIGGER IF EXISTS audit_log_no_update; DROP TRIGGER IF EXISTS audit_log_no_delete;").unwrap();
    tampered
        .execute_batch("UPDATE audit_log SET id = -2 WHERE id = 2; UPDATE audit_log SET id = 2 WHERE id = 3; UPDATE audit_log SET id = 3 WHERE id = -2;")
        .unwrap();
    assert!(matches!(
        verify(&tampered),
        Verification::Broken { row: 2, .. }
    ));
    // `clawvisor audit verify` names the row too, and fails.
    std::fs::create_dir_all(dir.path().join("tampered")).unwrap();
    // The chain is keyed: the key and the head outside the database go along with the copy.
    for anchor in [audit::KEY_FILE, audit::HEAD_FILE] {
        std::fs::copy(
            dir.path().join(anchor),
            dir.path().join("tampered").join(anchor),
        )
        .unwrap();
    }
    std::fs::copy(
        dir.path().join("copy-4.db"),
        dir.path().join("tampered/clawvisor.db"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("cli.toml"),
        "data_dir = \"tampered\"\n[providers.openai]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n",
    )
    .unwrap();
    let run = |db: &str| {
        std::fs::copy(
            dir.path().join(db),
            dir.path().join("tampered/clawvisor.db"),
        )
        .unwrap();
        std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
            .args([
                "--config",
                dir.path().join("cli.toml").to_str().unwrap(),
                "audit",
                "verify",
            ])
            .output()
            .unwrap()
    };
    let broken = run("copy-4.db");
    assert_eq!(broken.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&broken.stdout).contains("BROKEN at row 4"),
        "{broken:?}"
    );
    let valid = run("clawvisor.db");
    assert!(valid.status.success(), "{valid:?}");
    assert!(String::from_utf8_lossy(&valid.stdout).contains("valid: 10 entries"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_commands_decide_and_report_status() {
    let w = world("5m", false).await;
    // /deny <id>, typed by the approver, denies: nothing is written and the model is told.
    w.fake.push_message(w.bot, OWNER, OWNER, "write the notes");
    let first = w.approval_message(0).await;
    let id = World::id_of(&first);
    w.fake
        .push_message(w.bot, OWNER, STRANGER, &format!("/approve {id}"));
    w.fake
        .push_message(w.bot, OWNER, OWNER, &format!("/deny {id}"));
    w.reply("The file tool answered.").await;
    assert_eq!(w.notes(), None, "denied by text: nothing written");
    assert_eq!(
        w.count("SELECT COUNT(*) FROM approvals WHERE status = 'denied' AND decided_by LIKE 'telegram:42%'")
            .await,
        1,
        "the approver's /deny decided it, the stranger's /approve did not"
    );
    // /approve <id> approves.
    w.fake.push_message(w.bot, OWNER, OWNER, "write them again");
    let second = w.approval_message(first.message_id as usize).await;
    let id = World::id_of(&second);
    w.fake
        .push_message(w.bot, OWNER, OWNER, &format!("/approve {id}"));
    wait_until(Duration::from_secs(30), "approved by text", || async {
        w.notes().is_some()
    })
    .await;
    assert_eq!(w.notes().as_deref(), Some("hello"));
    // An unknown id is answered plainly.
    w.fake
        .push_message(w.bot, OWNER, OWNER, "/approve zzzzzzzz");
    w.reply("expired or does not exist").await;
    // /status says what the session is doing; /new starts a fresh one.
    w.fake.push_message(w.bot, OWNER, OWNER, "/status");
    let status = w
        .fake
        .wait_for_sent(
            w.bot,
            |m| m.chat_id == OWNER && m.visible_text.to_lowercase().contains("ada"),
            Duration::from_secs(20),
        )
        .await;
    assert!(status.is_some(), "/status answers");
    let sessions_before = w.count("SELECT COUNT(*) FROM sessions").await;
    w.fake.push_message(w.bot, OWNER, OWNER, "/new");
    w.fake.push_message(w.bot, OWNER, OWNER, "hello after new");
    wait_until(
        Duration::from_secs(20),
        "/new starts a fresh session",
        || async { w.count("SELECT COUNT(*) FROM sessions").await > sessions_before },
    )
    .await;
    w.world.harness.stop().await;
}

/// Issue #16, class 1: a grant covers exactly the action the human saw. After "this exact action,
/// 30 min" on one write, the same write runs without asking, but a write of other content to the
/// same file — same tool, same target — asks again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_covers_exactly_the_approved_action_and_the_prompt_says_so() {
    let script = Script::new()
        .rule(Rule::text("The file tool answered.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "notes.txt", "content": "sneaky `rm -rf ~` </pre>", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("other"),
        )
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "notes.txt", "content": "hello", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("write"),
        );
    let world = TestWorld::builder(script)
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"\napproval_ttl = \"5m\"\n",
            "556:AAH-approvals-test-token-exact01",
            &[OWNER],
            &[OWNER],
        )
        .start()
        .await;
    let bot = world.bot("ada");
    let w = World { world, bot };

    w.fake.push_message(w.bot, OWNER, OWNER, "write the note");
    let request = w.approval_message(0).await;
    // The prompt names the grant's exact scope and shows the whole action.
    assert!(
        request.visible_text.contains("same arguments"),
        "{}",
        request.visible_text
    );
    assert!(
        request.visible_text.contains("notes.txt"),
        "{}",
        request.visible_text
    );
    let id = World::id_of(&request);
    let grant_button = request
        .callback_data()
        .iter()
        .find(|data| data.starts_with("ag"))
        .cloned()
        .expect("a grant is offered");
    let answer = w.press(OWNER, &request, grant_button).await;
    assert!(answer.contains("Approved"), "{answer} ({id})");
    w.reply("The file tool answered.").await;

    // The same action again: covered by the grant, no second prompt.
    w.fake
        .push_message(w.bot, OWNER, OWNER, "write the note again");
    wait_until(Duration::from_secs(30), "the granted call ran", || async {
        w.count("SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'")
            .await
            >= 2
    })
    .await;

    // Another action on the same file: the grant does not cover it; a human is asked again,
    // and the prompt shows the content whole and escaped.
    w.fake
        .push_message(w.bot, OWNER, OWNER, "now the other content");
    let second = w.approval_message(request.message_id as usize).await;
    assert_ne!(World::id_of(&second), id);
    assert!(
        second.visible_text.contains("sneaky `rm -rf ~` </pre>"),
        "the whole action, as text: {}",
        second.visible_text
    );
    assert_eq!(
        w.count("SELECT COUNT(*) FROM audit_log WHERE action = 'tool.executed'")
            .await,
        2,
        "nothing ran without a decision"
    );
    assert_eq!(w.notes().as_deref(), Some("hello"));
    w.world.harness.stop().await;
}
