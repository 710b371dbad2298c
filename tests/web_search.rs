//! `web_search` end to end: a real daemon whose scripted model searches through the real tool,
//! against a loopback server speaking SearXNG's and Brave's JSON APIs, including their failures.
//! Each failure must reach the model as a clear tool error, and the run must still answer.

use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::fake_search::{BRAVE_TOKEN, FakeSearch, SearchFault};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml, config_toml};
use clawvisor::testkit::process::write_config;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;
use clawvisor::tools::web_search::SearchResult;

const BRAVE_ENV: &str = "CLAWVISOR_TEST_BRAVE_KEY";

/// The model searches for whatever follows "search for " and then answers "searched".
fn script() -> Script {
    Script::new()
        .rule(Rule::text("searched").when_after_tool_result("web_search"))
        .rule(
            Rule::tool_call("web_search", r#"{"query": "bakery opening hours"}"#)
                .when_last_user_contains("search for bakery"),
        )
        .rule(Rule::text("no search needed"))
}

async fn daemon(llm: &ScriptedLlm, web_search: &str, env: &[(&str, &str)]) -> Harness {
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "scout",
        "tools = [\"web_search\", \"web_fetch\"]",
    )];
    options.config_extra = web_search.to_string();
    options.env = env
        .iter()
        .map(|(key, value)| (key.to_string(), value.to_string()))
        .collect();
    options.start.studio = false;
    options.start.channels = false;
    Harness::start(options).await.expect("the daemon starts")
}

/// Asks the agent to search and returns what the tool gave the model.
async fn search_result(harness: &Harness, chat: &str) -> String {
    let reply = harness
        .ask(
            "scout",
            &ChatKey::cli(chat),
            "search for bakery hours please",
        )
        .await
        .expect("an answer");
    assert_eq!(
        reply.text, "searched",
        "the run went on after the tool: {reply:?}"
    );
    let run_id = reply.run_id.expect("a run");
    harness
        .store()
        .read(move |conn| {
            Ok(conn.query_row(
                "SELECT content FROM session_events WHERE kind = 'tool_result' AND run_id = ?1",
                [run_id],
                |row| row.get::<_, String>(0),
            )?)
        })
        .await
        .expect("the tool result is recorded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searxng_results_and_failures_reach_the_model_clearly() {
    let search = FakeSearch::start().await.unwrap();
    search.set_results(vec![
        SearchResult {
            title: "Bäckerei Müller – Öffnungszeiten".into(),
            url: "https://baeckerei.example/zeiten".into(),
            snippet: "Mo–Sa <b>6:30–18:00</b>, So 7:00–11:00".into(),
        },
        SearchResult {
            title: "Bakery map".into(),
            url: "https://maps.example/bakery".into(),
            snippet: String::new(),
        },
    ]);
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let config = format!(
        "[web_search]\nbackend = \"searxng\"\nurl = \"{}\"\ntimeout = \"1s\"\nmax_results = 5\n",
        search.base_url()
    );
    let harness = daemon(&llm, &config, &[]).await;
    assert!(
        harness
            .agent_tools("scout")
            .await
            .contains(&"web_search".to_string())
    );

    let found = search_result(&harness, "ok").await;
    assert!(
        found.contains("1. Bäckerei Müller – Öffnungszeiten"),
        "{found}"
    );
    assert!(
        found.contains("https://baeckerei.example/zeiten"),
        "{found}"
    );
    assert!(
        found.contains("Mo–Sa 6:30–18:00"),
        "markup stays out: {found}"
    );
    assert!(found.contains("2. Bakery map"), "{found}");
    let asked = search.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].query, "bakery opening hours");
    assert_eq!(asked[0].format.as_deref(), Some("json"));

    search.fail_next(SearchFault::Status {
        status: 429,
        retry_after_secs: Some(30),
    });
    let limited = search_result(&harness, "limited").await;
    assert!(
        limited.contains("rate limiting") && limited.contains("wait 30 s"),
        "{limited}"
    );

    search.fail_next(SearchFault::NotJson);
    let garbled = search_result(&harness, "garbled").await;
    assert!(garbled.contains("not its JSON format"), "{garbled}");

    search.fail_next(SearchFault::Status {
        status: 403,
        retry_after_secs: None,
    });
    let json_off = search_result(&harness, "json-off").await;
    assert!(json_off.contains("settings.yml"), "{json_off}");

    search.fail_next(SearchFault::Stall(Duration::from_secs(4)));
    let slow = search_result(&harness, "slow").await;
    assert!(slow.contains("did not answer within 1 s"), "{slow}");

    harness.stop().await;
    search.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brave_results_use_the_token_and_a_refused_token_is_named_without_it() {
    let search = FakeSearch::start().await.unwrap();
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let config = format!(
        "[web_search]\nbackend = \"brave\"\nurl = \"{}\"\napi_key_env = \"{BRAVE_ENV}\"\nmax_results = 2\n",
        search.base_url()
    );
    let harness = daemon(&llm, &config, &[(BRAVE_ENV, BRAVE_TOKEN)]).await;
    let found = search_result(&harness, "brave").await;
    assert!(
        found.contains("Brave Search, 2 shown"),
        "count is capped by max_results: {found}"
    );
    assert!(
        found.contains("1. Result 1 about bakery opening hours"),
        "{found}"
    );
    assert!(!found.contains("Result 3"), "{found}");
    let asked = search.requests();
    assert_eq!(asked[0].token.as_deref(), Some(BRAVE_TOKEN));
    assert_eq!(asked[0].count.as_deref(), Some("2"));
    harness.stop().await;

    let llm = ScriptedLlm::start(script()).await.unwrap();
    let wrong = "wrong-brave-token-12345";
    let harness = daemon(&llm, &config, &[(BRAVE_ENV, wrong)]).await;
    let refused = search_result(&harness, "refused").await;
    assert!(
        refused.contains("refused the subscription token (HTTP 401)"),
        "{refused}"
    );
    assert!(
        !refused.contains(wrong),
        "the token never reaches the model: {refused}"
    );
    harness.stop().await;
    search.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_backend_the_tool_is_absent() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let harness = daemon(&llm, "", &[]).await;
    let tools = harness.agent_tools("scout").await;
    assert!(tools.contains(&"web_fetch".to_string()), "{tools:?}");
    assert!(!tools.contains(&"web_search".to_string()), "{tools:?}");
    harness.stop().await;
}

