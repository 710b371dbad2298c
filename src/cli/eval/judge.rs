//! Judging a turn: every way what the chat showed and the database recorded differs from what
//! the turn expects.

use std::path::Path;

use super::scenario::Expect;

/// What a chat showed during one turn.
#[derive(Debug, Default)]
pub(super) struct Heard {
    pub(super) text: String,
    pub(super) run_id: Option<i64>,
    pub(super) notices: Vec<String>,
    /// Telegram turns: the kinds of files the bot sent (`photo`, `document`, `voice`), in order.
    pub(super) sent_files: Vec<String>,
}

/// What the database recorded, read after a turn.
#[derive(Debug, Default)]
pub(super) struct Recorded {
    pub(super) run: Option<crate::store::runs::RunRow>,
    /// Tools that ran in the turn's run.
    pub(super) ran: Vec<String>,
    pub(super) tool_results: Vec<String>,
    pub(super) recap: bool,
    pub(super) approvals: Vec<String>,
    pub(super) jobs: Vec<String>,
    pub(super) job_runs: Vec<String>,
    pub(super) handoffs: Vec<String>,
    pub(super) trigger_deliveries: Vec<String>,
    pub(super) memories: Vec<String>,
}

fn contains(haystack: &str, needle: &str) -> bool {
    haystack.to_lowercase().contains(&needle.to_lowercase())
}

/// Every way the turn's outcome differs from what it expects.
pub(super) fn judge(
    expect: &Expect,
    heard: &Heard,
    recorded: &Recorded,
    model_calls: Option<u64>,
    workspace: &Path,
) -> Vec<String> {
    let mut failures = Vec::new();
    judge_chat(expect, heard, &mut failures);
    judge_run(expect, heard, recorded, &mut failures);
    if let (Some(limit), Some(calls)) = (expect.max_model_calls, model_calls)
        && calls > u64::from(limit)
    {
        failures.push(format!("{calls} model calls, at most {limit} expected"));
    }
    judge_records(expect, recorded, &mut failures);
    judge_files(expect, workspace, &mut failures);
    if let Some(kinds) = &expect.sent_files
        && *kinds != heard.sent_files
    {
        failures.push(format!(
            "the bot sent the files {:?}, expected {kinds:?}",
            heard.sent_files
        ));
    }
    failures
}

/// The reply's text and the notices shown before it.
fn judge_chat(expect: &Expect, heard: &Heard, failures: &mut Vec<String>) {
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
}

/// The turn's run: recorded when the turn expects one, with the status, tools, tool output and
/// compaction expected.
fn judge_run(expect: &Expect, heard: &Heard, recorded: &Recorded, failures: &mut Vec<String>) {
    let wants_run = expect.status.is_some()
        || expect.compacted.is_some()
        || !expect.tools.is_empty()
        || !expect.tools_not_run.is_empty()
        || !expect.tool_output_contains.is_empty();
    let Some(run) = &recorded.run else {
        if wants_run {
            failures.push(match heard.run_id {
                Some(run_id) => format!("run {run_id} is not recorded"),
                None => "the answer has no run, but the turn expects one".to_string(),
            });
        }
        return;
    };
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
    for needle in &expect.model_never_saw {
        let seen = recorded.tool_results.iter().any(|r| contains(r, needle))
            || contains(&heard.text, needle);
        if seen {
            failures.push(format!(
                "`{needle}` reached the model (in a tool result or the reply)"
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

/// The scenario's approvals, jobs, job runs, hand-offs, webhook deliveries and memories so far.
fn judge_records(expect: &Expect, recorded: &Recorded, failures: &mut Vec<String>) {
    for (what, expected, actual) in [
        ("approvals", &expect.approvals, &recorded.approvals),
        ("jobs", &expect.jobs, &recorded.jobs),
        ("job_runs", &expect.job_runs, &recorded.job_runs),
        ("handoffs", &expect.handoffs, &recorded.handoffs),
        (
            "trigger_deliveries",
            &expect.trigger_deliveries,
            &recorded.trigger_deliveries,
        ),
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
}

/// The workspace's files: those expected hold their text, those expected absent are.
fn judge_files(expect: &Expect, workspace: &Path, failures: &mut Vec<String>) {
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
}
