//! Tool dispatch: every call of a model turn goes through the policy gate, then runs.
//!
//! For each call, in order: find the tool, parse its arguments (malformed JSON is reported to the
//! model, nothing runs), assess its risk, ask the gate (rate limit → loop guard → risk → autonomy),
//! record the decision, and — when approval is needed — wait for a recorded decision. Then the
//! allowed calls run: consecutive read-only calls together (bounded), side-effecting calls one at a
//! time in the model's order. Each runs under its timeout and the run's cancellation; its output is
//! truncated when long, recorded as a step and as a transcript event, and returned to the loop.
//!
//! This is also where secrets are kept away from tools and the model (`crate::secrets`): a call
//! whose arguments carry a registered secret (raw or encoded) is refused before the gate, with a
//! recorded decision and an audit row that do not contain it; and every output — success, error
//! or refusal — is redacted before it is recorded or returned, so that a tool printing a key (a
//! file, a web page, an MCP server) never hands it to the model.

mod policy;

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use super::approval::{self, ApprovalOutcome};
use super::loop_guard::LoopGuard;
use super::run::RunCtx;
use super::transcript;
use super::workspace_writes;
use crate::domain::OutEvent;
use crate::llm::ToolCall;
use crate::policy::Effect;
use crate::policy::gate::{self, Decision, GateRequest};
use crate::policy::rate_limit::RateLimiter;
use crate::store::StoreError;
use crate::store::runs::NewStep;
use crate::store::sessions::{self, EventKindRow, NewEvent};
use crate::store::workspace::WorkspaceWrite;
use crate::tool::{Tool, ToolError, ToolOutput};

/// One call and what came of it.
#[derive(Debug, Clone)]
pub struct CallResult {
    pub call: ToolCall,
    pub output: ToolOutput,
    /// The tool actually ran (false when refused, denied, malformed or unknown).
    pub executed: bool,
}

type BoxedCall<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = (usize, (ToolOutput, bool))> + Send + 'a>>;

/// A call cleared to run: its tool, parsed arguments and the approval that cleared it.
#[derive(Clone)]
struct Cleared {
    tool: Arc<dyn Tool>,
    args: Value,
    /// `approval::action_hash` of the call, computed once when it is planned.
    hash: String,
    approval: Option<String>,
    /// The grant that cleared it (checked again just before it runs).
    grant: Option<i64>,
    /// It could write into the workspace: running it moves the workspace generation.
    writes_workspace: bool,
}

/// What becomes of one call: it runs, or the model is told why not.
enum Plan {
    Run(Cleared),
    Refused(ToolOutput),
}

impl Plan {
    /// Whether the call is cleared to run and only reads.
    fn runs_read_only(&self) -> bool {
        matches!(self, Plan::Run(cleared) if cleared.tool.effect() == Effect::ReadOnly)
    }

    /// Whether the call is cleared to run and could write into the workspace.
    fn runs_writing(&self) -> bool {
        matches!(self, Plan::Run(cleared) if cleared.writes_workspace)
    }
}

/// Passes the calls of one model turn through the gate, runs the ones cleared, records the
/// others' results, and returns every call's result in the model's order.
pub async fn dispatch(
    ctx: &RunCtx,
    guard: &LoopGuard,
    limiter: &mut RateLimiter,
    calls: &[ToolCall],
) -> Result<Vec<CallResult>, StoreError> {
    let plans = plan_calls(ctx, guard, limiter, calls).await;
    let results = run_plans(ctx, calls, &plans).await;
    record_results(ctx, &results).await?;
    Ok(results)
}

