//! The policy gate: the one function every tool call passes through before it may run.
//!
//! It combines, in order: the rate limiter (per chat), the loop guard's verdict on this call, the
//! risk assessment (L3 is blocked in every mode), the stored policy rules (a denying rule wins,
//! an asking one turns an allow into an ask: rules only tighten), the agent's autonomy mode, and
//! last a scoped grant, which turns an ask into an allow. The answer is a [`DecisionEnvelope`] —
//! decision, reason, source, next step — recorded with the run and shown in Studio.
//!
//! Architecture Invariant: no tool runs without an envelope from `decide` that says `Allow`, or a
//! recorded and consumed approval of an envelope that said `RequireApproval`.
//! Architecture Invariant: a scoped grant covers exactly the action a human approved — the tool
//! and its canonical arguments, by hash (`grants.action_hash`) — in that chat, never "the same
//! program" or "the same tool"; and only while the agent's workspace is as it was left by
//! decisions: the caller passes a grant only when it was given in the agent's current workspace
//! generation (`store::workspace`), so a file written since — which the granted command could load
//! — makes the same action ask again.
//!
//! An L3 block stays a denial. Only where the configuration says so (`[policy] allow_l3_once`,
//! off by default) may a call the risk check alone blocked be put to the operator
//! ([`operator_may_allow_once`]): it then runs only after a recorded human decision, typed out,
//! covering exactly that action, once — never under a grant, never past a denying rule, the rate
//! limit or the loop guard.

use super::Effect;
use crate::config::Autonomy;
use crate::policy::{Assessment, RiskLevel};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    RequireApproval,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::RequireApproval => "require_approval",
            Decision::Deny => "deny",
        }
    }
}

/// Why a call may or may not run, in words an operator understands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEnvelope {
    pub decision: Decision,
    pub risk: RiskLevel,
    pub reason: String,
    /// What decided: `autonomy`, `risk`, `rate_limit`, `loop_guard`, `rule:<id>`, `contract:<id>`,
    /// `grant:<id>`.
    pub source: String,
    /// What happens next ("runs now", "waiting for approval from ...", "not run; the model is told why").
    pub next_step: String,
}

impl DecisionEnvelope {
    pub fn requires_confirmation(&self) -> bool {
        self.decision == Decision::RequireApproval
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "decision": self.decision.as_str(),
            "risk": self.risk.as_str(),
            "reason": self.reason,
            "source": self.source,
            "next_step": self.next_step,
            "requires_confirmation": self.requires_confirmation(),
        })
    }

    fn new(decision: Decision, risk: RiskLevel, reason: String, source: &str) -> Self {
        let next_step = match decision {
            Decision::Allow => "runs now".to_string(),
            Decision::RequireApproval => {
                "waits for an approver's decision; expiry counts as a denial".to_string()
            }
            Decision::Deny => "not run; the model is told why".to_string(),
        };
        Self {
            decision,
            risk,
            reason,
            source: source.to_string(),
            next_step,
        }
    }
}

/// What the caller knows about one call.
#[derive(Debug, Clone)]
pub struct GateRequest<'a> {
    pub tool: &'a str,
    pub autonomy: Autonomy,
    pub effect: Effect,
    pub assessment: &'a Assessment,
    /// `Some(reason)` when the per-chat rate limit is exceeded.
    pub rate_limited: Option<String>,
    /// `Some(reason)` when the loop guard refuses this call (e.g. the same call repeated).
    pub loop_guard: Option<String>,
    /// The strictest matching stored rule: (`rule:<id>`, decision it imposes, its description).
    pub rule: Option<(String, Decision, String)>,
    /// A live scoped grant covering this call (`grant:<id>`), given in the agent's current
    /// workspace generation.
    pub grant: Option<String>,
}

