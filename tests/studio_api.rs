//! Studio's approvals, grants and policy-rules API against the real daemon over loopback HTTP:
//! an approval requested by a run is decided from the inbox, a grant is listed and revoked, a
//! stored rule tightens policy, and the guard refuses foreign hosts, cross-site mutations and
//! missing tokens. Every change lands in the audit log, and every audit row is announced on the
//! event bus (Studio's Audit page refreshes on it). The skills catalogue says, per agent, whether
//! a skill is enabled, usable and why not, with the front matter `skills show` prints, and an
//! agent that does not answer never makes it (or the agents list) fail.

use std::collections::BTreeMap;
use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::events::{EventKind, RuntimeEvent};
use clawvisor::studio::event_json::data_json;
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, wait_reply};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::{poll_until, wait_until};
use serde_json::{Value, json};

struct Studio {
    harness: Harness,
    _llm: ScriptedLlm,
    base: String,
    /// A client without credentials (requests add the token, a cookie or nothing).
    http: reqwest::Client,
    /// The daemon's local access token (`<data_dir>/studio.token`), as scripts on the server send it.
    token: String,
    /// Every runtime event since the daemon started (subscribed before any request).
    events: clawvisor::events::EventReceiver,
    seen: Vec<std::sync::Arc<RuntimeEvent>>,
}

impl Studio {
    async fn start(config_extra: &str, env: BTreeMap<String, String>) -> Studio {
        let script = Script::new()
            .rule(Rule::text("Written.").when_after_tool_result("write_file"))
            .rule(
                Rule::tool_call(
                    "write_file",
                    r#"{"path": "note.txt", "content": "hi", "mode": "overwrite"}"#,
                )
                .when_last_user_contains("write"),
            );
        let llm = ScriptedLlm::start(script).await.expect("model");
        let mut options = HarnessOptions::new(llm.base_url());
        options.agents = vec![agent_toml(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
        )];
        options.config_extra = config_extra.to_string();
        options.env = env;
        let harness = Harness::start(options).await.expect("daemon");
        let events = harness.daemon().events.subscribe();
        let addr = harness
            .daemon()
            .studio_addr(Duration::from_secs(10))
            .await
            .expect("studio bound");
        let token = harness
            .daemon()
            .studio_token()
            .expect("Studio runs")
            .expose()
            .to_string();
        Studio {
            harness,
            _llm: llm,
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            token,
            events,
            seen: Vec::new(),
        }
    }

    /// The events of `kind` published so far.
    fn published(&mut self, kind: EventKind) -> Vec<std::sync::Arc<RuntimeEvent>> {
        while let Ok(event) = self.events.try_recv() {
            self.seen.push(event);
        }
        self.seen
            .iter()
            .filter(|event| event.kind == kind)
            .cloned()
            .collect()
    }

