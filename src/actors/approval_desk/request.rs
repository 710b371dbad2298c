//! Requests: a new request is stored with its audit row before it is shown; it then waits for an
//! approver, or is denied at once when no approver can see it. A resumed run that asks again for
//! the same call attaches to the request it made before.

use std::cmp::Reverse;

use ractor::{ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;

use super::DeskMsg;
use super::{DeskState, arm_timer, nonce, reachable, show};
use crate::events::{EventData, EventKind};
use crate::protocol::approvals::{ApprovalRequest, ApprovalVerdict};
use crate::store::approvals::{self as queries, ApprovalRow, ApprovalStatus};

/// Attaches to the request made before for the same call, or stores and shows a new one.
pub(super) async fn on_request(
    myself: &ActorRef<DeskMsg>,
    state: &mut DeskState,
    request: ApprovalRequest,
    reply: RpcReplyPort<ApprovalVerdict>,
) -> Result<(), ActorProcessingErr> {
    // A resumed run asks again for the same call: attach to what exists.
    let (run_id, call_id) = (request.run_id, request.call_id.clone());
    if let Some(existing) = state
        .args
        .store
        .read(move |conn| queries::for_call(conn, run_id, &call_id))
        .await?
    {
        match earlier_verdict(&existing) {
            Some(verdict) => {
                let _ = reply.send(verdict);
            }
            None => state.waiters.entry(existing.id).or_default().push(reply),
        }
        return Ok(());
    }

    let now = crate::clock::now_ms();
    let reachable = reachable(state, &request).await;
    let row = new_row(&request, nonce(), now, reachable.is_some());
    store_request(state, &row).await?;
    if let Some(screenshot) = request.screenshot.clone() {
        keep_screenshot(state, &row.id, screenshot).await;
    }
    crate::audit::announce(&state.args.events, "approval.requested", &row.id);
    if reachable.is_none() {
        deny_unreachable(state, row, reply);
        return Ok(());
    }
    wait_for_decision(myself, state, row, reply).await;
    Ok(())
}

/// The verdict a request made before already has; `None` while it is pending.
fn earlier_verdict(existing: &ApprovalRow) -> Option<ApprovalVerdict> {
    Some(match existing.status {
        ApprovalStatus::Pending => return None,
        ApprovalStatus::Approved => ApprovalVerdict::Approved {
            id: existing.id.clone(),
            by: existing.decided_by.clone().unwrap_or_default(),
        },
        ApprovalStatus::Consumed => ApprovalVerdict::Denied {
            id: existing.id.clone(),
            reason: "this action was already started once before a restart; it is not run twice"
                .into(),
        },
        ApprovalStatus::DeniedTimeout => ApprovalVerdict::Denied {
            id: existing.id.clone(),
            reason: "the request expired without a decision".into(),
        },
        other @ (ApprovalStatus::Denied | ApprovalStatus::DeniedUnreachable) => {
            ApprovalVerdict::Denied {
                id: existing.id.clone(),
                reason: format!("it was {}", other.as_str().replace('_', " ")),
            }
        }
    })
}

/// A new request's row: pending when an approver can see it, otherwise denied at once.
fn new_row(request: &ApprovalRequest, id: String, now: i64, reachable: bool) -> ApprovalRow {
    ApprovalRow {
        id,
        agent: request.agent.clone(),
        chat: request.chat.as_str().to_string(),
        run_id: request.run_id,
        call_id: request.call_id.clone(),
        tool: request.tool.clone(),
        action: request.action.clone(),
        action_hash: request.action_hash.clone(),
        target: request.target.clone(),
        risk: request.risk,
        reason: request.reason.clone(),
        requested_ms: now,
        expires_ms: now + request.ttl.as_millis() as i64,
        status: if reachable {
            ApprovalStatus::Pending
        } else {
            ApprovalStatus::DeniedUnreachable
        },
        decided_ms: (!reachable).then_some(now),
        decided_by: (!reachable).then(|| "system".to_string()),
        consumed_ms: None,
        tg_chat_id: None,
        tg_message_id: None,
    }
}

/// Stores the request with its audit row (and the denial's, when it is not pending).
async fn store_request(state: &DeskState, row: &ApprovalRow) -> Result<(), ActorProcessingErr> {
    let stored = row.clone();
    state
        .args
        .store
        .write(move |conn| {
            queries::insert(conn, &stored)?;
            crate::audit::append(
                conn,
                &format!("agent:{}", stored.agent),
                "approval.requested",
                &stored.id,
                &json!({"run_id": stored.run_id, "tool": stored.tool, "action": stored.action,
                        "action_hash": stored.action_hash, "risk": stored.risk.as_str(), "status": stored.status}),
            )?;
            if stored.status != ApprovalStatus::Pending {
                crate::audit::append(conn, "system", "approval.denied", &stored.id, &json!({"reason": "no approver reachable"}))?;
            }
            Ok(())
        })
        .await?;
    Ok(())
}

/// Keeps the request's screenshot beside the database for Studio (best effort: the request
/// stands without it; a failure is logged).
async fn keep_screenshot(
    state: &DeskState,
    id: &str,
    screenshot: crate::protocol::approvals::Screenshot,
) {
    let database = state.args.store.path().to_path_buf();
    let id = id.to_string();
    let saved = tokio::task::spawn_blocking(move || {
        queries::save_screenshot(&database, &id, &screenshot.0)
    })
    .await;
    match saved {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "an approval's screenshot was not kept"),
        Err(error) => tracing::warn!(%error, "an approval's screenshot was not kept"),
    }
}

/// Tells Studio and the run that the request was denied at once: no approver can see it.
fn deny_unreachable(state: &DeskState, row: ApprovalRow, reply: RpcReplyPort<ApprovalVerdict>) {
    let id = row.id.clone();
    crate::audit::announce(&state.args.events, "approval.denied", &row.id);
    // Decided at once: the inbox's "recently decided" list shows it.
    state.args.events.publish_data(
        EventKind::ApprovalDecided,
        &format!("approval:{id}"),
        "denied: no approver reachable",
        EventData::ApprovalDecided {
            id: id.clone(),
            status: row.status.as_str().to_string(),
            by: "system".to_string(),
            agent: row.agent.clone(),
        },
    );
    let _ = reply.send(ApprovalVerdict::Denied {
        id,
        reason: "no approver is reachable for this chat (no Telegram approver online and no Studio), so it was denied at once".into(),
    });
}

/// Waits for a decision until the request expires, and shows it to approvers and Studio.
async fn wait_for_decision(
    myself: &ActorRef<DeskMsg>,
    state: &mut DeskState,
    row: ApprovalRow,
    reply: RpcReplyPort<ApprovalVerdict>,
) {
    let id = row.id.clone();
    state.waiters.entry(id.clone()).or_default().push(reply);
    state.deadlines.push(Reverse((row.expires_ms, id.clone())));
    arm_timer(myself, state);
    show(&state.args, &row, false).await;
    state.args.events.publish_data(
        EventKind::ApprovalRequested,
        &format!("approval:{id}"),
        &row.action,
        EventData::ApprovalRequested {
            id: id.clone(),
            agent: row.agent.clone(),
            chat: row.chat.clone(),
            tool: row.tool.clone(),
            risk: row.risk.as_str().to_string(),
            action: row.action.clone(),
            reason: row.reason.clone(),
            expires_ms: row.expires_ms,
            run_id: row.run_id,
        },
    );
}