/// Decides one call. Pure: every input is in `request`.
pub fn decide(request: &GateRequest<'_>) -> DecisionEnvelope {
    let risk = request.assessment.level;
    let why = request.assessment.reasons.join("; ");
    if let Some(reason) = &request.rate_limited {
        return DecisionEnvelope::new(Decision::Deny, risk, reason.clone(), "rate_limit");
    }
    if let Some(reason) = &request.loop_guard {
        return DecisionEnvelope::new(Decision::Deny, risk, reason.clone(), "loop_guard");
    }
    if risk == RiskLevel::L3 {
        return DecisionEnvelope::new(
            Decision::Deny,
            risk,
            format!("{} is blocked (L3): {why}", request.tool),
            "risk",
        );
    }
    // Stored rules may only tighten: a rule that denies wins, one that asks turns Allow into Ask.
    if let Some((source, Decision::Deny, description)) = &request.rule {
        return DecisionEnvelope::new(
            Decision::Deny,
            risk,
            format!("policy rule: {description}"),
            source,
        );
    }
    let by_autonomy = autonomy_decision(request.autonomy, request.effect, risk);
    let rule_asks = matches!(&request.rule, Some((_, Decision::RequireApproval, _)));
    let (decision, source, reason) = match (by_autonomy, rule_asks) {
        (_, true) => {
            let (source, _, description) = request.rule.as_ref().expect("rule_asks implies a rule");
            (
                Decision::RequireApproval,
                source.clone(),
                format!("policy rule: {description}"),
            )
        }
        (Decision::Allow, false) => (
            Decision::Allow,
            "autonomy".to_string(),
            format!(
                "{} ({}, {}) is allowed in {} mode{}",
                request.tool,
                request.effect.as_str(),
                risk.as_str(),
                request.autonomy.as_str(),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {why}")
                }
            ),
        ),
        (decision, false) => (
            decision,
            "autonomy".to_string(),
            format!(
                "{} ({}, {}) needs approval in {} mode{}",
                request.tool,
                request.effect.as_str(),
                risk.as_str(),
                request.autonomy.as_str(),
                if why.is_empty() {
                    String::new()
                } else {
                    format!(": {why}")
                }
            ),
        ),
    };
    if decision == Decision::RequireApproval
        && let Some(grant) = &request.grant
    {
        return DecisionEnvelope::new(
            Decision::Allow,
            risk,
            format!("covered by scoped grant {grant} ({reason})"),
            grant,
        );
    }
    DecisionEnvelope::new(decision, risk, reason, &source)
}

/// The envelope that puts a blocked call to the operator, when `allow_l3_once` is set and the
/// risk check alone blocked it (an L3 denial with source `risk`: no denying rule or contract, no
/// rate limit, no loop guard). `None`: the denial stands. Pure, like [`decide`].
pub fn operator_may_allow_once(
    request: &GateRequest<'_>,
    envelope: &DecisionEnvelope,
    allow_l3_once: bool,
) -> Option<DecisionEnvelope> {
    let denied_by_rule = matches!(&request.rule, Some((_, Decision::Deny, _)));
    let only_the_risk_blocked = envelope.decision == Decision::Deny
        && envelope.source == "risk"
        && envelope.risk == RiskLevel::L3
        && request.rate_limited.is_none()
        && request.loop_guard.is_none()
        && !denied_by_rule;
    (allow_l3_once && only_the_risk_blocked).then(|| DecisionEnvelope {
        decision: Decision::RequireApproval,
        risk: RiskLevel::L3,
        reason: format!(
            "{}; `[policy] allow_l3_once` lets the operator allow exactly this once in Studio, typing it to confirm",
            envelope.reason
        ),
        source: "risk".to_string(),
        next_step: "waits for the operator to allow it once in Studio (typed confirmation); expiry counts as a denial".to_string(),
    })
}

