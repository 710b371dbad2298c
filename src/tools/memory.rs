//! The memory tools: `save_to_memory`, `search_memory`, `list_memory_facts`, `forget`.
//!
//! They ask the memory service through its handle (`protocol::memory::Memory`). An agent saves into its own memory by
//! default, into the platform's (read by every agent) only when asked; it reads what the read
//! model lets it read (its own, its direct reports', the platform's; private memories only in
//! their chat); it forgets (archives) only its own memories.
//!
//! Effects: reading and changing the agent's own memory stay inside the daemon (L0, free under
//! `require_approval`); writing platform memory changes what every agent reads (a write, L1).

use std::time::Duration;

use serde_json::{Value, json};

use crate::llm::ToolSpec;
use crate::policy::Effect;
use crate::policy::{Assessment, RiskLevel};
use crate::protocol::CallError;
use crate::protocol::memory::{
    Governance, Memory, MemoryError, PLATFORM, SaveOutcome, SaveRequest, SearchRequest,
};
use crate::store::memory::{self as queries, Scope};
use crate::tool::{Args, Tool, ToolContext, ToolError, ToolFuture, ToolOutput};

/// The tools' words for a memory service that could not help.
fn tool_error(error: MemoryError) -> ToolError {
    match error {
        MemoryError::Unavailable(CallError::NotRunning { .. }) => {
            ToolError::Failed("memory is not running right now; try again later".into())
        }
        MemoryError::Unavailable(CallError::NoAnswer { .. }) => {
            ToolError::Failed("memory did not answer in time; try again later".into())
        }
        MemoryError::Refused(reason) => ToolError::Failed(reason),
    }
}

/// `save_to_memory`.
pub struct SaveToMemoryTool;

const SAVE_FIELDS: &[&str] = &["text", "scope", "private", "sensitivity"];

fn platform_scope(args: &Value) -> bool {
    args.get("scope").and_then(Value::as_str) == Some("platform")
}

impl Tool for SaveToMemoryTool {
    fn name(&self) -> &str {
        "save_to_memory"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "save_to_memory".into(),
            description: "Remember a fact or note for later conversations. Save only what the user \
                          told you or asked you to remember, as one short self-contained statement \
                          (\"The user's dentist is Dr. Lee, on Tuesdays\"). Near duplicates of what \
                          you already remember are not saved again."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string", "description": "The fact, self-contained."},
                    "scope": {"type": "string", "enum": ["agent", "platform"],
                              "description": "agent (default): your memory; platform: every agent's, only when the user asks."},
                    "private": {"type": "boolean", "description": "Only recalled in this conversation (default false)."},
                    "sensitivity": {"type": "string", "enum": ["normal", "personal", "secret"],
                                    "description": "secret memories are never recalled automatically (default normal)."}
                },
                "required": ["text"],
                "additionalProperties": false
            }),
        }
    }

    fn may_write_workspace(
        &self,
        _args: &Value,
        _effect: Effect,
        _assessment: &Assessment,
    ) -> bool {
        // Memory lives in the database, not in the workspace.
        false
    }

    fn effect(&self) -> Effect {
        Effect::Write
    }

    fn effect_for(&self, args: &Value, _ctx: &ToolContext) -> Effect {
        if platform_scope(args) {
            Effect::Write
        } else {
            Effect::ReadOnly
        }
    }

    fn assess(&self, args: &Value, _ctx: &ToolContext) -> Assessment {
        if platform_scope(args) {
            Assessment::new(RiskLevel::L1, "changes what every agent remembers")
        } else {
            Assessment::new(RiskLevel::L0, "the agent's own memory")
        }
    }

    fn describe_call(&self, args: &Value) -> String {
        let text: String = args
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(160)
            .collect();
        format!("save_to_memory: {text}")
    }

    fn target(&self, args: &Value) -> String {
        if platform_scope(args) {
            PLATFORM.into()
        } else {
            "own".into()
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(40)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("save_to_memory", &args, SAVE_FIELDS)?;
            let text = parsed.required_str("text")?.to_string();
            let scope = parsed.choice("scope", &["agent", "platform"], "agent")?;
            let sensitivity =
                parsed.choice("sensitivity", &["normal", "personal", "secret"], "normal")?;
            let private = match args.get("private") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(value)) => *value,
                Some(_) => {
                    return Err(ToolError::InvalidArguments(
                        "save_to_memory: `private` must be true or false".into(),
                    ));
                }
            };
            let request = SaveRequest {
                owner: if scope == "platform" {
                    PLATFORM.into()
                } else {
                    ctx.agent.clone()
                },
                class: if private {
                    "restricted"
                } else if scope == "platform" {
                    "shared"
                } else {
                    "durable"
                }
                .into(),
                sensitivity: sensitivity.into(),
                source: "agent_saved".into(),
                chat: Some(ctx.chat.as_str().to_string()),
                text,
                run_id: Some(ctx.run_id),
                message_id: None,
            };
            let memory = Memory::new(&ctx.registry);
            let outcome = memory.save(request).await.map_err(tool_error)?;
            Ok(ToolOutput::ok(match outcome {
                SaveOutcome::Saved { id, .. } => format!("Saved as memory {id}."),
                SaveOutcome::Duplicate { of, .. } => {
                    format!("Not saved: memory {of} already says nearly the same.")
                }
            }))
        })
    }
}