/// `clawvisor doctor` on a config with `extra` and one agent with `tools`: its report.
async fn doctor(extra: &str, tools: &str) -> String {
    let dir = ScratchDir::new("clawvisor-doctor-search").unwrap();
    write_config(
        dir.path(),
        &config_toml("http://127.0.0.1:9/v1", extra),
        &[agent_toml("scout", tools)],
    )
    .unwrap();
    let path = dir.path().join("clawvisor.toml");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
            .args(["--config", path.to_str().unwrap(), "doctor"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_asks_the_backend_once_or_says_how_to_add_one() {
    let search = FakeSearch::start().await.unwrap();
    let working = format!(
        "[web_search]\nbackend = \"searxng\"\nurl = \"{}\"\n",
        search.base_url()
    );
    let report = doctor(&working, "tools = [\"web_search\"]").await;
    assert!(
        report.contains("[ ok ] web search: SearXNG answered a test search (3 result(s))"),
        "{report}"
    );
    assert_eq!(search.requests().len(), 1);

    search.fail_next(SearchFault::Status {
        status: 403,
        retry_after_secs: None,
    });
    let report = doctor(&working, "").await;
    assert!(
        report.contains("[FAIL] web search: SearXNG:") && report.contains("settings.yml"),
        "{report}"
    );

    let report = doctor("", "tools = [\"web_search\"]").await;
    assert!(
        report.contains(
            "[FAIL] next step: no backend: the web_search tool is absent. Add [web_search]"
        ),
        "{report}"
    );
    let report = doctor("", "").await;
    assert!(report.contains("[ ok ] web search: no backend"), "{report}");
    search.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_servers_tool_can_be_the_search_backend() {
    let llm = ScriptedLlm::start(script()).await.unwrap();
    let config = format!(
        "[web_search]\nbackend = \"mcp\"\nmcp_tool = \"finder__echo\"\nmcp_query_argument = \"text\"\n\n\
         [[mcp.servers]]\nname = \"finder\"\ntransport = \"stdio\"\ncommand = \"{}\"\ntrust = \"trusted\"\nagents = [\"scout\"]\n",
        env!("CARGO_BIN_EXE_clawvisor-mcp-test-server")
    );
    let harness = daemon(&llm, &config, &[]).await;
    wait_until(
        Duration::from_secs(20),
        "the MCP search server's tools",
        || async {
            harness
                .agent_tools("scout")
                .await
                .contains(&"finder__echo".to_string())
        },
    )
    .await;
    let found = search_result(&harness, "mcp").await;
    assert!(
        found.starts_with("Results for \"bakery opening hours\" (MCP server finder):"),
        "{found}"
    );
    assert!(
        found.contains("bakery opening hours\n") || found.ends_with("bakery opening hours"),
        "the server got the query: {found}"
    );
    harness.stop().await;
}
