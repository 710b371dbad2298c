//! Asking a human: the seam between the dispatcher and the ApprovalDesk.
//!
//! A call the gate marks `RequireApproval` waits here for a recorded decision; while it waits the
//! run is `waiting_approval`. An approved action is *consumed* (marked, in the database) before it
//! runs, so it runs at most once even across crashes. Without an approval desk, or when no approver
//! is reachable, the request is denied at once with that reason — never a silent wait.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::run::RunCtx;
use crate::llm::ToolCall;
use crate::policy::gate::DecisionEnvelope;
use crate::protocol::approvals::{ApprovalRequest, ApprovalVerdict, Approvals};
use crate::store::approvals;
use crate::store::runs::{self, NewStep, RunStatus};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    Approved { id: String, by: String },
    Denied { reason: String },
}

/// SHA-256 of the tool name and its canonical arguments (keys sorted): the exact action.
pub fn action_hash(tool: &str, args: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update(b"\n");
    hasher.update(args.to_string().as_bytes());
    hex::encode(hasher.finalize())
}

/// What the approver is asked about: the action as shown, its hash (what a grant covers) and the
/// tool's target (for display), as the dispatcher planned them.
pub struct Asked<'a> {
    pub action: &'a str,
    pub hash: &'a str,
    pub target: String,
}

pub async fn request(
    ctx: &RunCtx,
    call: &ToolCall,
    asked: Asked<'_>,
    envelope: &DecisionEnvelope,
) -> ApprovalOutcome {
    let request = ApprovalRequest {
        agent: ctx.agent().to_string(),
        chat: ctx.chat.clone(),
        run_id: ctx.run_id,
        call_id: call.id.clone(),
        tool: call.name.clone(),
        action: asked.action.to_string(),
        action_hash: asked.hash.to_string(),
        target: asked.target,
        risk: envelope.risk,
        reason: envelope.reason.clone(),
        ttl: ctx.runtime.spec.approval_ttl.0,
    };
    set_status(ctx, RunStatus::WaitingApproval).await;
    let deadline = tokio::time::Instant::now() + request.ttl + Duration::from_secs(30);
    let desk = Approvals::new(&ctx.runtime.registry);
    let verdict = loop {
        let answer = tokio::select! {
            answer = desk.request(request.clone()) => answer,
            _ = ctx.cancel.cancelled() => break ApprovalVerdict::Denied { id: String::new(), reason: "the run was stopped".into() },
        };
        match answer {
            Ok(verdict) => break verdict,
            // The desk is restarting (or restarted while we waited): ask again; the stored
            // request is found and reused.
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await
            }
            Err(error) => {
                break ApprovalVerdict::Denied {
                    id: String::new(),
                    reason: error.to_string(),
                };
            }
        }
    };
    set_status(ctx, RunStatus::Running).await;
    match verdict {
        ApprovalVerdict::Approved { id, by } => {
            let consumed_id = id.clone();
            let now = crate::clock::now_ms();
            match ctx
                .runtime
                .store
                .write(move |conn| approvals::consume(conn, &consumed_id, now))
                .await
            {
                Ok(true) => ApprovalOutcome::Approved { id, by },
                Ok(false) => ApprovalOutcome::Denied {
                    reason: "this approval was already used".into(),
                },
                Err(error) => ApprovalOutcome::Denied {
                    reason: format!("the approval could not be recorded as used ({error})"),
                },
            }
        }
        ApprovalVerdict::Denied { reason, id } => {
            ctx.record_step(NewStep {
                kind: "note",
                name: Some(call.name.clone()),
                detail: json!({"call_id": call.id, "approval": id, "denied": reason}),
                ..NewStep::default()
            })
            .await;
            ApprovalOutcome::Denied { reason }
        }
    }
}

async fn set_status(ctx: &RunCtx, status: RunStatus) {
    let run_id = ctx.run_id;
    let _ = ctx
        .runtime
        .store
        .write(move |conn| runs::set_status(conn, run_id, status))
        .await;
}
