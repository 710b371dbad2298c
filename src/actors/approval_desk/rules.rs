//! Operator policy administration: revoking a scoped grant, adding and disabling policy rules.
//! Each change is stored with its audit row in one transaction, then announced (`audit_appended`
//! and `policy_changed`). Rules only tighten; grants cover exactly one approved action.

use ractor::ActorProcessingErr;
use serde_json::json;

use super::DeskState;
use crate::events::{EventData, EventKind};
use crate::protocol::approvals::NewRule;
use crate::store::approvals as queries;

/// Revokes grant `id` (audited); `false` when it was not live.
pub(super) async fn revoke_grant(
    state: &DeskState,
    id: i64,
    by: String,
) -> Result<bool, ActorProcessingErr> {
    let revoked = state
        .args
        .store
        .write(move |conn| {
            let revoked = queries::revoke_grant(conn, id, crate::clock::now_ms())?;
            if revoked {
                crate::audit::append(
                    conn,
                    &by,
                    "grant.revoked",
                    &format!("grant:{id}"),
                    &json!({}),
                )?;
            }
            Ok(revoked)
        })
        .await?;
    if revoked {
        policy_changed(
            state,
            "grant.revoked",
            &format!("grant:{id}"),
            "grant revoked",
            EventData::GrantRevoked { grant: id },
        );
    }
    Ok(revoked)
}

/// Adds a rule (audited); the new rule's id.
pub(super) async fn add_rule(
    state: &DeskState,
    rule: NewRule,
    by: String,
) -> Result<i64, ActorProcessingErr> {
    let id = state
        .args
        .store
        .write(move |conn| {
            let id = queries::add_rule(
                conn,
                rule.effect.as_str(),
                rule.tool.as_deref(),
                rule.agent.as_deref(),
                rule.channel.as_deref(),
                rule.pattern.as_deref(),
                &rule.description,
                &by,
                crate::clock::now_ms(),
            )?;
            crate::audit::append(
                conn,
                &by,
                "policy.rule_added",
                &format!("rule:{id}"),
                &json!({"effect": rule.effect.as_str(), "tool": rule.tool, "agent": rule.agent,
                        "channel": rule.channel, "pattern": rule.pattern, "description": rule.description}),
            )?;
            Ok(id)
        })
        .await?;
    policy_changed(
        state,
        "policy.rule_added",
        &format!("rule:{id}"),
        "rule added",
        EventData::RuleAdded { rule: id },
    );
    Ok(id)
}

/// Disables rule `id` (audited); `false` when it was not active.
pub(super) async fn disable_rule(
    state: &DeskState,
    id: i64,
    by: String,
) -> Result<bool, ActorProcessingErr> {
    let disabled = state
        .args
        .store
        .write(move |conn| {
            let disabled = queries::disable_rule(conn, id, crate::clock::now_ms())?;
            if disabled {
                crate::audit::append(
                    conn,
                    &by,
                    "policy.rule_disabled",
                    &format!("rule:{id}"),
                    &json!({}),
                )?;
            }
            Ok(disabled)
        })
        .await?;
    if disabled {
        policy_changed(
            state,
            "policy.rule_disabled",
            &format!("rule:{id}"),
            "rule disabled",
            EventData::RuleDisabled { rule: id },
        );
    }
    Ok(disabled)
}

/// A policy change outside an approval (a grant revoked, a rule added or disabled), once its
/// audited write committed: the audit row is announced, and `policy_changed` tells live views.
fn policy_changed(state: &DeskState, action: &str, subject: &str, detail: &str, data: EventData) {
    crate::audit::announce(&state.args.events, action, subject);
    state
        .args
        .events
        .publish_data(EventKind::PolicyChanged, subject, detail, data);
}
