//! Resuming a run found open after a restart (see the durability notes of `agent::run`): its
//! interrupted calls are closed, the calls that were waiting for an approval go through the gate
//! again, and the run carries on from its reloaded conversation.

use serde_json::json;

use super::{RunCtx, load_conversation};
use crate::agent::dispatch;
use crate::agent::loop_guard::LoopGuard;
use crate::agent::transcript;
use crate::llm::{ChatMessage, ToolCall};
use crate::policy::rate_limit::RateLimiter;
use crate::store::StoreError;
use crate::store::approvals::ApprovalStatus;
use crate::store::runs::NewStep;
use crate::store::sessions::{self, EventKindRow, NewEvent};

/// Takes up an interrupted run: closes its interrupted calls, dispatches again the ones waiting
/// for a decision, records a `resume` note and returns the reloaded recap and conversation.
pub(super) async fn resume_run(
    ctx: &RunCtx,
    guard: &LoopGuard,
    limiter: &mut RateLimiter,
) -> Result<(Option<String>, Vec<ChatMessage>), StoreError> {
    let waiting = close_interrupted_calls(ctx).await?;
    if !waiting.is_empty() {
        // The run's egress ledger is rebuilt from what it had seen before its calls are judged
        // again (a fetch that waited for approval must not pass as the first call of a run).
        let (recap, seen) = load_conversation(ctx).await?;
        ctx.tools.egress.observe(&seen, recap.is_some());
        // Calls that were waiting for a decision go through the gate again and find their
        // stored approval: they run once it is granted, or are reported denied.
        dispatch::dispatch(ctx, guard, limiter, &waiting).await?;
    }
    let conversation = load_conversation(ctx).await?;
    ctx.record_step(NewStep {
        kind: "note",
        name: Some("resume".into()),
        detail: json!({"reason": "the daemon restarted while this run was open"}),
        ..NewStep::default()
    })
    .await;
    Ok(conversation)
}

/// After a restart: calls this run asked for whose results were never recorded get a result that
/// says so. They are not run again — they may have had effects before the crash. The exception are
/// calls that were waiting for (or had just received) an approval: they never started, so they are
/// returned to be dispatched again, which re-attaches them to their stored approval.
async fn close_interrupted_calls(ctx: &RunCtx) -> Result<Vec<ToolCall>, StoreError> {
    let (session_id, run_id) = (ctx.session_id, ctx.run_id);
    ctx.runtime
        .store
        .write(move |conn| {
            let open = calls_without_result(&sessions::run_events(conn, run_id)?);
            let now = crate::clock::now_ms();
            let mut waiting = Vec::new();
            for call in &open {
                let approval = crate::store::approvals::for_call(conn, run_id, &call.id)?;
                if approval.is_some_and(|row| {
                    matches!(row.status, ApprovalStatus::Pending | ApprovalStatus::Approved)
                }) {
                    waiting.push(call.clone());
                    continue;
                }
                let data = transcript::tool_result_data(call, true);
                sessions::append(
                    conn,
                    session_id,
                    &NewEvent {
                        kind: EventKindRow::ToolResult,
                        sender: None,
                        content: "This call was interrupted by a restart of the daemon and was not run again, \
                                  because it may already have taken effect. Check before repeating it.",
                        data: Some(&data),
                        run_id: Some(run_id),
                        inbound_id: None,
                    },
                    now,
                )?;
            }
            Ok(waiting)
        })
        .await
}

/// The calls the run's events ask for that no recorded result answers, in the order asked.
fn calls_without_result(events: &[sessions::EventRow]) -> Vec<ToolCall> {
    let mut open: Vec<ToolCall> = Vec::new();
    for event in events {
        match event.kind {
            EventKindRow::Assistant => {
                open.extend(transcript::parse_tool_calls(event.data.as_deref()))
            }
            EventKindRow::ToolResult => {
                let data: serde_json::Value = event
                    .data
                    .as_deref()
                    .and_then(|d| serde_json::from_str(d).ok())
                    .unwrap_or_default();
                open.retain(|call| Some(call.id.as_str()) != data["call_id"].as_str());
            }
            _ => {}
        }
    }
    open
}
