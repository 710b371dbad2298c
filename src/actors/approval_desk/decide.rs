//! Decisions: only an approver decides a pending request; the decision (and the grant it
//! creates) is stored with its audit rows before the waiting run, the chat and Studio are told.
//!
//! A blocked (L3) request is decided by the Studio operator alone: denied like any other, or
//! allowed once with `AllowBlockedOnce`, whose confirmation must be the action exactly as shown.
//! That decision is audited as `approval.allowed_blocked_once` (with the action's hash) and never
//! creates a grant: it covers exactly that one action, once.

use std::time::Duration;

use ractor::ActorProcessingErr;
use rusqlite::Connection;
use serde_json::json;

use super::{DeskState, resolve_message};
use crate::events::{EventData, EventKind};
use crate::policy::RiskLevel;
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
    if let Err(outcome) = fits_the_risk(&row, &decision, decider) {
        return Ok(outcome);
    }
    let by = decider.label();
    let status = match decision {
        Decision::Approve | Decision::ApproveFor(_) | Decision::AllowBlockedOnce { .. } => {
            ApprovalStatus::Approved
        }
        Decision::Deny => ApprovalStatus::Denied,
    };
    let grant_for = match decision {
        Decision::ApproveFor(duration) => Some(duration),
        _ => None,
    };
    let blocked_once = matches!(decision, Decision::AllowBlockedOnce { .. });
    let recorded = record_decision(state, &row, status, &by, grant_for, blocked_once).await?;
    let Some(grant) = recorded else {
        return Ok(DecideOutcome::NotPending {
            id: key,
            status: None,
        });
    };
    tell_decision(state, &row, status, &by, &decider.display_name(), grant);
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
        Decider::Channel {
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

/// Whether `decision` may be taken on `row` given its risk: a blocked (L3) action is only allowed
/// once, by the Studio operator, with the typed confirmation (or denied); `AllowBlockedOnce` is
/// only for blocked actions.
fn fits_the_risk(
    row: &ApprovalRow,
    decision: &Decision,
    decider: &Decider,
) -> Result<(), DecideOutcome> {
    let blocked = row.risk == RiskLevel::L3;
    let refuse = |reason: &str| {
        Err(DecideOutcome::NotAllowed {
            reason: reason.to_string(),
        })
    };
    match decision {
        Decision::Deny => Ok(()),
        Decision::AllowBlockedOnce { .. } if !matches!(decider, Decider::Operator { .. }) => {
            refuse("Only the operator in Studio can allow a blocked action.")
        }
        Decision::AllowBlockedOnce { .. } if !blocked => {
            refuse("This action is not a blocked one: approve it with Approve once instead.")
        }
        Decision::AllowBlockedOnce { confirmation }
            if confirmation.trim() != crate::protocol::approvals::typed_action(&row.action) =>
        {
            refuse(
                "The typed confirmation does not match the action. Type the action exactly as shown to allow it once.",
            )
        }
        Decision::AllowBlockedOnce { .. } => Ok(()),
        Decision::Approve | Decision::ApproveFor(_) if blocked => refuse(
            "This action is blocked by policy. Only an operator can allow it, once, in Studio, by typing the action to confirm.",
        ),
        Decision::Approve | Decision::ApproveFor(_) => Ok(()),
    }
}

/// Stores the decision and its grant with their audit rows; `None` when no longer pending.
async fn record_decision(
    state: &DeskState,
    row: &ApprovalRow,
    status: ApprovalStatus,
    by: &str,
    grant_for: Option<Duration>,
    blocked_once: bool,
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
            if blocked_once {
                // A human decision that lets exactly this blocked action run once.
                crate::audit::append(
                    conn,
                    &decided_by,
                    "approval.allowed_blocked_once",
                    &stored.id,
                    &json!({"risk": stored.risk.as_str(), "action": stored.action,
                            "action_hash": stored.action_hash, "tool": stored.tool,
                            "run_id": stored.run_id, "chat": stored.chat,
                            "confirmation": "the action, typed out"}),
                )?;
            }
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
    let (grant, generation) = queries::create_grant(
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
                "action_hash": stored.action_hash, "chat": stored.chat, "expires_ms": expires,
                "until": crate::protocol::approvals::GRANT_LAPSES,
                "workspace_generation": generation}),
    )?;
    Ok(grant)
}

/// Tells a stored decision to the audit log's watchers, the waiting runs, Telegram and Studio.
fn tell_decision(
    state: &mut DeskState,
    row: &ApprovalRow,
    status: ApprovalStatus,
    by: &str,
    shown_as: &str,
    grant: Option<i64>,
) {
    crate::audit::announce(&state.args.events, "approval.decided", &row.id);
    if row.risk == RiskLevel::L3 && status == ApprovalStatus::Approved {
        crate::audit::announce(&state.args.events, "approval.allowed_blocked_once", &row.id);
    }
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
    resolve_message(
        &state.args,
        row,
        &decided_text(row, status, shown_as, grant.is_some()),
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

/// What the Telegram prompt becomes once decided: who decided, the action, and the grant's rule.
pub(super) fn decided_text(
    row: &ApprovalRow,
    status: ApprovalStatus,
    shown_as: &str,
    granted: bool,
) -> String {
    let mark = if status == ApprovalStatus::Approved || status == ApprovalStatus::Consumed {
        "✅ Approved"
    } else {
        "❌ Denied"
    };
    let granted = if granted {
        " Exactly this may run again in this chat for a while without asking, until something else writes in the workspace."
    } else {
        ""
    };
    format!(
        "{mark} by {shown_as}: `{}`{granted}",
        row.action.chars().take(300).collect::<String>()
    )
}