    /// Waits until every audit row in the database has been announced as `audit_appended`
    /// (announcements follow the commit, so the last one may still be on its way).
    async fn assert_every_audit_row_announced(&mut self) {
        let stored = wait_until(Duration::from_secs(10), "every audit row announced", || {
            let mut announced: Vec<String> = self
                .published(EventKind::AuditAppended)
                .iter()
                .map(|event| {
                    data_json(&event.data)["action"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect();
            let store = self.harness.store().clone();
            async move {
                let mut stored = audit_actions(&store).await;
                stored.sort();
                announced.sort();
                if stored == announced {
                    Ok(stored)
                } else {
                    Err(format!("audit rows {stored:?} but announced {announced:?}"))
                }
            }
        })
        .await;
        assert!(!stored.is_empty(), "nothing was audited");
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn pending(&self) -> Vec<Value> {
        poll_until(Duration::from_secs(20), || async {
            let (status, body) = self.get("/api/v1/approvals?status=pending").await;
            assert_eq!(status, 200, "{body}");
            let list = body["approvals"].as_array().cloned().unwrap_or_default();
            (!list.is_empty()).then_some(list)
        })
        .await
        .unwrap_or_default()
    }

    /// The pending approvals right now (after a run finished, nothing can still appear).
    async fn pending_now(&self) -> usize {
        let (_, body) = self.get("/api/v1/approvals?status=pending").await;
        body["approvals"].as_array().map_or(0, Vec::len)
    }

    async fn audit_actions(&self) -> Vec<String> {
        audit_actions(self.harness.store()).await
    }
}

async fn audit_actions(store: &clawvisor::store::Store) -> Vec<String> {
    store
        .read(|conn| {
            let mut statement = conn.prepare("SELECT action FROM audit_log ORDER BY id")?;
            let rows = statement.query_map([], |r| r.get::<_, String>(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_decides_a_pending_approval_and_grants_are_listed_and_revoked() {
    let mut studio = Studio::start("", BTreeMap::new()).await;
    let chat = ChatKey::studio("inbox");
    let mut outputs = studio.harness.listen(&chat).await.unwrap();
    studio.harness.send("ada", &chat, "write the note").unwrap();
    let pending = studio.pending().await;
    assert_eq!(pending.len(), 1, "{pending:?}");
    let approval = &pending[0];
    assert_eq!(approval["tool"], "write_file");
    assert_eq!(approval["agent"], "ada");
    let id = approval["id"].as_str().unwrap().to_string();

    // Bad decisions are refused with a reason, and change nothing.
    let (status, body) = studio
        .post(
            &format!("/api/v1/approvals/{id}/decision"),
            json!({"decision": "maybe"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("approve")
    );
    let (status, _) = studio
        .post(
            "/api/v1/approvals/nosuchid/decision",
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 404);

    let (status, body) = studio
        .post(
            &format!("/api/v1/approvals/{id}/decision"),
            json!({"decision": "approve", "grant_minutes": 30}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let reply = wait_reply(&mut outputs, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(reply.text, "Written.");
    // Deciding twice is a conflict, not a second approval.
    let (status, _) = studio
        .post(
            &format!("/api/v1/approvals/{id}/decision"),
            json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(status, 409);

    let (_, body) = studio.get("/api/v1/grants").await;
    let grants = body["grants"].as_array().unwrap();
    assert_eq!(grants.len(), 1, "{body}");
    assert_eq!(grants[0]["tool"], "write_file");
    // A grant covers exactly the approved action, and shows it.
    assert_eq!(
        grants[0]["target"], "write_file (overwrite): note.txt, 2 bytes:\nhi",
        "{body}"
    );
    let grant = grants[0]["id"].as_i64().unwrap();

    // Within the grant the same write runs without asking.
    let reply = studio
        .harness
        .ask("ada", &chat, "write the note again")
        .await
        .unwrap();
    assert_eq!(reply.text, "Written.");
    assert_eq!(studio.pending_now().await, 0);

    let (status, _) = studio
        .post(&format!("/api/v1/grants/{grant}/revoke"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = studio
        .post(&format!("/api/v1/grants/{grant}/revoke"), json!({}))
        .await;
    assert_eq!(status, 404, "revoked once");
    let (_, body) = studio.get("/api/v1/grants").await;
    assert_eq!(body["grants"].as_array().unwrap().len(), 0);

    // After the revocation the same write asks again.
    studio
        .harness
        .send("ada", &chat, "write once more")
        .unwrap();
    assert_eq!(studio.pending().await.len(), 1, "asks again");

    let actions = studio.audit_actions().await;
    for expected in ["approval.decided", "grant.created", "grant.revoked"] {
        assert!(
            actions.iter().any(|a| a == expected),
            "{expected} in {actions:?}"
        );
    }
    studio.assert_every_audit_row_announced().await;
    let policy = studio.published(EventKind::PolicyChanged);
    assert_eq!(policy.len(), 1, "the revocation, once: {policy:?}");
    assert_eq!(policy[0].subject, format!("grant:{grant}"));
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_deny_rule_blocks_a_tool_and_disabling_it_is_audited() {
    let mut studio = Studio::start("", BTreeMap::new()).await;
    let (status, body) = studio
        .post(
            "/api/v1/policy/rules",
            json!({"effect": "allow", "tool": "write_file"}),
        )
        .await;
    assert_eq!(status, 400, "rules only tighten: {body}");
    let (status, _) = studio
        .post("/api/v1/policy/rules", json!({"effect": "deny"}))
        .await;
    assert_eq!(status, 400, "a rule on everything is refused");
    let (status, body) = studio
        .post(
            "/api/v1/policy/rules",
            json!({"effect": "deny", "tool": "write_file", "description": "no writes today"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let rule = body["id"].as_i64().unwrap();
    let (_, body) = studio.get("/api/v1/policy/rules").await;
    assert_eq!(body["rules"][0]["description"], "no writes today");

    let chat = ChatKey::studio("rules");
    let mut outputs = studio.harness.listen(&chat).await.unwrap();
    studio.harness.send("ada", &chat, "write the note").unwrap();
    // The model is told the call was denied and answers without the write (the scripted model
    // has no rule for a denied result, so it says nothing more than the run's closing).
    let _ = wait_reply(&mut outputs, Duration::from_secs(30)).await;
    assert_eq!(studio.pending_now().await, 0, "denied without asking");
    let workspace = studio
        .harness
        .dir
        .path()
        .join("data/workspaces/ada/note.txt");
    assert!(!workspace.exists(), "the rule blocked the write");

    let (status, _) = studio
        .post(&format!("/api/v1/policy/rules/{rule}/disable"), json!({}))
        .await;
    assert_eq!(status, 200);
    let (status, _) = studio
        .post(&format!("/api/v1/policy/rules/{rule}/disable"), json!({}))
        .await;
    assert_eq!(status, 404);
    let actions = studio.audit_actions().await;
    assert!(
        actions.iter().any(|a| a == "policy.rule_added"),
        "{actions:?}"
    );
    assert!(
        actions.iter().any(|a| a == "policy.rule_disabled"),
        "{actions:?}"
    );
    studio.assert_every_audit_row_announced().await;
    let changes: Vec<String> = studio
        .published(EventKind::PolicyChanged)
        .iter()
        .map(|event| {
            data_json(&event.data)["change"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(changes, ["rule_added", "rule_disabled"]);
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_refuses_foreign_hosts_cross_site_mutations_and_missing_tokens() {
    let studio = Studio::start("", BTreeMap::new()).await;
    let get_with = |header: &'static str, value: String| {
        studio
            .http
            .get(format!("{}/api/v1/approvals", studio.base))
            .header(header, value)
            .send()
    };
    let post_with = |header: &'static str, value: String| {
        studio
            .http
            .post(format!("{}/api/v1/policy/rules", studio.base))
            .header(header, value)
            .json(&json!({"effect": "deny", "tool": "shell"}))
            .send()
    };
    let status =
        |response: Result<reqwest::Response, reqwest::Error>| response.unwrap().status().as_u16();
    assert_eq!(
        status(get_with("Host", "rebind.attacker.example".into()).await),
        421
    );
    assert_eq!(
        status(post_with("Origin", "https://attacker.example".into()).await),
        403
    );
    assert_eq!(
        status(post_with("Sec-Fetch-Site", "cross-site".into()).await),
        403
    );
    // A browser without a session is refused even from the same origin...
    assert_eq!(status(post_with("Origin", studio.base.clone()).await), 401);
    // ...and passes once logged in through a one-time link, with the session's CSRF token.
    let link = clawvisor::studio::access::login_link(studio.harness.store(), &studio.base, "cli")
        .await
        .unwrap();
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let login = no_redirects.get(&link).send().await.unwrap();
    assert_eq!(login.status().as_u16(), 303);
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let session: Value = studio
        .http
        .get(format!("{}/api/v1/session", studio.base))
        .header("Cookie", &cookie)
        .header("Sec-Fetch-Site", "same-origin")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let csrf = session["csrf"].as_str().unwrap().to_string();
    let from_console = studio
        .http
        .post(format!("{}/api/v1/policy/rules", studio.base))
        .header("Origin", studio.base.clone())
        .header("Cookie", &cookie)
        .header("X-CSRF-Token", csrf)
        .json(&json!({"effect": "deny", "tool": "shell"}))
        .send()
        .await;
    assert_eq!(status(from_console), 201);
    // Health probes need nothing.
    let (status, _) = studio.get("/healthz").await;
    assert_eq!(status, 200);
    studio.harness.stop().await;

    let token = "studio-token-for-the-test-0123456789";
    let studio = Studio::start(
        "",
        BTreeMap::from([("CLAWVISOR_STUDIO_TOKEN".to_string(), token.to_string())]),
    )
    .await;
    let response = studio
        .http
        .get(format!("{}/api/v1/approvals", studio.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    let body = response.text().await.unwrap();
    assert!(!body.contains(token), "the token is never echoed");
    // The configured token and the local token file's are both accepted; nothing else is.
    for (token, expected) in [("wrong", 401), (token, 200), (&studio.token, 200)] {
        let response = studio
            .http
            .get(format!("{}/api/v1/approvals", studio.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), expected, "{token}");
    }
    studio.harness.stop().await;
}

/// Every file that appends to the audit log also announces it (`audit::announce`), so that a new
/// audited action cannot silently leave Studio's Audit page stale.
#[test]
fn every_writer_of_the_audit_log_announces_its_rows() {
    let mut pending = vec![std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src")];
    let mut writers = 0;
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") || path.ends_with("src/audit.rs") {
                continue;
            }
            // Operator commands (`src/cli/` and its folders, e.g. `cli/import/`) write the log
            // only while no daemon runs (`cli/daemon_link.rs`): there is no Studio to tell, and
            // its Audit page reads the rows when it starts.
            let cli = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cli");
            if path.starts_with(&cli) {
                continue;
            }
            // A tool node (`node serve`) keeps its own audit log in its own data directory, in a
            // process that has no Studio and no event bus; the daemon audits the call itself.
            if path.ends_with("src/node/handler.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let appends = text.matches("audit::append(").count();
            if appends == 0 {
                continue;
            }
            writers += 1;
            assert!(
                text.contains("audit::announce("),
                "{} appends audit rows but never calls crate::audit::announce after its commit",
                path.display()
            );
        }
    }
    assert!(writers >= 3, "the audit writers were not found under src/");
}

fn write_skill(root: &std::path::Path, folder: &str, text: &str) {
    let dir = root.join("skills").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

/// Calls the API in-process with `state` (to give Studio an agent that does not run).
async fn call(state: clawvisor::studio::StudioState, path: &str) -> (u16, Value) {
    use tower::ServiceExt;
    let token = format!("Bearer {}", state.access.tokens[0].expose());
    let request = axum::http::Request::builder()
        .uri(path)
        .header("host", "127.0.0.1")
        .header("authorization", token)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = clawvisor::studio::router(state)
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_skills_catalogue_gives_each_agent_its_reason_and_keeps_unknown_keys() {
    let dir = ScratchDir::new("studio-skills").unwrap();
    write_skill(
        dir.path(),
        "journal",
        "---\nname: journal\ndescription: Keeps a dated journal.\ntools: [write_file]\nrisk: medium\nrequires:\n  bins: [sh]\nlicense: MIT\nx-origin: another-runtime\n---\nWrite it down.\n",
    );
    write_skill(
        dir.path(),
        "bobs",
        "---\nname: bobs\ndescription: Only for bob.\nagents: [bob]\n---\nHi.\n",
    );
    write_skill(
        dir.path(),
        "mailer",
        "---\nname: mailer\ndescription: Sends mail.\nmcp: [mail]\n---\nMail.\n",
    );
    write_skill(
        dir.path(),
        "broken",
        "---\nname: broken\n---\nno description\n",
    );
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("ok")))
        .await
        .unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![
        agent_toml("ada", "tools = [\"write_file\"]"),
        agent_toml("bob", ""),
    ];
    let harness = Harness::start_in(dir, options).await.unwrap();
    let mut bus = harness.daemon().events.subscribe();
    let state = harness.daemon().studio_state();
    let (status, body) = call(state.clone(), "/api/v1/skills").await;
    assert_eq!(status, 200, "{body}");
    let skill = |body: &Value, name: &str| {
        body["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|skill| skill["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {body}"))
    };
    let of = |skill: &Value, agent: &str| {
        skill["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["agent"] == agent)
            .cloned()
            .unwrap_or_else(|| panic!("no {agent} in {skill}"))
    };

    // What `clawvisor skills show` prints: needs, risk, limits, and the keys kept but unused.
    let journal = skill(&body, "journal");
    assert_eq!(journal["valid"], true, "{journal}");
    assert_eq!(journal["tools"], json!(["write_file"]));
    assert_eq!(journal["risk"], "medium");
    assert_eq!(journal["requires"]["bins"], json!(["sh"]));
    assert_eq!(journal["unknown_keys"]["license"], "MIT", "{journal}");
    assert_eq!(journal["unknown_keys"]["x-origin"], "another-runtime");
    assert_eq!(skill(&body, "bobs")["limited_to"], json!(["bob"]));
    assert_eq!(skill(&body, "mailer")["mcp"], json!(["mail"]));

    // Per agent: ada can use the journal, bob cannot — and says why even though ada can.
    assert_eq!(journal["available"], true);
    let (ada, bob) = (of(&journal, "ada"), of(&journal, "bob"));
    assert_eq!(
        (
            &ada["enabled"],
            &ada["available"],
            &ada["usable"],
            &ada["reason"]
        ),
        (&json!(false), &json!(true), &json!(false), &Value::Null),
        "{ada}"
    );
    assert_eq!(bob["available"], false, "{bob}");
    assert!(
        bob["reason"].as_str().unwrap().contains("write_file"),
        "{bob}"
    );
    let bobs = skill(&body, "bobs");
    assert!(
        of(&bobs, "ada")["reason"]
            .as_str()
            .unwrap()
            .contains("limited to agents bob"),
        "{bobs}"
    );
    assert_eq!(of(&bobs, "bob")["available"], true, "{bobs}");
    assert!(
        of(&skill(&body, "mailer"), "ada")["reason"]
            .as_str()
            .unwrap()
            .contains("mail"),
    );
    // An invalid skill says what to fix, for the catalogue and for every agent.
    let broken = skill(&body, "broken");
    assert_eq!(broken["valid"], false, "{broken}");
    assert!(
        broken["error"].as_str().unwrap().contains("description"),
        "{broken}"
    );
    assert!(
        of(&broken, "bob")["reason"]
            .as_str()
            .unwrap()
            .contains("invalid"),
        "{broken}"
    );

    // Enabling it makes it usable for ada, and is announced (Studio's pages refresh on it).
    use tower::ServiceExt;
    let response = clawvisor::studio::router(state.clone())
        .oneshot(
            axum::http::Request::builder()
                .method("PATCH")
                .uri("/api/v1/agents/ada/skills/journal")
                .header("host", "127.0.0.1")
                .header(
                    "authorization",
                    format!("Bearer {}", state.access.tokens[0].expose()),
                )
                .header("content-type", "application/json")
                .body(axum::body::Body::from(r#"{"enabled": true}"#))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let (_, body) = call(state.clone(), "/api/v1/skills").await;
    assert_eq!(
        of(&skill(&body, "journal"), "ada")["usable"],
        true,
        "{body}"
    );
    let announced = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let event = bus.recv().await.unwrap();
            if event.kind == EventKind::AgentChanged {
                return event;
            }
        }
    })
    .await
    .expect("agent_changed after a skill toggle");
    assert_eq!(announced.subject, "agent:ada");
    let announced_data = data_json(&announced.data);
    assert_eq!(
        (&announced_data["skill"], &announced_data["enabled"]),
        (&json!("journal"), &json!(true))
    );

    // An agent that does not answer is listed as such; the catalogue and the list still answer.
    let mut with_ghost = state.clone();
    let mut agents = (*state.agents.get()).clone();
    agents.push(clawvisor::studio::AgentEntry {
        name: "ghost".into(),
        telegram: false,
    });
    with_ghost.agents = clawvisor::studio::Live::new(agents);
    let (status, body) = call(with_ghost.clone(), "/api/v1/skills").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["unreachable"][0]["agent"], "ghost", "{body}");
    let ghost = of(&skill(&body, "journal"), "ghost");
    assert_eq!(ghost["reachable"], false, "{ghost}");
    assert!(
        ghost["reason"].as_str().unwrap().contains("ghost"),
        "{ghost}"
    );
    assert_eq!(of(&skill(&body, "journal"), "ada")["usable"], true);
    let (status, body) = call(with_ghost, "/api/v1/agents").await;
    assert_eq!(status, 200, "{body}");
    let listed = body["agents"].as_array().unwrap();
    assert_eq!(listed.len(), 3, "{body}");
    assert_eq!(listed[2]["reachable"], false, "{body}");
    assert_eq!(listed[0]["reachable"], true, "{body}");
    harness.stop().await;
}
