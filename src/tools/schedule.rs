//! The schedule tools: `schedule_task`, `list_tasks`, `get_task`, `update_task`, `pause_task`,
//! `resume_task`, `cancel_task` and `preview_schedule`.
//!
//! They are published by the Scheduler to the agents whose file lists them, and talk to it by
//! its handle (`protocol::scheduler::Scheduler`), always scoped to the calling agent: an agent sees and changes only
//! its own tasks. A new task's answers go to the conversation it was created in (or nowhere,
//! `deliver = "silent"`). The model turns "every Monday at 9" into an expression; the tools answer
//! with the described schedule and the next fire times so the model can confirm them to the user.
//!
//! Reading tasks and previewing schedules is read-only (L0); creating and changing tasks is a
//! write at L1 (it makes the agent act later, but only as itself and towards its own chats).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::domain::{ChatKey, ChatKind};
use crate::jobs::{JobChange, JobScope, JobView, NewJob, PREVIEW_COUNT};
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::protocol::CallError;
use crate::protocol::scheduler::{Scheduler, SchedulerError};
use crate::schedule::format::format_local;
use crate::schedule::{MAX_PREVIEW, ScheduleSpec, parse_timezone};
use crate::store::schedules::{JobRunRow, JobRunStatus};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// Every tool name of this module, as agent files list them.
pub const TOOL_NAMES: [&str; 8] = [
    "schedule_task",
    "list_tasks",
    "get_task",
    "update_task",
    "pause_task",
    "resume_task",
    "cancel_task",
    "preview_schedule",
];

/// How long a tool waits for the scheduler's answer.
const CALL_TIMEOUT_MS: u64 = 10_000;

