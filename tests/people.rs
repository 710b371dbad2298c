//! Claiming a bot and managing its people, against the fake Bot API and Studio's API on a real
//! daemon: a fresh agent whose bot names nobody gets a claim code (in the store and Studio); wrong
//! codes are refused and limited per person (then not even the right one is checked); the right
//! code makes its sender the owner, who talks to the agent and approves pairings; a second use
//! is refused; a friend's pairing request is approved through Studio; a third person blocked
//! through Studio gets no answer at all. Every change is audited.

use std::time::Duration;

use clawvisor::testkit::fake_telegram::BotId;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);
const OWNER: i64 = 501;
const FRIEND: i64 = 502;
const STRANGER: i64 = 503;
const GUESSER: i64 = 504;
const LATECOMER: i64 = 505;

struct Setup {
    w: World,
    bot: BotId,
    base: String,
    http: reqwest::Client,
}

/// What the bot sent to `user`'s private chat, in order.
fn sent_to(w: &World, bot: BotId, user: i64) -> Vec<String> {
    w.fake
        .sent(bot)
        .into_iter()
        .filter(|message| message.chat_id == user)
        .map(|message| message.visible_text)
        .collect()
}

/// `user` writes `text` in their private chat; waits for a message to them containing `expect`
/// sent after it.
async fn say(w: &World, bot: BotId, user: i64, text: &str, expect: &str) -> String {
    let before = sent_to(w, bot, user).len();
    w.fake.push_message(bot, user, user, text);
    wait_until(
        WAIT,
        &format!("a reply to {user} containing `{expect}`"),
        || async {
            let sent = sent_to(w, bot, user);
            sent[before.min(sent.len())..]
                .iter()
                .find(|text| text.contains(expect))
                .cloned()
                .ok_or_else(|| format!("{sent:?}"))
        },
    )
    .await
}

impl Setup {
    async fn start() -> Setup {
        let w = World::builder(Script::new().rule(Rule::text("ada here, answering")))
            .config_extra("[telegram]\npoll_timeout = \"2s\"\n")
            .agent_with_bot("ada", "", "6161:AAH-people-test-token-0001", &[], &[])
            .start()
            .await;
        for (user, name) in [
            (OWNER, "Olivia"),
            (FRIEND, "Fred"),
            (STRANGER, "Sam"),
            (GUESSER, "Gus"),
            (LATECOMER, "Lena"),
        ] {
            w.fake.set_user(user, name, None);
        }
        let bot = w.bot("ada");
        let (base, http) = w.harness.studio_http().await;
        Setup { w, bot, base, http }
    }

    /// The Overview's hints.
    async fn hints(&self) -> String {
        let overview: Value = self
            .http
            .get(format!("{}/api/v1/overview", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        overview["hints"].to_string()
    }

    async fn people(&self) -> Value {
        let response = self
            .http
            .get(format!("{}/api/v1/people", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200);
        let body: Value = response.json().await.unwrap();
        body["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|agent| agent["agent"] == "ada")
            .cloned()
            .unwrap_or_else(|| panic!("ada is listed: {body}"))
    }

    async fn post(&self, path: &str) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    fn sent_to(&self, user: i64) -> Vec<String> {
        sent_to(&self.w, self.bot, user)
    }

    /// `user` writes `text` in their private chat; waits for a message to them containing `expect`
    /// sent after it.
    async fn say(&self, user: i64, text: &str, expect: &str) -> String {
        say(&self.w, self.bot, user, text, expect).await
    }

    /// `user` writes `text`; waits until the update is stored as handled and returns its status
    /// and note.
    async fn handled(&self, user: i64, text: &str) -> (String, String) {
        let pushed = self.w.fake.push_message(self.bot, user, user, text);
        wait_until(WAIT, &format!("update {} handled", pushed.update_id), || async {
            let update_id = pushed.update_id;
            self.w
                .store()
                .read(move |conn| {
                    Ok(conn.query_row(
                        "SELECT status, COALESCE(note, '') FROM inbound_updates WHERE update_id = ?1 AND status IN ('processed', 'ignored')",
                        [update_id],
                        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?)),
                    )?)
                })
                .await
                .map_err(|error| error.to_string())
        })
        .await
    }

    async fn audit_actions(&self) -> Vec<String> {
        self.w
            .store()
            .read(|conn| {
                let mut statement = conn.prepare(
                    "SELECT action FROM audit_log WHERE action LIKE 'people.%' ORDER BY id",
                )?;
                let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
                Ok(rows.collect::<Result<Vec<_>, _>>()?)
            })
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_right_code_claims_the_bot_and_the_owner_pairs_and_blocks_from_studio() {
    let s = Setup::start().await;

    // A fresh agent whose bot names nobody: a claim code, stored and shown in Studio.
    let code = wait_until(WAIT, "a claim code in Studio", || async {
        let ada = s.people().await;
        (ada["claim"]["state"] == "unclaimed")
            .then(|| ada["claim"]["code"].as_str().unwrap().to_string())
            .ok_or_else(|| ada["claim"].to_string())
    })
    .await;
    let stored: String =
        s.w.store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT code FROM bot_claims WHERE agent = 'ada' AND claimed_ms IS NULL",
                    [],
                    |row| row.get(0),
                )?)
            })
            .await
            .unwrap();
    assert_eq!(
        code.replace('-', ""),
        stored,
        "Studio shows the stored code"
    );
    assert_eq!(code.len(), 9, "shown as ABCD-EFGH: {code}");
    let hints = s.hints().await;
    assert!(
        hints.contains("The bot of `ada` waits to be claimed"),
        "the Overview points to the People page: {hints}"
    );
    assert!(
        !hints.contains(&stored),
        "the code itself stays on the People page: {hints}"
    );
    // A code of the same shape that is not this one.
    let wrong = if stored.starts_with('A') {
        "BBBB-BBBB"
    } else {
        "AAAA-AAAA"
    };

