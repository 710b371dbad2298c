//! `clawvisor eval <dir>`: living-spec scenarios — scripted conversations with expected outcomes.
//!
//! Each `*.toml` file in the directory is one scenario: the agent's extra settings, a script for
//! the scripted model (`testkit::scripted_llm`, used unless `--live`), and turns, each a user
//! message with what must come of it. A scenario runs on a throwaway daemon in-process (no
//! Studio, bots or scheduler) and is judged by its answers and by what the database recorded.
//!
//! With `--live`, the same scenarios run against a configured provider and model instead of the
//! script; only the expectations that a real model can be held to are checked (those not marked
//! `scripted_only`), and a pass rate is printed.
//!
//! ```toml
//! name = "tool use"
//! description = "The agent looks up the time with a tool and answers with it."
//! agent = 'tools = ["current_time"]'
//!
//! [[script.rules]]
//! when = { after_tool_result = "current_time" }
//! text = "It is 10:00 in Berlin."
//!
//! [[script.rules]]
//! when = { last_user_contains = "time" }
//! tool_calls = [{ name = "current_time", arguments = '{"timezone":"Europe/Berlin"}' }]
//!
//! [[turns]]
//! user = "What time is it in Berlin?"
//! expect = { tools = ["current_time"], status = "succeeded", reply_contains = ["Berlin"] }
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::daemon::StartOptions;
use crate::domain::ChatKey;
use crate::testkit::harness::{Harness, HarnessOptions, agent_toml};
use crate::testkit::scripted_llm::{Script, ScriptedLlm};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Extra lines for the agent file (tools, autonomy, context_tokens, ...).
    #[serde(default)]
    pub agent: String,
    /// Extra lines for the daemon's config.
    #[serde(default)]
    pub config: String,
    #[serde(default)]
    pub script: Script,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub user: String,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Every one of these appears in the reply (case-insensitive).
    #[serde(default)]
    pub reply_contains: Vec<String>,
    #[serde(default)]
    pub reply_not_contains: Vec<String>,
    /// Tools that ran during the turn (in any order).
    #[serde(default)]
    pub tools: Vec<String>,
    /// The run's status: succeeded, failed, cancelled, budget_stopped.
    #[serde(default)]
    pub status: Option<String>,
    /// The session's history was compacted into a recap by the end of the turn.
    #[serde(default)]
    pub compacted: Option<bool>,
    /// At most this many model calls during the turn.
    #[serde(default)]
    pub max_model_calls: Option<u32>,
    /// Only checked against the scripted model (exact texts a real model would not produce).
    #[serde(default)]
    pub scripted_only: bool,
}

/// Where the model comes from.
#[derive(Debug, Clone)]
pub enum ModelSource {
    Scripted,
    /// A live provider: its `[providers.NAME]` TOML table (with the key variable) and a model.
    Live {
        provider_toml: String,
        provider: String,
        model: String,
        env: std::collections::BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub name: String,
    pub failures: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Every scenario file of a directory, sorted by name.
pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Scenario)>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|error| format!("cannot read {}: {error}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .map_err(|error| format!("{}: {error}", path.display()))?;
            let scenario: Scenario = toml::from_str(&text)
                .map_err(|error| format!("{}: {}", path.display(), error.message()))?;
            if scenario.turns.is_empty() {
                return Err(format!(
                    "{}: a scenario needs at least one [[turns]]",
                    path.display()
                ));
            }
            Ok((path, scenario))
        })
        .collect()
}