/// The schedule tools named in `listed` (an agent file's `tools`), in [`TOOL_NAMES`] order.
pub fn tools_for(listed: &[String]) -> Vec<Arc<dyn Tool>> {
    TOOL_NAMES
        .iter()
        .filter(|name| listed.iter().any(|listed| listed == *name))
        .map(|name| {
            Arc::new(ScheduleTool {
                kind: kind_of(name),
            }) as Arc<dyn Tool>
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Schedule,
    List,
    Get,
    Update,
    Pause,
    Resume,
    Cancel,
    Preview,
}

fn kind_of(name: &str) -> Kind {
    match name {
        "schedule_task" => Kind::Schedule,
        "list_tasks" => Kind::List,
        "get_task" => Kind::Get,
        "update_task" => Kind::Update,
        "pause_task" => Kind::Pause,
        "resume_task" => Kind::Resume,
        "cancel_task" => Kind::Cancel,
        _ => Kind::Preview,
    }
}

/// One of the schedule tools.
pub struct ScheduleTool {
    kind: Kind,
}

const SCHEDULE_FIELDS: &[&str] = &[
    "name", "prompt", "kind", "schedule", "timezone", "missed", "deliver",
];
const UPDATE_FIELDS: &[&str] = &[
    "id", "name", "prompt", "kind", "schedule", "timezone", "missed", "deliver",
];
const ID_FIELDS: &[&str] = &["id"];
const GET_FIELDS: &[&str] = &["id", "history"];
const LIST_FIELDS: &[&str] = &["include_finished"];
const PREVIEW_FIELDS: &[&str] = &["kind", "schedule", "timezone", "count"];

fn schedule_properties() -> Value {
    json!({
        "kind": {
            "type": "string",
            "enum": ["cron", "every", "at"],
            "description": "cron: a crontab expression; every: a fixed interval; at: once."
        },
        "schedule": {
            "type": "string",
            "description": "cron: 5 fields `minute hour day-of-month month day-of-week` (0 or 7 = Sunday, names like MON-FRI allowed, e.g. `0 9 * * 1-5`), 6 with leading seconds, or @daily/@weekly/@hourly; every: a duration such as `15m`, `2h`, `1d`; at: `2026-12-01 09:00` (local time in `timezone`) or RFC 3339 with an offset."
        },
        "timezone": {
            "type": "string",
            "description": "IANA timezone for cron and local `at` times, e.g. `Europe/Berlin` (default: the conversation's time zone, stated in your instructions)."
        },
        "missed": {
            "type": "string",
            "description": "What to do with runs due while the daemon was down: `run_once` (default: run the latest once), `skip`, or `catch_up` (optionally `catch_up max_runs=3 window=24h`)."
        },
        "deliver": {
            "type": "string",
            "enum": ["here", "silent"],
            "description": "here (default): answers go to this conversation; silent: answers are only recorded."
        },
        "name": {"type": "string", "description": "A short label for the task."},
        "prompt": {
            "type": "string",
            "description": "The instruction you will receive at each run, written to yourself (e.g. `Summarise today's calendar for the user`)."
        }
    })
}

fn id_schema(description: &str) -> Value {
    json!({
        "type": "object",
        "properties": {"id": {"type": "integer", "description": description}},
        "required": ["id"],
        "additionalProperties": false
    })
}

impl Tool for ScheduleTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Schedule => "schedule_task",
            Kind::List => "list_tasks",
            Kind::Get => "get_task",
            Kind::Update => "update_task",
            Kind::Pause => "pause_task",
            Kind::Resume => "resume_task",
            Kind::Cancel => "cancel_task",
            Kind::Preview => "preview_schedule",
        }
    }

    fn spec(&self) -> ToolSpec {
        let (description, parameters) = match self.kind {
            Kind::Schedule => (
                "Schedule a task: at the given times you receive `prompt` in a separate \
                 conversation, and your answer is sent to this conversation. Turn the user's \
                 words into kind + schedule yourself (\"every Monday at 9\" = cron `0 9 * * 1`), \
                 then confirm the returned next run times to the user.",
                {
                    let mut parameters = json!({
                        "type": "object",
                        "properties": schedule_properties(),
                        "required": ["prompt", "kind", "schedule"],
                        "additionalProperties": false
                    });
                    parameters["properties"]["kind"]["description"] =
                        json!("cron: a crontab expression; every: a fixed interval; at: once.");
                    parameters
                },
            ),
            Kind::Update => (
                "Change one of your scheduled tasks (only the fields given change). A new \
                 schedule takes effect at once; the answer lists the next run times.",
                {
                    let mut properties = schedule_properties();
                    properties["id"] = json!({"type": "integer", "description": "The task's id."});
                    json!({
                        "type": "object",
                        "properties": properties,
                        "required": ["id"],
                        "additionalProperties": false
                    })
                },
            ),
            Kind::List => (
                "List your scheduled tasks with their schedules, next runs and last outcomes.",
                json!({
                    "type": "object",
                    "properties": {
                        "include_finished": {"type": "boolean", "description": "Also list done and cancelled tasks."}
                    },
                    "additionalProperties": false
                }),
            ),
            Kind::Get => (
                "Show one of your scheduled tasks with its run history (ran, failed, missed, \
                 skipped, caught up).",
                json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "description": "The task's id."},
                        "history": {"type": "integer", "description": "How many history entries (default 10)."}
                    },
                    "required": ["id"],
                    "additionalProperties": false
                }),
            ),
            Kind::Pause => (
                "Pause one of your scheduled tasks: it does not run until resumed.",
                id_schema("The task's id."),
            ),
            Kind::Resume => (
                "Resume a paused task: it runs again from its next scheduled time.",
                id_schema("The task's id."),
            ),
            Kind::Cancel => (
                "Cancel one of your scheduled tasks for good (its history is kept).",
                id_schema("The task's id."),
            ),
            Kind::Preview => (
                "Preview when a schedule would run (the next times), without creating anything.",
                json!({
                    "type": "object",
                    "properties": {
                        "kind": schedule_properties()["kind"].clone(),
                        "schedule": schedule_properties()["schedule"].clone(),
                        "timezone": schedule_properties()["timezone"].clone(),
                        "count": {"type": "integer", "description": "How many times (default 5, at most 50)."}
                    },
                    "required": ["kind", "schedule"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.name().to_string(),
            description: description.to_string(),
            parameters,
        }
    }

    fn may_write_workspace(
        &self,
        _args: &Value,
        _effect: Effect,
        _assessment: &Assessment,
    ) -> bool {
        // Scheduled tasks live in the database, not in the workspace.
        false
    }

    fn effect(&self) -> Effect {
        match self.kind {
            Kind::List | Kind::Get | Kind::Preview => Effect::ReadOnly,
            _ => Effect::Write,
        }
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        match self.kind {
            Kind::List | Kind::Get | Kind::Preview => {
                Assessment::new(RiskLevel::L0, "reads the agent's own scheduled tasks")
            }
            _ => Assessment::new(
                RiskLevel::L1,
                "changes the agent's own scheduled tasks (it will act later, as itself)",
            ),
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        let field = |name: &str| {
            args.get(name).map(|value| match value {
                Value::String(text) => text.chars().take(80).collect::<String>(),
                other => other.to_string(),
            })
        };
        match self.kind {
            Kind::Schedule | Kind::Preview => format!(
                "{}: {} `{}` ({})",
                self.name(),
                field("kind").unwrap_or_default(),
                field("schedule").unwrap_or_default(),
                field("timezone").unwrap_or_else(|| "the conversation's zone".into())
            ),
            Kind::List => self.name().to_string(),
            _ => format!("{} #{}", self.name(), field("id").unwrap_or_default()),
        }
    }

    fn target(&self, args: &Value) -> String {
        match self.kind {
            Kind::Schedule | Kind::List | Kind::Preview => "tasks".to_string(),
            _ => args
                .get("id")
                .map(|id| format!("task #{id}"))
                .unwrap_or_else(|| "tasks".into()),
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(CALL_TIMEOUT_MS + 2_000)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            match self.kind {
                Kind::Preview => preview(&args, ctx.timezone),
                Kind::Schedule => schedule(&args, ctx).await,
                Kind::List => list(&args, ctx).await,
                Kind::Get => get(&args, ctx).await,
                Kind::Update => update(&args, ctx).await,
                Kind::Pause | Kind::Resume | Kind::Cancel => self.change_state(&args, ctx).await,
            }
        })
    }
}

impl ScheduleTool {
    async fn change_state(&self, args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let name = self.name();
        let parsed = Args::parse(name, args, ID_FIELDS)?;
        let id = required_id(name, &parsed)?;
        let scheduler = Scheduler::new(&ctx.registry);
        let scope = JobScope::Agent(ctx.agent.clone());
        let result = match self.kind {
            Kind::Cancel => scheduler.cancel(scope, id).await,
            _ => {
                scheduler
                    .set_paused(scope, id, self.kind == Kind::Pause)
                    .await
            }
        };
        let view = answer(result)?;
        let verb = match self.kind {
            Kind::Pause => "Paused",
            Kind::Resume => "Resumed",
            _ => "Cancelled",
        };
        Ok(ToolOutput::ok(format!("{verb}.\n{}", view.summary())))
    }
}

/// The scheduler's answer, or the tool error that explains it.
fn answer<T>(result: Result<T, SchedulerError>) -> Result<T, ToolError> {
    match result {
        Ok(value) => Ok(value),
        Err(SchedulerError::Refused(reason)) => Err(ToolError::Refused(reason)),
        Err(SchedulerError::Unavailable(CallError::NotRunning { .. })) => Err(ToolError::Failed(
            "the scheduler is not running; try again later".into(),
        )),
        Err(error) => Err(ToolError::Failed(error.to_string())),
    }
}

fn required_id(tool: &str, parsed: &Args<'_>) -> Result<i64, ToolError> {
    parsed
        .optional_u64("id")?
        .and_then(|id| i64::try_from(id).ok())
        .ok_or_else(|| {
            ToolError::InvalidArguments(format!(
                "{tool}: `id` is required (a task id from list_tasks)"
            ))
        })
}

/// Where a new task's answers go: this conversation, or nowhere.
fn target(tool: &str, parsed: &Args<'_>, ctx: &ToolContext) -> Result<Option<ChatKey>, ToolError> {
    match parsed.choice("deliver", &["here", "silent"], "here")? {
        "silent" => Ok(None),
        _ => match ctx.chat.kind() {
            ChatKind::Telegram | ChatKind::WhatsApp | ChatKind::Signal | ChatKind::Local => {
                Ok(Some(ctx.chat.clone()))
            }
            ChatKind::Schedule | ChatKind::Handoff | ChatKind::Trigger => {
                Err(ToolError::InvalidArguments(format!(
                    "{tool}: this run is not in a conversation with a person; use `deliver = \"silent\"`"
                )))
            }
        },
    }
}

fn confirmation(verb: &str, view: &JobView) -> String {
    format!(
        "{verb} task #{}.\n{}\nConfirm the schedule and the next run times to the user.",
        view.id,
        view.summary()
    )
}

async fn schedule(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let parsed = Args::parse("schedule_task", args, SCHEDULE_FIELDS)?;
    let new_job = NewJob {
        agent: ctx.agent.clone(),
        name: parsed.optional_str("name")?.unwrap_or_default().to_string(),
        prompt: parsed.required_str("prompt")?.to_string(),
        target: target("schedule_task", &parsed, ctx)?,
        kind: parsed.required_str("kind")?.to_string(),
        expression: parsed.required_str("schedule")?.to_string(),
        // Without a zone the job lives in the conversation's; it is stored with the job.
        timezone: parsed
            .optional_str("timezone")?
            .filter(|name| !name.trim().is_empty())
            .unwrap_or(ctx.timezone.name())
            .to_string(),
        missed_policy: parsed
            .optional_str("missed")?
            .unwrap_or_default()
            .to_string(),
        created_by: "agent".to_string(),
        created_in: Some(ctx.chat.clone()),
    };
    let view = answer(Scheduler::new(&ctx.registry).create(new_job).await)?;
    Ok(ToolOutput::ok(confirmation("Scheduled", &view)))
}

async fn list(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let parsed = Args::parse("list_tasks", args, LIST_FIELDS)?;
    let include_finished = match args.get("include_finished") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(ToolError::InvalidArguments(
                "list_tasks: `include_finished` must be true or false".into(),
            ));
        }
    };
    let _ = parsed;
    let scope = JobScope::Agent(ctx.agent.clone());
    let views = answer(
        Scheduler::new(&ctx.registry)
            .list(scope, include_finished)
            .await,
    )?;
    if views.is_empty() {
        return Ok(ToolOutput::ok("You have no scheduled tasks."));
    }
    let text: Vec<String> = views.iter().map(JobView::summary).collect();
    Ok(ToolOutput::ok(text.join("\n\n")))
}

