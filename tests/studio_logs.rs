//! Studio's log viewer and audit filters through the API of a real daemon over loopback HTTP:
//! lines the daemon writes appear in `/api/v1/logs` and in the live tail (`/api/v1/logs/events`,
//! which resumes from `Last-Event-ID`); a registered secret never appears, neither in a line nor
//! through a search; the level filter and the search return exactly the lines they should; and
//! `/api/v1/audit` filtered by actor, action (and action family), agent, subject and time returns
//! exactly the matching entries, with wrong parameters refused by name.

use std::collections::BTreeSet;
use std::time::Duration;

use clawvisor::testkit::scripted_llm::{Rule, Script};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use futures::StreamExt;
use serde_json::{Value, json};

const TOKEN: &str = "6161:AAH-studio-logs-token-0001";

struct Studio {
    world: World,
    base: String,
    http: reqwest::Client,
}

impl Studio {
    async fn start() -> Studio {
        // Every line the daemon writes at debug and above is kept (the first init in this
        // binary wins; every test asks for the same).
        let _ = clawvisor::logging::init("debug", clawvisor::config::LogFormat::Text);
        let world = World::builder(Script::new().rule(Rule::text("hi")))
            .agent_with_bot("ada", "", TOKEN, &[], &[])
            .agent("bob", "")
            .start()
            .await;
        let (base, http) = world.harness.studio_http().await;
        Studio { world, base, http }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// The messages of `/api/v1/logs` with `query`, newest first.
    async fn messages(&self, query: &str) -> Vec<String> {
        let (status, body) = self.get(&format!("/api/v1/logs?{query}")).await;
        assert_eq!(status, 200, "{body}");
        body["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|line| line["message"].as_str().unwrap().to_string())
            .collect()
    }

    /// Opens the live tail with `query` (and `Last-Event-ID` when given).
    async fn tail(&self, query: &str, last_event_id: Option<u64>) -> Tail {
        let mut request = self
            .http
            .get(format!("{}/api/v1/logs/events?{query}", self.base));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Tail {
            stream: Box::pin(response.bytes_stream()),
            text: String::new(),
        }
    }
}

/// A live tail being read.
struct Tail {
    stream:
        std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    text: String,
}

impl Tail {
    /// Reads until `needle` has arrived (or fails after 20 s); returns everything read so far.
    async fn until(&mut self, needle: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while !self.text.contains(needle) {
            match tokio::time::timeout_at(deadline, self.stream.next()).await {
                Ok(Some(Ok(bytes))) => self.text.push_str(&String::from_utf8_lossy(&bytes)),
                other => panic!(
                    "`{needle}` never arrived on the tail ({:?}); read: {}",
                    other.map(|item| item.map(|result| result.is_ok())),
                    self.text
                ),
            }
        }
        self.text.clone()
    }

    /// The `line` events read so far, as JSON.
    fn lines(&self) -> Vec<Value> {
        self.text
            .split("\n\n")
            .filter(|event| event.lines().any(|line| line == "event: line"))
            .filter_map(|event| {
                event
                    .lines()
                    .find_map(|line| line.strip_prefix("data: "))
                    .and_then(|data| serde_json::from_str(data).ok())
            })
            .collect()
    }
}

fn nonce() -> String {
    format!("{:x}", rand::random::<u64>())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_the_daemon_writes_are_listed_filtered_searched_and_tailed_without_secrets() {
    let studio = Studio::start().await;

    // A line the daemon wrote at boot, with this daemon's own address in it.
    let address = studio.base.trim_start_matches("http://").to_string();
    let listening = wait_until(
        Duration::from_secs(20),
        "the boot's line is listed",
        || async {
            let (_, body) = studio.get(&format!("/api/v1/logs?q={address}")).await;
            body["lines"]
                .as_array()
                .and_then(|lines| lines.first().cloned())
        },
    )
    .await;
    assert_eq!(listening["level"], "info", "{listening}");
    assert!(
        listening["message"]
            .as_str()
            .unwrap()
            .starts_with("studio listening on http://"),
        "the plain message comes first: {listening}"
    );
    assert_eq!(listening["target"], "clawvisor::actors::studio");
    let (_, page) = studio.get("/api/v1/logs?limit=1").await;
    assert_eq!(page["recording"], "debug", "{page}");
    assert_eq!(page["limits"], json!({"lines": 2000, "bytes": 1048576}));

    // The bot's token is registered by the daemon: a line carrying it (as Telegram's URLs do)
    // keeps it nowhere — not in the message, not in a field, not found by a search.
    let marker = nonce();
    tracing::warn!(target: "clawvisor::telegram::poller", url = %format!("https://api.telegram.org/bot{TOKEN}/getUpdates"),
        "poll failed {marker}: error sending request for url (https://api.telegram.org/bot{TOKEN}/getUpdates)");
    // A secret registered after its line was kept is hidden on the way out too.
    let late = format!("sk-late-{}", nonce());
    tracing::info!(target: "clawvisor::llm", "key check {marker} with {late}");
    clawvisor::secrets::register(&late);
    let (status, everything) = studio
        .get(&format!("/api/v1/logs?level=trace&limit=2000&q={marker}"))
        .await;
    assert_eq!(status, 200);
    let text = everything.to_string();
    assert!(!text.contains(TOKEN), "the bot token leaked: {text}");
    assert!(!text.contains(&late), "a late secret leaked: {text}");
    let lines = everything["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{everything}");
    assert_eq!(
        lines[0]["message"].as_str().unwrap(),
        format!("key check {marker} with ***")
    );
    assert!(
        lines[1]["message"]
            .as_str()
            .unwrap()
            .contains("/bot***/getUpdates"),
        "{everything}"
    );
    assert_eq!(
        lines[1]["fields"]["url"],
        "https://api.telegram.org/bot***/getUpdates"
    );
    for secret in [TOKEN, late.as_str()] {
        let found = studio.messages(&format!("level=trace&q={secret}")).await;
        assert!(found.is_empty(), "a search for a secret found {found:?}");
    }

    // Levels: `warn` is warnings and errors, the default `info` adds information, `debug` all.
    let levels = nonce();
    tracing::error!("levels {levels} error");
    tracing::warn!("levels {levels} warn");
    tracing::info!("levels {levels} info");
    tracing::debug!("levels {levels} debug");
    let client = &studio;
    let at = |level: &str| {
        let query = format!("level={level}&q=levels+{levels}");
        async move { client.messages(&query).await }
    };
    let expect = |names: &[&str]| -> Vec<String> {
        names
            .iter()
            .map(|name| format!("levels {levels} {name}"))
            .collect()
    };
    assert_eq!(at("error").await, expect(&["error"]));
    assert_eq!(at("warn").await, expect(&["warn", "error"]));
    assert_eq!(at("info").await, expect(&["info", "warn", "error"]));
    assert_eq!(
        at("debug").await,
        expect(&["debug", "info", "warn", "error"])
    );
    assert_eq!(
        studio.messages(&format!("q=levels+{levels}")).await,
        expect(&["info", "warn", "error"]),
        "info is the default"
    );

    // Search: any case, in the message, a field or the target; paged with `before`.
    let search = nonce();
    tracing::info!(order = %format!("pear-{search}"), "fruit delivered");
    tracing::info!(target: "clawvisor::orchard", "apple {search} picked");
    tracing::info!("plum {search} eaten");
    assert_eq!(
        studio.messages(&format!("q=PEAR-{search}")).await,
        ["fruit delivered"]
    );
    assert_eq!(
        studio
            .messages(&format!("q=Apple+{}", search.to_uppercase()))
            .await,
        [format!("apple {search} picked")]
    );
    let (_, first) = studio
        .get(&format!("/api/v1/logs?q={search}&limit=1"))
        .await;
    let next = first["next_before"].as_u64().expect("a next page");
    let (_, second) = studio
        .get(&format!("/api/v1/logs?q={search}&limit=5&before={next}"))
        .await;
    let second: Vec<&str> = second["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line["message"].as_str().unwrap())
        .collect();
    assert_eq!(first["lines"][0]["message"], format!("plum {search} eaten"));
    assert_eq!(
        second,
        [format!("apple {search} picked").as_str(), "fruit delivered"]
    );
    assert!(studio.messages("q=no+line+says+this+zq").await.is_empty());

    // Wrong parameters are refused by name.
    for (query, name) in [
        ("level=loud", "level"),
        ("before=soon", "before"),
        ("limit=-1", "limit"),
    ] {
        let (status, body) = studio.get(&format!("/api/v1/logs?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(name),
            "{body}"
        );
    }
    let (status, body) = studio.get("/api/v1/logs/events?after=later").await;
    assert_eq!(status, 400, "{body}");

    // The live tail: a line the daemon writes (a reload's report) arrives; a filtered-out level
    // does not; the bot token never does.
    let mut tail = studio.tail("level=info&q=reload", None).await;
    tail.until("event: hello").await;
    tracing::debug!("reload {marker} at debug is filtered out");
    let (status, report) = {
        let response = studio
            .http
            .post(format!("{}/api/v1/reload", studio.base))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        (
            response.status().as_u16(),
            response.json::<Value>().await.unwrap(),
        )
    };
    assert_eq!(status, 200, "{report}");
    let summary = report["summary"].as_str().unwrap().to_string();
    let read = tail.until(&summary).await;
    assert!(!read.contains("filtered out"), "{read}");
    let reloaded = tail
        .lines()
        .into_iter()
        .find(|line| line["message"] == summary.as_str())
        .expect("the reload's line");
    assert_eq!(reloaded["target"], "clawvisor::actors::reloader");
    let seq = reloaded["seq"].as_u64().unwrap();
    assert!(
        read.contains(&format!("id: {seq}")),
        "each line carries its number: {read}"
    );
    let mut secret_tail = studio.tail(&format!("level=warn&q={marker}"), None).await;
    secret_tail.until("event: hello").await;
    tracing::warn!("tail {marker} token {TOKEN}");
    let read = secret_tail.until(&format!("tail {marker} token ***")).await;
    assert!(!read.contains(TOKEN), "{read}");

    // A browser that reconnects sends the last number it saw and gets what came after it.
    tracing::info!("resume {marker} one");
    tracing::info!("resume {marker} two");
    let (_, resumed) = studio.get(&format!("/api/v1/logs?q=resume+{marker}")).await;
    let one = resumed["lines"][1]["seq"].as_u64().unwrap();
    let mut again = studio
        .tail(&format!("q=resume+{marker}&after=0"), Some(one))
        .await;
    again.until(&format!("resume {marker} two")).await;
    let messages: Vec<Value> = again
        .lines()
        .iter()
        .map(|line| line["message"].clone())
        .collect();
    assert_eq!(messages, [json!(format!("resume {marker} two"))]);

    studio.world.harness.stop().await;
}

/// Appends an audit row as the daemon's writers do.
async fn audit(
    studio: &Studio,
    actor: &str,
    action: &str,
    subject: &str,
    details: Value,
) -> (i64, i64) {
    let (actor, action, subject) = (actor.to_string(), action.to_string(), subject.to_string());
    studio
        .world
        .store()
        .write(move |conn| {
            let id = clawvisor::audit::append(conn, &actor, &action, &subject, &details)?;
            let at: i64 =
                conn.query_row("SELECT at_ms FROM audit_log WHERE id = ?1", [id], |row| {
                    row.get(0)
                })?;
            Ok((id, at))
        })
        .await
        .unwrap()
}

/// Waits until the clock has passed `ms`, so the next rows are later than every row before.
async fn after_ms(ms: i64) {
    wait_until(Duration::from_secs(5), "the clock moves on", || async {
        clawvisor::clock::now_ms() > ms
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_filters_return_exactly_the_matching_entries() {
    let studio = Studio::start().await;
    // An approval and a grant of ada's, which audit rows name only by id.
    studio
        .world
        .store()
        .write(|conn| {
            conn.execute_batch(
                "INSERT INTO approvals (id, agent, chat, run_id, call_id, tool, action, action_hash, target, risk, reason, requested_ms, expires_ms, status)
                 VALUES ('apx1', 'ada', 'tg:1', 1, 'c1', 'shell', 'ls', 'h', 't', 'low', 'r', 0, 1, 'denied_timeout');
                 INSERT INTO grants (id, agent, chat, tool, target, created_ms, expires_ms, created_by)
                 VALUES (77, 'ada', 'tg:1', 'shell', 't', 0, 1, 'operator');",
            )?;
            Ok(())
        })
        .await
        .unwrap();
    let (before_rows, _) = {
        let (_, body) = studio.get("/api/v1/audit?limit=1000").await;
        let ids: BTreeSet<i64> = body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect();
        (ids, ())
    };
    // Three moments, each later than the one before.
    let (settings, first_at) = audit(
        &studio,
        "operator",
        "agent.settings_changed",
        "agent:ada",
        json!({}),
    )
    .await;
    let (ada_tool, _) = audit(
        &studio,
        "agent:ada",
        "tool.executed",
        "run:1",
        json!({"tool": "shell"}),
    )
    .await;
    let (bob_tool, first_end) = audit(
        &studio,
        "agent:bob",
        "tool.executed",
        "run:2",
        json!({"tool": "shell"}),
    )
    .await;
    after_ms(first_end).await;
    let (claimed, second_at) = audit(
        &studio,
        "telegram:42",
        "people.claimed",
        "telegram:42",
        json!({"agent": "bob"}),
    )
    .await;
    let (expired, _) = audit(
        &studio,
        "system",
        "approval.expired",
        "apx1",
        json!({"decision": "denied_timeout"}),
    )
    .await;
    let (revoked, second_end) =
        audit(&studio, "operator", "grant.revoked", "grant:77", json!({})).await;
    after_ms(second_end).await;
    let (job, third_at) = audit(
        &studio,
        "operator",
        "job.created",
        "job:5",
        json!({"agent": "ada", "name": "standup"}),
    )
    .await;
    let (reload, _) = audit(
        &studio,
        "operator",
        "config.reload",
        "config",
        json!({"trigger": "studio"}),
    )
    .await;
    let (requested, _) = audit(
        &studio,
        "agent:ada",
        "approval.requested",
        "apx1",
        json!({"tool": "shell"}),
    )
    .await;
    let mine = [
        settings, ada_tool, bob_tool, claimed, expired, revoked, job, reload, requested,
    ];

    let ids = |body: &Value| -> Vec<i64> {
        body["entries"]
            .as_array()
            .unwrap_or_else(|| panic!("{body}"))
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect()
    };
    // Only this test's rows count (the daemon may audit its own boot).
    let matching = |query: String| {
        let studio = &studio;
        let before_rows = &before_rows;
        async move {
            let (status, body) = studio
                .get(&format!("/api/v1/audit?limit=1000&{query}"))
                .await;
            assert_eq!(status, 200, "{query}: {body}");
            let mut found: Vec<i64> = ids(&body)
                .into_iter()
                .filter(|id| !before_rows.contains(id))
                .collect();
            let newest_first = found.windows(2).all(|pair| pair[0] > pair[1]);
            assert!(newest_first, "{query}: {found:?}");
            found.reverse();
            found
        }
    };
    assert_eq!(matching(String::new()).await, mine);
    assert_eq!(
        matching("actor=operator".into()).await,
        [settings, revoked, job, reload]
    );
    assert_eq!(
        matching("actor=agent:ada".into()).await,
        [ada_tool, requested]
    );
    assert_eq!(
        matching("action=tool.executed".into()).await,
        [ada_tool, bob_tool]
    );
    assert_eq!(
        matching("action=approval.*".into()).await,
        [expired, requested]
    );
    assert_eq!(
        matching("action=approval.".into()).await,
        Vec::<i64>::new(),
        "an exact action"
    );
    // By or about ada: her settings, her tool call, her approval (expired, named by id), her
    // grant (revoked, named by id), her job (named in the details), her request.
    assert_eq!(
        matching("agent=ada".into()).await,
        [settings, ada_tool, expired, revoked, job, requested]
    );
    assert_eq!(matching("agent=bob".into()).await, [bob_tool, claimed]);
    assert_eq!(matching("agent=nobody".into()).await, Vec::<i64>::new());
    assert_eq!(matching("subject=apx1".into()).await, [expired, requested]);
    assert_eq!(matching(format!("since_ms={first_at}")).await, mine);
    assert_eq!(
        matching(format!("since_ms={second_at}")).await,
        [claimed, expired, revoked, job, reload, requested]
    );
    assert_eq!(
        matching(format!("since_ms={second_at}&until_ms={third_at}")).await,
        [claimed, expired, revoked]
    );
    assert_eq!(
        matching(format!("until_ms={second_at}")).await,
        [settings, ada_tool, bob_tool]
    );
    assert_eq!(
        matching(format!("actor=operator&agent=ada&since_ms={second_at}")).await,
        [revoked, job]
    );

    // Paged: two at a time, newest first, with the filter kept.
    let (_, page) = studio.get("/api/v1/audit?agent=ada&limit=2").await;
    assert_eq!(ids(&page), [requested, job]);
    let next = page["next_before"].as_i64().unwrap();
    let (_, page) = studio
        .get(&format!("/api/v1/audit?agent=ada&limit=2&before={next}"))
        .await;
    assert_eq!(ids(&page), [revoked, expired]);

    // What the filters can choose from.
    let (_, facets) = studio.get("/api/v1/audit/facets").await;
    let count = |list: &str, key: &str, name: &str| {
        facets[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item[key] == name)
            .map(|item| item["entries"].as_i64().unwrap())
    };
    assert!(
        count("actors", "actor", "operator").unwrap() >= 4,
        "{facets}"
    );
    assert_eq!(
        count("actions", "action", "tool.executed"),
        Some(2),
        "{facets}"
    );
    assert_eq!(facets["agents"], json!(["ada", "bob"]));

    // Wrong parameters are refused by name.
    for (query, name) in [
        ("since_ms=yesterday", "since_ms"),
        ("until_ms=1.5", "until_ms"),
        ("since_ms=200&until_ms=100", "until_ms"),
        ("limit=many", "limit"),
    ] {
        let (status, body) = studio.get(&format!("/api/v1/audit?{query}")).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(name),
            "{query}: {body}"
        );
    }
    studio.world.harness.stop().await;
}
