//! Studio trusts identity, not position: against a real daemon over loopback HTTP, no API route
//! (the OpenAI-compatible gateway and the event stream included) answers a caller without a
//! session or a token — not a plain local client, not a request that claims to come through a
//! proxy, not an MCP server process with a cleared environment, and not the agent's own shell
//! trying to approve its own pending request. The local token file is private, re-used across
//! restarts, refused by clients when others could read it and replaced by the daemon. `/metrics`
//! keeps the Host check and needs its token when one is set. The real binary prints no login link
//! when it has no terminal.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::studio::{API_ROUTES, access};
use clawvisor::testkit::harness::{
    Harness, HarnessOptions, ScratchDir, agent_toml, config_toml, wait_reply,
};
use clawvisor::testkit::process::{DaemonProcess, write_config};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use serde_json::{Value, json};

/// The headers a reverse proxy adds, claiming the caller is the machine itself.
const PROXY_CLAIMS: &[(&str, &str)] = &[
    ("x-forwarded-for", "127.0.0.1"),
    (
        "forwarded",
        "for=127.0.0.1;proto=https;host=studio.home.example",
    ),
    ("x-real-ip", "127.0.0.1"),
    ("x-forwarded-host", "localhost"),
];

struct Studio {
    harness: Harness,
    llm: ScriptedLlm,
    base: String,
    /// A client without credentials.
    http: reqwest::Client,
    /// The daemon's local access token.
    token: String,
}

impl Studio {
    async fn start(script: Script, agent_extra: &str, env: BTreeMap<String, String>) -> Studio {
        let llm = ScriptedLlm::start(script).await.expect("model");
        let mut options = HarnessOptions::new(llm.base_url());
        options.agents = vec![agent_toml("ada", agent_extra)];
        options.env = env;
        let harness = Harness::start(options).await.expect("daemon");
        Self::around(harness, llm).await
    }

    async fn around(harness: Harness, llm: ScriptedLlm) -> Studio {
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
            llm,
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            token,
        }
    }

    fn data_dir(&self) -> std::path::PathBuf {
        self.harness.daemon().config.config.data_dir.clone()
    }

    /// A call with the local access token, as a command on the server makes it.
    async fn authed(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let value: Value = response.json().await.unwrap_or(Value::Null);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {value}"
        );
        value
    }

    /// Pending approvals of `tool`, waiting (up to 20 s) for one to appear.
    async fn pending(&self, tool: &str) -> String {
        wait_until(
            Duration::from_secs(20),
            &format!("a pending {tool} approval"),
            || async {
                let list = self
                    .authed(
                        reqwest::Method::GET,
                        "/api/v1/approvals?status=pending",
                        None,
                    )
                    .await;
                list["approvals"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|approval| approval["tool"] == tool)
                    .map(|approval| approval["id"].as_str().unwrap().to_string())
                    .ok_or_else(|| format!("no pending {tool} approval: {list}"))
            },
        )
        .await
    }

    async fn rule_count(&self) -> i64 {
        self.harness
            .store()
            .read(|conn| {
                Ok(conn.query_row("SELECT COUNT(*) FROM policy_rules", [], |row| row.get(0))?)
            })
            .await
            .unwrap()
    }
}

fn concrete(path: &str) -> String {
    path.replace("{name}", "ada")
        .replace("{skill}", "journal")
        .replace("{id}", "1")
        .replace("{operation}", "archive")
}