/// Plans each call in the model's order: refused (a secret, malformed, the gate, the user) or
/// cleared to run. Refusals are redacted.
async fn plan_calls(
    ctx: &RunCtx,
    guard: &LoopGuard,
    limiter: &mut RateLimiter,
    calls: &[ToolCall],
) -> Vec<Plan> {
    let mut plans: Vec<Plan> = Vec::with_capacity(calls.len());
    for call in calls {
        let arguments = parse_arguments(call);
        // A call after one of this turn that could write runs on a changed workspace: no grant
        // given before covers it.
        let grants_apply = !plans.iter().any(Plan::runs_writing);
        let planned = if carries_secret(call, arguments.as_ref().ok()) {
            refuse_secret(ctx, call).await
        } else {
            plan(ctx, guard, limiter, call, arguments, grants_apply).await
        };
        plans.push(match planned {
            Plan::Refused(output) => Plan::Refused(redacted_output(output)),
            run => run,
        });
    }
    plans
}

/// Runs the cleared calls — consecutive read-only ones together, the others one at a time in the
/// model's order — and returns every call's result, refused ones included.
async fn run_plans(ctx: &RunCtx, calls: &[ToolCall], plans: &[Plan]) -> Vec<CallResult> {
    let mut results: Vec<Option<CallResult>> = vec![None; calls.len()];
    let mut index = 0;
    while index < calls.len() {
        let plan = &plans[index];
        match plan {
            Plan::Refused(output) => {
                results[index] = Some(CallResult {
                    call: calls[index].clone(),
                    output: output.clone(),
                    executed: false,
                });
                index += 1;
            }
            Plan::Run(_) if plan.runs_read_only() => {
                // A run of consecutive read-only calls executes concurrently, bounded.
                let end = (index..calls.len())
                    .find(|&end| !plans[end].runs_read_only())
                    .unwrap_or(calls.len());
                for (i, (output, executed)) in execute_together(ctx, calls, plans, index..end).await
                {
                    results[i] = Some(CallResult {
                        call: calls[i].clone(),
                        output,
                        executed,
                    });
                }
                index = end;
            }
            Plan::Run(cleared) => {
                let (output, executed) = execute(ctx, &calls[index], cleared.clone()).await;
                results[index] = Some(CallResult {
                    call: calls[index].clone(),
                    output,
                    executed,
                });
                index += 1;
            }
        }
    }
    results.into_iter().flatten().collect()
}

/// Executes the cleared calls of `plans` in `range` concurrently, at most `max_parallel_tools` at
/// a time; returns each output (and whether it ran) with its call's index.
async fn execute_together(
    ctx: &RunCtx,
    calls: &[ToolCall],
    plans: &[Plan],
    range: Range<usize>,
) -> Vec<(usize, (ToolOutput, bool))> {
    let batch: Vec<(usize, Cleared)> = range
        .filter_map(|i| match &plans[i] {
            Plan::Run(cleared) => Some((i, cleared.clone())),
            Plan::Refused(_) => None,
        })
        .collect();
    // Boxed with an explicit type: a closure here trips the compiler's higher-ranked
    // lifetime inference for `Send` futures.
    let futures: Vec<BoxedCall<'_>> = batch
        .into_iter()
        .map(|(i, cleared)| -> BoxedCall<'_> {
            Box::pin(async move { (i, execute(ctx, &calls[i], cleared).await) })
        })
        .collect();
    futures::stream::iter(futures)
        .buffered(ctx.runtime.limits.max_parallel_tools.max(1))
        .collect()
        .await
}

/// What the model is told when a call is refused for carrying a secret. It names no value.
pub const SECRET_REFUSAL: &str = "Not run: the arguments carry a secret of this daemon (a bot token or API key, possibly encoded). Tools never receive the daemon's secrets and nothing may send them anywhere. Do not retry this call; tell the user if it matters.";

/// A call's arguments as JSON (no arguments at all is an empty object); parsed once per call.
fn parse_arguments(call: &ToolCall) -> Result<Value, serde_json::Error> {
    let text = call.arguments.trim();
    serde_json::from_str(if text.is_empty() { "{}" } else { text })
}

