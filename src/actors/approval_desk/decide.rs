//! Decisions: only an approver decides a pending request; the decision (and the grant it
//! creates) is stored with its audit rows before the waiting run, the chat and Studio are told.

use std::time::Duration;

use ractor::ActorProcessingErr;
use rusqlite::Connection;
use serde_json::json;

use super::{DeskState, resolve_message};
use crate::events::{EventData, EventKind};
use crate::protocol::approvals::{ApprovalVerdict, DecideOutcome, Decider, Decision};
use crate::store::approvals::{self as queries, ApprovalRow, ApprovalStatus};

/// Decides request `id` for `decider`, when it is pending and theirs to decide.
pub(super) async fn on_decide(
    state: &mut DeskState,
    id: &str,
    decision: Decision,
    decider: &Decider,
) -> Result<DecideOutcome, ActorProcessingErr> {
    let key = id.trim().to_ascii_lowercase();
    let lookup = key.clone();
    let found = state
        .args
        .store
        .read(move |conn| queries::get(conn, &lookup))
        .await?;
    let row = match decidable(&key, found, decider) {
        Ok(row) => row,
        Err(outcome) => return Ok(outcome),
    };
    let by = decider.label();
    let status = match decision {
        Decision::Approve | Decision::ApproveFor(_) => ApprovalStatus::Approved,
        Decision::Deny => ApprovalStatus::Denied,
    };
    let grant_for = match decision {
        Decision::ApproveFor(duration) => Some(duration),
        _ => None,
    };
    let Some(grant) = record_decision(state, &row, status, &by, grant_for).await? else {
        return Ok(DecideOutcome::NotPending {
            id: key,
            status: None,
        });
    };
    tell_decision(state, &row, status, &by, grant);
    Ok(if status == ApprovalStatus::Approved {
        DecideOutcome::Approved { id: row.id }
    } else {
        DecideOutcome::Denied { id: row.id }
    })
}

/// The request when `decider` may decide it now; otherwise the answer saying why not.
fn decidable(
    key: &str,
    found: Option<ApprovalRow>,
    decider: &Decider,
) -> Result<ApprovalRow, DecideOutcome> {
    let not_pending = |status| DecideOutcome::NotPending {
        id: key.to_string(),
        status,
    };
    let Some(row) = found else {
        return Err(not_pending(None));
    };
    if row.status != ApprovalStatus::Pending {
        return Err(not_pending(Some(row.status)));
    }
    if row.expires_ms <= crate::clock::now_ms() {
        return Err(not_pending(Some(ApprovalStatus::DeniedTimeout)));
    }
    match decider {
        Decider::Telegram {
            agent, approver, ..
        } if !approver || *agent != row.agent => Err(DecideOutcome::NotAllowed {
            reason: "Only this agent's approvers can decide this.".into(),
        }),
        Decider::Local { chat } if chat.as_str() != row.chat => Err(DecideOutcome::NotAllowed {
            reason: "You can only decide requests of your own chat.".into(),
        }),
        _ => Ok(row),
    }
}

/// Stores the decision and its grant with their audit rows; `None` when no longer pending.
async fn record_decision(
    state: &DeskState,
    row: &ApprovalRow,
    status: ApprovalStatus,
    by: &str,
    grant_for: Option<Duration>,
) -> Result<Option<Option<i64>>, ActorProcessingErr> {
    let now = crate::clock::now_ms();
    let (stored, decided_by) = (row.clone(), by.to_string());
    // None: it was no longer pending; Some(grant): decided, with the grant it created if any.
    let decided = state
        .args
        .store
        .write(move |conn| {
            if !queries::decide(conn, &stored.id, status, &decided_by, now)? {
                return Ok(None);
            }
            crate::audit::append(
                conn,
                &decided_by,
                "approval.decided",
                &stored.id,
                &json!({"decision": status, "action_hash": stored.action_hash, "tool": stored.tool, "run_id": stored.run_id}),
            )?;
            let Some(duration) = grant_for else {
                return Ok(Some(None));
            };
            let grant = grant_exact_action(conn, &stored, &decided_by, duration, now)?;
            Ok(Some(Some(grant)))
        })
        .await?;
    Ok(decided)
}

/// Creates the grant an approval offers (this exact action, in this chat), with its audit row.
fn grant_exact_action(
    conn: &Connection,
    stored: &ApprovalRow,
    decided_by: &str,
    duration: Duration,
    now: i64,
) -> crate::store::Result<i64> {
    let expires = now + duration.as_millis() as i64;
    let grant = queries::create_grant(
        conn,
        &queries::NewGrant {
            agent: &stored.agent,
            chat: &stored.chat,
            tool: &stored.tool,
            target: &stored.action,
            action_hash: &stored.action_hash,
            expires_ms: expires,
            created_by: decided_by,
            approval_id: Some(&stored.id),
        },
        now,
    )?;
    crate::audit::append(
        conn,
        decided_by,
        "grant.created",
        &format!("grant:{grant}"),
        &json!({"tool": stored.tool, "scope": "this exact action", "action": stored.action,
                "action_hash": stored.action_hash, "chat": stored.chat, "expires_ms": expires}),
    )?;
    Ok(grant)
}

/// Tells a stored decision to the audit log's watchers, the waiting runs, Telegram and Studio.
fn tell_decision(
    state: &mut DeskState,
    row: &ApprovalRow,
    status: ApprovalStatus,
    by: &str,
    grant: Option<i64>,
) {
    crate::audit::announce(&state.args.events, "approval.decided", &row.id);
    if let Some(grant) = grant {
        crate::audit::announce(
            &state.args.events,
            "grant.created",
            &format!("grant:{grant}"),
        );
    }
    let verdict = match status {
        ApprovalStatus::Approved => ApprovalVerdict::Approved {
            id: row.id.clone(),
            by: by.to_string(),
        },
        _ => ApprovalVerdict::Denied {
            id: row.id.clone(),
            reason: format!("denied by {by}"),
        },
    };
    for waiter in state.waiters.remove(&row.id).unwrap_or_default() {
        let _ = waiter.send(verdict.clone());
    }
    let mark = if status == ApprovalStatus::Approved {
        "✅ Approved"
    } else {
        "❌ Denied"
    };
    resolve_message(
        &state.args,
        row,
        &format!(
            "{mark} by {by}: `{}`",
            row.action.chars().take(300).collect::<String>()
        ),
    );
    state.args.events.publish_data(
        EventKind::ApprovalDecided,
        &format!("approval:{}", row.id),
        &format!("{status} by {by}"),
        EventData::ApprovalDecided {
            id: row.id.clone(),
            status: status.to_string(),
            by: by.to_string(),
            agent: row.agent.clone(),
        },
    );
}
