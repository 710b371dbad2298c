//! An honest bill, end to end: a real daemon in-process, a scripted model on loopback, real
//! SQLite. A model without a price is recorded with its tokens and marked unpriced, its tokens
//! stop runs through `daily_token_budget` (before a run and between a run's model calls), a
//! `free = true` provider's models are never unpriced, `[pricing]` overrides the built-in table,
//! the built-in table prices a known model, and Studio's Costs API says all of it.

use clawvisor::domain::ChatKey;
use clawvisor::store::runs::{self, RunStatus};
use clawvisor::testkit::harness::{Harness, HarnessOptions, agent_toml};
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};
use serde_json::Value;

async fn run(harness: &Harness, run_id: i64) -> runs::RunRow {
    harness
        .store()
        .read(move |conn| runs::get(conn, run_id))
        .await
        .unwrap()
        .expect("the run is recorded")
}

/// (input tokens, output tokens, cost, unpriced) of every cost event of a run.
async fn cost_events(harness: &Harness, run_id: i64) -> Vec<(i64, i64, f64, bool)> {
    harness
        .store()
        .read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT input_tokens, output_tokens, cost_usd, unpriced FROM cost_events WHERE run_id = ?1",
            )?;
            let rows = statement.query_map([run_id], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap()
}

async fn start(
    script: Script,
    agents: Vec<String>,
    config_extra: String,
) -> (ScriptedLlm, Harness) {
    let _ = clawvisor::logging::init("info", clawvisor::config::LogFormat::Text);
    let llm = ScriptedLlm::start(script)
        .await
        .expect("the scripted model starts");
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = agents;
    options.config_extra = config_extra;
    let harness = Harness::start(options).await.expect("the daemon starts");
    (llm, harness)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpriced_model_is_recorded_with_its_tokens_and_stopped_by_the_token_budget() {
    // 800 characters: about 200 output tokens, over ada's budget of 100 after one answer.
    let long = "The unpriced model answers at length. ".repeat(21);
    let script = Script::new()
        .rule(Rule::tool_call("current_time", "{}").when_last_user_contains("what time"))
        .rule(Rule::text("It is late.").when_after_tool_result("current_time"))
        .rule(Rule::text(long.clone()));
    let (llm, harness) = start(
        script,
        vec![
            agent_toml("ada", "model = \"mystery-model\"\ndaily_token_budget = 100"),
            agent_toml(
                "bo",
                "model = \"mystery-model\"\ndaily_token_budget = 10\ntools = [\"current_time\"]\nautonomy = \"trust_first\"",
            ),
        ],
        String::new(),
    )
    .await;

    // The first run on the unpriced model: answered, its tokens recorded, its cost $0, marked.
    let chat = ChatKey::cli("unpriced");
    let first = harness.ask("ada", &chat, "tell me a lot").await.unwrap();
    assert_eq!(first.text, long.trim());
    let first_run = run(&harness, first.run_id.unwrap()).await;
    assert_eq!(first_run.status, RunStatus::Succeeded);
    assert!(first_run.unpriced, "the run is marked unpriced");
    assert!(
        first_run.input_tokens > 0 && first_run.output_tokens >= 150,
        "{first_run:?}"
    );
    assert_eq!(first_run.cost_usd, 0.0);
    let events = cost_events(&harness, first_run.id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0],
        (first_run.input_tokens, first_run.output_tokens, 0.0, true)
    );

    // The next run is stopped before any model call, and the user is told which budget and when
    // it resets.
    let second = harness.ask("ada", &chat, "and more").await.unwrap();
    let used = first_run.input_tokens + first_run.output_tokens;
    assert!(
        second.text.starts_with(&format!(
            "Today's token budget for ada (100 tokens) is used up ({used} used), so I cannot answer now. It resets at midnight UTC (in "
        )) && second.text.ends_with("), or the operator can raise daily_token_budget."),
        "{}",
        second.text
    );
    let second_run = run(&harness, second.run_id.unwrap()).await;
    assert_eq!(second_run.status, RunStatus::BudgetStopped);
    assert_eq!(
        llm.request_count(),
        1,
        "no model call once the budget is used"
    );
    let steps = harness
        .store()
        .read(move |conn| runs::steps(conn, second_run.id))
        .await
        .unwrap();
    let note = steps
        .iter()
        .find(|step| step.name.as_deref() == Some("budget"))
        .expect("the budget stop is recorded as a step");
    let detail: Value = serde_json::from_str(&note.detail).unwrap();
    assert_eq!(detail["budget"], "daily_token_budget");
    assert_eq!(detail["used_tokens"], used);
    assert_eq!(detail["mid_run"], false);

    // A run under way stops at its next model call: bo's first call (a tool call) uses up its
    // budget of 10 tokens, so the answer after the tool is never asked for.
    let time_chat = ChatKey::cli("time");
    let stopped = harness
        .ask("bo", &time_chat, "what time is it?")
        .await
        .unwrap();
    assert!(
        stopped.text.starts_with(
            "I stopped before finishing: today's token budget for bo (10 tokens) is used up"
        ) && stopped.text.contains("daily_token_budget"),
        "{}",
        stopped.text
    );
    let bo_run = run(&harness, stopped.run_id.unwrap()).await;
    assert_eq!(bo_run.status, RunStatus::BudgetStopped);
    assert_eq!(bo_run.turns, 1, "one model call, then the stop");
    assert_eq!(llm.request_count(), 2);
    assert!(
        !stopped.text.contains("It is late"),
        "the answer after the tool was never asked for"
    );
    harness.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_providers_pricing_overrides_and_the_built_in_table_set_the_bill() {
    let llm = ScriptedLlm::start(Script::new().rule(Rule::text("x".repeat(400))))
        .await
        .expect("the scripted model starts");
    let _ = clawvisor::logging::init("info", clawvisor::config::LogFormat::Text);
    let local = format!(
        "[providers.local]\nkind = \"openai\"\nbase_url = \"{}\"\nfree = true\n\
         [pricing.\"gpt-4o\"]\ninput_per_mtok = 1000.0\noutput_per_mtok = 1000.0\n",
        llm.base_url()
    );
    let mut options = HarnessOptions::new(llm.base_url());
    options.agents = vec![
        "name = \"cy\"\nprovider = \"local\"\nmodel = \"llama3.1:8b\"\ninstructions = \"You are cy.\"\n"
            .to_string(),
        agent_toml("dee", "model = \"claude-sonnet-4-5-20250929\""),
        agent_toml("eve", "model = \"gpt-4o\""),
        agent_toml("fay", "model = \"mystery-model\"\ndaily_token_budget = 1000000"),
    ];
    options.config_extra = local;
    let harness = Harness::start(options).await.expect("the daemon starts");
    let chat = ChatKey::cli("bill");
    let mut runs_by_agent = Vec::new();
    for agent in ["cy", "dee", "eve", "fay"] {
        let reply = harness.ask(agent, &chat, "hello").await.unwrap();
        let row = run(&harness, reply.run_id.unwrap()).await;
        assert_eq!(row.status, RunStatus::Succeeded, "{agent}: {row:?}");
        assert!(row.output_tokens >= 100, "{agent}: {row:?}");
        runs_by_agent.push(row);
    }
    let [cy, dee, eve, fay] = <[runs::RunRow; 4]>::try_from(runs_by_agent).unwrap();
    // A free provider: $0, and not unpriced.
    assert_eq!((cy.cost_usd, cy.unpriced), (0.0, false), "{cy:?}");
    // The built-in table prices Claude Sonnet 4.5 (dated id) at $3 / $15 per million tokens.
    let expected = (dee.input_tokens as f64 * 3.0 + dee.output_tokens as f64 * 15.0) / 1e6;
    assert!(!dee.unpriced && dee.cost_usd > 0.0, "{dee:?}");
    assert!(
        (dee.cost_usd - expected).abs() < 1e-12,
        "{dee:?} vs {expected}"
    );
    // [pricing."gpt-4o"] overrides the built-in $2.50 / $10.
    let expected = (eve.input_tokens + eve.output_tokens) as f64 * 1000.0 / 1e6;
    assert!(
        (eve.cost_usd - expected).abs() < 1e-9,
        "{eve:?} vs {expected}"
    );
    assert!(fay.unpriced && fay.cost_usd == 0.0, "{fay:?}");

    // Studio's Costs API: the unpriced model with its agent and tokens, budgets, by-day tokens.
    let (studio, client) = harness.studio_http().await;
    let costs: Value = client
        .get(format!("{studio}/api/v1/costs?days=14"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let unpriced = costs["unpriced"].as_array().unwrap();
    assert_eq!(unpriced.len(), 1, "only fay's model is unpriced: {costs}");
    assert_eq!(unpriced[0]["provider"], "scripted");
    assert_eq!(unpriced[0]["model"], "mystery-model");
    assert_eq!(unpriced[0]["agents"], serde_json::json!(["fay"]));
    assert_eq!(unpriced[0]["in_use"], true);
    assert_eq!(unpriced[0]["input_tokens"], fay.input_tokens);
    assert_eq!(unpriced[0]["output_tokens"], fay.output_tokens);
    assert!(
        unpriced[0]["fix"]
            .as_str()
            .unwrap()
            .contains("[pricing.\"mystery-model\"]"),
        "{costs}"
    );
    let by_model = costs["by_model"].as_array().unwrap();
    let line = |model: &str| {
        by_model
            .iter()
            .find(|line| line["model"] == model)
            .unwrap_or_else(|| panic!("{model} in {costs}"))
    };
    assert_eq!(line("mystery-model")["unpriced"], true);
    assert_eq!(line("llama3.1:8b")["unpriced"], false);
    assert_eq!(line("gpt-4o")["unpriced"], false);
    let fay_tokens = fay.input_tokens + fay.output_tokens;
    assert_eq!(costs["unpriced_tokens"], fay_tokens, "{costs}");
    let all_tokens: i64 = [&cy, &dee, &eve, &fay]
        .iter()
        .map(|row| row.input_tokens + row.output_tokens)
        .sum();
    assert_eq!(costs["today_tokens"], all_tokens, "{costs}");
    assert_eq!(costs["by_day"][0]["unpriced_tokens"], fay_tokens, "{costs}");
    let budgets = costs["budgets"].as_array().unwrap();
    let fay_budget = budgets
        .iter()
        .find(|budget| budget["agent"] == "fay")
        .unwrap();
    assert_eq!(fay_budget["tokens"]["limit"], 1_000_000);
    assert_eq!(fay_budget["tokens"]["used_today"], fay_tokens);
    assert_eq!(fay_budget["unpriced_tokens_today"], fay_tokens);
    assert_eq!(fay_budget["usd"]["limit"], Value::Null);
    let dee_budget = budgets
        .iter()
        .find(|budget| budget["agent"] == "dee")
        .unwrap();
    assert_eq!(dee_budget["tokens"]["limit"], Value::Null);
    assert!(
        (dee_budget["usd"]["used_today"].as_f64().unwrap() - dee.cost_usd).abs() < 1e-12,
        "{costs}"
    );
    let resets = costs["resets_at_ms"].as_i64().unwrap();
    assert_eq!(resets % 86_400_000, 0, "midnight UTC: {costs}");
    assert!(resets > clawvisor::clock::now_ms());
    // The run says it too.
    let run_json: Value = client
        .get(format!("{studio}/api/v1/runs/{}", fay.id))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run_json["unpriced"], true, "{run_json}");
    harness.stop().await;
}
