//! Studio's Schedules and Memory APIs against the real daemon, with its bot on the fake Bot API
//! and a scripted model: a job created with a "deliver to" target (the owner's private chat,
//! offered by name and preselected; the daemon's zone and `run_once` as defaults) answers in that
//! Telegram chat; it is edited, run now (recorded with trigger `manual` before it is sent, refused
//! while it runs), and its last runs link to the agent's run — every change audited. The operator
//! adds a memory and edits one (origin kept, audited, re-embedded and re-indexed), and search
//! stems words ("plants" finds "plant" and "planting"), also for memories stored before the
//! migration that brought the stemmer.

use std::time::Duration;

use clawvisor::store::{Store, StoreOptions};
use clawvisor::testkit::fake_embeddings::FakeEmbeddings;
use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use serde_json::{Value, json};

const OWNER: i64 = 601;
const WAIT: Duration = Duration::from_secs(30);
/// The daemon's zone: not the machine's, so a default taken from anywhere else shows.
const DAEMON_ZONE: &str = "Pacific/Auckland";

/// Studio's API with the daemon's local token.
struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn of(world: &World) -> Api {
        let (base, http) = world.harness.studio_http().await;
        Api { base, http }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(json!(text)))
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }
}

fn message(body: &Value) -> String {
    body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The actions the audit log holds for `subject`, oldest first.
async fn audited(world: &World, subject: String) -> Vec<(String, String)> {
    world
        .store()
        .read(move |conn| {
            let mut statement =
                conn.prepare("SELECT actor, action FROM audit_log WHERE subject = ?1 ORDER BY id")?;
            let rows = statement.query_map([subject], |row| Ok((row.get(0)?, row.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

/// Ada with a bot on the fake Bot API, claimed by Olivia (the owner), in a daemon whose zone is
/// [`DAEMON_ZONE`]. The model answers a scheduled run slowly (so that a second "run now" meets
/// it still running).
async fn claimed_world() -> World {
    let script = Script::new()
        .rule(
            Rule::text("Time to water the plants and the herbs, Olivia!")
                .delay(Duration::from_millis(1500))
                .when_last_user_contains("water"),
        )
        .rule(Rule::text("Hello."));
    let world = World::builder(script)
        .agent_with_bot("ada", "", "4343:AAH-schedules-api-token-0001", &[], &[])
        .env("CLAWVISOR_TIMEZONE", DAEMON_ZONE)
        .start()
        .await;
    world.fake.set_user(OWNER, "Olivia", None);
    let code = wait_until(WAIT, "ada's claim code", || async {
        world
            .store()
            .read(|conn| clawvisor::store::people::claim(conn, "ada"))
            .await
            .unwrap()
            .map(|claim| claim.code)
    })
    .await;
    world
        .fake
        .push_message(world.bot("ada"), OWNER, OWNER, &format!("/start {code}"));
    wait_until(WAIT, "Olivia owns ada's bot", || async {
        world
            .store()
            .read(|conn| clawvisor::store::people::owner(conn, "ada"))
            .await
            .unwrap()
            .is_some()
    })
    .await;
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_made_in_studio_delivers_to_its_telegram_chat_and_is_edited_and_run_now() {
    let world = claimed_world().await;
    let api = Api::of(&world).await;
    let bot = world.bot("ada");

    // The form's choices: the owner's private chat by name, first and preselected; the
    // daemon's zone; run_once.
    let choices = api.get("/api/v1/schedules/choices?agent=ada").await;
    let owner_chat = format!("tg:{OWNER}");
    assert_eq!(choices["default_target"], owner_chat, "{choices}");
    assert_eq!(choices["targets"][0]["chat"], owner_chat, "{choices}");
    assert_eq!(
        choices["targets"][0]["label"], "Olivia — private chat (owner)",
        "{choices}"
    );
    assert_eq!(choices["timezone"], DAEMON_ZONE, "{choices}");
    assert_eq!(choices["missed_policy"], "run_once", "{choices}");
    let (status, body) = api
        .call(reqwest::Method::GET, "/api/v1/schedules/choices", None)
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("`agent`"), "{body}");

    // Created with that target (and no zone or policy: the defaults).
    let (status, job) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/schedules",
            Some(json!({
                "agent": "ada", "name": "plants", "prompt": "Remind me to water the plants",
                "kind": "cron", "expression": "0 9 * * *", "target": owner_chat,
            })),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    assert_eq!(job["target"], owner_chat, "{job}");
    assert_eq!(job["timezone"], DAEMON_ZONE, "{job}");
    assert!(
        job["missed_policy"]
            .as_str()
            .unwrap()
            .starts_with("run_once"),
        "{job}"
    );
    // A target no chat key reads is refused, naming the field.
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/schedules",
            Some(
                json!({"agent": "ada", "name": "x", "prompt": "x", "kind": "every",
                        "expression": "1h", "target": "the kitchen"}),
            ),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("`target`"), "{body}");

    // Edited: the prompt and the time change, the target stays.
    let (status, edited) = api
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/schedules/{id}"),
            Some(json!({
                "prompt": "Remind me to water the plants and the herbs",
                "kind": "cron", "expression": "30 8 * * *",
            })),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["expression"], "30 8 * * *", "{edited}");
    assert_eq!(
        edited["prompt"], "Remind me to water the plants and the herbs",
        "{edited}"
    );
    assert_eq!(edited["target"], owner_chat, "{edited}");
    let (status, body) = api
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/schedules/{id}"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("nothing to change"), "{body}");

    // Run now: recorded as a manual fire before it is sent; a second one while it runs is
    // refused (a job never runs twice at once).
    let (status, fired) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/schedules/{id}/run"),
            None,
        )
        .await;
    assert_eq!(status, 202, "{fired}");
    assert_eq!(fired["fire"]["trigger"], "manual", "{fired}");
    assert_eq!(fired["fire"]["status"], "running", "{fired}");
    assert_eq!(fired["running"], true, "{fired}");
    let (status, busy) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/schedules/{id}/run"),
            None,
        )
        .await;
    assert_eq!(status, 409, "{busy}");
    assert!(message(&busy).contains("running now"), "{busy}");

    // The answer arrives in Olivia's private chat, through ada's bot.
    world
        .fake
        .wait_for_sent(
            bot,
            |sent| sent.chat_id == OWNER && sent.visible_text.contains("water the plants"),
            WAIT,
        )
        .await
        .expect("the scheduled answer reaches the owner's chat");

    // The list shows the run with its outcome and the agent's run to follow.
    let run_id = wait_until(WAIT, "the manual run is recorded as done", || async {
        let list = api.get("/api/v1/schedules").await;
        let job = list["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|job| job["id"] == id)
            .cloned()
            .unwrap();
        let last = job["last_runs"][0].clone();
        (last["status"] == "succeeded" && last["trigger"] == "manual")
            .then(|| (last["run_id"].as_i64().unwrap(), job))
    })
    .await;
    let (run_id, listed) = run_id;
    assert_eq!(
        listed["target_label"], "Olivia — private chat (owner)",
        "{listed}"
    );
    let run = api.get(&format!("/api/v1/runs/{run_id}")).await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let detail = api.get(&format!("/api/v1/schedules/{id}")).await;
    let manual: Vec<&Value> = detail["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["trigger"] == "manual")
        .collect();
    assert_eq!(manual.len(), 1, "one fire, not two: {detail}");
    assert_eq!(manual[0]["run_id"], run_id, "{detail}");

    // A paused job is not run now; every change is the operator's in the audit log.
    let (status, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/schedules/{id}/pause"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/schedules/{id}/run"),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("paused"), "{body}");
    let actions = audited(&world, format!("job:{id}")).await;
    let studio: Vec<&str> = actions
        .iter()
        .filter(|(actor, _)| actor == "operator (studio)")
        .map(|(_, action)| action.as_str())
        .collect();
    assert_eq!(
        studio,
        ["job.created", "job.updated", "job.run_now", "job.paused"],
        "{actions:?}"
    );
    world.harness.stop().await;
}

/// The memory facts' stored embedding of `id`, decoded.
async fn stored_vector(world: &World, id: i64) -> Option<Vec<f32>> {
    world
        .store()
        .read(move |conn| {
            let blob: Option<Vec<u8>> = conn.query_row(
                "SELECT embedding FROM memory_facts WHERE id = ?1",
                [id],
                |row| row.get(0),
            )?;
            Ok(blob.and_then(|blob| clawvisor::store::memory::decode_vector(&blob)))
        })
        .await
        .unwrap()
}

async fn search_texts(api: &Api, query: &str) -> Vec<String> {
    let found = api.get(&format!("/api/v1/memory/search?q={query}")).await;
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hit| hit["memory"]["text"].as_str().unwrap().to_string())
        .collect()
}

/// The memories the full-text side of a search matched (hybrid hits carry their ranks).
async fn full_text_matches(api: &Api, query: &str) -> Vec<i64> {
    let found = api.get(&format!("/api/v1/memory/search?q={query}")).await;
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|hit| !hit["full_text_rank"].is_null())
        .map(|hit| hit["memory"]["id"].as_i64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_adds_and_edits_memories_and_search_finds_other_forms_of_a_word() {
    let embeddings = FakeEmbeddings::start().await.unwrap();
    let world = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent("ada", "")
        .config_extra(&format!(
            "[providers.embed]\nkind = \"openai\"\nbase_url = \"{}\"\nembeddings_model = \"fake-embed\"\nmax_retries = 0\n[memory]\nembeddings_provider = \"embed\"\n",
            embeddings.openai_base_url()
        ))
        .start()
        .await;
    let api = Api::of(&world).await;

    // Added as the operator: stored, embedded, audited.
    let (status, added) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/memory",
            Some(json!({"owner": "ada", "text": "Anna plants tomatoes every spring"})),
        )
        .await;
    assert_eq!(status, 201, "{added}");
    let id = added["id"].as_i64().unwrap();
    assert_eq!(added["source"], "operator", "{added}");
    assert_eq!(added["embedded"], true, "{added}");
    let (status, body) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/memory",
            Some(json!({"owner": "ada", "text": "Anna plants tomatoes every spring"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(message(&body).contains(&format!("#{id}")), "{body}");
    for (bad, field) in [
        (json!({"owner": "nobody", "text": "x"}), "`owner`"),
        (json!({"owner": "ada", "text": "   "}), "`text`"),
        (
            json!({"owner": "ada", "text": "x", "sensitivity": "loud"}),
            "`sensitivity`",
        ),
    ] {
        let (status, body) = api
            .call(reqwest::Method::POST, "/api/v1/memory", Some(bad))
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(message(&body).contains(field), "{field}: {body}");
    }

    // Search stems: other forms of the word find it.
    for query in ["plant", "planting", "plants"] {
        assert_eq!(
            search_texts(&api, query).await,
            ["Anna plants tomatoes every spring"],
            "{query}"
        );
    }

    // Edited: the text changes, the origin stays, the edit is audited and the vector replaced.
    let before = api.get("/api/v1/memory?owner=ada").await["memories"][0].clone();
    let (status, edited) = api
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/memory/{id}"),
            Some(json!({"text": "Anna plants basil every spring"})),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["text"], "Anna plants basil every spring");
    assert_eq!(edited["edited_by"], "operator (studio)");
    for kept in ["owner", "class", "source", "chat", "run_id", "created_ms"] {
        assert_eq!(edited[kept], before[kept], "{kept} kept");
    }
    // Matched by its words: the new ones, no longer the old (a vector search always returns
    // the nearest memories, so what the full text matched is what tells).
    assert_eq!(full_text_matches(&api, "basil").await, [id]);
    assert!(full_text_matches(&api, "tomatoes").await.is_empty());
    let expected = clawvisor::memory::index::normalize(
        &embeddings.vector_for("Anna plants basil every spring"),
        embeddings.dimension(),
    )
    .unwrap();
    assert_eq!(stored_vector(&world, id).await, Some(expected));
    let stats = api.get("/api/v1/memory/stats").await;
    assert_eq!(
        stats["indexed"], 1,
        "the old vector left the index: {stats}"
    );
    assert_eq!(
        audited(&world, format!("memory:{id}")).await,
        [
            ("operator (studio)".to_string(), "memory.added".to_string()),
            ("operator (studio)".to_string(), "memory.edited".to_string()),
        ]
    );

    // What cannot be edited says why.
    let (status, body) = api
        .call(
            reqwest::Method::PATCH,
            "/api/v1/memory/987654",
            Some(json!({"text": "x"})),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    let (status, _) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/memory/{id}/redact"),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = api
        .call(
            reqwest::Method::PATCH,
            &format!("/api/v1/memory/{id}"),
            Some(json!({"text": "Anna plants roses"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(message(&body).contains("redacted"), "{body}");

    // The list comes a page at a time, newest first, each page naming where the next begins.
    for text in ["Bo likes tea", "Cy likes coffee"] {
        let (status, body) = api
            .call(
                reqwest::Method::POST,
                "/api/v1/memory",
                Some(json!({"owner": "ada", "text": text})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let texts = |page: &Value| -> Vec<String> {
        page["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|fact| fact["text"].as_str().unwrap().to_string())
            .collect()
    };
    let first = api.get("/api/v1/memory?owner=ada&limit=2").await;
    assert_eq!(texts(&first), ["Cy likes coffee", "Bo likes tea"]);
    let next = first["next_before"].as_i64().expect("a next page");
    let last = api
        .get(&format!("/api/v1/memory?owner=ada&limit=2&before={next}"))
        .await;
    assert_eq!(last["memories"].as_array().unwrap().len(), 1, "{last}");
    assert_eq!(
        last["memories"][0]["id"],
        json!(id),
        "the first memory, redacted by now"
    );
    assert_eq!(last["next_before"], Value::Null);

    world.harness.stop().await;
}

/// The migrations before the one that brought the stemmer, as files in `migrations/`.
fn migrations_before_stemming() -> Vec<(u32, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<(u32, String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| {
            let number: u32 = name.split('_').next()?.parse().ok()?;
            let sql = std::fs::read_to_string(dir.join(&name)).ok()?;
            Some((number, name, sql))
        })
        .collect();
    files.sort();
    let stemming = files
        .iter()
        .find(|(_, name, _)| name.ends_with("_memory_stemming_and_edits.sql"))
        .map(|(number, _, _)| *number)
        .expect("the stemming migration exists");
    files
        .into_iter()
        .filter(|(number, _, _)| *number < stemming)
        .map(|(number, _, sql)| (number, sql))
        .collect()
}

#[test]
fn memories_stored_before_the_stemming_migration_are_found_by_other_forms_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clawvisor.db");
    {
        // The database as the previous version left it, with memories in it.
        let conn = rusqlite::Connection::open(&path).unwrap();
        let mut version = 0;
        for (number, sql) in migrations_before_stemming() {
            conn.execute_batch(&sql).unwrap();
            version = number;
        }
        conn.pragma_update(None, "user_version", version).unwrap();
        for text in ["The plants need water", "Olivia is planting roses"] {
            conn.execute(
                "INSERT INTO memory_facts (owner, class, source, text, created_ms, updated_ms) \
                 VALUES ('ada', 'durable', 'user_said', ?1, 0, 0)",
                [text],
            )
            .unwrap();
        }
        let matched: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH '\"plant\"'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(
            matched, 0,
            "before the migration words match only as written"
        );
    }
    let store = Store::open(&path, StoreOptions::default()).unwrap();
    store.stop_writer();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let scope = clawvisor::store::memory::Scope {
        owners: vec!["ada".into()],
        chat: None,
    };
    for query in ["plant", "plants", "planting"] {
        let found = clawvisor::store::memory::search_text(&conn, &scope, query, 10).unwrap();
        assert_eq!(found.len(), 2, "{query}: {found:?}");
    }
    // The index still follows the rows: a new memory and an edit are found by their stems.
    conn.execute(
        "INSERT INTO memory_facts (owner, class, source, text, created_ms, updated_ms) \
         VALUES ('ada', 'durable', 'user_said', 'Watering happens on Sundays', 0, 0)",
        [],
    )
    .unwrap();
    let mut found = clawvisor::store::memory::search_text(&conn, &scope, "watered", 10).unwrap();
    found.sort();
    assert_eq!(found, [1, 3], "\"water\" and \"Watering\"");
    conn.execute(
        "UPDATE memory_facts SET text = 'The herbs need water' WHERE id = 1",
        [],
    )
    .unwrap();
    let found = clawvisor::store::memory::search_text(&conn, &scope, "plant", 10).unwrap();
    assert_eq!(
        found,
        [2],
        "the edited row left the index under its old words"
    );
    let found = clawvisor::store::memory::search_text(&conn, &scope, "herb", 10).unwrap();
    assert_eq!(found, [1]);
}