async fn get(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let parsed = Args::parse("get_task", args, GET_FIELDS)?;
    let id = required_id("get_task", &parsed)?;
    let history = parsed
        .optional_u64("history")?
        .map_or(10, |count| count.clamp(1, 100) as u32);
    let scope = JobScope::Agent(ctx.agent.clone());
    let (view, runs) = answer(Scheduler::new(&ctx.registry).get(scope, id, history).await)?;
    let zone = parse_timezone(&view.timezone).unwrap_or(chrono_tz::Tz::UTC);
    let mut lines = vec![view.summary(), "History (newest first):".to_string()];
    if runs.is_empty() {
        lines.push("  nothing yet".to_string());
    }
    lines.extend(runs.iter().map(|run| history_line(run, zone)));
    Ok(ToolOutput::ok(lines.join("\n")))
}

/// One history entry: "2026-01-05 09:00 … succeeded (attempt 1): <answer>".
fn history_line(run: &JobRunRow, zone: chrono_tz::Tz) -> String {
    let what = match (run.status, run.trigger.as_str()) {
        (JobRunStatus::Missed | JobRunStatus::Skipped, _) => format!(
            "{} ({} fire time(s))",
            run.status,
            run.missed_count.unwrap_or(1)
        ),
        (status, "caught_up") => format!("{status}, caught up late"),
        (status, "retry") => format!("{status}, retry (attempt {})", run.attempt),
        (status, _) => status.to_string(),
    };
    let detail = run
        .detail
        .as_deref()
        .map(|detail| format!(": {}", detail.chars().take(200).collect::<String>()))
        .unwrap_or_default();
    format!("  {} {what}{detail}", format_local(run.fire_ms, zone))
}