/// Whether a call's arguments hold a registered secret: in the text as sent (raw, URL-encoded,
/// base64, hex) or in any string once parsed (a JSON escape hides nothing).
fn carries_secret(call: &ToolCall, parsed: Option<&Value>) -> bool {
    crate::secrets::contains_secret(&call.arguments)
        || crate::secrets::contains_secret(&call.name)
        || parsed.is_some_and(crate::secrets::json_contains_secret)
}

/// Refuses a call that carries a secret, before the gate: the decision is recorded as a step and
/// an audit row (neither holds the arguments), and the model is told why.
async fn refuse_secret(ctx: &RunCtx, call: &ToolCall) -> Plan {
    let name = crate::secrets::redact(&call.name).into_owned();
    let reason =
        "the arguments carry a registered secret (bot token or API key); tools never receive one";
    ctx.record_step(NewStep {
        kind: "decision",
        name: Some(name.clone()),
        detail: json!({
            "call_id": call.id,
            "action": format!("{name}: (arguments withheld: they carry a secret)"),
            "envelope": {
                "decision": Decision::Deny.as_str(),
                "risk": crate::policy::RiskLevel::L3.as_str(),
                "reason": reason,
                "source": "secrets",
                "next_step": "not run; the model is told why",
                "requires_confirmation": false,
            },
            "assessment": [reason],
        }),
        ..NewStep::default()
    })
    .await;
    let (actor, subject) = (
        format!("agent:{}", ctx.agent()),
        format!("run:{}", ctx.run_id),
    );
    let details = json!({"tool": name, "call_id": call.id, "reason": reason});
    let announced = subject.clone();
    let written = ctx
        .runtime
        .store
        .write(move |conn| {
            crate::audit::append(conn, &actor, "tool.refused_secret", &subject, &details)
                .map(|_| ())
        })
        .await;
    match written {
        Ok(()) => crate::audit::announce(&ctx.runtime.events, "tool.refused_secret", &announced),
        Err(error) => tracing::warn!(run_id = ctx.run_id, %error, "could not audit a refused call"),
    }
    tracing::warn!(
        agent = %ctx.agent(),
        run_id = ctx.run_id,
        tool = %name,
        "a tool call carrying a secret was refused"
    );
    Plan::Refused(ToolOutput::error(SECRET_REFUSAL))
}

/// `output` with every registered secret (in any encoded form) replaced by `***`.
fn redacted_output(mut output: ToolOutput) -> ToolOutput {
    if let std::borrow::Cow::Owned(text) = crate::secrets::redact(&output.text) {
        output.text = text;
    }
    output
}

/// The calls as they may be stored and shown back to the model: names and arguments redacted.
/// The dispatcher itself gets the calls as sent, so that it can refuse the ones carrying secrets.
pub fn redacted_calls(calls: &[ToolCall]) -> Vec<ToolCall> {
    calls
        .iter()
        .map(|call| ToolCall {
            id: call.id.clone(),
            name: crate::secrets::redact(&call.name).into_owned(),
            arguments: crate::secrets::redact(&call.arguments).into_owned(),
        })
        .collect()
}

