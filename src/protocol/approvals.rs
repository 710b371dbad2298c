//! The approvals service: a run asks for a human decision; approvers (Telegram, Studio, the
//! terminal) decide; the operator administers grants and policy rules. Served by
//! `actors/approval_desk/`.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::domain::ChatKey;
use crate::policy::RiskLevel;
use crate::registry::Registry;
use crate::store::approvals::ApprovalStatus;

/// Where the approval desk is registered.
pub const NAME: ServiceName<ApprovalDeskMsg> = ServiceName::fixed("approvals");
/// How long a decision or an administrative change may take (a stored, audited write).
const TIMEOUT: Duration = Duration::from_secs(10);

/// What a run asks.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    pub agent: String,
    pub chat: ChatKey,
    pub run_id: i64,
    pub call_id: String,
    pub tool: String,
    pub action: String,
    pub action_hash: String,
    pub target: String,
    pub risk: RiskLevel,
    pub reason: String,
    pub ttl: Duration,
}

/// The answer a waiting run gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalVerdict {
    Approved { id: String, by: String },
    Denied { id: String, reason: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Approve, and let the same tool on the same target run without asking for this long.
    ApproveFor(Duration),
    Deny,
}

/// Who decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decider {
    /// A Telegram user pressing a button or typing `/approve`; `approver` as the bot knows it.
    Telegram {
        agent: String,
        user_id: i64,
        name: String,
        approver: bool,
    },
    /// The Studio operator.
    Operator { name: String },
    /// The user of a local (terminal) chat, for requests of that chat only.
    Local { chat: ChatKey },
}

impl Decider {
    pub fn label(&self) -> String {
        match self {
            Decider::Telegram { user_id, name, .. } => format!("telegram:{user_id} ({name})"),
            Decider::Operator { name } => format!("operator ({name})"),
            Decider::Local { chat } => format!("local:{chat}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideOutcome {
    Approved {
        id: String,
    },
    Denied {
        id: String,
    },
    /// Unknown, already decided, or expired.
    NotPending {
        id: String,
        status: Option<ApprovalStatus>,
    },
    NotAllowed {
        reason: String,
    },
}

impl DecideOutcome {
    /// What the decider is told.
    pub fn message(&self) -> String {
        match self {
            DecideOutcome::Approved { id } => format!("Approved ({id})."),
            DecideOutcome::Denied { id } => format!("Denied ({id})."),
            DecideOutcome::NotPending {
                status: Some(status),
                ..
            } if *status == ApprovalStatus::DeniedTimeout => {
                "This request has expired; it was not approved.".into()
            }
            DecideOutcome::NotPending {
                status: Some(status),
                ..
            } => format!("This request was already decided ({status})."),
            DecideOutcome::NotPending { .. } => {
                "This request has expired or does not exist.".into()
            }
            DecideOutcome::NotAllowed { reason } => reason.clone(),
        }
    }
}

/// What others may ask of the approval desk.
pub enum ApprovalDeskMsg {
    Request(ApprovalRequest, RpcReplyPort<ApprovalVerdict>),
    Decide(String, Decision, Decider, RpcReplyPort<DecideOutcome>),
    /// The bot posted the buttons of a request.
    Posted {
        id: String,
        chat_id: i64,
        message_id: i32,
    },
    /// An agent's bot is online: requests carried over from before a restart are posted again.
    BotOnline {
        agent: String,
    },
    /// Revoke a scoped grant (audited); `false` when it was not live.
    RevokeGrant {
        id: i64,
        by: String,
        reply: RpcReplyPort<bool>,
    },
    /// Add a policy rule (audited); the id of the new rule.
    AddRule {
        rule: NewRule,
        by: String,
        reply: RpcReplyPort<i64>,
    },
    /// Disable a policy rule (audited); `false` when it was not active.
    DisableRule {
        id: i64,
        by: String,
        reply: RpcReplyPort<bool>,
    },
}

/// A policy rule as an operator writes it. Rules only tighten: `deny` or `require_confirmation`
/// (nothing can loosen an L3 block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRule {
    pub effect: RuleEffect,
    /// A tool name, or a prefix ending in `*` (`github__*`); `None`: every tool.
    pub tool: Option<String>,
    pub agent: Option<String>,
    /// A channel kind (`tg`, `local`, `sched`, `handoff`).
    pub channel: Option<String>,
    /// A substring of the action ("rm ", "/etc/").
    pub pattern: Option<String>,
    pub description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleEffect {
    Deny,
    RequireConfirmation,
}

impl RuleEffect {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleEffect::Deny => "deny",
            RuleEffect::RequireConfirmation => "require_confirmation",
        }
    }

    pub fn parse(text: &str) -> Option<RuleEffect> {
        match text {
            "deny" => Some(RuleEffect::Deny),
            "require_confirmation" => Some(RuleEffect::RequireConfirmation),
            _ => None,
        }
    }
}

/// Why the approvals service could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalsError {
    #[error(transparent)]
    Unavailable(#[from] CallError),
}

/// The approvals service, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Approvals {
    registry: Registry,
}

impl Approvals {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    /// Asks for a decision and waits for it, as long as it takes (the desk expires the request).
    pub async fn request(
        &self,
        request: ApprovalRequest,
    ) -> Result<ApprovalVerdict, ApprovalsError> {
        Ok(super::ask(&self.registry, &NAME, None, |reply| {
            ApprovalDeskMsg::Request(request, reply)
        })
        .await?)
    }

    /// Records `decider`'s decision on request `id`.
    pub async fn decide(
        &self,
        id: &str,
        decision: Decision,
        decider: Decider,
    ) -> Result<DecideOutcome, ApprovalsError> {
        let id = id.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::Decide(id, decision, decider, reply)
        })
        .await?)
    }

    /// A bot posted the buttons of request `id` (so that the message can be resolved later).
    pub fn posted(&self, id: String, chat_id: i64, message_id: i32) {
        let posted = ApprovalDeskMsg::Posted {
            id,
            chat_id,
            message_id,
        };
        let _ = super::tell(&self.registry, &NAME, posted);
    }

    /// An agent's bot is online: requests carried over from before a restart are posted again.
    pub fn bot_online(&self, agent: &str) {
        let online = ApprovalDeskMsg::BotOnline {
            agent: agent.to_string(),
        };
        let _ = super::tell(&self.registry, &NAME, online);
    }

    /// Revokes a scoped grant (audited); `false` when it was not live.
    pub async fn revoke_grant(&self, id: i64, by: &str) -> Result<bool, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::RevokeGrant { id, by, reply }
        })
        .await?)
    }

    /// Adds a policy rule (audited); the new rule's id.
    pub async fn add_rule(&self, rule: NewRule, by: &str) -> Result<i64, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::AddRule { rule, by, reply }
        })
        .await?)
    }

    /// Disables a policy rule (audited); `false` when it was not active.
    pub async fn disable_rule(&self, id: i64, by: &str) -> Result<bool, ApprovalsError> {
        let by = by.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            ApprovalDeskMsg::DisableRule { id, by, reply }
        })
        .await?)
    }
}
