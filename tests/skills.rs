//! Skills: loading over the three levels (valid, broken, foreign keys, precedence, missing
//! requirements), then through the daemon with the scripted model: the prompt lists enabled skills
//! by name and description only, `use_skill` brings the instructions into the run and the skill's
//! tool is used; a disabled skill cannot be loaded; a skill never grants a tool.

use std::path::Path;

use clawvisor::domain::ChatKey;
use clawvisor::skills::{self, AgentContext, Level};
use clawvisor::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

fn write_skill(root: &Path, folder: &str, text: &str) {
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), text).unwrap();
}

fn skill_md(name: &str, description: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n{extra}---\n{body}\n")
}

#[test]
fn skills_load_over_three_levels_with_precedence_and_clear_reasons() {
    let root = tempfile::tempdir().unwrap();
    let (bundled, installed, workspace) = (
        root.path().join("bundled"),
        root.path().join("installed"),
        root.path().join("workspace"),
    );
    write_skill(
        &bundled,
        "notes",
        &skill_md("notes", "bundled notes", "", "bundled body"),
    );
    write_skill(
        &installed,
        "notes",
        &skill_md("notes", "installed notes", "", "installed body"),
    );
    write_skill(
        &workspace,
        "my-notes",
        &skill_md("notes", "workspace notes", "", "workspace body"),
    );
    write_skill(
        &bundled,
        "only-bundled",
        &skill_md("only-bundled", "stays", "", "x"),
    );
    write_skill(&bundled, "broken", "no front matter at all");
    write_skill(&bundled, "badyaml", "---\nname: [oops\n---\nbody");
    write_skill(
        &installed,
        "foreign",
        &skill_md(
            "foreign",
            "from another runtime",
            "license: MIT\nallowed-tools: Bash\n",
            "body",
        ),
    );
    write_skill(
        &installed,
        "needs-mcp",
        &skill_md("needs-mcp", "uses GitHub", "mcp: [github]\n", "body"),
    );
    std::fs::write(bundled.join("notes/template.md"), "# template").unwrap();

    let catalogue = skills::discover(&[
        (bundled.clone(), Level::Bundled),
        (installed.clone(), Level::Installed),
        (workspace.clone(), Level::Workspace),
    ]);
    let find = |name: &str| catalogue.iter().find(|entry| entry.name == name).unwrap();
    let notes = find("notes").skill.as_ref().unwrap();
    assert_eq!(
        (notes.description.as_str(), notes.level),
        ("installed notes", Level::Installed),
        "installed > bundled, and a workspace skill never replaces either"
    );
    // The workspace `notes` stays listed, right after the one used, as shadowed with the reason.
    let all_notes: Vec<_> = catalogue
        .iter()
        .filter(|entry| entry.name == "notes")
        .collect();
    assert_eq!(all_notes.len(), 2);
    assert_eq!(all_notes[0].shadowed, None);
    assert_eq!(all_notes[1].level, Level::Workspace);
    let reason = all_notes[1].shadowed.as_deref().unwrap();
    assert!(
        reason.contains("shadowed") && reason.contains("installed skill named `notes`"),
        "{reason}"
    );
    assert_eq!(find("only-bundled").level, Level::Bundled);
    assert!(
        find("broken")
            .skill
            .as_ref()
            .unwrap_err()
            .contains("front matter")
    );
    assert!(
        find("badyaml")
            .skill
            .as_ref()
            .unwrap_err()
            .contains("not valid YAML")
    );
    let foreign = find("foreign").skill.as_ref().unwrap();
    assert_eq!(
        foreign.unknown.get("license").map(String::as_str),
        Some("MIT")
    );
    assert!(
        foreign.unknown.contains_key("allowed-tools"),
        "unknown keys are kept"
    );
    // Without the workspace level, the installed copy wins over the bundled one.
    let two = skills::discover(&[
        (bundled.clone(), Level::Bundled),
        (installed, Level::Installed),
    ]);
    let notes = two
        .iter()
        .find(|entry| entry.name == "notes")
        .unwrap()
        .skill
        .as_ref()
        .unwrap();
    assert_eq!(notes.instructions, "installed body");
    let bundled_notes = skills::load_level(&bundled, Level::Bundled);
    let bundled_notes = bundled_notes.iter().find(|e| e.name == "notes").unwrap();
    assert_eq!(bundled_notes.skill.as_ref().unwrap().files, ["template.md"]);

    let yes = |_: &str| true;
    let context = AgentContext {
        agent: "ada",
        tools: &[],
        mcp_servers: &[],
        env: &yes,
        bin: &yes,
    };
    let reason =
        skills::availability(find("needs-mcp").skill.as_ref().unwrap(), &context).unwrap_err();
    assert!(
        reason.contains("MCP servers") && reason.contains("github"),
        "{reason}"
    );
    assert!(skills::availability(foreign, &context).is_ok());

    // For an agent that enables `notes`, the installed one is what it loads; the workspace one is
    // unavailable with the shadowing reason.
    let for_ada = skills::for_agent(catalogue.clone(), &["notes".to_string()], &context);
    let shadowed = for_ada
        .iter()
        .find(|skill| skill.entry.level == Level::Workspace && skill.entry.name == "notes")
        .unwrap();
    assert!(
        shadowed
            .available
            .as_ref()
            .unwrap_err()
            .starts_with("shadowed"),
        "{:?}",
        shadowed.available
    );
    let usable = skills::usable(&for_ada, &["notes".to_string()]);
    assert_eq!(usable.len(), 1);
    assert_eq!(usable[0].instructions, "installed body");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_loads_an_enabled_skill_and_uses_its_tool_but_nothing_more() {
    let dir = ScratchDir::new("clawvisor-skills").unwrap();
    let bundled = dir.path().join("skills");
    write_skill(
        &bundled,
        "journal",
        &skill_md(
            "journal",
            "Keeps a dated journal file.",
            "tools: [write_file]\n",
            "JOURNAL-INSTRUCTIONS: append the entry to journal.md with write_file.",
        ),
    );
    write_skill(
        &bundled,
        "shouting",
        &skill_md(
            "shouting",
            "Not enabled for ada.",
            "",
            "SHOUTING-INSTRUCTIONS",
        ),
    );
    write_skill(
        &bundled,
        "runner",
        &skill_md(
            "runner",
            "Needs the shell.",
            "tools: [shell]\n",
            "RUNNER-INSTRUCTIONS",
        ),
    );
    let script = Script::new()
        .rule(Rule::text("Journal updated.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call(
                "write_file",
                r#"{"path": "journal.md", "content": "- walked the dog\n", "mode": "append"}"#,
            )
            .when_after_tool_result("use_skill")
            .when_any_message_contains("JOURNAL-INSTRUCTIONS"),
        )
        .rule(Rule::text("That skill is not available.").when_after_tool_result("use_skill"))
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "journal"}"#)
                .when_last_user_contains("journal"),
        )
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "shouting"}"#)
                .when_last_user_contains("shout"),
        )
        .rule(Rule::tool_call("use_skill", r#"{"name": "runner"}"#).when_last_user_contains("run"));
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        "tools = [\"write_file\"]\nskills = [\"journal\", \"runner\"]\nautonomy = \"trust_first\"",
    )];
    let harness = Harness::start_in(dir, options).await.unwrap();

    let reply = harness
        .ask(
            "ada",
            &ChatKey::cli("j"),
            "add to my journal: walked the dog",
        )
        .await
        .unwrap();
    assert_eq!(reply.text, "Journal updated.");
    let requests = llm.requests();
    let first = requests[0].to_string();
    assert!(
        first.contains("journal: Keeps a dated journal file."),
        "listed by name and description"
    );
    assert!(
        !first.contains("JOURNAL-INSTRUCTIONS"),
        "instructions only when loaded"
    );
    assert!(
        !first.contains("shouting") && !first.contains("runner:"),
        "only enabled, usable skills are listed"
    );
    assert!(
        requests
            .iter()
            .any(|r| r.to_string().contains("JOURNAL-INSTRUCTIONS")),
        "use_skill brought the instructions into the run"
    );
    let journal = harness.dir.path().join("data/workspaces/ada/journal.md");
    assert_eq!(
        std::fs::read_to_string(journal).unwrap(),
        "- walked the dog\n"
    );

    // A skill that is not enabled, and one needing a tool ada lacks, cannot be loaded.
    for (ask, skill) in [("shout it", "shouting"), ("run it", "runner")] {
        let reply = harness.ask("ada", &ChatKey::cli(skill), ask).await.unwrap();
        assert_eq!(reply.text, "That skill is not available.");
        let last = llm.requests().last().unwrap().to_string();
        assert!(
            last.contains(&format!("the skill `{skill}` is not enabled")),
            "{last}"
        );
        let names: Vec<String> = llm.requests().last().unwrap()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|tool| tool["function"]["name"].as_str().unwrap().to_string())
            .collect();
        assert!(
            !names.contains(&"shell".to_string()),
            "a skill never grants a tool: {names:?}"
        );
    }
    harness.stop().await;
}