/// Plans one call: finds its tool, checks its arguments, asks the gate (recording the decision)
/// and, when the gate wants it, the user.
async fn plan(
    ctx: &RunCtx,
    guard: &LoopGuard,
    limiter: &mut RateLimiter,
    call: &ToolCall,
    arguments: Result<Value, serde_json::Error>,
    grants_apply: bool,
) -> Plan {
    let tool = match find_tool(ctx, call) {
        Ok(tool) => tool,
        Err(refusal) => return Plan::Refused(refusal),
    };
    let args = match object_arguments(call, arguments) {
        Ok(args) => args,
        Err(refusal) => return Plan::Refused(refusal),
    };
    let assessment = tool.assess(&args, &ctx.tools);
    let action = tool.describe_call(&args);
    let hash = approval::action_hash(&call.name, &args);
    let mut policy = policy::call_policy(ctx, &call.name, &action, &hash).await;
    if !grants_apply {
        policy.grant = None;
    }
    let rate_limited = rate_limit_reason(limiter);
    let effect = tool.effect_for(&args, &ctx.tools);
    let writes_workspace = tool.may_write_workspace(&args, effect, &assessment);
    let request = GateRequest {
        tool: &call.name,
        autonomy: policy.autonomy,
        effect,
        assessment: &assessment,
        rate_limited,
        loop_guard: guard.check_call(call),
        rule: policy.rule,
        grant: policy.grant,
    };
    let decided = gate::decide(&request);
    // A block by the risk check alone may go to the operator (`[policy] allow_l3_once`).
    let put_to_operator =
        gate::operator_may_allow_once(&request, &decided, ctx.runtime.limits.allow_l3_once);
    let blocked = put_to_operator.is_some();
    let mut envelope = put_to_operator.unwrap_or(decided);
    note_lapsed_grant(&mut envelope, policy.lapsed_grant.as_ref());
    ctx.record_step(NewStep {
        kind: "decision",
        name: Some(call.name.clone()),
        detail: json!({
            "call_id": call.id,
            "action": action,
            "effect": effect.as_str(),
            "envelope": envelope.to_json(),
            "assessment": assessment.reasons,
            "tightened_by_skills": policy.tightened_by,
            "blocked_put_to_operator": blocked,
            "writes_workspace": writes_workspace,
        }),
        ..NewStep::default()
    })
    .await;
    let grant = (envelope.decision == Decision::Allow)
        .then(|| envelope.source.strip_prefix("grant:")?.parse().ok())
        .flatten();
    let cleared = Cleared {
        tool,
        args,
        hash,
        approval: None,
        grant,
        writes_workspace,
    };
    let refusal = approval::Told {
        tool: &call.name,
        action: &action,
        why: &assessment.reasons.join("; "),
        envelope: &envelope,
    };
    match envelope.decision {
        Decision::Allow => Plan::Run(cleared),
        Decision::Deny => {
            approval::tell_refusal(ctx, &refusal, false).await;
            Plan::Refused(ToolOutput::error(format!(
                "Not run: {} (decided by {}). Do not retry this call; tell the user if it matters.",
                envelope.reason, envelope.source
            )))
        }
        Decision::RequireApproval => {
            if blocked {
                approval::tell_refusal(ctx, &refusal, true).await;
            }
            ask_for_approval(ctx, call, cleared, &action, &envelope).await
        }
    }
}

/// When the call asks although a person allowed exactly this for a while, the reason says why:
/// the grant lapsed because something wrote in the workspace.
fn note_lapsed_grant(envelope: &mut gate::DecisionEnvelope, lapsed: Option<&(i64, String)>) {
    if envelope.decision == Decision::RequireApproval
        && let Some((grant, why)) = lapsed
    {
        envelope.reason = format!(
            "{}; grant {grant} for exactly this lapsed: {why}",
            envelope.reason
        );
    }
}

/// The call's tool, or the refusal that names the tools there are (or says why one is missing).
fn find_tool(ctx: &RunCtx, call: &ToolCall) -> Result<Arc<dyn Tool>, ToolOutput> {
    if let Some(tool) = ctx.settings.tool(&call.name) {
        return Ok(tool);
    }
    if let Some(message) = ctx.unavailable_tool_message(&call.name) {
        return Err(ToolOutput::error(message));
    }
    let available: Vec<&str> = ctx.settings.tools.iter().map(|tool| tool.name()).collect();
    Err(ToolOutput::error(format!(
        "There is no tool named `{}`. Available tools: {}.",
        call.name,
        if available.is_empty() {
            "none".to_string()
        } else {
            available.join(", ")
        }
    )))
}

