//! `clawvisor eval <dir>`: living-spec scenarios — scripted conversations with expected outcomes.
//!
//! Each `*.toml` file in the directory is one scenario: the agents' extra settings, a script for
//! the scripted model (`testkit::scripted_llm`, used unless `--live`), and turns, each a user
//! message (or a wait) with what must come of it. A scenario runs on a throwaway daemon
//! in-process (no Studio, no bots; the scheduler and configured MCP servers run) and is judged by
//! its answers and by what the database recorded.
//!
//! With `--live`, the same scenarios run against a configured provider and model instead of the
//! script; only the expectations that a real model can be held to are checked (a turn's `expect`,
//! unless marked `scripted_only`; never its `scripted`), and a pass rate is printed.
//!
//! ```toml
//! name = "tool use"
//! description = "The agent looks up the time with a tool and answers with it."
//! agent = 'tools = ["current_time"]'
//!
//! [[script.rules]]
//! when = { after_tool_result = "current_time", last_tool_result_contains = "Europe/Berlin" }
//! text = "It is 10:00 in Berlin."
//!
//! [[script.rules]]
//! when = { last_user_contains = "time" }
//! tool_calls = [{ name = "current_time", arguments = '{"timezone":"Europe/Berlin"}' }]
//!
//! [[turns]]
//! user = "What time is it in Berlin?"
//! expect = { tools = ["current_time"], status = "succeeded", reply_contains = ["Berlin"] }
//! scripted = { reply_contains = ["10:00"], max_model_calls = 2 }
//! ```
//!
//! Every key (an unknown key is an error that names it):
//!
//! Scenario
//! - `name`, `description`.
//! - `agent`: extra lines for the file of the agent called `agent`, the one turns talk to unless
//!   they say otherwise (tools, autonomy, approval_ttl, skills, context_tokens, ...).
//! - `[[agents]]`: more agents, each `name` and `file` (extra lines for its file, like `agent`),
//!   for handoffs and validators. Every agent's instructions say `You are <name>, a test agent.`,
//!   which script rules can match with `system_contains`.
//! - `config`: extra lines for the daemon's config (`[scheduler]`, `[[mcp.servers]]`, ...).
//! - `[files]`: `"path" = "contents"`, written into `agent`'s (default) workspace before the
//!   daemon starts: documents to read, workspace skills (`"skills/x/SKILL.md"`).
//! - `[script]`: the scripted model's rules (see `testkit::scripted_llm`); rules are shared by all
//!   agents. Make answers depend on what a tool returned (`after_tool_result` with
//!   `last_tool_result_contains`), so that a broken tool shows in the reply.
//! - `[[turns]]`: at least one.
//!
//! Placeholders, in `agent`, `[[agents]] file`, `config`, `[files]` contents and the script's
//! texts and tool-call arguments:
//! - `{{now+5s}}` (any duration, or `{{now}}`): that moment as RFC 3339 UTC (for `at` tasks). In
//!   the script, now is when the first turn starts (the daemon is up and its tools are ready);
//!   elsewhere, when the scenario starts;
//! - `{{mcp_test_server}}`: the path of `clawvisor-mcp-test-server` beside this binary.
//!
//! Before the first turn the runner waits (up to 15 s) until every agent is offered the tools its
//! file lists by name (scheduler, memory and MCP tools are published after start; list an MCP tool
//! as `server__tool` to wait for its link).
//!
//! Turn
//! - `user`: the message; or `wait = "10s"`: send nothing and wait at most that long for the
//!   agent's next message in the chat (a scheduled task's answer, shown as a notice, or a late
//!   answer). A user turn ignores what the chat showed before its message; a wait does not. A
//!   scheduled task's answer comes without its run: check it with `jobs` and `job_runs`.
//! - `to`: the agent (default `agent`). `chat`: the conversation, a terminal chat `cli:<chat>`
//!   (default `eval`).
//! - `approval`: `approve`, `deny` or `expire` (leave it until its `approval_ttl` passes): what the
//!   user does with every approval requested in the chat during the turn. Without it a request is
//!   denied at once and the turn fails.
//! - `settings`: `{ paused = true, autonomy = "trust_first" }`: an operator's change to the
//!   agent's runtime settings, applied before the message.
//! - `expect`: below; what any capable model must bring about (tools run or refused, files,
//!   recorded statuses, memories, and the facts the reply must state).
//! - `scripted`: more expectations, with the same keys, checked only against the scripted model:
//!   the exact texts its script makes it say, model call counts.
//!
//! Expect (all optional; texts compare case-insensitively)
//! - `reply_contains`, `reply_not_contains`: the answer's text.
//! - `notices_contain`: notices the chat showed during the turn (approval requests,
//!   `send_message` messages).
//! - `status`: the run's status (succeeded, failed, cancelled, budget_stopped).
//! - `tools`, `tools_not_run`: tools that did / did not run in the turn's run.
//! - `tool_output_contains`: texts in the results the model got back in the run (refusals too).
//! - `compacted`: the session's history was compacted into a recap by the end of the turn.
//! - `max_model_calls`: at most this many model calls during the turn (scripted model only).
//! - `approvals`, `jobs`, `job_runs`, `handoffs`: the statuses of every approval request, job,
//!   job fire and handoff contract recorded so far, in the order they were created.
//! - `memory_contains`: texts that some saved memory (not a recap) contains; `memory_count`: how
//!   many saved memories there are.
//! - `files`: `{ "path" = "text" }`: the file in `agent`'s workspace contains the text;
//!   `files_absent`: files that must not exist there.
//! - `scripted_only`: this turn's expectations are only checked against the scripted model (exact
//!   texts a real model would not produce).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::config::{Autonomy, Dur};
use crate::daemon::StartOptions;
use crate::domain::{ChatKey, OutEvent, Outbound};
use crate::protocol::agent::{Agent, AgentError, SettingsChange};
use crate::protocol::approvals::{Approvals, DecideOutcome, Decider, Decision};
use crate::testkit::harness::{Harness, HarnessOptions, ScratchDir, agent_toml};
use crate::testkit::scripted_llm::{Script, ScriptedLlm};

