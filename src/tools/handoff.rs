//! Delegation tools. The owner: `handoff_task` (create a contract and wait for its outcome),
//! `handoff_status`, `handoff_cancel`, and `spawn_subagent` (a child run of the same agent for an
//! independent piece of work). The delegate: `handoff_progress` and `handoff_return`.
//!
//! `spawn_subagent` is a contract whose delegate is the agent itself, at most
//! [`SUBAGENT_CONCURRENCY`] (4) at once per agent. A contract may list the only tools its
//! delegate may use (`handoff_task`'s `tools`): in that conversation the dispatcher's policy
//! lookup turns the list into a deny rule (source `contract:<id>`), so the gate refuses the
//! others and records why. The result enters the owner's run as data (a tool result).
//!
//! Delegating changes nothing outside the daemon by itself (the delegate's own tools pass its own
//! policy gate), so these are reads for the gate (L0). A delegate — any run in a `handoff:`
//! conversation — cannot delegate or spawn sub-agents (no recursion).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::domain::ChatKind;
use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::protocol::CallError;
use crate::protocol::handoff::{HandoffError, Handoffs, NewContract};
use crate::store::handoff::{self as queries, ContractStatus};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// How long `handoff_task` waits by default before leaving the result to arrive later.
const DEFAULT_WAIT: Duration = Duration::from_secs(300);
const MAX_WAIT: Duration = Duration::from_secs(1_800);
const DEFAULT_DEADLINE_MINUTES: u64 = 30;
/// Sub-agents of one agent running at once.
pub const SUBAGENT_CONCURRENCY: usize = 4;

/// The tools' words for a handoff service that could not help (a refusal is the model's to fix).
fn tool_error(error: HandoffError) -> ToolError {
    match error {
        HandoffError::Unavailable(CallError::NotRunning { .. }) => {
            ToolError::Failed("delegation is not running right now".into())
        }
        HandoffError::Unavailable(CallError::NoAnswer { .. }) => {
            ToolError::Failed("delegation did not answer".into())
        }
        HandoffError::Refused(reason) => ToolError::Refused(reason),
    }
}

fn in_handoff(ctx: &ToolContext) -> bool {
    ctx.chat.kind() == ChatKind::Handoff
}

/// The contract id of a delegate's conversation (`handoff:h-xxxx`).
fn own_contract(ctx: &ToolContext) -> Result<String, ToolError> {
    ctx.chat
        .handoff_contract()
        .map(str::to_string)
        .ok_or_else(|| {
            ToolError::Refused("only a delegate working on a handoff contract can use this".into())
        })
}

fn read_only(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        description: description.into(),
        parameters,
    }
}

/// Creates a contract and waits for its outcome; shared by `handoff_task` and `spawn_subagent`.
async fn delegate_and_wait(
    ctx: &ToolContext,
    request: NewContract,
    wait: Duration,
) -> Result<ToolOutput, ToolError> {
    if in_handoff(ctx) {
        return Err(ToolError::Refused(
            "a delegate cannot delegate further or spawn sub-agents: finish your task and answer with its result"
                .into(),
        ));
    }
    let handoffs = Handoffs::new(&ctx.registry);
    let id = handoffs.create(request).await.map_err(tool_error)?;
    match handoffs.wait(&id, wait).await {
        Ok(outcome) => Ok(ToolOutput {
            text: outcome.as_data(),
            is_error: outcome.status != ContractStatus::Returned,
        }),
        Err(_) => Ok(ToolOutput::ok(format!(
            "Contract {id} is still in progress. Its result will be added to this conversation \
             when it returns; tell the user it is being worked on."
        ))),
    }
}

/// `handoff_task`.
pub struct HandoffTaskTool;

const TASK_FIELDS: &[&str] = &[
    "tools",
    "agent",
    "task",
    "expected",
    "validator",
    "deadline_minutes",
    "wait_seconds",
];

impl Tool for HandoffTaskTool {
    fn name(&self) -> &str {
        "handoff_task"
    }