/// The call's arguments when they are a JSON object, or the refusal that tells the model why not.
fn object_arguments(
    call: &ToolCall,
    arguments: Result<Value, serde_json::Error>,
) -> Result<Value, ToolOutput> {
    match arguments {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(ToolOutput::error(format!(
            "The arguments of `{}` must be a JSON object matching its schema.",
            call.name
        ))),
        Err(error) => Err(ToolOutput::error(format!(
            "The arguments of `{}` were not valid JSON ({error}); nothing was run. Call it again with a JSON object matching its schema.",
            call.name
        ))),
    }
}

/// Why the call may not run now because of the rate limit (`None`: a slot was taken).
fn rate_limit_reason(limiter: &mut RateLimiter) -> Option<String> {
    limiter.try_acquire(Instant::now()).err().map(|wait| {
        format!(
            "rate limit reached ({}); try again in {} s",
            limiter.describe(),
            wait.as_secs().max(1)
        )
    })
}

/// Asks the user about a call the gate holds for approval: cleared to run once approved (with a
/// note of who approved it), refused when denied.
async fn ask_for_approval(
    ctx: &RunCtx,
    call: &ToolCall,
    cleared: Cleared,
    action: &str,
    envelope: &gate::DecisionEnvelope,
) -> Plan {
    // Issue #32: the browser shows the page (a screenshot in the chat) before the prompt; the
    // request keeps the screenshot for Studio.
    let screenshot = cleared
        .tool
        .show_before_approval(&cleared.args, &ctx.tools)
        .await;
    let asked = approval::Asked {
        action,
        hash: &cleared.hash,
        target: cleared.tool.target(&cleared.args),
        screenshot,
    };
    match approval::request(ctx, call, asked, envelope).await {
        ApprovalOutcome::Approved { id, by } => {
            ctx.record_step(NewStep {
                kind: "note",
                name: Some(call.name.clone()),
                detail: json!({"call_id": call.id, "approval": id, "approved_by": by}),
                ..NewStep::default()
            })
            .await;
            Plan::Run(Cleared {
                approval: Some(id),
                ..cleared
            })
        }
        ApprovalOutcome::Denied { reason } => Plan::Refused(ToolOutput::error(format!(
            "Not run: the user did not approve this action ({reason}). Do not retry it without new input from the user."
        ))),
    }
}

/// Runs one cleared call under its timeout and the run's cancellation; records it (step, audit,
/// transcript) and tells the channel; returns its output, redacted and truncated, and whether it
/// ran (a call whose grant lapsed meanwhile does not).
async fn execute(ctx: &RunCtx, call: &ToolCall, cleared: Cleared) -> (ToolOutput, bool) {
    if let Err(refusal) = before_running(ctx, call, &cleared).await {
        return (refusal, false);
    }
    ctx.deliver(OutEvent::Tool {
        name: call.name.clone(),
        status: "started".into(),
    });
    // Calls carrying a secret never get here (secrets are registered once, at boot), so the
    // arguments are recorded as they are.
    ctx.record_step(NewStep {
        kind: "tool_call",
        name: Some(call.name.clone()),
        detail: json!({"call_id": call.id, "arguments": cleared.args}),
        ..NewStep::default()
    })
    .await;
    let started = Instant::now();
    let result = call_tool(ctx, cleared.tool.as_ref(), cleared.args.clone()).await;
    // Redacted before anything else sees it: the step, the transcript, the audit and the model.
    let output = redacted_output(match result {
        Ok(output) => output,
        Err(error) => ToolOutput::error(error.to_string()),
    });
    let output = truncated(output, ctx.runtime.limits.tool_output_max_chars);
    let duration_ms = started.elapsed().as_millis() as u64;
    record_execution(ctx, call, &output, &cleared, duration_ms).await;
    ctx.deliver(OutEvent::Tool {
        name: call.name.clone(),
        status: if output.is_error {
            "failed".into()
        } else {
            "done".into()
        },
    });
    (output, true)
}