/// `search_memory`.
pub struct SearchMemoryTool;

const SEARCH_FIELDS: &[&str] = &["query", "limit"];

impl Tool for SearchMemoryTool {
    fn name(&self) -> &str {
        "search_memory"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "search_memory".into(),
            description: "Search what you remember (by words and by meaning). Results show each \
                          memory's id, owner and text."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "description": "At most this many results (default 8)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "reads memory")
    }

    fn describe_call(&self, args: &Value) -> String {
        format!(
            "search_memory: {}",
            args.get("query").and_then(Value::as_str).unwrap_or("")
        )
    }

    fn target(&self, _args: &Value) -> String {
        "memory".into()
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(40)
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("search_memory", &args, SEARCH_FIELDS)?;
            let query = parsed.required_str("query")?.to_string();
            let limit = parsed.optional_u64("limit")?.unwrap_or(8).clamp(1, 50) as usize;
            let request = SearchRequest {
                agent: Some(ctx.agent.clone()),
                chat: Some(ctx.chat.as_str().to_string()),
                query,
                limit,
                include_secret: true,
            };
            let memory = Memory::new(&ctx.registry);
            let result = memory.search(request).await.map_err(tool_error)?;
            if result.hits.is_empty() {
                return Ok(ToolOutput::ok("Nothing in memory matches."));
            }
            let lines: Vec<String> = result
                .hits
                .iter()
                .map(|hit| {
                    format!(
                        "[{}] ({}, {}) {}",
                        hit.fact.id, hit.fact.owner, hit.fact.class, hit.fact.text
                    )
                })
                .collect();
            Ok(ToolOutput::ok(lines.join("\n")))
        })
    }
}

/// `list_memory_facts`.
pub struct ListMemoryFactsTool;

impl Tool for ListMemoryFactsTool {
    fn name(&self) -> &str {
        "list_memory_facts"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_memory_facts".into(),
            description: "List the most recent memories you can read (yours, your reports', the \
                          platform's), newest first."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"limit": {"type": "integer", "description": "Default 20."}},
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(RiskLevel::L0, "reads memory")
    }

    fn describe_call(&self, _args: &Value) -> String {
        "list_memory_facts".into()
    }

    fn target(&self, _args: &Value) -> String {
        "memory".into()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("list_memory_facts", &args, &["limit"])?;
            let limit = parsed.optional_u64("limit")?.unwrap_or(20).clamp(1, 200) as u32;
            let memory = Memory::new(&ctx.registry);
            let owners = memory
                .readable_owners(&ctx.agent)
                .await
                .map_err(tool_error)?;
            let scope = Scope {
                owners,
                chat: Some(ctx.chat.as_str().to_string()),
            };
            let facts = ctx
                .store
                .read(move |conn| queries::list_visible(conn, &scope, limit))
                .await
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            if facts.is_empty() {
                return Ok(ToolOutput::ok("Memory is empty."));
            }
            let lines: Vec<String> = facts
                .iter()
                .map(|fact| {
                    format!(
                        "[{}] ({}, {}) {}",
                        fact.id, fact.owner, fact.class, fact.text
                    )
                })
                .collect();
            Ok(ToolOutput::ok(lines.join("\n")))
        })
    }
}

/// `forget`.
pub struct ForgetTool;

impl Tool for ForgetTool {
    fn name(&self) -> &str {
        "forget"
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "forget".into(),
            description: "Forget one of your own memories by its id (it is archived; the operator \
                          can restore it)."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
                "additionalProperties": false
            }),
        }
    }

    fn effect(&self) -> Effect {
        Effect::ReadOnly
    }

    fn assess(&self, _args: &Value, _ctx: &ToolContext) -> Assessment {
        Assessment::new(
            RiskLevel::L0,
            "archives one of the agent's own memories (reversible)",
        )
    }

    fn describe_call(&self, args: &Value) -> String {
        format!("forget: memory {}", args.get("id").unwrap_or(&Value::Null))
    }

    fn target(&self, args: &Value) -> String {
        args.get("id").map(Value::to_string).unwrap_or_default()
    }

    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let parsed = Args::parse("forget", &args, &["id"])?;
            let Some(id) = parsed.optional_u64("id")? else {
                return Err(ToolError::InvalidArguments(
                    "forget: `id` is required".into(),
                ));
            };
            let id = id as i64;
            let fact = ctx
                .store
                .read(move |conn| queries::get(conn, id))
                .await
                .map_err(|error| ToolError::Failed(error.to_string()))?;
            match fact {
                Some(fact) if fact.owner == ctx.agent => {}
                Some(_) => {
                    return Err(ToolError::Refused(format!(
                        "memory {id} is not yours to forget"
                    )));
                }
                None => return Err(ToolError::Failed(format!("there is no memory {id}"))),
            }
            let memory = Memory::new(&ctx.registry);
            memory
                .govern(id, Governance::Archive, &format!("agent:{}", ctx.agent))
                .await
                .map_err(tool_error)?;
            Ok(ToolOutput::ok(format!("Forgot memory {id}.")))
        })
    }
}