async fn update(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let parsed = Args::parse("update_task", args, UPDATE_FIELDS)?;
    let id = required_id("update_task", &parsed)?;
    let owned = |value: Option<&str>| value.map(str::to_string);
    let target = match parsed.optional_str("deliver")? {
        None => None,
        Some(_) => Some(target("update_task", &parsed, ctx)?),
    };
    let change = JobChange {
        name: owned(parsed.optional_str("name")?),
        prompt: owned(parsed.optional_str("prompt")?),
        kind: owned(parsed.optional_str("kind")?),
        expression: owned(parsed.optional_str("schedule")?),
        // An empty zone leaves the task's zone as it is.
        timezone: owned(
            parsed
                .optional_str("timezone")?
                .filter(|zone| !zone.trim().is_empty()),
        ),
        missed_policy: owned(parsed.optional_str("missed")?),
        target,
    };
    if change == JobChange::default() {
        return Err(ToolError::InvalidArguments(
            "update_task: give at least one field to change besides `id`".into(),
        ));
    }
    let scope = JobScope::Agent(ctx.agent.clone());
    let view = answer(
        Scheduler::new(&ctx.registry)
            .update(scope, id, change)
            .await,
    )?;
    Ok(ToolOutput::ok(confirmation("Updated", &view)))
}