/// What must hold, and be recorded, before a cleared call runs: the grant that cleared it is still
/// honoured, and a call that could write moves the workspace generation first (so a crash while
/// it runs cannot lose the bump). Both in one transaction. `Err`: the call must not run; the
/// model is told why.
async fn before_running(
    ctx: &RunCtx,
    call: &ToolCall,
    cleared: &Cleared,
) -> Result<(), ToolOutput> {
    if cleared.grant.is_none() && !cleared.writes_workspace {
        return Ok(());
    }
    let (grant, writes) = (cleared.grant, cleared.writes_workspace);
    let (agent, chat, hash) = (
        ctx.agent().to_string(),
        ctx.chat.as_str().to_string(),
        cleared.hash.clone(),
    );
    let what = format!("{} in run {}", call.name, ctx.run_id);
    let actor = format!("agent:{agent}");
    let now = crate::clock::now_ms();
    let checked = ctx
        .runtime
        .store
        .write(move |conn| {
            if let Some(grant) = grant
                && !crate::store::approvals::grant_is_live(conn, grant, now)?
            {
                return Ok(Err(grant));
            }
            if !writes {
                return Ok(Ok(Vec::new()));
            }
            let write = WorkspaceWrite {
                agent: &agent,
                what: &what,
                action: Some((&hash, &chat)),
            };
            workspace_writes::record(conn, &write, &actor, now).map(Ok)
        })
        .await;
    match checked {
        Ok(Ok(lapsed)) => {
            workspace_writes::announce(&ctx.runtime.events, &lapsed);
            Ok(())
        }
        Ok(Err(grant)) => {
            ctx.record_step(NewStep {
                kind: "note",
                name: Some(call.name.clone()),
                detail: json!({"call_id": call.id, "grant_lapsed": grant}),
                ..NewStep::default()
            })
            .await;
            Err(ToolOutput::error(workspace_writes::lapsed_refusal(grant)))
        }
        Err(error) => {
            tracing::warn!(run_id = ctx.run_id, %error, "could not record a call that may write in the workspace; not run");
            Err(ToolOutput::error(
                "Not run: the daemon could not record this call before running it. Try again in a moment.",
            ))
        }
    }
}

/// Calls the tool, bounded by its timeout (an hour at most) and cut short by the run's cancellation.
async fn call_tool(ctx: &RunCtx, tool: &dyn Tool, args: Value) -> Result<ToolOutput, ToolError> {
    let timeout = tool.timeout().min(Duration::from_secs(3600));
    tokio::select! {
        result = tokio::time::timeout(timeout, tool.call(args, &ctx.tools)) => match result {
            Ok(result) => result,
            Err(_) => Err(ToolError::Timeout(timeout)),
        },
        _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
    }
}

/// `output` cut to `limit` characters, with a note of how many were left out.
fn truncated(mut output: ToolOutput, limit: usize) -> ToolOutput {
    let length = output.text.chars().count();
    if length > limit {
        let kept: String = output.text.chars().take(limit).collect();
        output.text = format!(
            "{kept}\n[output truncated: {} of {length} characters omitted]",
            length - limit
        );
    }
    output
}

