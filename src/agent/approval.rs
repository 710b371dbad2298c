//! Asking a human: the seam between the dispatcher and the ApprovalDesk; and telling the chat
//! when the policy refuses an action.
//!
//! A refusal by the policy itself (the risk check's L3 block, an operator's rule) is told to the
//! person in the chat — what was not done, why, and what an operator could change — as a notice
//! that is also kept in the transcript (`protocol::approvals::refusal_notice`); the model is told
//! separately, in the tool result. A blocked action put to the operator (`[policy]
//! allow_l3_once`) says it waits for the operator instead.
//!
//! A call the gate marks `RequireApproval` waits here for a recorded decision; while it waits the
//! run is `waiting_approval`. An approved action is *consumed* (marked, in the database) before it
//! runs, so it runs at most once even across crashes. Without an approval desk, or when no approver
//! is reachable, the request is denied at once with that reason — never a silent wait.

use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::run::RunCtx;
use crate::domain::{ChatKind, OutEvent};
use crate::llm::ToolCall;
use crate::policy::gate::DecisionEnvelope;
use crate::protocol::approvals::{
    ApprovalRequest, ApprovalVerdict, Approvals, Refusal, refusal_notice,
};
use crate::store::approvals;
use crate::store::runs::{self, NewStep, RunStatus};
use crate::store::sessions::{self, EventKindRow, NewEvent};

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
    /// What the tool showed before asking (the browser's screenshot), kept with the request.
    pub screenshot: Option<Vec<u8>>,
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
        screenshot: asked
            .screenshot
            .map(|png| crate::protocol::approvals::Screenshot(png.into())),
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

/// A call the policy refused (or put to the operator), as the chat is told about it.
pub struct Told<'a> {
    pub tool: &'a str,
    pub action: &'a str,
    /// The risk check's reasons.
    pub why: &'a str,
    pub envelope: &'a DecisionEnvelope,
}

/// Tells a person's chat (Telegram, terminal, Studio) that the policy refused an action, or, when
/// `waits`, that it waits for the operator: a notice, also kept in the transcript. Refusals that
/// are the model's own doing (rate limit, loop guard, a contract's tool list) are told to the
/// model only.
pub async fn tell_refusal(ctx: &RunCtx, told: &Told<'_>, waits: bool) {
    let source = told.envelope.source.as_str();
    let by_policy = source == "risk" || source.starts_with("rule:");
    if !by_policy || !(ctx.chat.kind().has_outbox() || ctx.chat.kind() == ChatKind::Local) {
        return;
    }
    let why = if source == "risk" && !told.why.is_empty() {
        told.why.to_string()
    } else {
        told.envelope.reason.clone()
    };
    let text = refusal_notice(&Refusal {
        agent: ctx.agent(),
        tool: told.tool,
        action: told.action,
        why: &why,
        source,
        operator_may_allow: waits.then_some(ctx.runtime.spec.approval_ttl.0),
    });
    let (session_id, run_id, now) = (ctx.session_id, ctx.run_id, crate::clock::now_ms());
    let stored = text.clone();
    let written = ctx
        .runtime
        .store
        .write(move |conn| {
            sessions::append(
                conn,
                session_id,
                &NewEvent {
                    kind: EventKindRow::Notice,
                    sender: None,
                    content: &stored,
                    data: None,
                    run_id: Some(run_id),
                    inbound_id: None,
                },
                now,
            )
            .map(|_| ())
        })
        .await;
    if let Err(error) = written {
        tracing::warn!(run_id, %error, "could not keep a refusal notice in the transcript");
    }
    ctx.deliver(OutEvent::Notice { text });
}

async fn set_status(ctx: &RunCtx, status: RunStatus) {
    let run_id = ctx.run_id;
    let _ = ctx
        .runtime
        .store
        .write(move |conn| runs::set_status(conn, run_id, status))
        .await;
}
