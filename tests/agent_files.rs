//! Agents managed from Studio with the files as the one source of truth: what Studio changes
//! lands in the agent's TOML file (comments kept), survives a reload and a restart; a hand edit of
//! the file wins at the next reload; an agent made, duplicated or deleted in Studio is a file made,
//! copied or removed, and runs (or stops) at once; settings an older version kept in the database
//! move into the file at boot; a change the files would refuse changes nothing.

use std::time::Duration;

use clawvisor::domain::ChatKey;
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use serde_json::{Value, json};

const ADA: &str = "# Ada keeps the house in order.\ndescription = \"House helper\"\n# Ask first.\nautonomy = \"require_approval\"\ntools = [\"current_time\"]\n";

async fn start(llm: &ScriptedLlm) -> Harness {
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml("ada", ADA)];
    Harness::start(options).await.unwrap()
}

async fn call(harness: &Harness, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (base, http) = harness.studio_http().await;
    let request = http.request(method.parse().unwrap(), format!("{base}{path}"));
    let request = match body {
        Some(body) => request.json(&body),
        None => request,
    };
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn ada_file(harness: &Harness) -> String {
    std::fs::read_to_string(harness.dir.path().join("actors/agent0.toml")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn studio_edits_land_in_the_file_and_survive_a_reload_and_a_restart() {
    let llm = ScriptedLlm::start(
        Script::new()
            .rule(Rule::text("Ahoy from the new instructions.").when_system_contains("pirate"))
            .rule(Rule::text("Plain hello.")),
    )
    .await
    .unwrap();
    let harness = start(&llm).await;
    let (status, agent) = call(
        &harness,
        "PATCH",
        "/api/v1/agents/ada",
        Some(json!({
            "model": "house-model",
            "autonomy": "supervised",
            "instructions": "You speak like a pirate.\nKeep it short.\n",
            "daily_budget_usd": 2.5,
        })),
    )
    .await;
    assert_eq!(status, 200, "{agent}");
    assert_eq!(agent["model"], "house-model", "{agent}");
    assert_eq!(agent["autonomy"], "supervised", "{agent}");
    assert!(
        agent["reload"]
            .as_str()
            .unwrap()
            .contains("agents: restarted ada"),
        "{agent}"
    );
    let file = ada_file(&harness);
    assert!(file.contains("# Ada keeps the house in order."), "{file}");
    assert!(
        file.contains("# Ask first.\nautonomy = \"supervised\""),
        "{file}"
    );
    assert!(file.contains("model = \"house-model\""), "{file}");
    assert!(
        file.contains("instructions = \"\"\"\nYou speak like a pirate.\n"),
        "{file}"
    );

    // The next answer uses the new instructions.
    let reply = harness
        .ask("ada", &ChatKey::cli("t"), "hello")
        .await
        .unwrap();
    assert_eq!(reply.text, "Ahoy from the new instructions.");

    // The database keeps no copy that could beat the file.
    let stored: (Option<String>, Option<String>) = harness
        .store()
        .read(|conn| {
            Ok(conn
                .query_row(
                    "SELECT autonomy, model FROM agent_settings WHERE agent = 'ada'",
                    [],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )
                .unwrap_or((None, None)))
        })
        .await
        .unwrap();
    assert_eq!(stored, (None, None));

    // A reload changes nothing, and a restart reads the same file.
    let (status, report) = call(&harness, "POST", "/api/v1/reload", None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["summary"], "reloaded: nothing to change", "{report}");
    let dir = harness.stop().await;
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = Vec::new();
    let harness = Harness::start_in(dir, options).await.unwrap();
    let (_, agent) = call(&harness, "GET", "/api/v1/agents/ada", None).await;
    assert_eq!(agent["model"], "house-model", "{agent}");
    assert_eq!(agent["autonomy"], "supervised", "{agent}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_wins_after_a_hand_edit_and_a_reload() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("ok")))
        .await
        .unwrap();
    let harness = start(&llm).await;
    let (status, _) = call(
        &harness,
        "PATCH",
        "/api/v1/agents/ada",
        Some(json!({"autonomy": "trust_first"})),
    )
    .await;
    assert_eq!(status, 200);
    let path = harness.dir.path().join("actors/agent0.toml");
    let file =
        ada_file(&harness).replace("autonomy = \"trust_first\"", "autonomy = \"supervised\"");
    std::fs::write(&path, file).unwrap();
    let (_, report) = call(&harness, "POST", "/api/v1/reload", None).await;
    assert!(
        report["summary"]
            .as_str()
            .unwrap()
            .contains("restarted ada"),
        "{report}"
    );
    let (_, agent) = call(&harness, "GET", "/api/v1/agents/ada", None).await;
    assert_eq!(
        agent["autonomy"], "supervised",
        "the file's value, not Studio's: {agent}"
    );
    let (_, file) = call(&harness, "GET", "/api/v1/agents/ada/file", None).await;
    assert_eq!(file["settings"]["autonomy"], "supervised", "{file}");
    assert_eq!(file["writable"], true, "{file}");
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_are_made_copied_and_deleted_as_files() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("I am here.")))
        .await
        .unwrap();
    let harness = start(&llm).await;
    let (status, made) = call(
        &harness,
        "POST",
        "/api/v1/agents",
        Some(json!({
            "name": "bob", "provider": "scripted", "model": "scripted-model",
            "tools": ["current_time", "read_file"], "autonomy": "require_approval",
        })),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert!(
        made["reload"].as_str().unwrap().contains("added bob"),
        "{made}"
    );
    let bob = harness.dir.path().join("actors/bob.toml");
    let text = std::fs::read_to_string(&bob).unwrap();
    assert!(
        text.contains("name = \"bob\"") && text.contains("You are a friendly"),
        "{text}"
    );
    let reply = harness.ask("bob", &ChatKey::cli("b"), "hi").await.unwrap();
    assert_eq!(reply.text, "I am here.");

    // Bad input is refused before anything is written, naming what to fix.
    for (body, expect) in [
        (
            json!({"name": "bob", "provider": "scripted", "model": "m"}),
            "exists already",
        ),
        (
            json!({"name": "Carol!", "provider": "scripted", "model": "m"}),
            "`name`",
        ),
        (
            json!({"name": "carol", "provider": "nowhere", "model": "m"}),
            "nowhere",
        ),
        (
            json!({"name": "carol", "provider": "scripted"}),
            "`model` is required",
        ),
        (
            json!({"name": "carol", "provider": "scripted", "model": "m", "tools": ["teleport"]}),
            "teleport",
        ),
        (
            json!({"name": "carol", "provider": "scripted", "model": "m", "colour": "red"}),
            "colour",
        ),
    ] {
        let (status, body) = call(&harness, "POST", "/api/v1/agents", Some(body)).await;
        assert_eq!(status, 400, "{body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(expect), "{expect}: {message}");
    }
    assert!(!harness.dir.path().join("actors/carol.toml").exists());

    let (status, copy) = call(
        &harness,
        "POST",
        "/api/v1/agents/bob/duplicate",
        Some(json!({"name": "bob-2"})),
    )
    .await;
    assert_eq!(status, 201, "{copy}");
    assert_eq!(copy["tools"].as_array().map(Vec::len), Some(2), "{copy}");

    // Deleting asks what happens to the workspace.
    let (status, body) = call(&harness, "DELETE", "/api/v1/agents/bob", None).await;
    assert_eq!(status, 400, "{body}");
    let workspace = harness.dir.path().join("data/workspaces/bob");
    assert!(workspace.is_dir());
    let (status, body) = call(&harness, "DELETE", "/api/v1/agents/bob?data=remove", None).await;
    assert_eq!(status, 200, "{body}");
    assert!(!bob.exists());
    assert!(!workspace.exists());
    let (status, _) = call(&harness, "GET", "/api/v1/agents/bob", None).await;
    assert_eq!(status, 404);
    // Audited as the operator's.
    let actions: Vec<String> = harness
        .store()
        .read(|conn| {
            let mut statement = conn
                .prepare("SELECT action FROM audit_log WHERE action LIKE 'agent.%' ORDER BY id")?;
            let rows = statement.query_map([], |row| row.get(0))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap();
    assert_eq!(actions, ["agent.created", "agent.created", "agent.deleted"]);
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_an_older_version_kept_in_the_database_move_into_the_file_once() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("ok")))
        .await
        .unwrap();
    let harness = start(&llm).await;
    // What Studio used to store instead of writing the file.
    harness
        .store()
        .write(|conn| {
            let row = clawvisor::store::runs::SettingsRow {
                autonomy: Some("trust_first".into()),
                model: Some("studio-model".into()),
                paused: false,
            };
            clawvisor::store::runs::save_settings(conn, "ada", &row, 1)?;
            clawvisor::store::studio::set_skill_toggle(conn, "ada", "journal", true, 1)
        })
        .await
        .unwrap();
    let dir = harness.stop().await;
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = Vec::new();
    let harness = Harness::start_in(dir, options).await.unwrap();
    let file = ada_file(&harness);
    assert!(file.contains("autonomy = \"trust_first\""), "{file}");
    assert!(file.contains("model = \"studio-model\""), "{file}");
    assert!(file.contains("skills = [\"journal\"]"), "{file}");
    assert!(file.contains("# Ada keeps the house in order."), "{file}");
    let (_, agent) = call(&harness, "GET", "/api/v1/agents/ada", None).await;
    assert_eq!(agent["model"], "studio-model", "{agent}");
    assert_eq!(
        agent["not_in_file"],
        json!([]),
        "the file says what it runs with"
    );
    let left: (Option<String>, i64) = harness
        .store()
        .read(|conn| {
            Ok((
                conn.query_row(
                    "SELECT model FROM agent_settings WHERE agent = 'ada'",
                    [],
                    |row| row.get(0),
                )?,
                conn.query_row("SELECT count(*) FROM agent_skill_toggles", [], |row| {
                    row.get(0)
                })?,
            ))
        })
        .await
        .unwrap();
    assert_eq!(left, (None, 0));
    harness.wait_settled(Duration::from_secs(5)).await;
    harness.stop().await;
}