    // /start without a code: the bot says it waits for its operator.
    s.say(GUESSER, "/start", "waiting to be claimed").await;
    // Wrong codes are refused, the fifth one locks the sender out for the window ...
    for left in (1..5).rev() {
        let reply = s.say(GUESSER, &format!("/start {wrong}"), "wrong").await;
        assert!(reply.contains(&format!("{left} more")), "{reply}");
    }
    let reply = s
        .say(GUESSER, "/start not-even-a-code", "don't check codes")
        .await;
    assert!(reply.contains("10 minutes"), "{reply}");
    // ... after which not even the right code is checked, and nothing is said.
    let told = s.sent_to(GUESSER).len();
    let (status, note) = s.handled(GUESSER, &format!("/start {code}")).await;
    assert_eq!(
        (status.as_str(), note.as_str()),
        ("ignored", "claim: rate-limited, code not checked")
    );
    assert_eq!(
        s.sent_to(GUESSER).len(),
        told,
        "the limited sender is not answered"
    );
    assert_eq!(s.people().await["claim"]["state"], "unclaimed");
    assert_eq!(
        s.w.llm.request_count(),
        0,
        "nobody unknown reached the model"
    );

    // The right code (typed in lower case) makes its sender the owner, at once.
    s.say(
        OWNER,
        &format!("/start {}", code.to_lowercase()),
        "you are my owner",
    )
    .await;
    let ada = s.people().await;
    assert_eq!(ada["claim"]["state"], "claimed", "{ada}");
    assert_eq!(ada["claim"]["owner"]["user_id"], OWNER, "{ada}");
    assert!(
        ada["claim"]["code"].is_null(),
        "no code once claimed: {ada}"
    );
    assert_eq!(ada["people"][0]["status"], "owner", "{ada}");
    assert_eq!(ada["people"][0]["name"], "Olivia", "{ada}");
    assert!(!s.hints().await.contains("waits to be claimed"));
    s.say(OWNER, "hello", "ada here, answering").await;

    // A second use of the code is refused.
    s.say(LATECOMER, &format!("/start {code}"), "already has an owner")
        .await;
    assert_eq!(s.people().await["people"].as_array().unwrap().len(), 1);