/// The agent turns talk to unless they name another.
pub const MAIN_AGENT: &str = "agent";
const DEFAULT_CHAT: &str = "eval";
/// How long an agent may take to be offered the tools its file lists.
const TOOLS_READY_WITHIN: Duration = Duration::from_secs(15);
const SCRIPTED_TURN_LIMIT: Duration = Duration::from_secs(60);
const LIVE_TURN_LIMIT: Duration = Duration::from_secs(180);
/// How often pending approvals are looked for during a turn.
const APPROVAL_POLL: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Extra lines for the main agent's file (tools, autonomy, context_tokens, ...).
    #[serde(default)]
    pub agent: String,
    /// More agents (handoff delegates, validators).
    #[serde(default)]
    pub agents: Vec<ExtraAgent>,
    /// Extra lines for the daemon's config.
    #[serde(default)]
    pub config: String,
    /// Files put into the main agent's workspace before start: path → contents.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    #[serde(default)]
    pub script: Script,
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtraAgent {
    pub name: String,
    /// Extra lines for its agent file.
    #[serde(default)]
    pub file: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The user's message; absent for a `wait` turn.
    #[serde(default)]
    pub user: Option<String>,
    /// Send nothing; wait at most this long for the agent's next message in the chat.
    #[serde(default)]
    pub wait: Option<Dur>,
    /// The agent spoken to (default `agent`).
    #[serde(default)]
    pub to: Option<String>,
    /// The conversation: the terminal chat `cli:<chat>` (default `eval`).
    #[serde(default)]
    pub chat: Option<String>,
    /// What the user does with approval requests during the turn.
    #[serde(default)]
    pub approval: Option<ApprovalAction>,
    /// An operator's settings change applied before the message.
    #[serde(default)]
    pub settings: Option<Settings>,
    #[serde(default)]
    pub expect: Expect,
    /// Expectations checked only against the scripted model (its exact texts).
    #[serde(default)]
    pub scripted: Expect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAction {
    Approve,
    Deny,
    /// Leave the request alone until it expires.
    Expire,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    #[serde(default)]
    pub paused: Option<bool>,
    #[serde(default)]
    pub autonomy: Option<Autonomy>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Every one of these appears in the reply (case-insensitive).
    #[serde(default)]
    pub reply_contains: Vec<String>,
    #[serde(default)]
    pub reply_not_contains: Vec<String>,
    /// Every one of these appears in some notice shown during the turn.
    #[serde(default)]
    pub notices_contain: Vec<String>,
    /// Tools that ran during the turn (in any order).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools that did not run during the turn.
    #[serde(default)]
    pub tools_not_run: Vec<String>,
    /// Every one of these appears in some tool result the model got back during the turn.
    #[serde(default)]
    pub tool_output_contains: Vec<String>,
    /// The run's status: succeeded, failed, cancelled, budget_stopped.
    #[serde(default)]
    pub status: Option<String>,
    /// The session's history was compacted into a recap by the end of the turn.
    #[serde(default)]
    pub compacted: Option<bool>,
    /// At most this many model calls during the turn.
    #[serde(default)]
    pub max_model_calls: Option<u32>,
    /// The statuses of every approval request so far, oldest first.
    #[serde(default)]
    pub approvals: Option<Vec<String>>,
    /// The statuses of every scheduled job so far, oldest first.
    #[serde(default)]
    pub jobs: Option<Vec<String>>,
    /// The statuses of every job fire so far, oldest first.
    #[serde(default)]
    pub job_runs: Option<Vec<String>>,
    /// The statuses of every handoff contract so far, oldest first.
    #[serde(default)]
    pub handoffs: Option<Vec<String>>,
    /// Every one of these appears in some saved memory (recaps excluded).
    #[serde(default)]
    pub memory_contains: Vec<String>,
    /// How many saved memories there are (recaps excluded).
    #[serde(default)]
    pub memory_count: Option<usize>,
    /// Files of the main agent's workspace and a text each must contain.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Files that must not exist in the main agent's workspace.
    #[serde(default)]
    pub files_absent: Vec<String>,
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

impl Scenario {
    /// The names of every agent, the main one first.
    fn agent_names(&self) -> Vec<&str> {
        std::iter::once(MAIN_AGENT)
            .chain(self.agents.iter().map(|agent| agent.name.as_str()))
            .collect()
    }

    /// What serde cannot check: references between keys, one of `user` / `wait`, safe paths.
    fn check(&self) -> Result<(), String> {
        if self.turns.is_empty() {
            return Err("a scenario needs at least one [[turns]]".into());
        }
        let mut names = BTreeSet::new();
        for name in self.agent_names() {
            if name.trim().is_empty() || !names.insert(name) {
                return Err(format!(
                    "[[agents]]: `{name}` is empty or used twice (`{MAIN_AGENT}` is the main agent)"
                ));
            }
        }
        for path in self.files.keys() {
            workspace_path(path).map_err(|error| format!("[files]: {error}"))?;
        }
        for (index, turn) in self.turns.iter().enumerate() {
            let number = index + 1;
            match (&turn.user, &turn.wait) {
                (Some(_), None) => {}
                (None, Some(wait)) if !wait.0.is_zero() => {}
                (None, Some(_)) => return Err(format!("turn {number}: `wait` must be positive")),
                _ => {
                    return Err(format!(
                        "turn {number}: give either `user` (a message) or `wait` (a duration)"
                    ));
                }
            }
            if let Some(to) = &turn.to
                && !names.contains(to.as_str())
            {
                return Err(format!(
                    "turn {number}: `to = \"{to}\"` is not an agent of this scenario ({})",
                    names.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
            if turn
                .chat
                .as_ref()
                .is_some_and(|chat| chat.trim().is_empty())
            {
                return Err(format!("turn {number}: `chat` is empty"));
            }
            for expect in [&turn.expect, &turn.scripted] {
                for path in expect.files.keys().chain(expect.files_absent.iter()) {
                    workspace_path(path).map_err(|error| format!("turn {number}: {error}"))?;
                }
            }
        }
        Ok(())
    }
}

impl Turn {
    fn agent(&self) -> &str {
        self.to.as_deref().unwrap_or(MAIN_AGENT)
    }

    fn chat(&self) -> ChatKey {
        ChatKey::cli(self.chat.as_deref().unwrap_or(DEFAULT_CHAT))
    }
}

/// A relative path inside a workspace (no `..`, not absolute).
fn workspace_path(path: &str) -> Result<PathBuf, String> {
    let candidate = Path::new(path);
    if path.is_empty()
        || !candidate
            .components()
            .all(|component| matches!(component, Component::Normal(_)))
    {
        return Err(format!(
            "`{path}` must be a relative path inside the workspace"
        ));
    }
    Ok(candidate.to_path_buf())
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
            scenario
                .check()
                .map_err(|error| format!("{}: {error}", path.display()))?;
            Ok((path, scenario))
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Placeholders.

/// Replaces every `{{...}}` placeholder of `text`.
fn expand(text: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, String> {
    let mut expanded = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        expanded.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("a `{{{{` without its `}}}}` in {text:?}"))?;
        expanded.push_str(&placeholder(after[..end].trim(), now)?);
        rest = &after[end + 2..];
    }
    expanded.push_str(rest);
    Ok(expanded)
}

fn placeholder(name: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String, String> {
    if name == "mcp_test_server" {
        return mcp_test_server();
    }
    if let Some(offset) = name.strip_prefix("now") {
        let offset = offset.trim();
        let delta = match offset.strip_prefix('+') {
            None if offset.is_empty() => chrono::TimeDelta::zero(),
            Some(duration) => Dur::parse(duration)
                .ok()
                .and_then(|duration| chrono::TimeDelta::from_std(duration.0).ok())
                .ok_or_else(|| format!("`{{{{{name}}}}}`: `{duration}` is not a duration"))?,
            None => return Err(format!("`{{{{{name}}}}}`: write `now` or `now+30s`")),
        };
        return Ok((now + delta).to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    }
    Err(format!(
        "unknown placeholder `{{{{{name}}}}}` (known: now, now+<duration>, mcp_test_server)"
    ))
}

/// The repository's MCP test server, built beside this binary (`target/<profile>/`); a test
/// binary lives one level lower (`deps/`).
fn mcp_test_server() -> Result<String, String> {
    let exe =
        std::env::current_exe().map_err(|error| format!("`{{{{mcp_test_server}}}}`: {error}"))?;
    let name = format!("clawvisor-mcp-test-server{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1)
        .take(2)
        .map(|dir| dir.join(&name))
        .find(|candidate| candidate.is_file())
        .map(|found| found.display().to_string())
        .ok_or_else(|| {
            format!(
                "`{{{{mcp_test_server}}}}`: no {name} beside {} (build it: cargo build --bins)",
                exe.display()
            )
        })
}

/// The scenario with its placeholders expanded at `now`.
fn expanded(scenario: &Scenario, now: chrono::DateTime<chrono::Utc>) -> Result<Scenario, String> {
    let mut copy = scenario.clone();
    copy.agent = expand(&copy.agent, now)?;
    copy.config = expand(&copy.config, now)?;
    for agent in &mut copy.agents {
        agent.file = expand(&agent.file, now)?;
    }
    for contents in copy.files.values_mut() {
        *contents = expand(contents, now)?;
    }
    copy.script = expanded_script(&scenario.script, now)?;
    Ok(copy)
}

/// The script's texts and tool-call arguments with their placeholders expanded at `now`.
fn expanded_script(script: &Script, now: chrono::DateTime<chrono::Utc>) -> Result<Script, String> {
    let mut copy = script.clone();
    for rule in &mut copy.rules {
        if let Some(text) = &rule.text {
            rule.text = Some(expand(text, now)?);
        }
        for call in &mut rule.tool_calls {
            call.arguments = expand(&call.arguments, now)?;
        }
    }
    Ok(copy)
}

// ---------------------------------------------------------------------------------------------
// Running.

/// What a chat showed during one turn.
#[derive(Debug, Default)]
struct Heard {
    text: String,
    run_id: Option<i64>,
    notices: Vec<String>,
}

/// What the database recorded, read after a turn.
#[derive(Debug, Default)]
struct Recorded {
    run: Option<crate::store::runs::RunRow>,
    /// Tools that ran in the turn's run.
    ran: Vec<String>,
    tool_results: Vec<String>,
    recap: bool,
    approvals: Vec<String>,
    jobs: Vec<String>,
    job_runs: Vec<String>,
    handoffs: Vec<String>,
    memories: Vec<String>,
}

/// Runs one scenario and judges it.
pub async fn run(scenario: &Scenario, source: &ModelSource) -> Outcome {
    let outcome = |failures| Outcome {
        name: scenario.name.clone(),
        failures,
    };
    let script = scenario.script.clone();
    let scenario = match expanded(scenario, chrono::Utc::now()) {
        Ok(scenario) => scenario,
        Err(error) => return outcome(vec![error]),
    };
    let (llm, options, dir) = match setup(&scenario, source).await {
        Ok(setup) => setup,
        Err(error) => return outcome(vec![error]),
    };
    let harness = match Harness::start_in(dir, options.clone()).await {
        Ok(harness) => harness,
        Err(error) => return outcome(vec![format!("the daemon did not start: {error}")]),
    };
    let failures = converse_all(&scenario, &script, &harness, llm.as_ref(), &options, source).await;
    harness.stop().await;
    outcome(failures)
}

async fn converse_all(
    scenario: &Scenario,
    script: &Script,
    harness: &Harness,
    llm: Option<&ScriptedLlm>,
    options: &HarnessOptions,
    source: &ModelSource,
) -> Vec<String> {
    let live = matches!(source, ModelSource::Live { .. });
    if let Err(error) = tools_ready(harness, scenario, options).await {
        return vec![error];
    }
    // The script's `{{now+…}}` count from here, when the conversation starts, not from before the
    // daemon booted (slower on a busy machine). No model call has been made yet, so replacing the
    // script loses no rule's uses.
    if let Some(llm) = llm {
        match expanded_script(script, chrono::Utc::now()) {
            Ok(script) => llm.set_script(script),
            Err(error) => return vec![error],
        }
    }
    // One listener per chat for the whole scenario, so that nothing said between turns is lost.
    let mut listeners: BTreeMap<ChatKey, UnboundedReceiver<Outbound>> = BTreeMap::new();
    for turn in &scenario.turns {
        if let std::collections::btree_map::Entry::Vacant(entry) = listeners.entry(turn.chat()) {
            match harness.listen(entry.key()).await {
                Ok(receiver) => {
                    entry.insert(receiver);
                }
                Err(error) => return vec![error],
            }
        }
    }
    let workspace = harness
        .dir
        .path()
        .join("data")
        .join("workspaces")
        .join(MAIN_AGENT);
    let limit = if live {
        LIVE_TURN_LIMIT
    } else {
        SCRIPTED_TURN_LIMIT
    };
    let mut failures = Vec::new();
    for (index, turn) in scenario.turns.iter().enumerate() {
        let prefix = match (&turn.user, &turn.wait) {
            (Some(user), _) => format!(
                "turn {} ({:?})",
                index + 1,
                user.chars().take(40).collect::<String>()
            ),
            (None, wait) => format!("turn {} (wait {})", index + 1, wait.unwrap_or_default()),
        };
        if let Some(settings) = &turn.settings
            && let Err(error) = apply_settings(harness, turn.agent(), settings).await
        {
            failures.push(format!("{prefix}: {error}"));
            continue;
        }
        let calls_before = llm.map(ScriptedLlm::request_count).unwrap_or(0);
        let chat = turn.chat();
        let Some(outputs) = listeners.get_mut(&chat) else {
            failures.push(format!("{prefix}: no listener for {chat}"));
            continue;
        };
        let heard = match converse(harness, outputs, turn, limit, &mut failures, &prefix).await {
            Ok(heard) => heard,
            Err(error) => {
                failures.push(format!("{prefix}: {error}"));
                continue;
            }
        };
        if live && turn.expect.scripted_only {
            continue;
        }
        let recorded = match record(harness, heard.run_id).await {
            Ok(recorded) => recorded,
            Err(error) => {
                failures.push(format!("{prefix}: cannot read the database: {error}"));
                continue;
            }
        };
        let calls = llm.map(|llm| llm.request_count() - calls_before);
        let mut found = judge(&turn.expect, &heard, &recorded, calls, &workspace);
        if !live {
            found.extend(judge(&turn.scripted, &heard, &recorded, calls, &workspace));
        }
        failures.extend(
            found
                .into_iter()
                .map(|failure| format!("{prefix}: {failure}")),
        );
    }
    failures
}

/// Waits until every agent is offered the tools its file names.
async fn tools_ready(
    harness: &Harness,
    scenario: &Scenario,
    options: &HarnessOptions,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + TOOLS_READY_WITHIN;
    for (name, file) in scenario.agent_names().into_iter().zip(&options.agents) {
        let wanted: Vec<String> = toml::from_str::<toml::Table>(file)
            .ok()
            .and_then(|table| table.get("tools").cloned())
            .and_then(|tools| tools.try_into::<Vec<String>>().ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|tool| !tool.contains(':') && !tool.contains('*'))
            .collect();
        if wanted.is_empty() {
            continue;
        }
        loop {
            let offered = harness.agent_tools(name).await;
            let missing: Vec<&String> = wanted
                .iter()
                .filter(|tool| !offered.contains(tool))
                .collect();
            if missing.is_empty() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!(
                    "agent `{name}` was not offered {missing:?} within {} s (offered: {offered:?})",
                    TOOLS_READY_WITHIN.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

async fn apply_settings(harness: &Harness, agent: &str, settings: &Settings) -> Result<(), String> {
    let change = SettingsChange {
        autonomy: settings.autonomy,
        model: None,
        paused: settings.paused,
    };
    match Agent::new(&harness.daemon().registry, agent)
        .update_settings(change)
        .await
    {
        Ok(_) => Ok(()),
        Err(AgentError::Unavailable(error)) => Err(format!(
            "the settings change did not reach {agent}: {error}"
        )),
        Err(error) => Err(format!("the settings change was refused: {error}")),
    }
}

/// Sends the turn's message (if any) and collects what the chat shows until the answer, deciding
/// approval requests as the turn says.
async fn converse(
    harness: &Harness,
    outputs: &mut UnboundedReceiver<Outbound>,
    turn: &Turn,
    limit: Duration,
    failures: &mut Vec<String>,
    prefix: &str,
) -> Result<Heard, String> {
    let agent = turn.agent();
    let chat = turn.chat();
    let limit = turn.wait.map_or(limit, |wait| wait.0);
    if let Some(user) = &turn.user {
        while outputs.try_recv().is_ok() {}
        harness.send(agent, &chat, user)?;
    }
    let deadline = tokio::time::Instant::now() + limit;
    let mut heard = Heard::default();
    let mut decided: HashSet<String> = HashSet::new();
    let mut poll = tokio::time::interval(APPROVAL_POLL);
    let finished = loop {
        tokio::select! {
            received = tokio::time::timeout_at(deadline, outputs.recv()) => {
                let outbound = match received {
                    Ok(Some(outbound)) => outbound,
                    Ok(None) => break Err("the local channel closed".to_string()),
                    Err(_) => break Err(format!(
                        "no answer within {} s (notices: {:?})",
                        limit.as_secs(),
                        heard.notices
                    )),
                };
                if outbound.agent != agent {
                    continue;
                }
                match outbound.event {
                    OutEvent::Final { text, .. } => {
                        heard.text = text;
                        heard.run_id = outbound.run_id;
                        break Ok(());
                    }
                    OutEvent::Notice { text } if turn.user.is_none() => {
                        heard.text = text;
                        heard.run_id = outbound.run_id;
                        break Ok(());
                    }
                    OutEvent::Notice { text } => heard.notices.push(text),
                    _ => {}
                }
            }
            _ = poll.tick() => {
                decide_pending(harness, agent, &chat, turn.approval, &mut decided, failures, prefix).await;
            }
        }
    };
    if turn.approval.is_some() && decided.is_empty() {
        failures.push(format!(
            "{prefix}: `approval` is set but no approval was requested during the turn"
        ));
    }
    finished.map(|()| heard)
}

/// Decides the chat's pending approval requests as the turn says (once each).
async fn decide_pending(
    harness: &Harness,
    agent: &str,
    chat: &ChatKey,
    action: Option<ApprovalAction>,
    decided: &mut HashSet<String>,
    failures: &mut Vec<String>,
    prefix: &str,
) {
    let (owner, key) = (agent.to_string(), chat.as_str().to_string());
    let pending: Vec<(String, String)> = harness
        .store()
        .read(move |conn| {
            let mut statement = conn.prepare(
                "SELECT id, tool FROM approvals WHERE status = 'pending' AND agent = ?1 AND chat = ?2 ORDER BY requested_ms",
            )?;
            let rows = statement.query_map([&owner, &key], |row| Ok((row.get(0)?, row.get(1)?)))?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
        .unwrap_or_default();
    for (id, tool) in pending {
        if decided.contains(&id) {
            continue;
        }
        let decision = match action {
            Some(ApprovalAction::Approve) => Decision::Approve,
            Some(ApprovalAction::Deny) => Decision::Deny,
            Some(ApprovalAction::Expire) => {
                decided.insert(id);
                continue;
            }
            None => {
                failures.push(format!(
                    "{prefix}: approval {id} was requested for `{tool}` but the turn has no `approval` key (denied)"
                ));
                Decision::Deny
            }
        };
        decided.insert(id.clone());
        let decider = Decider::Local { chat: chat.clone() };
        match Approvals::new(&harness.daemon().registry)
            .decide(&id, decision, decider)
            .await
        {
            Ok(DecideOutcome::Approved { .. } | DecideOutcome::Denied { .. }) => {}
            Ok(other) => failures.push(format!(
                "{prefix}: deciding approval {id}: {}",
                other.message()
            )),
            Err(error) => failures.push(format!("{prefix}: deciding approval {id}: {error}")),
        }
    }
}

/// Reads the turn's run (when there is one) and the scenario's records so far.
async fn record(harness: &Harness, run_id: Option<i64>) -> Result<Recorded, String> {
    harness
        .store()
        .read(move |conn| {
            fn column(
                conn: &rusqlite::Connection,
                sql: &str,
                run_id: Option<i64>,
            ) -> rusqlite::Result<Vec<String>> {
                let mut statement = conn.prepare(sql)?;
                let params: &[&dyn rusqlite::ToSql] = match &run_id {
                    Some(run_id) => &[run_id],
                    None => &[],
                };
                let rows = statement.query_map(params, |row| row.get(0))?;
                rows.collect()
            }
            let mut recorded = Recorded {
                approvals: column(
                    conn,
                    "SELECT status FROM approvals ORDER BY requested_ms, rowid",
                    None,
                )?,
                jobs: column(conn, "SELECT status FROM jobs ORDER BY id", None)?,
                job_runs: column(conn, "SELECT status FROM job_runs ORDER BY id", None)?,
                handoffs: column(
                    conn,
                    "SELECT status FROM handoff_contracts ORDER BY created_ms, rowid",
                    None,
                )?,
                memories: column(
                    conn,
                    "SELECT text FROM memory_facts WHERE archived_ms IS NULL AND class != 'session_recap' ORDER BY id",
                    None,
                )?,
                ..Recorded::default()
            };
            if let Some(run_id) = run_id {
                recorded.run = crate::store::runs::get(conn, run_id)?;
                recorded.ran = crate::store::runs::steps(conn, run_id)?
                    .into_iter()
                    .filter(|step| step.kind == "tool_call")
                    .filter_map(|step| step.name)
                    .collect();
                recorded.tool_results = column(
                    conn,
                    "SELECT content FROM session_events WHERE kind = 'tool_result' AND run_id = ?1 ORDER BY id",
                    Some(run_id),
                )?;
                let recap: Option<String> = conn.query_row(
                    "SELECT recap FROM sessions WHERE id = (SELECT session_id FROM runs WHERE id = ?1)",
                    [run_id],
                    |row| row.get(0),
                )?;
                recorded.recap = recap.is_some();
            }
            Ok(recorded)
        })
        .await
        .map_err(|error| error.to_string())
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// Every way the turn's outcome differs from what it expects.
fn judge(
    expect: &Expect,
    heard: &Heard,
    recorded: &Recorded,
    model_calls: Option<u64>,
    workspace: &Path,
) -> Vec<String> {
    let mut failures = Vec::new();
    for needle in &expect.reply_contains {
        if !contains(&heard.text, needle) {
            failures.push(format!(
                "the reply does not contain `{needle}`: {:?}",
                heard.text
            ));
        }
    }
    for needle in &expect.reply_not_contains {
        if contains(&heard.text, needle) {
            failures.push(format!("the reply contains `{needle}`: {:?}", heard.text));
        }
    }
    for needle in &expect.notices_contain {
        if !heard.notices.iter().any(|notice| contains(notice, needle)) {
            failures.push(format!(
                "no notice contains `{needle}` (notices: {:?})",
                heard.notices
            ));
        }
    }
    let wants_run = expect.status.is_some()
        || expect.compacted.is_some()
        || !expect.tools.is_empty()
        || !expect.tools_not_run.is_empty()
        || !expect.tool_output_contains.is_empty();
    match &recorded.run {
        None if wants_run => failures.push(match heard.run_id {
            Some(run_id) => format!("run {run_id} is not recorded"),
            None => "the answer has no run, but the turn expects one".to_string(),
        }),
        None => {}
        Some(run) => {
            if let Some(status) = &expect.status
                && run.status.as_str() != status
            {
                failures.push(format!(
                    "run status is {}, expected {status}",
                    run.status.as_str()
                ));
            }
            let ran = &recorded.ran;
            for tool in &expect.tools {
                if !ran.contains(tool) {
                    failures.push(format!("tool `{tool}` did not run (ran: {ran:?})"));
                }
            }
            for tool in &expect.tools_not_run {
                if ran.contains(tool) {
                    failures.push(format!("tool `{tool}` ran (ran: {ran:?})"));
                }
            }
            for needle in &expect.tool_output_contains {
                if !recorded
                    .tool_results
                    .iter()
                    .any(|result| contains(result, needle))
                {
                    failures.push(format!(
                        "no tool result contains `{needle}` (results: {:?})",
                        recorded.tool_results
                    ));
                }
            }
            if let Some(compacted) = expect.compacted
                && compacted != recorded.recap
            {
                failures.push(format!(
                    "compaction expected {compacted}, recap present {}",
                    recorded.recap
                ));
            }
        }
    }
    if let (Some(limit), Some(calls)) = (expect.max_model_calls, model_calls)
        && calls > u64::from(limit)
    {
        failures.push(format!("{calls} model calls, at most {limit} expected"));
    }
    for (what, expected, actual) in [
        ("approvals", &expect.approvals, &recorded.approvals),
        ("jobs", &expect.jobs, &recorded.jobs),
        ("job_runs", &expect.job_runs, &recorded.job_runs),
        ("handoffs", &expect.handoffs, &recorded.handoffs),
    ] {
        if let Some(expected) = expected
            && expected != actual
        {
            failures.push(format!("{what} are {actual:?}, expected {expected:?}"));
        }
    }
    for needle in &expect.memory_contains {
        if !recorded
            .memories
            .iter()
            .any(|memory| contains(memory, needle))
        {
            failures.push(format!(
                "no memory contains `{needle}` (memories: {:?})",
                recorded.memories
            ));
        }
    }
    if let Some(count) = expect.memory_count
        && count != recorded.memories.len()
    {
        failures.push(format!(
            "{} memories, expected {count}: {:?}",
            recorded.memories.len(),
            recorded.memories
        ));
    }
    for (path, needle) in &expect.files {
        match std::fs::read_to_string(workspace.join(path)) {
            Ok(text) if contains(&text, needle) => {}
            Ok(text) => failures.push(format!(
                "the file `{path}` does not contain `{needle}`: {text:?}"
            )),
            Err(error) => failures.push(format!("cannot read the file `{path}`: {error}")),
        }
    }
    for path in &expect.files_absent {
        if workspace.join(path).exists() {
            failures.push(format!("the file `{path}` exists"));
        }
    }
    failures
}

/// The model, the daemon's options, and its directory with the workspace files in place.
async fn setup(
    scenario: &Scenario,
    source: &ModelSource,
) -> Result<(Option<ScriptedLlm>, HarnessOptions, ScratchDir), String> {
    let start = StartOptions {
        studio: false,
        channels: false,
        scheduler: true,
    };
    let dir = ScratchDir::new("clawvisor-eval")
        .map_err(|error| format!("cannot create a scratch directory: {error}"))?;
    let workspace = dir.path().join("data").join("workspaces").join(MAIN_AGENT);
    for (path, contents) in &scenario.files {
        let target = workspace.join(workspace_path(path)?);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|error| format!("[files] `{path}`: {error}"))?;
        }
        std::fs::write(&target, contents).map_err(|error| format!("[files] `{path}`: {error}"))?;
    }
    let extras = std::iter::once(scenario.agent.as_str())
        .chain(scenario.agents.iter().map(|agent| agent.file.as_str()));
    let named = scenario.agent_names().into_iter().zip(extras);
    match source {
        ModelSource::Scripted => {
            let llm = ScriptedLlm::start(scenario.script.clone())
                .await
                .map_err(|error| format!("the scripted model did not start: {error}"))?;
            let mut options = HarnessOptions::new(llm.base_url());
            options.agents = named.map(|(name, extra)| agent_toml(name, extra)).collect();
            options.config_extra = scenario.config.clone();
            options.start = start;
            Ok((Some(llm), options, dir))
        }
        ModelSource::Live {
            provider_toml,
            provider,
            model,
            env,
        } => {
            // The scripted provider entry stays (unused); the agents use the live one, whose
            // table is appended to the config: it must not use the scripted entry's names.
            if provider == "scripted" || model == "scripted-model" {
                return Err(format!(
                    "--live: the provider name `scripted` and the model name `scripted-model` are \
                     the eval runner's own; give the live ones other names (got {provider}/{model})"
                ));
            }
            let mut options = HarnessOptions::new("http://127.0.0.1:9/v1");
            options.agents = named
                .map(|(name, extra)| {
                    format!(
                        "name = \"{name}\"\nprovider = \"{provider}\"\nmodel = \"{model}\"\ninstructions = \"You are {name}, a helpful assistant under test.\"\n{extra}\n"
                    )
                })
                .collect();
            options.config_extra = format!("{}\n{provider_toml}\n", scenario.config);
            options.env = env.clone();
            options.start = start;
            Ok((None, options, dir))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, String> {
        let scenario: Scenario = toml::from_str(text).map_err(|error| error.to_string())?;
        scenario.check()?;
        Ok(scenario)
    }

    #[test]
    fn unknown_keys_and_bad_references_are_named() {
        let error =
            parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nexpect = { replies = 1 }").unwrap_err();
        assert!(error.contains("replies"), "{error}");
        let error = parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\nto = \"nobody\"").unwrap_err();
        assert!(error.contains("nobody"), "{error}");
        let error = parse("name = \"x\"\n[[turns]]\nexpect = {}").unwrap_err();
        assert!(error.contains("either `user`"), "{error}");
        let error =
            parse("name = \"x\"\n[files]\n\"../x\" = \"\"\n[[turns]]\nuser = \"hi\"").unwrap_err();
        assert!(error.contains("relative path"), "{error}");
        let error = parse(
            "name = \"x\"\n[[turns]]\nuser = \"hi\"\nscripted = { files_absent = [\"/etc/x\"] }",
        )
        .unwrap_err();
        assert!(error.contains("relative path"), "{error}");
        let error =
            parse("name = \"x\"\n[[turns]]\nuser = \"hi\"\napproval = \"maybe\"").unwrap_err();
        assert!(error.contains("maybe"), "{error}");
        assert!(
            parse("name = \"x\"\n[[agents]]\nname = \"b\"\n[[turns]]\nwait = \"2s\"\nto = \"b\"")
                .is_ok()
        );
    }

    #[test]
    fn placeholders_expand_or_are_refused() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(
            expand(r#"{"at": "{{now+90s}}", "b": {}}"#, now).unwrap(),
            r#"{"at": "2026-01-01T00:01:30Z", "b": {}}"#
        );
        assert_eq!(expand("{{ now }}", now).unwrap(), "2026-01-01T00:00:00Z");
        assert!(expand("{{later}}", now).unwrap_err().contains("unknown"));
        assert!(expand("{{now+soon}}", now).is_err());
        assert!(expand("{{now", now).is_err());
    }
}