/// Records an executed call's result — its step, audit row and transcript event in one
/// transaction — then announces the audit row and the step.
async fn record_execution(
    ctx: &RunCtx,
    call: &ToolCall,
    output: &ToolOutput,
    cleared: &Cleared,
    duration_ms: u64,
) {
    let (hash, approval) = (cleared.hash.as_str(), cleared.approval.clone());
    // The result's step and its transcript event land together, right away: after a crash the
    // resumed run knows exactly which calls finished.
    let step = NewStep {
        kind: "tool_result",
        name: Some(call.name.clone()),
        detail: json!({
            "call_id": call.id,
            "is_error": output.is_error,
            "summary": output.text.chars().take(500).collect::<String>(),
            "chars": output.text.len(),
        }),
        duration_ms: Some(duration_ms),
        ..NewStep::default()
    };
    let rows = vec![(
        output.text.clone(),
        transcript::tool_result_data(call, output.is_error),
    )];
    let (run_id, now) = (ctx.run_id, crate::clock::now_ms());
    let session_id = ctx.session_id;
    let mut audit = json!({"tool": call.name, "call_id": call.id, "action_hash": hash, "approval": approval,
                       "is_error": output.is_error, "duration_ms": duration_ms});
    if let Some(node) = cleared.tool.node() {
        audit["node"] = json!(node);
    }
    let (actor, subject) = (format!("agent:{}", ctx.agent()), format!("run:{run_id}"));
    let announced = subject.clone();
    // A call that could write moves the workspace generation again with its result: a grant given
    // while it ran (in another conversation) lapses too.
    let (agent, chat, action_hash) = (
        ctx.agent().to_string(),
        ctx.chat.as_str().to_string(),
        hash.to_string(),
    );
    let (writes, what) = (
        cleared.writes_workspace,
        format!("{} in run {run_id}", call.name),
    );
    // The call ran: its record (and audit row) waits out a busy or holding store, never dropped.
    let record = format!("the result of {what}");
    let written = ctx
        .runtime
        .store
        .write_until_committed(&record, || {
            let (step, actor, subject, audit, rows) = (
                step.clone(),
                actor.clone(),
                subject.clone(),
                audit.clone(),
                rows.clone(),
            );
            let (agent, what, action_hash, chat) = (
                agent.clone(),
                what.clone(),
                action_hash.clone(),
                chat.clone(),
            );
            move |conn: &rusqlite::Connection| {
                crate::store::runs::add_step(conn, run_id, &step, now)?;
                crate::audit::append(conn, &actor, "tool.executed", &subject, &audit)?;
                append_results(conn, session_id, run_id, &rows, now)?;
                if !writes {
                    return Ok(Vec::new());
                }
                let write = WorkspaceWrite {
                    agent: &agent,
                    what: &what,
                    action: Some((&action_hash, &chat)),
                };
                workspace_writes::record(conn, &write, &actor, now)
            }
        })
        .await;
    match written {
        Ok(lapsed) => {
            workspace_writes::announce(&ctx.runtime.events, &lapsed);
            crate::audit::announce(&ctx.runtime.events, "tool.executed", &announced);
            ctx.runtime.events.publish_data(
                crate::events::EventKind::RunStep,
                &announced,
                &format!("tool_result {}", call.name),
                crate::events::EventData::RunStep {
                    run_id,
                    agent: ctx.agent().to_string(),
                    kind: "tool_result".to_string(),
                    name: call.name.clone(),
                },
            );
        }
        Err(error) => tracing::warn!(run_id, %error, "could not record a tool result"),
    }
}

async fn record_results(ctx: &RunCtx, results: &[CallResult]) -> Result<(), StoreError> {
    let (session_id, run_id) = (ctx.session_id, ctx.run_id);
    let rows: Vec<(String, String)> = results
        .iter()
        .filter(|result| !result.executed)
        .map(|result| {
            (
                result.output.text.clone(),
                transcript::tool_result_data(&result.call, result.output.is_error),
            )
        })
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let now = crate::clock::now_ms();
    ctx.runtime
        .store
        .write(move |conn| append_results(conn, session_id, run_id, &rows, now))
        .await
}

fn append_results(
    conn: &rusqlite::Connection,
    session_id: i64,
    run_id: i64,
    rows: &[(String, String)],
    now: i64,
) -> Result<(), StoreError> {
    for (content, data) in rows {
        sessions::append(
            conn,
            session_id,
            &NewEvent {
                kind: EventKindRow::ToolResult,
                sender: None,
                content,
                data: Some(data),
                run_id: Some(run_id),
                inbound_id: None,
            },
            now,
        )?;
    }
    Ok(())
}