/// Runs one scenario and judges it.
pub async fn run(scenario: &Scenario, source: &ModelSource) -> Outcome {
    let mut failures = Vec::new();
    let (llm, options) = match setup(scenario, source).await {
        Ok(setup) => setup,
        Err(error) => {
            return Outcome {
                name: scenario.name.clone(),
                failures: vec![error],
            };
        }
    };
    let harness = match Harness::start(options).await {
        Ok(harness) => harness,
        Err(error) => {
            return Outcome {
                name: scenario.name.clone(),
                failures: vec![format!("the daemon did not start: {error}")],
            };
        }
    };
    let live = matches!(source, ModelSource::Live { .. });
    let chat = ChatKey::cli("eval");
    for (index, turn) in scenario.turns.iter().enumerate() {
        let calls_before = llm.as_ref().map(|llm| llm.request_count()).unwrap_or(0);
        let reply = match tokio::time::timeout(
            Duration::from_secs(180),
            harness.ask("agent", &chat, &turn.user),
        )
        .await
        {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => {
                failures.push(format!("turn {}: {error}", index + 1));
                continue;
            }
            Err(_) => {
                failures.push(format!("turn {}: no answer within 3 minutes", index + 1));
                continue;
            }
        };
        let expect = &turn.expect;
        if live && expect.scripted_only {
            continue;
        }
        let prefix = format!(
            "turn {} ({:?})",
            index + 1,
            turn.user.chars().take(40).collect::<String>()
        );
        let lower = reply.text.to_lowercase();
        for needle in &expect.reply_contains {
            if !lower.contains(&needle.to_lowercase()) {
                failures.push(format!(
                    "{prefix}: the reply does not contain `{needle}`: {:?}",
                    reply.text
                ));
            }
        }
        for needle in &expect.reply_not_contains {
            if lower.contains(&needle.to_lowercase()) {
                failures.push(format!(
                    "{prefix}: the reply contains `{needle}`: {:?}",
                    reply.text
                ));
            }
        }
        let Some(run_id) = reply.run_id else {
            failures.push(format!("{prefix}: the answer has no run"));
            continue;
        };
        let recorded = harness
            .store()
            .read(move |conn| {
                let run = crate::store::runs::get(conn, run_id)?;
                let steps = crate::store::runs::steps(conn, run_id)?;
                let recap: Option<String> = conn.query_row(
                    "SELECT recap FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = ?1)",
                    [run_id],
                    |row| row.get(0),
                )?;
                Ok((run, steps, recap))
            })
            .await;
        let (run, steps, recap) = match recorded {
            Ok((Some(run), steps, recap)) => (run, steps, recap),
            Ok((None, _, _)) => {
                failures.push(format!("{prefix}: run {run_id} is not recorded"));
                continue;
            }
            Err(error) => {
                failures.push(format!("{prefix}: cannot read the run: {error}"));
                continue;
            }
        };
        if let Some(status) = &expect.status
            && run.status.as_str() != status
        {
            failures.push(format!(
                "{prefix}: run status is {}, expected {status}",
                run.status.as_str()
            ));
        }
        let ran: Vec<&str> = steps
            .iter()
            .filter(|s| s.kind == "tool_call")
            .filter_map(|s| s.name.as_deref())
            .collect();
        for tool in &expect.tools {
            if !ran.contains(&tool.as_str()) {
                failures.push(format!(
                    "{prefix}: tool `{tool}` did not run (ran: {ran:?})"
                ));
            }
        }
        if let Some(compacted) = expect.compacted
            && compacted != recap.is_some()
        {
            failures.push(format!(
                "{prefix}: compaction expected {compacted}, recap present {}",
                recap.is_some()
            ));
        }
        if let (Some(limit), Some(llm)) = (expect.max_model_calls, &llm) {
            let calls = llm.request_count() - calls_before;
            if calls > u64::from(limit) {
                failures.push(format!(
                    "{prefix}: {calls} model calls, at most {limit} expected"
                ));
            }
        }
    }
    harness.stop().await;
    Outcome {
        name: scenario.name.clone(),
        failures,
    }
}

async fn setup(
    scenario: &Scenario,
    source: &ModelSource,
) -> Result<(Option<ScriptedLlm>, HarnessOptions), String> {
    let start = StartOptions {
        studio: false,
        channels: false,
        scheduler: false,
    };
    match source {
        ModelSource::Scripted => {
            let llm = ScriptedLlm::start(scenario.script.clone())
                .await
                .map_err(|error| format!("the scripted model did not start: {error}"))?;
            let mut options = HarnessOptions::new(llm.base_url());
            options.agents = vec![agent_toml("agent", &scenario.agent)];
            options.config_extra = scenario.config.clone();
            options.start = start;
            Ok((Some(llm), options))
        }
        ModelSource::Live {
            provider_toml,
            provider,
            model,
            env,
        } => {
            // The scripted provider entry stays (unused); the agent uses the live one.
            let mut options = HarnessOptions::new("http://127.0.0.1:9/v1");
            let agent = format!(
                "name = \"agent\"\nprovider = \"{provider}\"\nmodel = \"{model}\"\ninstructions = \"You are a helpful assistant under test.\"\n{}\n",
                scenario.agent
            );
            options.agents = vec![agent];
            options.config_extra = format!("{}\n{provider_toml}\n", scenario.config);
            options.env = env.clone();
            options.start = start;
            Ok((None, options))
        }
    }
}