    fn spec(&self) -> ToolSpec {
        read_only(
            "handoff_task",
            "Delegate a subtask to another agent and wait for its result (returned to you as data; \
             you still answer the user yourself). Optionally a validator agent reviews the work.",
            json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "description": "The delegate's name."},
                    "task": {"type": "string", "description": "The subtask, self-contained."},
                    "expected": {"type": "string", "description": "The shape of the expected output."},
                    "validator": {"type": "string", "description": "An agent that reviews the work (optional)."},
                    "tools": {"type": "array", "items": {"type": "string"}, "description": "Limit the delegate to these of its tools (optional)."},
                    "deadline_minutes": {"type": "integer", "description": "Default 30."},
                    "wait_seconds": {"type": "integer", "description": "How long to wait here (default 300); after that the result arrives later."}
                },
                "required": ["agent", "task"],
                "additionalProperties": false
            }),
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(
            RiskLevel::L0,
            "delegates within the daemon; the delegate's tools pass its own gate",
        )
    }

    fn describe_call(&self, args: &Value) -> String {
        format!(
            "handoff_task to {}: {}",
            args.get("agent").and_then(Value::as_str).unwrap_or("?"),
            args.get("task")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(120)
                .collect::<String>()
        )
    }

    fn target(&self, args: &Value) -> String {
        args.get("agent")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    fn timeout(&self) -> Duration {
        MAX_WAIT + Duration::from_secs(30)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("handoff_task", &args, TASK_FIELDS)?;
            let request = NewContract {
                owner: ctx.agent.clone(),
                owner_chat: ctx.chat.as_str().to_string(),
                owner_run_id: Some(ctx.run_id),
                delegate: parsed.required_str("agent")?.trim().to_string(),
                subtask: parsed.required_str("task")?.to_string(),
                expected: parsed.optional_str("expected")?.unwrap_or("").to_string(),
                validator: parsed
                    .optional_str("validator")?
                    .map(str::trim)
                    .filter(|name| !name.is_empty())
                    .map(str::to_string),
                tools: match args.get("tools") {
                    None | Some(Value::Null) => None,
                    Some(Value::Array(items)) => Some(
                        items
                            .iter()
                            .map(|item| {
                                item.as_str().map(str::to_string).ok_or_else(|| {
                                    ToolError::InvalidArguments(
                                        "handoff_task: `tools` must be a list of tool names".into(),
                                    )
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    Some(_) => {
                        return Err(ToolError::InvalidArguments(
                            "handoff_task: `tools` must be a list of tool names".into(),
                        ));
                    }
                },
                deadline: Duration::from_secs(
                    parsed
                        .optional_u64("deadline_minutes")?
                        .unwrap_or(DEFAULT_DEADLINE_MINUTES)
                        .clamp(1, 7 * 24 * 60)
                        * 60,
                ),
            };
            let wait = parsed
                .optional_u64("wait_seconds")?
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_WAIT)
                .min(MAX_WAIT);
            delegate_and_wait(ctx, request, wait).await
        })
    }
}

/// `spawn_subagent`: the same agent, on an independent piece of work, in parallel.
pub struct SpawnSubagentTool {
    running: Arc<Semaphore>,
}

impl SpawnSubagentTool {
    pub fn new() -> SpawnSubagentTool {
        SpawnSubagentTool {
            running: Arc::new(Semaphore::new(SUBAGENT_CONCURRENCY)),
        }
    }
}

impl Default for SpawnSubagentTool {
    fn default() -> Self {
        SpawnSubagentTool::new()
    }
}

impl Tool for SpawnSubagentTool {
    fn name(&self) -> &str {
        "spawn_subagent"
    }

    fn spec(&self) -> ToolSpec {
        read_only(
            "spawn_subagent",
            "Run an independent piece of work in a sub-agent (yourself, in a separate conversation) \
             and get its result. Several calls in one answer run in parallel (at most 4 at once). \
             Sub-agents cannot spawn sub-agents.",
            json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string"},
                    "timeout_seconds": {"type": "integer", "description": "Default 300."}
                },
                "required": ["task"],
                "additionalProperties": false
            }),
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "a child run of the same agent")
    }

    fn describe_call(&self, args: &Value) -> String {
        format!(
            "spawn_subagent: {}",
            args.get("task")
                .and_then(Value::as_str)
                .unwrap_or("")
                .chars()
                .take(120)
                .collect::<String>()
        )
    }

    fn target(&self, _args: &Value) -> String {
        "self".into()
    }

    fn timeout(&self) -> Duration {
        MAX_WAIT + Duration::from_secs(30)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("spawn_subagent", &args, &["task", "timeout_seconds"])?;
            let task = parsed.required_str("task")?.to_string();
            let wait = parsed
                .optional_u64("timeout_seconds")?
                .map(Duration::from_secs)
                .unwrap_or(DEFAULT_WAIT)
                .min(MAX_WAIT);
            if in_handoff(ctx) {
                return Err(ToolError::Refused(
                    "sub-agents cannot spawn sub-agents".into(),
                ));
            }
            let _permit = self
                .running
                .acquire()
                .await
                .map_err(|_| ToolError::Cancelled)?;
            let request = NewContract {
                owner: ctx.agent.clone(),
                owner_chat: ctx.chat.as_str().to_string(),
                owner_run_id: Some(ctx.run_id),
                delegate: ctx.agent.clone(),
                subtask: task,
                expected: String::new(),
                validator: None,
                tools: None,
                deadline: wait + Duration::from_secs(60),
            };
            delegate_and_wait(ctx, request, wait).await
        })
    }
}

/// The schema of the tools that take one contract id.
fn contract_id_spec(name: &str, description: &str) -> ToolSpec {
    read_only(
        name,
        description,
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"], "additionalProperties": false}),
    )
}

/// The `id` argument as given (for descriptions and grant targets; `call` checks it).
fn contract_id_arg(args: &Value) -> &str {
    args.get("id").and_then(Value::as_str).unwrap_or("")
}