    // The owner approves: Lena's pairing request (from her /start) with /pair.
    let latecomer_code = s.people().await["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|request| request["user_id"] == LATECOMER)
        .map(|request| request["display"].as_str().unwrap().to_string())
        .expect("Lena's pairing request is pending");
    s.say(OWNER, &format!("/pair {latecomer_code}"), "Paired Lena")
        .await;
    s.say(LATECOMER, "hi", "ada here, answering").await;

    // A friend asks to pair and is approved in Studio.
    s.say(FRIEND, "hi, it's Fred", "approve code").await;
    let friend_code = wait_until(WAIT, "Fred's request in Studio", || async {
        s.people().await["pending"]
            .as_array()
            .unwrap()
            .iter()
            .find(|request| request["user_id"] == FRIEND)
            .map(|request| request["code"].as_str().unwrap().to_string())
    })
    .await;
    let (status, body) = s
        .post(&format!("/api/v1/pairings/{friend_code}/approve"))
        .await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from("paired")),
        "{body}"
    );
    s.w.fake
        .wait_for_sent(
            s.bot,
            |m| m.chat_id == FRIEND && m.visible_text.contains("You're approved, Fred"),
            WAIT,
        )
        .await
        .expect("Fred is told");
    s.say(FRIEND, "so, hello", "ada here, answering").await;
    let (status, body) = s
        .post(&format!("/api/v1/pairings/{friend_code}/approve"))
        .await;
    assert_eq!(status, 404, "a decided request is gone: {body}");

    // A third person asks, is blocked in Studio, and from then on gets no answer at all.
    s.say(STRANGER, "let me in", "approve code").await;
    let (status, body) = s
        .post(&format!("/api/v1/people/ada/{STRANGER}/block"))
        .await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from("blocked")),
        "{body}"
    );
    let told = s.sent_to(STRANGER).len();
    let (status, note) = s.handled(STRANGER, "hello??").await;
    assert_eq!(
        (status.as_str(), note.as_str()),
        ("ignored", "blocked by the operator: not answered")
    );
    let (status, _) = s.handled(STRANGER, "/start").await;
    assert_eq!(status, "ignored");
    assert_eq!(
        s.sent_to(STRANGER).len(),
        told,
        "a blocked person hears nothing"
    );
    // Someone who never asked is blocked by id: not even a first pairing reply.
    let (status, body) = s.post(&format!("/api/v1/people/ada/{GUESSER}/block")).await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from("blocked")),
        "{body}"
    );
    let told = s.sent_to(GUESSER).len();
    let (status, note) = s.handled(GUESSER, "hi there").await;
    assert_eq!(
        (status.as_str(), note.as_str()),
        ("ignored", "blocked by the operator: not answered")
    );
    assert_eq!(
        s.sent_to(GUESSER).len(),
        told,
        "a blocked person hears nothing"
    );
    let ada = s.people().await;
    assert!(
        !ada["pending"]
            .as_array()
            .unwrap()
            .iter()
            .any(|request| request["user_id"] == STRANGER),
        "the blocked person's request is closed: {ada}"
    );
    let statuses: Vec<(i64, String)> = ada["people"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["user_id"].as_i64().unwrap(),
                p["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for expected in [
        (OWNER, "owner"),
        (LATECOMER, "paired"),
        (FRIEND, "paired"),
        (STRANGER, "blocked"),
    ] {
        assert!(
            statuses.contains(&(expected.0, expected.1.to_string())),
            "{expected:?} in {statuses:?}"
        );
    }

    // Revoked, Fred is unknown again: his next message gets a pairing reply, not an answer.
    let (status, body) = s.post(&format!("/api/v1/people/ada/{FRIEND}/revoke")).await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from("unknown")),
        "{body}"
    );
    s.say(FRIEND, "still there?", "approve code").await;
    // Denied, his new request is gone, and he is not answered again while it would have lasted.
    let again = s.people().await["pending"]
        .as_array()
        .unwrap()
        .iter()
        .find(|request| request["user_id"] == FRIEND)
        .map(|request| request["code"].as_str().unwrap().to_string())
        .expect("Fred's new request");
    let (status, body) = s.post(&format!("/api/v1/pairings/{again}/deny")).await;
    assert_eq!(
        (status, &body["status"]),
        (200, &Value::from("denied")),
        "{body}"
    );
    assert!(s.people().await["pending"].as_array().unwrap().is_empty());
    let told = s.sent_to(FRIEND).len();
    let (status, _) = s.handled(FRIEND, "hello?").await;
    assert_eq!(status, "ignored");
    assert_eq!(s.sent_to(FRIEND).len(), told, "no second pairing reply");
    // Revoking someone who is blocked is refused with what to do instead.
    let (status, body) = s
        .post(&format!("/api/v1/people/ada/{STRANGER}/revoke"))
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(body.to_string().contains("unblock"), "{body}");

    // Every change is in the audit log (and never the claim code).
    let actions = s.audit_actions().await;
    assert_eq!(
        actions,
        [
            "people.claim_rate_limited",
            "people.claimed",
            "people.paired",
            "people.paired",
            "people.blocked",
            "people.blocked",
            "people.revoked",
            "people.pairing_denied",
        ],
        "{actions:?}"
    );
    let details: String =
        s.w.store()
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT group_concat(details, ' ') FROM audit_log",
                    [],
                    |row| row.get(0),
                )?)
            })
            .await
            .unwrap();
    assert!(!details.contains(&stored), "the claim code is not audited");
    s.w.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bot_whose_file_names_people_is_never_claimable_and_its_people_are_not_changed_in_studio()
{
    let w = World::builder(Script::new().rule(Rule::text("bo here")))
        .config_extra("[telegram]\npoll_timeout = \"2s\"\n")
        .agent_with_bot("bo", "", "6262:AAH-people-test-token-0002", &[OWNER], &[])
        .start()
        .await;
    let bot = w.bot("bo");
    let (base, http) = w.harness.studio_http().await;
    // Once the bot answers, it has been online (and would have made a code by then).
    w.fake.push_message(bot, OWNER, OWNER, "hi");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.visible_text.contains("bo here"),
            WAIT,
        )
        .await
        .expect("the file's person is answered");
    let body: Value = http
        .get(format!("{base}/api/v1/people"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bo = &body["agents"][0];
    assert_eq!(bo["claim"]["state"], "managed_by_file", "{body}");
    assert_eq!(bo["from_file"][0]["user_id"], OWNER, "{body}");
    assert_eq!(bo["from_file"][0]["approver"], true, "{body}");
    let claims: i64 = w
        .store()
        .read(|conn| Ok(conn.query_row("SELECT COUNT(*) FROM bot_claims", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(claims, 0);
    // A /start with a code-shaped text from a stranger does nothing but the usual pairing reply.
    w.fake
        .push_message(bot, STRANGER, STRANGER, "/start ABCD-EFGH");
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == STRANGER && m.visible_text.contains("approve code"),
            WAIT,
        )
        .await
        .expect("a pairing reply");
    let response = http
        .post(format!("{base}/api/v1/people/bo/{OWNER}/block"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 409);
    let body: Value = response.json().await.unwrap();
    assert!(body.to_string().contains("agent file"), "{body}");
    w.harness.stop().await;
}

/// The claimed owner approves like an approver named in the file: without Studio, a paired
/// friend's request for an action reaches the owner privately, and the owner's button press
/// lets it run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_approves_what_a_paired_friend_asks_for_without_studio() {
    let script = Script::new()
        .rule(Rule::text("The note is written.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "note.txt", "content": "milk", "mode": "overwrite"}"#,
            )
            .when_last_user_contains("note"),
        )
        .rule(Rule::text("ada here, answering"));
    let w = World::builder(script)
        .config_extra("[telegram]\npoll_timeout = \"2s\"\n")
        .agent_with_bot(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
            "6363:AAH-people-test-token-0003",
            &[],
            &[],
        )
        .studio(false)
        .start()
        .await;
    let bot = w.bot("ada");
    let stored = |sql: &'static str| {
        let store = w.store().clone();
        async move {
            store
                .read(move |conn| Ok(conn.query_row(sql, [], |row| row.get::<_, String>(0))?))
                .await
                .ok()
        }
    };
    let code = wait_until(WAIT, "a claim code", || {
        stored("SELECT code FROM bot_claims WHERE agent = 'ada'")
    })
    .await;
    say(&w, bot, OWNER, &format!("/start {code}"), "owner").await;
    w.fake.push_message(bot, FRIEND, FRIEND, "hi");
    let pairing = wait_until(WAIT, "the friend's pairing request", || {
        stored("SELECT code FROM pairing_codes WHERE user_id = 502")
    })
    .await;
    w.fake
        .push_message(bot, OWNER, OWNER, &format!("/pair {pairing}"));
    wait_until(WAIT, "the friend told they are approved", || async {
        sent_to(&w, bot, FRIEND)
            .iter()
            .any(|text| text.contains("approved"))
    })
    .await;

    w.fake
        .push_message(bot, FRIEND, FRIEND, "please write the shopping note");
    let private = w
        .fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == OWNER && m.callback_data().iter().any(|d| d.starts_with("ap:")),
            WAIT,
        )
        .await
        .expect("the owner gets the request privately");
    let approve = private
        .callback_data()
        .into_iter()
        .find(|d| d.starts_with("ap:"))
        .unwrap()
        .to_string();
    w.fake
        .push_callback(bot, OWNER, OWNER, private.message_id, &approve);
    w.fake
        .wait_for_sent(
            bot,
            |m| m.chat_id == FRIEND && m.visible_text.contains("The note is written."),
            WAIT,
        )
        .await
        .expect("approved by the owner, the action ran");
    w.harness.stop().await;
}