/// The autonomy × risk table (DESIGN.md, "Policy and risk"; L3 is handled before).
fn autonomy_decision(autonomy: Autonomy, effect: Effect, risk: RiskLevel) -> Decision {
    match autonomy {
        // Everything runs except destructive tools and L2+ writes.
        Autonomy::TrustFirst => match (effect, risk) {
            (Effect::Destructive, _) => Decision::RequireApproval,
            (Effect::Write, RiskLevel::L2) => Decision::RequireApproval,
            (Effect::ReadOnly, RiskLevel::L2) => Decision::RequireApproval,
            _ => Decision::Allow,
        },
        // Read-only tools at L0/L1 run; every write and every L2 asks.
        Autonomy::RequireApproval => match (effect, risk) {
            (Effect::ReadOnly, RiskLevel::L0 | RiskLevel::L1) => Decision::Allow,
            _ => Decision::RequireApproval,
        },
        // Everything asks.
        Autonomy::Supervised => Decision::RequireApproval,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(autonomy: Autonomy, effect: Effect, risk: RiskLevel, expected: Decision) {
        let assessment = Assessment::new(risk, "test");
        let request = GateRequest {
            tool: "t",
            autonomy,
            effect,
            assessment: &assessment,
            rate_limited: None,
            loop_guard: None,
            rule: None,
            grant: None,
        };
        let envelope = decide(&request);
        assert_eq!(
            envelope.decision, expected,
            "{autonomy:?} {effect:?} {risk:?}: {}",
            envelope.reason
        );
    }

    #[test]
    fn autonomy_and_risk_table() {
        use Effect::*;
        use RiskLevel::*;
        let (trust, ask_mode, supervised) = (
            Autonomy::TrustFirst,
            Autonomy::RequireApproval,
            Autonomy::Supervised,
        );
        let (allow, ask, deny) = (Decision::Allow, Decision::RequireApproval, Decision::Deny);
        let table = [
            (trust, ReadOnly, L0, allow),
            (trust, Write, L1, allow),
            (trust, Write, L2, ask),
            (trust, Destructive, L1, ask),
            (trust, Write, L3, deny),
            (ask_mode, ReadOnly, L0, allow),
            (ask_mode, ReadOnly, L1, allow),
            (ask_mode, ReadOnly, L2, ask),
            (ask_mode, Write, L0, ask),
            (ask_mode, Destructive, L3, deny),
            (supervised, ReadOnly, L0, ask),
            (supervised, Write, L1, ask),
            (supervised, ReadOnly, L3, deny),
        ];
        for (autonomy, effect, risk, expected) in table {
            check(autonomy, effect, risk, expected);
        }
    }

    #[test]
    fn rate_limit_and_loop_guard_deny_before_anything_else_and_grants_never_widen_l3() {
        let low = Assessment::new(RiskLevel::L0, "read");
        let mut request = GateRequest {
            tool: "t",
            autonomy: Autonomy::TrustFirst,
            effect: Effect::ReadOnly,
            assessment: &low,
            rate_limited: Some("30 tool calls per minute".into()),
            loop_guard: None,
            rule: None,
            grant: None,
        };
        assert_eq!(decide(&request).source, "rate_limit");
        request.rate_limited = None;
        request.loop_guard = Some("the same call three times".into());
        assert_eq!(decide(&request).source, "loop_guard");

        let blocked = Assessment::new(RiskLevel::L3, "rm -rf");
        let request = GateRequest {
            tool: "shell",
            autonomy: Autonomy::TrustFirst,
            effect: Effect::Destructive,
            assessment: &blocked,
            rate_limited: None,
            loop_guard: None,
            rule: None,
            grant: Some("grant:7".into()),
        };
        assert_eq!(decide(&request).decision, Decision::Deny);

        let write = Assessment::new(RiskLevel::L1, "write");
        let request = GateRequest {
            tool: "write_file",
            autonomy: Autonomy::RequireApproval,
            effect: Effect::Write,
            assessment: &write,
            rate_limited: None,
            loop_guard: None,
            rule: None,
            grant: Some("grant:7".into()),
        };
        let envelope = decide(&request);
        assert_eq!(
            (envelope.decision, envelope.source.as_str()),
            (Decision::Allow, "grant:7")
        );
    }

    #[test]
    fn only_a_block_by_the_risk_check_alone_may_go_to_the_operator_and_only_when_configured() {
        let blocked = Assessment::new(RiskLevel::L3, "`rm -rf` deletes a whole tree");
        let request = GateRequest {
            tool: "shell",
            autonomy: Autonomy::TrustFirst,
            effect: Effect::Destructive,
            assessment: &blocked,
            rate_limited: None,
            loop_guard: None,
            rule: None,
            grant: Some("grant:7".into()),
        };
        let denied = decide(&request);
        assert_eq!(denied.decision, Decision::Deny);
        assert_eq!(operator_may_allow_once(&request, &denied, false), None);
        let asks = operator_may_allow_once(&request, &denied, true).expect("asks the operator");
        assert_eq!(
            (asks.decision, asks.risk, asks.source.as_str()),
            (Decision::RequireApproval, RiskLevel::L3, "risk")
        );
        // A denying rule, the loop guard or the rate limit keep the denial.
        let ruled = GateRequest {
            rule: Some(("rule:2".into(), Decision::Deny, "never".into())),
            ..request.clone()
        };
        assert_eq!(operator_may_allow_once(&ruled, &decide(&ruled), true), None);
        let looping = GateRequest {
            loop_guard: Some("again".into()),
            ..request.clone()
        };
        assert_eq!(
            operator_may_allow_once(&looping, &decide(&looping), true),
            None
        );
        // Anything that is not an L3 block is untouched.
        let low = Assessment::new(RiskLevel::L2, "rm");
        let asked = GateRequest {
            assessment: &low,
            ..request
        };
        assert_eq!(operator_may_allow_once(&asked, &decide(&asked), true), None);
    }

    #[test]
    fn rules_tighten_but_never_loosen() {
        let low = Assessment::new(RiskLevel::L0, "read");
        let request = GateRequest {
            tool: "web_fetch",
            autonomy: Autonomy::TrustFirst,
            effect: Effect::ReadOnly,
            assessment: &low,
            rate_limited: None,
            loop_guard: None,
            rule: Some((
                "rule:3".into(),
                Decision::RequireApproval,
                "ask before fetching".into(),
            )),
            grant: None,
        };
        assert_eq!(decide(&request).decision, Decision::RequireApproval);
        let deny = GateRequest {
            rule: Some(("rule:4".into(), Decision::Deny, "never".into())),
            ..request.clone()
        };
        assert_eq!(decide(&deny).decision, Decision::Deny);
        // A rule saying Allow cannot loosen an L3 block.
        let blocked = Assessment::new(RiskLevel::L3, "x");
        let allow = GateRequest {
            assessment: &blocked,
            rule: Some(("rule:5".into(), Decision::Allow, "fine".into())),
            ..request
        };
        assert_eq!(decide(&allow).decision, Decision::Deny);
    }
}