/// Every route, with and without proxy headers, answers a caller without credentials with 401,
/// and nothing it asked for happens.
async fn assert_every_route_refuses_anonymous_callers(studio: &Studio, host: Option<&str>) {
    for (method, path, _) in API_ROUTES {
        let path = concrete(path);
        let method: reqwest::Method = method.to_uppercase().parse().unwrap();
        for claims in [&[][..], PROXY_CLAIMS] {
            let mut request = studio
                .http
                .request(method.clone(), format!("{}{path}", studio.base))
                .json(
                    &json!({"model": "ada", "messages": [{"role": "user", "content": "hi"}],
                              "effect": "deny", "tool": "shell", "decision": "approve"}),
                );
            if let Some(host) = host {
                request = request.header("host", host);
            }
            for (name, value) in claims {
                request = request.header(*name, *value);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body = response.text().await.unwrap();
            assert_eq!(status, 401, "{method} {path} {claims:?}: {body}");
            assert!(body.contains("studio-link"), "says how to get in: {body}");
        }
    }
    assert_eq!(studio.rule_count().await, 0, "no rule was added");
    assert_eq!(
        studio.llm.request_count(),
        0,
        "the gateway never ran the agent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_answers_a_local_or_proxied_caller_without_credentials() {
    // Loopback, no token configured, no public_url: once the open door.
    let studio = Studio::start(Script::new().rule(Rule::echo()), "", BTreeMap::new()).await;
    assert_every_route_refuses_anonymous_callers(&studio, None).await;
    // The probes stay open and say nothing sensitive.
    for probe in ["/healthz", "/readyz"] {
        let response = studio
            .http
            .get(format!("{}{probe}", studio.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{probe}");
        let text = response.text().await.unwrap();
        assert!(
            text.len() < 40 && !text.contains(&studio.token),
            "{probe}: {text}"
        );
    }
    // The token opens the API, the gateway and the event stream.
    let overview = studio
        .authed(reqwest::Method::GET, "/api/v1/overview", None)
        .await;
    assert!(overview.is_object(), "{overview}");
    let answer = studio
        .authed(
            reqwest::Method::POST,
            "/v1/chat/completions",
            Some(json!({"model": "ada", "messages": [{"role": "user", "content": "hi"}]})),
        )
        .await;
    assert_eq!(answer["choices"][0]["message"]["content"], "echo: hi");
    let events = studio
        .http
        .get(format!("{}/api/v1/events", studio.base))
        .bearer_auth(&studio.token)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status().as_u16(), 200);
    assert_eq!(events.headers()["content-type"], "text/event-stream");
    drop(events);
    // A wrong token is refused, and never echoed.
    let response = studio
        .http
        .get(format!("{}/api/v1/overview", studio.base))
        .bearer_auth("0".repeat(64))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    studio.harness.stop().await;

    // Behind a reverse proxy (public_url set, Studio still on loopback) every caller arrives from
    // loopback; the proxy's headers grant nothing either.
    let studio = Studio::start(
        Script::new().rule(Rule::echo()),
        "",
        BTreeMap::from([(
            "CLAWVISOR_STUDIO_PUBLIC_URL".to_string(),
            "https://studio.home.example".to_string(),
        )]),
    )
    .await;
    assert_every_route_refuses_anonymous_callers(&studio, Some("studio.home.example")).await;
    assert_every_route_refuses_anonymous_callers(&studio, None).await;
    let response = studio
        .http
        .get(format!("{}/metrics", studio.base))
        .header("host", "studio.home.example")
        .header("x-forwarded-for", "127.0.0.1")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        401,
        "metrics are not open behind a proxy"
    );
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_process_with_a_cleared_environment_gets_401() {
    let studio = Studio::start(Script::new().rule(Rule::echo()), "", BTreeMap::new()).await;
    // MCP children start with a cleared environment; this one is curl, trying a read and a
    // mutation on the loopback port it could find.
    for (method, path, body) in [
        ("GET", "/api/v1/approvals", None),
        (
            "POST",
            "/api/v1/policy/rules",
            Some(r#"{"effect": "deny", "tool": "shell"}"#),
        ),
        (
            "POST",
            "/v1/chat/completions",
            Some(r#"{"model": "ada", "messages": [{"role": "user", "content": "hi"}]}"#),
        ),
    ] {
        let mut command = tokio::process::Command::new("curl");
        command
            .env_clear()
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "status=%{http_code}",
                "-X",
                method,
            ])
            .arg(format!("{}{path}", studio.base));
        if let Some(body) = body {
            command.args(["-H", "Content-Type: application/json", "-d", body]);
        }
        let output = command.output().await.expect("curl runs");
        let printed = String::from_utf8_lossy(&output.stdout);
        assert_eq!(printed, "status=401", "{method} {path}");
    }
    assert_eq!(studio.rule_count().await, 0);
    assert_eq!(studio.llm.request_count(), 0);
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_shell_cannot_approve_its_own_pending_request() {
    let write = Rule::tool_call(
        "write_file",
        r#"{"path": "note.txt", "content": "hi", "mode": "overwrite"}"#,
    )
    .when_last_user_contains("write");
    let studio = Studio::start(
        Script::new().rule(write.clone()),
        "tools = [\"write_file\", \"shell\"]\nallow_shell = true\nautonomy = \"require_approval\"",
        BTreeMap::new(),
    )
    .await;
    // Chat one: the agent asks to write a file and waits for the operator.
    let victim = ChatKey::studio("victim");
    let _victim_outputs = studio.harness.listen(&victim).await.unwrap();
    studio
        .harness
        .send("ada", &victim, "write the note")
        .unwrap();
    let pending = studio.pending("write_file").await;

    // Chat two: the agent's shell calls Studio's decision route for that very approval.
    let command = format!(
        "curl -s -o /dev/null -w 'status=%{{http_code}}' -X POST -H 'Content-Type: application/json' \
         -d '{{\"decision\": \"approve\"}}' {}/api/v1/approvals/{pending}/decision",
        studio.base
    );
    studio.llm.set_script(
        Script::new()
            .rule(Rule::text("Not written.").when_after_tool_result("write_file"))
            .rule(
                Rule::text("The approval call was refused.")
                    .when_last_tool_result_contains("status=401"),
            )
            .rule(Rule::text("The approval call was NOT refused.").when_after_tool_result("shell"))
            .rule(
                Rule::tool_call("shell", json!({"command": command}).to_string())
                    .when_last_user_contains("approve it"),
            )
            .rule(write),
    );
    let shell_chat = ChatKey::studio("shell");
    let mut shell_outputs = studio.harness.listen(&shell_chat).await.unwrap();
    studio
        .harness
        .send("ada", &shell_chat, "approve it")
        .unwrap();
    // The shell itself is gated; the operator lets this one command run, so that it really
    // reaches Studio's guard.
    let shell_approval = studio.pending("shell").await;
    studio
        .authed(
            reqwest::Method::POST,
            &format!("/api/v1/approvals/{shell_approval}/decision"),
            Some(json!({"decision": "approve"})),
        )
        .await;
    let reply = wait_reply(&mut shell_outputs, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(reply.text, "The approval call was refused.", "{reply:?}");

    // The write is still waiting for the operator, and nobody but the operator decides it.
    let list = studio
        .authed(
            reqwest::Method::GET,
            "/api/v1/approvals?status=pending",
            None,
        )
        .await;
    let still: Vec<&str> = list["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|approval| approval["id"].as_str())
        .collect();
    assert_eq!(still, [pending.as_str()], "{list}");
    studio
        .authed(
            reqwest::Method::POST,
            &format!("/api/v1/approvals/{pending}/decision"),
            Some(json!({"decision": "deny"})),
        )
        .await;
    // The audit log shows one decision about the write: the operator's denial.
    let subject = pending.clone();
    let decisions: Vec<String> = studio
        .harness
        .store()
        .read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT details FROM audit_log WHERE subject = ?1 AND action = 'approval.decided'",
            )?;
            let rows = statement.query_map([subject], |row| row.get(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert!(decisions[0].contains("denied"), "{decisions:?}");
    let workspace = studio.data_dir().join("workspaces").join("ada");
    assert!(!workspace.join("note.txt").exists(), "the write never ran");
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_file_is_private_reused_and_replaced_when_others_could_read_it() {
    let studio = Studio::start(Script::new().rule(Rule::echo()), "", BTreeMap::new()).await;
    let data_dir = studio.data_dir();
    let path = data_dir.join("studio.token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        access::local_token(&data_dir).unwrap().expose(),
        studio.token
    );
    let first = studio.token.clone();
    let Studio { harness, llm, .. } = studio;
    let dir = harness.stop().await;

    // Re-used across restarts: scripts that read it keep working.
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", "")];
    let studio = Studio::around(Harness::start_in(dir, options.clone()).await.unwrap(), llm).await;
    assert_eq!(studio.token, first);

    // Readable by others: clients refuse it with a message that says what to do...
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = access::local_token(&data_dir).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("other users") && message.contains("644") && message.contains("restart"),
        "{message}"
    );
    assert!(!message.contains(&first), "{message}");
    let Studio { harness, llm, .. } = studio;
    let dir = harness.stop().await;
    // ...and the daemon replaces it with a new private token; the old one no longer works.
    let studio = Studio::around(Harness::start_in(dir, options).await.unwrap(), llm).await;
    assert_ne!(studio.token, first);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        access::local_token(&data_dir).unwrap().expose(),
        studio.token
    );
    let old = studio
        .http
        .get(format!("{}/api/v1/overview", studio.base))
        .bearer_auth(&first)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 401);
    studio
        .authed(reqwest::Method::GET, "/api/v1/overview", None)
        .await;
    studio.harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_check_the_host_and_need_the_metrics_token_when_one_is_set() {
    let get = |studio: &Studio, host: Option<&str>, token: Option<&str>| {
        let mut request = studio.http.get(format!("{}/metrics", studio.base));
        if let Some(host) = host {
            request = request.header("host", host.to_string());
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    // No metrics token, loopback: open to a local scraper, but only under a loopback Host.
    let studio = Studio::start(Script::new().rule(Rule::echo()), "", BTreeMap::new()).await;
    let (status, text) = get(&studio, None, None).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("clawvisor_"), "{text}");
    let (status, _) = get(&studio, Some("rebind.attacker.example"), None).await;
    assert_eq!(status, 421);
    studio.harness.stop().await;

    let metrics_token = "metrics-token-for-prometheus-0123456789";
    let studio = Studio::start(
        Script::new().rule(Rule::echo()),
        "",
        BTreeMap::from([
            (
                "CLAWVISOR_STUDIO_METRICS_TOKEN_ENV".to_string(),
                "PROMETHEUS_TOKEN".to_string(),
            ),
            ("PROMETHEUS_TOKEN".to_string(), metrics_token.to_string()),
        ]),
    )
    .await;
    let (status, text) = get(&studio, None, None).await;
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("metrics_token_env"), "{text}");
    let (status, text) = get(&studio, None, Some("wrong-token")).await;
    assert_eq!(status, 401, "{text}");
    assert!(!text.contains(metrics_token));
    let (status, _) = get(
        &studio,
        Some("rebind.attacker.example"),
        Some(metrics_token),
    )
    .await;
    assert_eq!(status, 421, "the Host check comes first");
    let (status, text) = get(&studio, None, Some(metrics_token)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("clawvisor_"), "{text}");
    // The metrics token opens nothing else.
    let response = studio
        .http
        .get(format!("{}/api/v1/overview", studio.base))
        .bearer_auth(metrics_token)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);
    studio.harness.stop().await;

    // A metrics token variable that is named but not set is a config error that says so.
    let dir = ScratchDir::new("studio-auth-config").unwrap();
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", "").replace(
            "[studio]\n",
            "[studio]\nmetrics_token_env = \"PROMETHEUS_TOKEN\"\n",
        ),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    let overrides = clawvisor::config::Overrides {
        config: Some(dir.path().join("clawvisor.toml")),
        ..Default::default()
    };
    let error = clawvisor::config::load_in(&overrides, BTreeMap::new(), dir.path()).unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("metrics_token_env") && message.contains("PROMETHEUS_TOKEN"),
        "{message}"
    );
}

#[test]
fn the_real_binary_prints_no_login_link_without_a_terminal() {
    let dir = ScratchDir::new("studio-auth-process").unwrap();
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", ""),
        &[agent_toml("ada", "")],
    )
    .unwrap();
    let binary = env!("CARGO_BIN_EXE_clawvisor");
    let mut daemon = DaemonProcess::start(binary, dir.path(), &BTreeMap::new()).unwrap();
    // Stdout and stderr are pipes here, as under a service manager: the log says how to get a
    // link instead of printing one.
    let hint = daemon.wait_for_line("clawvisor studio-link", Duration::from_secs(30));
    assert!(hint.is_some(), "no hint; log:\n{}", daemon.log.join("\n"));
    let token = access::local_token(&dir.path().join("data")).unwrap();
    let (status, log) = daemon.terminate(Duration::from_secs(30)).unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!log.is_empty());
    for line in &log {
        assert!(
            !line.contains("/login?token="),
            "a login link was printed: {line}"
        );
        assert!(
            !line.contains(token.expose()),
            "the token reached the log: {line}"
        );
    }
    // The operator still gets a link on demand.
    let output = std::process::Command::new(binary)
        .args([
            "--config",
            &dir.path().join("clawvisor.toml").display().to_string(),
        ])
        .arg("studio-link")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("/login?token="));
}
