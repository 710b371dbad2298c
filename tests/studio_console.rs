//! Studio's JSON API called in-process (`tower::ServiceExt::oneshot` on `studio::router`) with
//! the state of a real daemon: every route answers, validation errors and unknown ids answer in
//! the one error shape, the login link → cookie → CSRF flow works, browsers without a session and
//! callers without a token are refused, and Host/Origin checks hold.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use clawvisor::domain::ChatKey;
use clawvisor::events::EventKind;
use clawvisor::studio::{self, API_ROUTES, StudioState, access};
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::testkit::world::World;
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Console {
    harness: Harness,
    _llm: ScriptedLlm,
    state: StudioState,
}

impl Console {
    async fn start() -> Console {
        let script = Script::new()
            .rule(Rule::text("Written.").when_after_tool_result("write_file"))
            .rule(
                Rule::tool_call(
                    "write_file",
                    r#"{"path": "note.txt", "content": "hi", "mode": "overwrite"}"#,
                )
                .when_last_user_contains("write"),
            )
            .rule(Rule::text("Hello from ada, streaming in parts."));
        let llm = ScriptedLlm::start(script).await.expect("model");
        let mut options = HarnessOptions::new(llm.base_url());
        options.agents = vec![agent_toml(
            "ada",
            "tools = [\"write_file\"]\nautonomy = \"require_approval\"",
        )];
        let harness = Harness::start(options).await.expect("daemon");
        let state = harness.daemon().studio_state();
        Console {
            harness,
            _llm: llm,
            state,
        }
    }

    /// A request as a script on the same machine sends it (no browser headers), without
    /// credentials.
    fn request(method: Method, path: &str, body: Option<Value>) -> Request<Body> {
        let builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "127.0.0.1:7070");
        match body {
            Some(body) => builder
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.to_string()))
                .unwrap(),
            None => builder.body(Body::empty()).unwrap(),
        }
    }

    /// The same request with the daemon's local access token, as a script on the server sends it.
    fn authed(&self, method: Method, path: &str, body: Option<Value>) -> Request<Body> {
        let mut request = Self::request(method, path, body);
        let token = format!("Bearer {}", self.state.access.tokens[0].expose());
        request
            .headers_mut()
            .insert(header::AUTHORIZATION, token.parse().unwrap());
        request
    }

    async fn send_with(&self, state: StudioState, request: Request<Body>) -> (u16, Value) {
        let response = studio::router(state).oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 4 << 20)
            .await
            .unwrap();
        let value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, value)
    }

    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.send_with(self.state.clone(), self.authed(method, path, body))
            .await
    }
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_else(|| {
        panic!("not the API's error shape: {body}");
    })
}

