//! The store's side of one call's gate decision: the live grant of exactly this action (given in
//! the agent's current workspace generation), the strictest stored rule (a handoff contract's tool
//! list included), and the autonomy tightened by the skills the run loaded.

use super::super::run::RunCtx;
use crate::policy::gate::Decision;

/// What the gate weighs for one call besides the call itself: the store's grant and rule, and
/// the run's autonomy tightened by the skills it loaded (named in `tightened_by`).
pub(super) struct CallPolicy<'a> {
    pub(super) grant: Option<String>,
    /// A grant of exactly this action in this chat that lapsed (not yet expired): its id and why.
    pub(super) lapsed_grant: Option<(i64, String)>,
    pub(super) rule: Option<(String, Decision, String)>,
    pub(super) autonomy: crate::config::Autonomy,
    pub(super) tightened_by: Vec<&'a str>,
}

/// Looks up the policy for one call (see [`CallPolicy`]).
pub(super) async fn call_policy<'a>(
    ctx: &'a RunCtx,
    tool: &str,
    action: &str,
    hash: &str,
) -> CallPolicy<'a> {
    // A skill loaded in this run tightens it by its `risk` hint (never loosens). Only when the
    // agent has such a skill does the lookup also read which skills the run loaded.
    let could_tighten: Vec<(&str, crate::config::Autonomy)> = ctx
        .settings
        .skills
        .iter()
        .filter_map(|skill| Some((skill.name.as_str(), skill.autonomy_ceiling()?)))
        .filter(|(_, ceiling)| *ceiling > ctx.settings.autonomy)
        .collect();
    let skills_of_run = (!could_tighten.is_empty()).then_some(ctx.run_id);
    let PolicyLookup {
        grant,
        lapsed_grant,
        rule,
        skills_loaded,
    } = policy_lookup(ctx, tool, action, hash, skills_of_run).await;
    let tightening: Vec<(&str, crate::config::Autonomy)> = could_tighten
        .into_iter()
        .filter(|(name, _)| skills_loaded.iter().any(|loaded| loaded == name))
        .collect();
    let autonomy = tightening
        .iter()
        .map(|(_, ceiling)| *ceiling)
        .fold(ctx.settings.autonomy, std::cmp::max);
    let tightened_by: Vec<&str> = tightening.iter().map(|(name, _)| *name).collect();
    CallPolicy {
        grant,
        lapsed_grant,
        rule,
        autonomy,
        tightened_by,
    }
}

/// What the store says about one call: the live grant, the strictest stored rule (in a
/// delegate's conversation the contract's tool list, when it has one, is a deny rule too), and
/// the skills the run loaded (read only when asked for: `skills_of_run`).
#[derive(Default)]
struct PolicyLookup {
    grant: Option<String>,
    lapsed_grant: Option<(i64, String)>,
    rule: Option<(String, Decision, String)>,
    skills_loaded: Vec<String>,
}

async fn policy_lookup(
    ctx: &RunCtx,
    tool: &str,
    action: &str,
    action_hash: &str,
    skills_of_run: Option<i64>,
) -> PolicyLookup {
    let (agent, chat, tool, action, action_hash) = (
        ctx.agent().to_string(),
        ctx.chat.as_str().to_string(),
        tool.to_string(),
        action.to_string(),
        action_hash.to_string(),
    );
    let channel = match ctx.chat.kind() {
        crate::domain::ChatKind::Telegram => "tg",
        crate::domain::ChatKind::WhatsApp => "wa",
        crate::domain::ChatKind::Signal => "sg",
        crate::domain::ChatKind::Local => "local",
        crate::domain::ChatKind::Schedule => "sched",
        crate::domain::ChatKind::Handoff => "handoff",
        crate::domain::ChatKind::Trigger => "trigger",
    };
    let contract = ctx.chat.handoff_contract().map(str::to_string);
    let now = crate::clock::now_ms();
    let found = ctx
        .runtime
        .store
        .read(move |conn| {
            let skills_loaded = match skills_of_run {
                Some(run_id) => crate::store::runs::skills_used(conn, &[run_id])?
                    .into_iter()
                    .map(|(_, skill)| skill)
                    .collect(),
                None => Vec::new(),
            };
            if let Some(contract) = contract
                .map(|id| crate::store::handoff::get(conn, &id))
                .transpose()?
                .flatten()
                && let Some(allowed) = contract.tools
                && !allowed.contains(&tool)
            {
                let listed = if allowed.is_empty() {
                    "none".to_string()
                } else {
                    allowed.join(", ")
                };
                let reason = format!(
                    "contract {} allows only these tools: {listed}; `{tool}` was not run",
                    contract.id
                );
                return Ok(PolicyLookup {
                    grant: None,
                    lapsed_grant: None,
                    rule: Some((format!("contract:{}", contract.id), Decision::Deny, reason)),
                    skills_loaded,
                });
            }
            let grant =
                crate::store::approvals::live_grant(conn, &agent, &chat, &tool, &action_hash, now)?;
            let lapsed_grant = match grant {
                Some(_) => None,
                None => crate::store::approvals::lapsed_grant(
                    conn,
                    &agent,
                    &chat,
                    &tool,
                    &action_hash,
                    now,
                )?,
            };
            let rule = strictest_rule(
                crate::store::approvals::rules(conn)?,
                &agent,
                &tool,
                channel,
                &action,
            );
            Ok(PolicyLookup {
                grant: grant.map(|id| format!("grant:{id}")),
                lapsed_grant,
                rule,
                skills_loaded,
            })
        })
        .await;
    found.unwrap_or_default()
}

/// The strictest stored rule matching a call: a denying one first, then one that asks.
fn strictest_rule(
    rules: Vec<crate::store::approvals::RuleRow>,
    agent: &str,
    tool: &str,
    channel: &str,
    action: &str,
) -> Option<(String, Decision, String)> {
    let matching: Vec<_> = rules
        .into_iter()
        .filter(|rule| rule.matches(agent, tool, channel, action))
        .collect();
    matching
        .iter()
        .find(|rule| rule.effect == "deny")
        .or_else(|| {
            matching
                .iter()
                .find(|rule| rule.effect == "require_confirmation")
        })
        .map(|rule| {
            let decision = if rule.effect == "deny" {
                Decision::Deny
            } else {
                Decision::RequireApproval
            };
            (
                format!("rule:{}", rule.id),
                decision,
                rule.description.clone(),
            )
        })
}