/// `handoff_status`.
pub struct HandoffStatusTool;

impl Tool for HandoffStatusTool {
    fn name(&self) -> &str {
        "handoff_status"
    }

    fn spec(&self) -> ToolSpec {
        contract_id_spec(
            "handoff_status",
            "The status and timeline of a contract you created.",
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "reads a contract")
    }

    fn describe_call(&self, args: &Value) -> String {
        format!("handoff_status: {}", contract_id_arg(args))
    }

    fn target(&self, args: &Value) -> String {
        contract_id_arg(args).to_string()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("handoff_status", &args, &["id"])?;
            let id = parsed.required_str("id")?.trim().to_string();
            let lookup = id.clone();
            let (row, timeline) = ctx
                .store
                .read(move |conn| {
                    Ok((
                        queries::get(conn, &lookup)?,
                        queries::timeline_of(conn, &lookup)?,
                    ))
                })
                .await
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            let Some(row) = row.filter(|row| row.owner == ctx.agent || row.delegate == ctx.agent)
            else {
                return Err(ToolError::Failed(format!("no contract {id} of yours")));
            };
            let mut text = format!(
                "Contract {} to {}: {} (attempts {})\n",
                row.id, row.delegate, row.status, row.attempts
            );
            for (_, kind, detail) in timeline {
                text.push_str(&format!(
                    "- {kind}: {}\n",
                    detail.chars().take(200).collect::<String>()
                ));
            }
            Ok(ToolOutput::ok(text))
        })
    }
}

/// `handoff_cancel`.
pub struct HandoffCancelTool;

impl Tool for HandoffCancelTool {
    fn name(&self) -> &str {
        "handoff_cancel"
    }

    fn spec(&self) -> ToolSpec {
        contract_id_spec(
            "handoff_cancel",
            "Cancel a contract you created; the delegate's work is stopped.",
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "stops the agent's own delegation")
    }

    fn describe_call(&self, args: &Value) -> String {
        format!("handoff_cancel: {}", contract_id_arg(args))
    }

    fn target(&self, args: &Value) -> String {
        contract_id_arg(args).to_string()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("handoff_cancel", &args, &["id"])?;
            let id = parsed.required_str("id")?.trim().to_string();
            let lookup = id.clone();
            let row = ctx
                .store
                .read(move |conn| queries::get(conn, &lookup))
                .await
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            if row.is_none_or(|row| row.owner != ctx.agent) {
                return Err(ToolError::Refused(format!("contract {id} is not yours")));
            }
            Handoffs::new(&ctx.registry)
                .cancel(&id, &format!("agent:{}", ctx.agent))
                .await
                .map_err(|error| match error {
                    HandoffError::Refused(reason) => ToolError::Failed(reason),
                    other => tool_error(other),
                })?;
            Ok(ToolOutput::ok(format!("Contract {id} cancelled.")))
        })
    }
}

/// `handoff_progress` (delegate).
pub struct HandoffProgressTool;

impl Tool for HandoffProgressTool {
    fn name(&self) -> &str {
        "handoff_progress"
    }

    fn spec(&self) -> ToolSpec {
        read_only(
            "handoff_progress",
            "As a delegate: record a progress note on your contract (the owner sees it).",
            json!({"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"], "additionalProperties": false}),
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "a note on the delegate's own contract")
    }

    fn describe_call(&self, _args: &Value) -> String {
        "handoff_progress".into()
    }

    fn target(&self, _args: &Value) -> String {
        "contract".into()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("handoff_progress", &args, &["note"])?;
            let note = parsed.required_str("note")?.chars().take(2_000).collect();
            let id = own_contract(ctx)?;
            Handoffs::new(&ctx.registry)
                .progress(&id, note)
                .map_err(|_| ToolError::Failed("delegation is not running".into()))?;
            Ok(ToolOutput::ok("Noted."))
        })
    }
}

/// `handoff_return` (delegate).
pub struct HandoffReturnTool;

impl Tool for HandoffReturnTool {
    fn name(&self) -> &str {
        "handoff_return"
    }

    fn spec(&self) -> ToolSpec {
        read_only(
            "handoff_return",
            "As a delegate: give the result of your contract explicitly (otherwise your final answer is the result).",
            json!({"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"], "additionalProperties": false}),
        )
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "the delegate's own result")
    }

    fn describe_call(&self, _args: &Value) -> String {
        "handoff_return".into()
    }

    fn target(&self, _args: &Value) -> String {
        "contract".into()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("handoff_return", &args, &["result"])?;
            let result = parsed.required_str("result")?.to_string();
            let id = own_contract(ctx)?;
            Handoffs::new(&ctx.registry)
                .return_result(&id, result)
                .map_err(|_| ToolError::Failed("delegation is not running".into()))?;
            Ok(ToolOutput::ok(
                "Result recorded; finish with a short final answer.",
            ))
        })
    }
}