/// Studio's per-agent toggles: turning a skill on or off is applied to the next turn at once and
/// survives a restart; a skill the agent cannot use cannot be turned on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn studio_toggles_skills_live_and_they_persist() {
    use axum::body::Body;
    use tower::ServiceExt;

    let dir = ScratchDir::new("clawvisor-skill-toggles").unwrap();
    let bundled = dir.path().join("skills");
    for (name, description, extra, body) in [
        (
            "journal",
            "Keeps a dated journal file.",
            "tools: [write_file]\n",
            "JOURNAL-INSTRUCTIONS",
        ),
        (
            "shouting",
            "Answers in capitals.",
            "",
            "SHOUTING-INSTRUCTIONS",
        ),
        (
            "runner",
            "Needs the shell.",
            "tools: [shell]\n",
            "RUNNER-INSTRUCTIONS",
        ),
    ] {
        write_skill(&bundled, name, &skill_md(name, description, extra, body));
    }
    let script = Script::new()
        .rule(
            Rule::text("LOUD AND CLEAR.")
                .when_after_tool_result("use_skill")
                .when_any_message_contains("SHOUTING-INSTRUCTIONS"),
        )
        .rule(Rule::text("That skill is not available.").when_after_tool_result("use_skill"))
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "journal"}"#)
                .when_last_user_contains("journal"),
        )
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "shouting"}"#)
                .when_last_user_contains("shout"),
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        "tools = [\"write_file\"]\nskills = [\"journal\"]\nautonomy = \"trust_first\"",
    )];
    let harness = Harness::start_in(dir, options.clone()).await.unwrap();
    let patch = |state: clawvisor::studio::StudioState, skill: &str, enabled: bool| {
        let request = axum::http::Request::builder()
            .method("PATCH")
            .uri(format!("/api/v1/agents/ada/skills/{skill}"))
            .header("host", "127.0.0.1")
            .header(
                "authorization",
                format!("Bearer {}", state.access.tokens[0].expose()),
            )
            .header("content-type", "application/json")
            .body(Body::from(
                serde_json::json!({"enabled": enabled}).to_string(),
            ))
            .unwrap();
        async move {
            let response = clawvisor::studio::router(state)
                .oneshot(request)
                .await
                .unwrap();
            let status = response.status().as_u16();
            let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .unwrap();
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            )
        }
    };
    let state = harness.daemon().studio_state();

    // Turned on in Studio: the next turn lists it and can load it.
    let (status, agent) = patch(state.clone(), "shouting", true).await;
    assert_eq!(status, 200, "{agent}");
    let shouting = agent["skills"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "shouting")
        .unwrap()
        .clone();
    assert_eq!(shouting["enabled"], true, "{agent}");
    let reply = harness
        .ask("ada", &ChatKey::cli("s"), "shout it")
        .await
        .unwrap();
    assert_eq!(reply.text, "LOUD AND CLEAR.");
    assert!(
        llm.requests()
            .last()
            .unwrap()
            .to_string()
            .contains("shouting: Answers in capitals.")
    );

    // Turned off: gone from the prompt, and use_skill refuses it.
    let (status, _) = patch(state.clone(), "journal", false).await;
    assert_eq!(status, 200);
    let reply = harness
        .ask("ada", &ChatKey::cli("j"), "journal this")
        .await
        .unwrap();
    assert_eq!(reply.text, "That skill is not available.");
    let requests = llm.requests();
    let last = requests.last().unwrap().to_string();
    assert!(
        last.contains("the skill `journal` is not enabled"),
        "{last}"
    );
    assert!(
        !requests[requests.len() - 2]
            .to_string()
            .contains("journal: Keeps"),
        "no longer listed"
    );

    // What cannot be used cannot be turned on; unknown skills are 404.
    let (status, body) = patch(state.clone(), "runner", true).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("shell"),
        "{body}"
    );
    let (status, _) = patch(state.clone(), "nothing-like-it", true).await;
    assert_eq!(status, 404);

    // The catalogue shows each agent's enablement and why a skill is unavailable.
    let response = clawvisor::studio::router(state.clone())
        .oneshot(
            axum::http::Request::builder()
                .uri("/api/v1/skills")
                .header("host", "127.0.0.1")
                .header(
                    "authorization",
                    format!("Bearer {}", state.access.tokens[0].expose()),
                )
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let catalogue: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let find = |name: &str| {
        catalogue["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        find("journal")["agents"][0]["enabled"],
        false,
        "{catalogue}"
    );
    assert_eq!(
        find("shouting")["agents"][0]["enabled"],
        true,
        "{catalogue}"
    );
    assert_eq!(find("runner")["available"], false, "{catalogue}");

    // The toggles survive a restart (they are in the agent's file now, which the restart reads
    // as it is: the harness writes no agent files this time).
    let dir = harness.stop().await;
    options.agents = Vec::new();
    let harness = Harness::start_in(dir, options).await.unwrap();
    let reply = harness
        .ask("ada", &ChatKey::cli("s2"), "shout again")
        .await
        .unwrap();
    assert_eq!(reply.text, "LOUD AND CLEAR.");
    let reply = harness
        .ask("ada", &ChatKey::cli("j2"), "journal again")
        .await
        .unwrap();
    assert_eq!(reply.text, "That skill is not available.");
    harness.stop().await;
}

/// A skill's `risk` hint tightens the run that loaded it and never loosens anything: with a
/// `risk: high` skill loaded, a trust_first agent's write asks first (and, left unanswered until
/// it expires, does not run); with a `risk: low` skill the same write runs freely.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_risky_skill_makes_the_run_that_loaded_it_ask_before_acting() {
    let dir = ScratchDir::new("clawvisor-skills-risk").unwrap();
    let bundled = dir.path().join("skills");
    for (name, risk, marker) in [
        ("careful", "high", "CAREFUL-INSTRUCTIONS"),
        ("easy", "low", "EASY-INSTRUCTIONS"),
    ] {
        write_skill(
            &bundled,
            name,
            &skill_md(
                name,
                "Writes a file.",
                &format!("tools: [write_file]\nrisk: {risk}\n"),
                marker,
            ),
        );
    }
    let script = Script::new()
        .rule(Rule::text("Write attempted.").when_after_tool_result("write_file"))
        .rule(
            Rule::tool_call("write_file", r#"{"path": "careful.md", "content": "x"}"#)
                .when_after_tool_result("use_skill")
                .when_any_message_contains("CAREFUL-INSTRUCTIONS"),
        )
        .rule(
            Rule::tool_call("write_file", r#"{"path": "easy.md", "content": "x"}"#)
                .when_after_tool_result("use_skill")
                .when_any_message_contains("EASY-INSTRUCTIONS"),
        )
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "careful"}"#)
                .when_last_user_contains("carefully"),
        )
        .rule(
            Rule::tool_call("use_skill", r#"{"name": "easy"}"#).when_last_user_contains("easily"),
        );
    let llm = ScriptedLlm::start(script).await.unwrap();
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![agent_toml(
        "ada",
        "tools = [\"write_file\"]\nskills = [\"careful\", \"easy\"]\nautonomy = \"trust_first\"\napproval_ttl = \"1s\"",
    )];
    let harness = Harness::start_in(dir, options).await.unwrap();
    let workspace = harness.dir.path().join("data/workspaces/ada");

    let reply = harness
        .ask("ada", &ChatKey::cli("easy"), "write it easily")
        .await
        .unwrap();
    assert_eq!(reply.text, "Write attempted.");
    assert!(
        workspace.join("easy.md").exists(),
        "a low-risk skill changes nothing"
    );

    let reply = harness
        .ask("ada", &ChatKey::cli("careful"), "write it carefully")
        .await
        .unwrap();
    assert_eq!(reply.text, "Write attempted.");
    assert!(
        !workspace.join("careful.md").exists(),
        "the write waited for an approval that never came"
    );
    let (approvals, tightened): (Vec<(String, String)>, String) = harness
        .store()
        .read(|conn| {
            let mut statement =
                conn.prepare("SELECT tool, status FROM approvals ORDER BY rowid")?;
            let approvals = statement
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            let tightened = conn.query_row(
                "SELECT json_extract(detail, '$.tightened_by_skills') FROM run_steps \
                 WHERE kind = 'decision' AND name = 'write_file' ORDER BY id DESC LIMIT 1",
                [],
                |row| row.get(0),
            )?;
            Ok((approvals, tightened))
        })
        .await
        .unwrap();
    assert_eq!(
        approvals,
        vec![("write_file".to_string(), "denied_timeout".to_string())],
        "only the careful run asked"
    );
    assert_eq!(
        tightened, r#"["careful"]"#,
        "the decision says why it asked"
    );
    harness.stop().await;
}