fn preview(args: &Value, default_zone: chrono_tz::Tz) -> Result<ToolOutput, ToolError> {
    let parsed = Args::parse("preview_schedule", args, PREVIEW_FIELDS)?;
    let kind = parsed.required_str("kind")?;
    let expression = parsed.required_str("schedule")?;
    let timezone = parsed
        .optional_str("timezone")?
        .filter(|name| !name.trim().is_empty())
        .unwrap_or(default_zone.name());
    let count = parsed
        .optional_u64("count")?
        .map_or(PREVIEW_COUNT, |count| {
            (count as usize).clamp(1, 50.min(MAX_PREVIEW))
        });
    let now = chrono::Utc::now();
    let spec = ScheduleSpec::parse(kind, expression, timezone, now)
        .map_err(|error| ToolError::InvalidArguments(format!("preview_schedule: {error}")))?;
    let zone = parse_timezone(timezone).unwrap_or(default_zone);
    let times: Vec<String> = spec
        .preview(now, count)
        .into_iter()
        .map(|time| format!("  {}", format_local(time.timestamp_millis(), zone)))
        .collect();
    if times.is_empty() {
        return Ok(ToolOutput::ok(format!(
            "{}: it would not run again after now.",
            spec.describe_in(zone)
        )));
    }
    Ok(ToolOutput::ok(format!(
        "{}\nNext runs:\n{}",
        spec.describe_in(zone),
        times.join("\n")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_published_only_when_listed_and_declare_their_effect() {
        let listed = vec![
            "list_tasks".to_string(),
            "schedule_task".to_string(),
            "shell".into(),
        ];
        let tools = tools_for(&listed);
        let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
        assert_eq!(names, ["schedule_task", "list_tasks"]);
        assert_eq!(tools[0].effect(), Effect::Write);
        assert_eq!(tools[1].effect(), Effect::ReadOnly);
        for name in TOOL_NAMES {
            let tool = ScheduleTool {
                kind: kind_of(name),
            };
            assert_eq!(tool.name(), name);
            assert_eq!(tool.spec().name, name);
        }
    }

    #[test]
    fn preview_answers_with_times_and_refuses_bad_input_with_the_reason() {
        let utc = chrono_tz::Tz::UTC;
        let ok = preview(&json!({"kind": "cron", "schedule": "0 9 * * MON-FRI", "timezone": "Europe/Berlin", "count": 3}), utc)
            .unwrap();
        assert_eq!(ok.text.lines().count(), 5, "{}", ok.text);
        let cases = [
            (json!({"kind": "cron", "schedule": "0 25 * * *"}), "hour"),
            (
                json!({"kind": "cron", "schedule": "0 9 * * *", "timezone": "Nowhere/Land"}),
                "unknown timezone",
            ),
            (json!({"kind": "cron"}), "`schedule` is required"),
            (json!({"kind": "every", "schedule": "soon"}), "interval"),
            (json!("0 9 * * *"), "must be a JSON object"),
        ];
        for (args, expected) in cases {
            let error = preview(&args, utc).unwrap_err().to_string();
            assert!(error.contains(expected), "{args}: {error}");
        }
    }

    #[test]
    fn a_time_without_a_zone_is_read_in_the_conversations_zone() {
        let args = json!({"kind": "at", "schedule": "2099-01-15 09:00"});
        let berlin = preview(&args, chrono_tz::Tz::Europe__Berlin).unwrap().text;
        assert!(berlin.contains("2099-01-15 09:00:00 CET"), "{berlin}");
        assert!(berlin.contains("(Europe/Berlin)"), "{berlin}");
        let named = json!({"kind": "at", "schedule": "2099-07-15 09:00", "timezone": "UTC"});
        let utc = preview(&named, chrono_tz::Tz::Europe__Berlin).unwrap().text;
        assert!(utc.contains("2099-07-15 09:00:00 UTC"), "{utc}");
    }
}