/// Reads a Server-Sent Events body until `until` has been seen (or 20 s pass).
async fn read_sse(response: axum::response::Response, until: &str) -> String {
    let mut stream = response.into_body().into_data_stream();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !text.contains(until) {
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(bytes))) => text.push_str(&String::from_utf8_lossy(&bytes)),
            _ => break,
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_and_unknown_ids_are_404() {
    let console = Console::start().await;
    // Something to look at: a run with steps, an approval, a session.
    let reply = console
        .harness
        .ask("ada", &ChatKey::cli("op"), "hello there")
        .await
        .expect("answer");
    let run_id = reply.run_id.expect("run id");

    let (status, job) = console
        .call(
            Method::POST,
            "/api/v1/schedules",
            Some(
                json!({"agent": "ada", "name": "standup", "prompt": "Say hi", "kind": "cron",
                        "expression": "0 9 * * 1-5", "timezone": "Europe/Berlin"}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let job_id = job["id"].as_i64().unwrap();
    assert_eq!(job["upcoming"].as_array().map(Vec::len), Some(5), "{job}");

    let (status, sessions) = console
        .call(Method::GET, "/api/v1/sessions?agent=ada", None)
        .await;
    assert_eq!(status, 200);
    let session_id = sessions["sessions"][0]["id"].as_i64().expect("a session");

    // Every route in the table, with a request that succeeds. A route added to the table without
    // a case here fails this test.
    let cases: Vec<(&str, &str, Method, String, Option<Value>)> = vec![
        (
            "get",
            "/api/v1/session",
            Method::GET,
            "/api/v1/session".into(),
            None,
        ),
        (
            "get",
            "/api/v1/overview",
            Method::GET,
            "/api/v1/overview".into(),
            None,
        ),
        (
            "get",
            "/api/v1/providers",
            Method::GET,
            "/api/v1/providers".into(),
            None,
        ),
        (
            "get",
            "/api/v1/tree",
            Method::GET,
            "/api/v1/tree".into(),
            None,
        ),
        (
            "get",
            "/api/v1/agents",
            Method::GET,
            "/api/v1/agents".into(),
            None,
        ),
        (
            "get",
            "/api/v1/agents/{name}",
            Method::GET,
            "/api/v1/agents/ada".into(),
            None,
        ),
        (
            "patch",
            "/api/v1/agents/{name}",
            Method::PATCH,
            "/api/v1/agents/ada".into(),
            Some(json!({"model": "scripted-model"})),
        ),
        (
            "get",
            "/api/v1/sessions",
            Method::GET,
            "/api/v1/sessions".into(),
            None,
        ),
        (
            "get",
            "/api/v1/sessions/{id}",
            Method::GET,
            format!("/api/v1/sessions/{session_id}"),
            None,
        ),
        (
            "get",
            "/api/v1/runs",
            Method::GET,
            "/api/v1/runs?agent=ada".into(),
            None,
        ),
        (
            "get",
            "/api/v1/runs/{id}",
            Method::GET,
            format!("/api/v1/runs/{run_id}"),
            None,
        ),
        (
            "get",
            "/api/v1/approvals",
            Method::GET,
            "/api/v1/approvals?status=pending".into(),
            None,
        ),
        (
            "get",
            "/api/v1/import/openclaw",
            Method::GET,
            "/api/v1/import/openclaw".into(),
            None,
        ),
        (
            "get",
            "/api/v1/grants",
            Method::GET,
            "/api/v1/grants".into(),
            None,
        ),
        (
            "get",
            "/api/v1/policy/rules",
            Method::GET,
            "/api/v1/policy/rules".into(),
            None,
        ),
        (
            "get",
            "/api/v1/policy/decisions",
            Method::GET,
            "/api/v1/policy/decisions".into(),
            None,
        ),
        (
            "get",
            "/api/v1/schedules",
            Method::GET,
            "/api/v1/schedules".into(),
            None,
        ),
        (
            "post",
            "/api/v1/schedules/preview",
            Method::POST,
            "/api/v1/schedules/preview".into(),
            Some(json!({"kind": "every", "expression": "15m"})),
        ),
        (
            "get",
            "/api/v1/schedules/{id}",
            Method::GET,
            format!("/api/v1/schedules/{job_id}"),
            None,
        ),
        (
            "post",
            "/api/v1/schedules/{id}/pause",
            Method::POST,
            format!("/api/v1/schedules/{job_id}/pause"),
            None,
        ),
        (
            "post",
            "/api/v1/schedules/{id}/resume",
            Method::POST,
            format!("/api/v1/schedules/{job_id}/resume"),
            None,
        ),
        (
            "get",
            "/api/v1/memory",
            Method::GET,
            "/api/v1/memory".into(),
            None,
        ),
        (
            "get",
            "/api/v1/memory/stats",
            Method::GET,
            "/api/v1/memory/stats".into(),
            None,
        ),
        (
            "get",
            "/api/v1/memory/search",
            Method::GET,
            "/api/v1/memory/search?q=hello".into(),
            None,
        ),
        (
            "get",
            "/api/v1/mcp",
            Method::GET,
            "/api/v1/mcp".into(),
            None,
        ),
        (
            "get",
            "/api/v1/skills",
            Method::GET,
            "/api/v1/skills".into(),
            None,
        ),
        (
            "get",
            "/api/v1/handoffs",
            Method::GET,
            "/api/v1/handoffs".into(),
            None,
        ),
        (
            "get",
            "/api/v1/audit",
            Method::GET,
            "/api/v1/audit".into(),
            None,
        ),
        (
            "get",
            "/api/v1/audit/verify",
            Method::GET,
            "/api/v1/audit/verify".into(),
            None,
        ),
        (
            "get",
            "/api/v1/audit/facets",
            Method::GET,
            "/api/v1/audit/facets".into(),
            None,
        ),
        (
            "get",
            "/api/v1/logs",
            Method::GET,
            "/api/v1/logs?level=debug".into(),
            None,
        ),
        (
            "get",
            "/api/v1/costs",
            Method::GET,
            "/api/v1/costs?days=7".into(),
            None,
        ),
        (
            "get",
            "/api/v1/backups",
            Method::GET,
            "/api/v1/backups".into(),
            None,
        ),
        (
            "get",
            "/api/v1/openapi.json",
            Method::GET,
            "/api/v1/openapi.json".into(),
            None,
        ),
        (
            "get",
            "/api/v1/timezones",
            Method::GET,
            "/api/v1/timezones".into(),
            None,
        ),
        (
            "patch",
            "/api/v1/users/{id}/timezone",
            Method::PATCH,
            "/api/v1/users/42/timezone".into(),
            Some(json!({"timezone": "Europe/Berlin"})),
        ),
        (
            "get",
            "/api/v1/people",
            Method::GET,
            "/api/v1/people".into(),
            None,
        ),
        (
            "post",
            "/api/v1/reload",
            Method::POST,
            "/api/v1/reload".into(),
            None,
        ),
        (
            "delete",
            "/api/v1/schedules/{id}",
            Method::DELETE,
            format!("/api/v1/schedules/{job_id}"),
            None,
        ),
    ];
    // Routes whose success needs a particular object and is shown by their own tests (below and
    // in studio_api.rs, memory.rs, handoff.rs); here they are called for their 404 / 400.
    let elsewhere = [
        "/v1/chat/completions",
        "/api/v1/session/logout",
        "/api/v1/events",
        "/api/v1/agents/{name}/chat",
        // tests/studio_runs.rs: a slow run to stop.
        "/api/v1/agents/{name}/chat/stop",
        "/api/v1/agents/{name}/skills/{skill}",
        "/api/v1/approvals/{id}/decision",
        "/api/v1/grants/{id}/revoke",
        "/api/v1/policy/rules/{id}/disable",
        "/api/v1/memory/{id}/{operation}",
        // tests/people.rs and studio_browser.rs: a pairing request and people to change.
        "/api/v1/pairings/{id}/{operation}",
        "/api/v1/people/{name}/{id}/{operation}",
        // tests/signal.rs (the People page, clicked) and whatsapp.rs: a WhatsApp or Signal
        // pairing request.
        "/api/v1/channel-pairings/{id}/{operation}",
        "/api/v1/handoffs/{id}",
        "/api/v1/handoffs/{id}/cancel",
        "/api/v1/schedules",
        "/api/v1/policy/rules",
        // tests/cli_ops.rs: `clawvisor mcp call` against the MCP test server through a daemon.
        "/api/v1/mcp/{server}/tools/{tool}/call",
        // tests/schedules_memory_api.rs: a job's choices, edit and run now; adding and editing
        // a memory.
        "/api/v1/schedules/choices",
        "/api/v1/schedules/{id}",
        "/api/v1/schedules/{id}/run",
        "/api/v1/memory",
        "/api/v1/memory/{id}",
        // tests/logs.rs: the live tail of the log.
        "/api/v1/logs/events",
        // tests/agent_files.rs: agents made, read, copied and deleted as files.
        "/api/v1/agents",
        "/api/v1/agents/{name}/file",
        "/api/v1/agents/{name}/duplicate",
        "/api/v1/agents/{name}",
        // tests/setup_wizard.rs: providers and bots checked and saved, the tool catalogue, QR.
        "/api/v1/setup",
        "/api/v1/tools",
        "/api/v1/providers/{name}/models",
        "/api/v1/providers/check",
        "/api/v1/providers/{name}",
        "/api/v1/telegram/check",
        "/api/v1/qr.svg",
        // tests/secrets_store.rs and secrets_browser.rs: Keys & tokens, against the real daemon.
        "/api/v1/secrets",
        "/api/v1/secrets/{name}",
        // tests/triggers.rs: webhook triggers listed and a test event sent, with triggers set up.
        "/api/v1/triggers",
        "/api/v1/triggers/{name}/test",
        // tests/nodes.rs: the Nodes page lists, pairs (a wrong code, the right one) and removes a
        // node running as its own process.
        "/api/v1/nodes",
        "/api/v1/nodes/{name}",
        // tests/studio_browser.rs: a browser approval's screenshot (200 with a PNG, 401 without
        // a session, 404 for an unknown id).
        "/api/v1/approvals/{id}/screenshot",
    ];
    for (method, path, _) in API_ROUTES {
        assert!(
            cases
                .iter()
                .any(|case| case.0 == *method && case.1 == *path)
                || elsewhere.contains(path),
            "no test case for {method} {path}"
        );
    }
    for (_, route, method, path, body) in cases {
        let (status, value) = console.call(method.clone(), &path, body).await;
        assert_eq!(status, 200, "{method} {path} ({route}): {value}");
        assert!(value.is_object(), "{path}: {value}");
    }

    // What the answers say. A reload of unchanged files changes nothing.
    let (_, reload) = console.call(Method::POST, "/api/v1/reload", None).await;
    assert_eq!(reload["ok"], true, "{reload}");
    assert!(
        reload["agents"]["restarted"].as_array().unwrap().is_empty(),
        "{reload}"
    );
    assert!(
        reload["summary"]
            .as_str()
            .unwrap()
            .starts_with("reloaded: "),
        "{reload}"
    );
    let (_, overview) = console.call(Method::GET, "/api/v1/overview", None).await;
    assert_eq!(overview["health"]["boot_complete"], true, "{overview}");
    let tree = overview["tree"].as_array().unwrap();
    for id in [
        "root",
        "agents",
        "agent:ada",
        "session:ada:cli:op",
        "memory",
        "studio",
    ] {
        assert!(
            tree.iter().any(|actor| actor["id"] == id),
            "{id} missing: {overview}"
        );
    }
    let ada = tree
        .iter()
        .find(|actor| actor["id"] == "agent:ada")
        .unwrap();
    assert_eq!(ada["parent"], "agents");
    assert!(overview["runs_today"].as_i64().unwrap() >= 1, "{overview}");
    assert!(
        overview["hints"]
            .as_array()
            .unwrap()
            .iter()
            .any(|hint| hint.as_str().unwrap().contains("No Telegram bot")),
        "{overview}"
    );
    let (_, run) = console
        .call(Method::GET, &format!("/api/v1/runs/{run_id}"), None)
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert!(
        run["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|step| step["kind"] == "llm"),
        "{run}"
    );
    let (_, transcript) = console
        .call(Method::GET, &format!("/api/v1/sessions/{session_id}"), None)
        .await;
    assert!(
        transcript["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|event| event["content"] == "hello there"),
        "{transcript}"
    );
    let (_, costs) = console.call(Method::GET, "/api/v1/costs", None).await;
    assert!(costs["total_usd"].as_f64().unwrap() > 0.0, "{costs}");
    assert_eq!(costs["by_agent"][0]["agent"], "ada", "{costs}");
    let (_, job) = console
        .call(Method::GET, &format!("/api/v1/schedules/{job_id}"), None)
        .await;
    assert_eq!(job["status"], "cancelled", "{job}");
    let (_, openapi) = console
        .call(Method::GET, "/api/v1/openapi.json", None)
        .await;
    for (method, path, _) in API_ROUTES {
        assert!(
            openapi["paths"][path][method].is_object(),
            "{method} {path} missing from openapi.json"
        );
    }

    // Unknown ids and routes: 404 in the one error shape.
    for (method, path) in [
        (Method::GET, "/api/v1/runs/987654"),
        (Method::GET, "/api/v1/sessions/987654"),
        (Method::GET, "/api/v1/agents/nobody"),
        (Method::PATCH, "/api/v1/agents/nobody"),
        (Method::GET, "/api/v1/schedules/987654"),
        (Method::POST, "/api/v1/schedules/987654/pause"),
        (Method::DELETE, "/api/v1/schedules/987654"),
        (Method::GET, "/api/v1/handoffs/h-nothing"),
        (Method::POST, "/api/v1/handoffs/h-nothing/cancel"),
        (Method::POST, "/api/v1/approvals/nothing/decision"),
        (Method::POST, "/api/v1/grants/987654/revoke"),
        (Method::POST, "/api/v1/policy/rules/987654/disable"),
        (Method::POST, "/api/v1/memory/987654/archive"),
        (Method::POST, "/api/v1/agents/nobody/chat"),
        (Method::POST, "/api/v1/agents/nobody/chat/stop"),
        (Method::PATCH, "/api/v1/agents/ada/skills/no-such-skill"),
        (Method::POST, "/api/v1/pairings/ABCD-EFGH/approve"),
        (Method::POST, "/api/v1/pairings/ABCD-EFGH/deny"),
        (Method::POST, "/api/v1/channel-pairings/ABCD-EFGH/approve"),
        (Method::POST, "/api/v1/channel-pairings/ABCD-EFGH/deny"),
        (Method::POST, "/api/v1/people/nobody/5/block"),
        (Method::POST, "/api/v1/people/ada/5/revoke"),
        (Method::GET, "/api/v1/no-such-thing"),
    ] {
        let body = match method {
            Method::PATCH if path.contains("/skills/") => Some(json!({"enabled": true})),
            Method::PATCH => Some(json!({"paused": true})),
            Method::POST if path.ends_with("/decision") => Some(json!({"decision": "approve"})),
            Method::POST if path.ends_with("/chat") => Some(json!({"text": "hi"})),
            Method::POST => Some(json!({})),
            _ => None,
        };
        let (status, value) = console.call(method.clone(), path, body).await;
        assert_eq!(status, 404, "{method} {path}: {value}");
        assert!(!error_message(&value).is_empty());
    }
    console.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_400_that_says_what_to_fix() {
    let console = Console::start().await;
    for (method, path, body, expect) in [
        (
            Method::PATCH,
            "/api/v1/agents/ada",
            json!({"autonomy": "yolo"}),
            "trust_first",
        ),
        (
            Method::PATCH,
            "/api/v1/agents/ada",
            json!({"model": "  "}),
            "model",
        ),
        (
            Method::PATCH,
            "/api/v1/agents/ada",
            json!({"colour": "red"}),
            "colour",
        ),
        (
            Method::POST,
            "/api/v1/schedules/preview",
            json!({"kind": "cron", "expression": "61 * * * *"}),
            "61",
        ),
        (
            Method::POST,
            "/api/v1/people/ada/abc/block",
            json!({}),
            "not a Telegram user id",
        ),
        (
            Method::POST,
            "/api/v1/people/ada/5/smash",
            json!({}),
            "revoke, block, unblock",
        ),
        (
            Method::POST,
            "/api/v1/pairings/ABCD-EFGH/maybe",
            json!({}),
            "approve, deny",
        ),
        (
            Method::POST,
            "/api/v1/channel-pairings/ABCD-EFGH/maybe",
            json!({}),
            "approve, deny",
        ),
        (
            Method::POST,
            "/api/v1/schedules/preview",
            json!({"kind": "weekly", "expression": "x"}),
            "weekly",
        ),
        (
            Method::POST,
            "/api/v1/schedules/preview",
            json!({"kind": "cron", "expression": "0 9 * * *", "timezone": "Mars/Olympus"}),
            "Mars/Olympus",
        ),
        (
            Method::POST,
            "/api/v1/schedules",
            json!({"agent": "ada", "prompt": "", "kind": "every", "expression": "1h"}),
            "prompt",
        ),
        (
            Method::POST,
            "/api/v1/schedules",
            json!({"agent": "nobody", "prompt": "x", "kind": "every", "expression": "1h"}),
            "nobody",
        ),
        (
            Method::POST,
            "/api/v1/agents/ada/chat",
            json!({"text": "   "}),
            "text",
        ),
        (
            Method::POST,
            "/api/v1/agents/ada/chat",
            json!({"text": "hi", "chat": "../etc"}),
            "chat",
        ),
        (
            Method::POST,
            "/api/v1/approvals/x/decision",
            json!({"decision": "maybe"}),
            "approve",
        ),
    ] {
        let (status, value) = console.call(method.clone(), path, Some(body.clone())).await;
        assert_eq!(status, 400, "{method} {path} {body}: {value}");
        assert!(
            error_message(&value).contains(expect),
            "{path} {body}: {value}"
        );
    }
    let (status, value) = console
        .call(Method::GET, "/api/v1/runs?status=exploded", None)
        .await;
    assert_eq!(status, 400, "{value}");
    assert!(error_message(&value).contains("succeeded"));
    // What axum refuses before a handler runs answers in the same shape.
    for (method, path, status, expect) in [
        (Method::GET, "/api/v1/runs/abc", 400, "abc"),
        (Method::GET, "/api/v1/audit?before=soon", 400, "before"),
        (
            Method::GET,
            "/api/v1/audit?since_ms=yesterday",
            400,
            "since_ms",
        ),
        (Method::GET, "/api/v1/logs?level=loud", 400, "level"),
        (Method::PUT, "/api/v1/agents", 405, "PUT"),
    ] {
        let (got, value) = console.call(method.clone(), path, None).await;
        assert_eq!(got, status, "{method} {path}: {value}");
        assert!(error_message(&value).contains(expect), "{path}: {value}");
    }
    // Not JSON at all.
    let request = Request::builder()
        .method(Method::POST)
        .uri("/api/v1/schedules/preview")
        .header(header::HOST, "localhost")
        .header(
            header::AUTHORIZATION,
            format!("Bearer {}", console.state.access.tokens[0].expose()),
        )
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{not json"))
        .unwrap();
    let (status, value) = console.send_with(console.state.clone(), request).await;
    assert_eq!(status, 400, "{value}");
    error_message(&value);
    // Nothing was half-written: no job exists.
    let (_, jobs) = console.call(Method::GET, "/api/v1/schedules", None).await;
    assert_eq!(jobs["jobs"].as_array().map(Vec::len), Some(0), "{jobs}");
    console.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_link_opens_one_session_whose_mutations_need_the_csrf_token() {
    let console = Console::start().await;
    let link = access::login_link(&console.state.store, "http://127.0.0.1:7070", "cli")
        .await
        .unwrap();
    let path = link
        .strip_prefix("http://127.0.0.1:7070")
        .unwrap()
        .to_string();
    let browser = |method: Method, path: &str, cookie: Option<&str>| {
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, "127.0.0.1:7070")
            .header("sec-fetch-site", "same-origin")
            .header(header::ORIGIN, "http://127.0.0.1:7070")
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(cookie) = cookie {
            builder = builder.header(
                header::COOKIE,
                format!("theme=dark; {}={cookie}", access::SESSION_COOKIE),
            );
        }
        builder
    };

    // A browser without a session is refused, with a message that says how to log in.
    let (status, value) = console
        .send_with(
            console.state.clone(),
            browser(Method::GET, "/api/v1/overview", None)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, 401, "{value}");
    assert!(error_message(&value).contains("studio-link"));

    // The link logs in once.
    let response = studio::router(console.state.clone())
        .oneshot(
            browser(Method::GET, &path, None)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    let set_cookie = response.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
    let cookie = set_cookie
        .split(';')
        .next()
        .and_then(|pair| pair.split_once('='))
        .map(|(_, value)| value.to_string())
        .unwrap();
    let (status, _) = console
        .send_with(
            console.state.clone(),
            browser(Method::GET, &path, None)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, 401, "a login link works once");

    let (status, session) = console
        .send_with(
            console.state.clone(),
            browser(Method::GET, "/api/v1/session", Some(&cookie))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["via"], "cookie");
    let csrf = session["csrf"].as_str().unwrap().to_string();
    assert_eq!(csrf.len(), 64);

    let patch = |csrf: Option<&str>| {
        let mut builder = browser(Method::PATCH, "/api/v1/agents/ada", Some(&cookie));
        if let Some(csrf) = csrf {
            builder = builder.header(access::CSRF_HEADER, csrf);
        }
        builder
            .body(Body::from(json!({"paused": true}).to_string()))
            .unwrap()
    };
    let (status, value) = console.send_with(console.state.clone(), patch(None)).await;
    assert_eq!(status, 403, "{value}");
    assert!(error_message(&value).contains("CSRF"));
    let (status, _) = console
        .send_with(console.state.clone(), patch(Some("0".repeat(64).as_str())))
        .await;
    assert_eq!(status, 403, "a wrong CSRF token");
    let (status, value) = console
        .send_with(console.state.clone(), patch(Some(&csrf)))
        .await;
    assert_eq!(status, 200, "{value}");
    assert_eq!(value["paused"], true);
    // Persisted, not only applied.
    let stored: i64 = console
        .state
        .store
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT paused FROM agent_settings WHERE agent = 'ada'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(stored, 1);
    // And audited: who may act without asking is policy.
    let audited: String = console
        .state
        .store
        .read(|conn| {
            Ok(conn.query_row(
                "SELECT details FROM audit_log WHERE action = 'agent.settings_changed' AND subject = 'agent:ada'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .unwrap();
    let audited: Value = serde_json::from_str(&audited).unwrap();
    assert_eq!(audited["paused"], json!({"from": false, "to": true}));

    // Another site's page is refused even with the cookie; so is a rebinding Host.
    let cross = browser(Method::PATCH, "/api/v1/agents/ada", Some(&cookie))
        .header(access::CSRF_HEADER, &csrf)
        .header(header::ORIGIN, "https://evil.example")
        .body(Body::from("{}"))
        .unwrap();
    let mut cross = cross;
    cross
        .headers_mut()
        .insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    let (status, _) = console.send_with(console.state.clone(), cross).await;
    assert_eq!(status, 403);
    let mut rebound = browser(Method::GET, "/api/v1/overview", Some(&cookie))
        .body(Body::empty())
        .unwrap();
    rebound
        .headers_mut()
        .insert(header::HOST, "attacker.example:7070".parse().unwrap());
    let (status, _) = console.send_with(console.state.clone(), rebound).await;
    assert_eq!(status, 421);

    // Logging out ends the session.
    let logout = browser(Method::POST, "/api/v1/session/logout", Some(&cookie))
        .header(access::CSRF_HEADER, &csrf)
        .body(Body::from("{}"))
        .unwrap();
    let (status, _) = console.send_with(console.state.clone(), logout).await;
    assert_eq!(status, 200);
    let (status, _) = console
        .send_with(
            console.state.clone(),
            browser(Method::GET, "/api/v1/session", Some(&cookie))
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, 401);
    console.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_loopback_every_api_call_needs_the_token_but_probes_do_not() {
    let console = Console::start().await;
    let token = "an-access-token-of-the-operator-0123456789";
    let mut state = console.state.clone();
    state.access = Arc::new(access::Access::new(
        vec![clawvisor::secrets::Secret::new(token)],
        None,
        "0.0.0.0:7070".parse().unwrap(),
        "https://home.example",
    ));
    for (method, path, _) in API_ROUTES {
        let concrete = path
            .replace("{name}", "ada")
            .replace("{id}", "1")
            .replace("{operation}", "archive");
        let method: Method = method.to_uppercase().parse().unwrap();
        let mut request = Console::request(method.clone(), &concrete, Some(json!({})));
        request
            .headers_mut()
            .insert(header::HOST, "home.example".parse().unwrap());
        let (status, value) = console.send_with(state.clone(), request).await;
        assert_eq!(status, 401, "{method} {concrete}: {value}");
        assert!(!value.to_string().contains(token));
    }
    let mut request = Console::request(Method::GET, "/api/v1/overview", None);
    request
        .headers_mut()
        .insert(header::HOST, "home.example".parse().unwrap());
    request.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    let (status, value) = console.send_with(state.clone(), request).await;
    assert_eq!(status, 200, "{value}");
    let (status, _) = console
        .send_with(
            state.clone(),
            Console::request(Method::GET, "/healthz", None),
        )
        .await;
    assert_eq!(status, 200, "the health probe needs nothing");
    // Off loopback `/metrics` needs a token too (here no metrics token is set: the access token).
    let (status, value) = console
        .send_with(
            state.clone(),
            Console::request(Method::GET, "/metrics", None),
        )
        .await;
    assert_eq!(status, 401, "{value}");
    let mut request = Console::request(Method::GET, "/metrics", None);
    request.headers_mut().insert(
        header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    let (status, value) = console.send_with(state.clone(), request).await;
    assert_eq!(status, 200, "{value}");
    // Cookies are Secure when Studio is reached over https.
    assert!(state.access.session_cookie("x", 60).contains("Secure"));
    // Off loopback with no token at all (config refuses this; the guard does not rely on it), a
    // local-looking client without a session still gets nothing.
    state.access = Arc::new(access::Access::new(
        Vec::new(),
        None,
        "0.0.0.0:7070".parse().unwrap(),
        "",
    ));
    let (status, value) = console
        .send_with(
            state.clone(),
            Console::request(Method::GET, "/api/v1/overview", None),
        )
        .await;
    assert_eq!(status, 401, "{value}");
    console.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_the_answer_and_events_stream_live() {
    let console = Console::start().await;
    // The live stream: a hello, then what the bus carries.
    let response = studio::router(console.state.clone())
        .oneshot(console.authed(Method::GET, "/api/v1/events", None))
        .await
        .unwrap();
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let events = tokio::spawn(read_sse(response, "the-marker-event"));
    // The stream may not be subscribed yet: publish the marker until the reader has seen it.
    wait_until(
        Duration::from_secs(20),
        "the marker event on the stream",
        || async {
            console
                .state
                .events
                .publish(EventKind::Warning, "test", "the-marker-event");
            events.is_finished()
        },
    )
    .await;
    let text = events.await.unwrap();
    assert!(text.contains("event: hello"), "{text}");
    assert!(
        text.contains("event: warning") && text.contains("the-marker-event"),
        "{text}"
    );

    // Chat: partial texts, then the final answer with its run.
    let response = studio::router(console.state.clone())
        .oneshot(console.authed(
            Method::POST,
            "/api/v1/agents/ada/chat",
            Some(json!({"text": "hello", "chat": "console-test"})),
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = read_sse(response, "event: final").await;
    assert!(text.contains("event: final"), "{text}");
    assert!(
        text.contains("Hello from ada, streaming in parts."),
        "{text}"
    );
    // The conversation is a real session of chat studio:console-test.
    let (_, sessions) = console
        .call(Method::GET, "/api/v1/sessions?agent=ada", None)
        .await;
    assert!(
        sessions["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|session| session["chat"] == "studio:console-test"),
        "{sessions}"
    );
    // A tool that needs approval shows as a tool card state before the final answer.
    let response = studio::router(console.state.clone())
        .oneshot(console.authed(
            Method::POST,
            "/api/v1/agents/ada/chat",
            Some(json!({"text": "please write the note", "chat": "console-test"})),
        ))
        .await
        .unwrap();
    let approval = wait_until(Duration::from_secs(20), "a pending approval", || async {
        let (_, pending) = console
            .call(Method::GET, "/api/v1/approvals?status=pending", None)
            .await;
        pending["approvals"][0]["id"].as_str().map(str::to_string)
    })
    .await;
    let (status, _) = console
        .call(
            Method::POST,
            &format!("/api/v1/approvals/{approval}/decision"),
            Some(json!({"decision": "approve"})),
        )
        .await;
    assert_eq!(status, 200);
    let text = read_sse(response, "event: final").await;
    assert!(
        text.contains("event: tool") && text.contains("write_file"),
        "{text}"
    );
    assert!(text.contains("Written."), "{text}");

    // /metrics is Prometheus text with the runtime's figures.
    let (status, metrics) = console.call(Method::GET, "/metrics", None).await;
    assert_eq!(status, 200);
    let metrics = metrics.as_str().unwrap();
    for family in [
        "clawvisor_messages_total{direction=\"in\"}",
        "clawvisor_runs_total{status=\"succeeded\"}",
        "clawvisor_tool_calls_total 1",
        "clawvisor_approvals_pending 0",
        "clawvisor_actor_restarts_total{actor=\"agent:ada\"} 0",
        "clawvisor_llm_input_tokens_total{agent=\"ada\",model=\"scripted-model\"}",
        "# TYPE clawvisor_bot_poll_lag_seconds gauge",
        "# TYPE clawvisor_bot_last_update_age_seconds gauge",
    ] {
        assert!(metrics.contains(family), "{family} missing:\n{metrics}");
    }
    // No bot here: no polling lag to report (rather than a made-up one).
    assert!(
        !metrics.contains("clawvisor_bot_poll_lag_seconds{"),
        "{metrics}"
    );
    console.harness.stop().await;
}

/// `name{agent="ada"}`'s value in a Prometheus text, if it is there.
fn sample(metrics: &str, name: &str) -> Option<f64> {
    let prefix = format!("{name}{{agent=\"ada\"}} ");
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|value| value.trim().parse().ok())
}

/// Scrapes `/metrics` until `check` holds (or fails after `seconds`); the last scrape.
async fn metrics_until(
    state: &StudioState,
    what: &str,
    seconds: u64,
    check: impl Fn(&str) -> bool,
) -> String {
    wait_until(Duration::from_secs(seconds), what, || async {
        let response = studio::router(state.clone())
            .oneshot(Console::request(Method::GET, "/metrics", None))
            .await
            .unwrap();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        if check(&text) {
            Ok(text)
        } else {
            Err(format!("\n{text}"))
        }
    })
    .await
}

/// Polling lag is the time since the bot's last completed `getUpdates` (empty or not): it stays
/// below the long-poll timeout (2 s in the harness) for an idle, healthy bot while the newest
/// update only gets older, and grows when polls stop coming back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_polling_lag_counts_from_the_last_completed_poll() {
    let World {
        fake: telegram,
        llm: _llm,
        harness,
        bots,
    } = World::builder(Script::new().rule(Rule::text("Hello.")))
        .agent_with_bot("ada", "", "4343:AAH-metrics-test-token-0001", &[42], &[])
        .start()
        .await;
    let bot = bots[0].id;
    let state = harness.daemon().studio_state();

    // One update arrives; then the bot idles, its long polls coming back empty.
    telegram.push_message(bot, 42, 42, "hello");
    let text = metrics_until(&state, "the newest update is 5 s old", 30, |text| {
        sample(text, "clawvisor_bot_last_update_age_seconds").is_some_and(|age| age >= 5.0)
    })
    .await;
    let lag = sample(&text, "clawvisor_bot_poll_lag_seconds").expect("a polling lag");
    assert!(
        lag <= 3.5,
        "an idle healthy bot lags at most a poll: {lag}\n{text}"
    );

    // Polls stop coming back: the lag grows; once they do again, it falls.
    telegram.hang_polls(bot, Duration::from_secs(5));
    metrics_until(
        &state,
        "the polling lag grows while polls hang",
        20,
        |text| sample(text, "clawvisor_bot_poll_lag_seconds").is_some_and(|lag| lag >= 3.0),
    )
    .await;
    metrics_until(
        &state,
        "the polling lag falls once polls return",
        30,
        |text| sample(text, "clawvisor_bot_poll_lag_seconds").is_some_and(|lag| lag < 2.5),
    )
    .await;
    harness.stop().await;
}

/// The changes the Memory and Handoffs pages show are announced once stored: a memory saved and
/// archived (the archive also as an audit row), a contract through its lifecycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_handoff_changes_are_announced_for_live_pages() {
    use clawvisor::events::RuntimeEvent;
    use clawvisor::protocol::handoff::{HandoffMsg, NewContract};
    use clawvisor::protocol::memory::{MemoryMsg, SaveOutcome, SaveRequest};

    let console = Console::start().await;
    let mut bus = console.state.events.subscribe();
    let registry = &console.harness.daemon().registry;
    let memory = registry
        .lookup(&clawvisor::protocol::memory::NAME)
        .expect("memory");
    let saved = ractor::call_t!(
        memory,
        MemoryMsg::Save,
        10_000,
        SaveRequest {
            owner: "ada".into(),
            class: "durable".into(),
            sensitivity: "normal".into(),
            source: "user_said".into(),
            chat: None,
            text: "The operator prefers mornings.".into(),
            run_id: None,
            message_id: None,
        }
    )
    .unwrap()
    .unwrap();
    let SaveOutcome::Saved { id, .. } = saved else {
        panic!("not saved: {saved:?}");
    };
    let (status, body) = console
        .call(
            Method::POST,
            &format!("/api/v1/memory/{id}/archive"),
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let handoffs = registry
        .lookup(&clawvisor::protocol::handoff::NAME)
        .expect("handoffs");
    let contract = ractor::call_t!(
        handoffs,
        HandoffMsg::Create,
        10_000,
        NewContract {
            owner: "ada".into(),
            owner_chat: "cli:op".into(),
            owner_run_id: None,
            delegate: "ada".into(),
            subtask: "Say hello".into(),
            expected: String::new(),
            validator: None,
            deadline: Duration::from_secs(60),
            tools: None,
        }
    )
    .unwrap()
    .unwrap();

    // Collect until the contract was delivered (or 20 s pass).
    let mut seen: Vec<std::sync::Arc<RuntimeEvent>> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !seen
        .iter()
        .any(|event| event.kind == EventKind::HandoffChanged && event.detail == "delivered")
    {
        match tokio::time::timeout_at(deadline, bus.recv()).await {
            Ok(Ok(event)) => seen.push(event),
            _ => panic!("no delivered contract in {seen:#?}"),
        }
    }
    let of = |kind: EventKind| -> Vec<(String, String)> {
        seen.iter()
            .filter(|event| event.kind == kind)
            .map(|event| (event.subject.clone(), event.detail.clone()))
            .collect()
    };
    let subject = format!("memory:{id}");
    assert_eq!(
        of(EventKind::MemoryChanged),
        [
            (subject.clone(), "saved".to_string()),
            (subject.clone(), "memory.archive".to_string())
        ]
    );
    assert!(
        of(EventKind::AuditAppended).contains(&(subject, "memory.archive".to_string())),
        "{seen:#?}"
    );
    let changes: Vec<String> = of(EventKind::HandoffChanged)
        .into_iter()
        .filter(|(subject, _)| *subject == format!("contract:{contract}"))
        .map(|(_, change)| change)
        .collect();
    assert_eq!(
        changes,
        ["created", "in_progress", "returned", "delivered"],
        "{seen:#?}"
    );
    console.harness.stop().await;
}
