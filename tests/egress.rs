//! Egress follows the lethal-trifecta rule, end to end: a real in-process daemon, the scripted
//! model, a loopback HTTP server counting the requests that reach it.
//!
//! - A run that read a workspace file and then fetches `http://127.0.0.1:PORT/?q=<text from the
//!   file>` waits for approval; the pending request shows the URL decoded and why; nothing
//!   reaches the server (the request expires, the model is told).
//! - A run that read the same file and then fetches a URL the user sent does not wait.
//! - An agent that lists the host in `web_fetch_allow` does not wait either.
//! - A run that read nothing private fetches a URL of its own making without a prompt.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use clawvisor::testkit::wait_until;

/// What the workspace file holds: private text the model then tries to send out.
const PRIVATE_TEXT: &str = "quarterly margin 41%";

/// A loopback server answering every request with a page; counts the requests.
async fn counting_server() -> (String, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "a public page"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{address}"), hits)
}

fn fetch(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

/// One pending (or decided) approval request of `chat`: its action, reason and status.
fn approvals_of(harness: &Harness, chat: &ChatKey) -> Vec<(String, String, String)> {
    let chat = chat.as_str().to_string();
    harness
        .store()
        .read_blocking(move |conn| {
            let mut statement = conn
                .prepare("SELECT action, reason, status FROM approvals WHERE chat = ?1 ORDER BY requested_ms")?;
            let rows = statement.query_map([chat], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_carrying_private_text_asks_first_and_given_links_and_allowed_hosts_do_not() {
    let (server, hits) = counting_server().await;
    // The model puts the file's text into the query string, percent-encoded.
    let leaking = format!("{server}/collect?q=quarterly%20margin%2041%25");
    let given = format!("{server}/report/latest?id=7");
    let script = Script::new()
        .rule(Rule::text("Fetched.").when_after_tool_result("web_fetch"))
        .rule(
            Rule::tool_call("web_fetch", fetch(&given))
                .when_after_tool_result("read_file")
                .when_any_message_contains("case-link"),
        )
        .rule(Rule::tool_call("web_fetch", fetch(&leaking)).when_after_tool_result("read_file"))
        .rule(
            Rule::tool_call("read_file", r#"{"path": "notes.txt"}"#)
                .when_last_user_contains("read the notes"),
        )
        .rule(Rule::tool_call("web_fetch", fetch(&leaking)).when_last_user_contains("look it up"));
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    let tools =
        "tools = [\"read_file\", \"web_fetch\"]\nautonomy = \"trust_first\"\napproval_ttl = \"3s\"";
    options.agents = vec![
        agent_toml("ada", tools),
        agent_toml(
            "bea",
            &format!("{tools}\nweb_fetch_allow = [\"127.0.0.1\"]"),
        ),
    ];
    options.config_extra = "[tools]\nweb_fetch_allow_private = true\n".into();
    let harness = Harness::start(options).await.unwrap();
    for agent in ["ada", "bea"] {
        let workspace = harness.dir.path().join("data/workspaces").join(agent);
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(
            workspace.join("notes.txt"),
            format!("board notes\n{PRIVATE_TEXT}\nkeep this internal\n"),
        )
        .unwrap();
    }

    // 1. Read a workspace file, then send its text out: the call waits for a human.
    let leak_chat = ChatKey::cli("egress-leak");
    let (reply, pending) = tokio::join!(
        harness.ask("ada", &leak_chat, "case-leak: read the notes"),
        wait_until(Duration::from_secs(30), "a pending approval", || async {
            approvals_of(&harness, &leak_chat)
                .into_iter()
                .find(|(_, _, status)| status == "pending")
        }),
    );
    let (action, reason, _) = pending;
    assert!(
        action.contains("/collect?q=quarterly margin 41%"),
        "the prompt does not show the URL decoded: {action}"
    );
    assert!(
        reason.contains("private data (read_file)") && reason.contains("\"quarterly\""),
        "the prompt does not say why: {reason}"
    );
    let reply = reply.unwrap();
    assert_eq!(reply.text, "Fetched.", "the model is told and answers");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "the fetch carrying private text reached the server without a decision"
    );
    let statuses: Vec<String> = approvals_of(&harness, &leak_chat)
        .into_iter()
        .map(|(_, _, status)| status)
        .collect();
    assert_eq!(statuses, vec!["denied_timeout"]);

    // 2. The same file read, then a link the user sent: no prompt, the page is fetched.
    let link_chat = ChatKey::cli("egress-link");
    let reply = harness
        .ask(
            "ada",
            &link_chat,
            &format!("case-link: read the notes, then open {given} for me"),
        )
        .await
        .unwrap();
    assert_eq!(reply.text, "Fetched.");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "the given link was fetched");
    assert!(approvals_of(&harness, &link_chat).is_empty());

    // 3. An agent that may always reach the host: no prompt, even with the private text.
    let allowed_chat = ChatKey::cli("egress-allowed");
    let reply = harness
        .ask("bea", &allowed_chat, "case-allowed: read the notes")
        .await
        .unwrap();
    assert_eq!(reply.text, "Fetched.");
    assert_eq!(
        hits.load(Ordering::SeqCst),
        2,
        "the allowed host was fetched"
    );
    assert!(approvals_of(&harness, &allowed_chat).is_empty());

    // 4. A run that read nothing private: the same URL is fetched without a prompt.
    let clean_chat = ChatKey::cli("egress-clean");
    let reply = harness
        .ask("ada", &clean_chat, "case-clean: look it up")
        .await
        .unwrap();
    assert_eq!(reply.text, "Fetched.");
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    assert!(approvals_of(&harness, &clean_chat).is_empty());
    harness.stop().await;
}
