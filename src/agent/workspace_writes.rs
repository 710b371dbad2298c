//! Writes into an agent's workspace, as the grants see them: every tool call or command that could
//! have written there, and every inbound file saved there, moves the agent's workspace generation
//! (`crate::store::workspace`) in the transaction that records it; the grants given before lapse,
//! each with an audit row (`grant.lapsed`) and a `policy_changed` event so open pages refresh.
//!
//! Architecture Invariant: nothing written without a decision changes what a grant lets run. A
//! call that could write moves the generation twice — before it runs (so a crash mid-call cannot
//! lose the bump) and in the transaction that records its result (so a grant given meanwhile, in
//! another conversation, lapses too); a call cleared by a grant checks, in the same transaction as
//! the first bump, that the grant is still honoured, and does not run when it is not.

use serde_json::json;

use crate::events::{EventBus, EventData, EventKind};
use crate::store::workspace::{self, Lapsed, WorkspaceWrite};

/// Records a workspace write in the caller's transaction: moves the generation, lapses the grants
/// it leaves behind and appends an audit row (by `actor`) for each. Announce the answer with
/// [`announce`] once the transaction committed.
pub fn record(
    conn: &rusqlite::Connection,
    write: &WorkspaceWrite<'_>,
    actor: &str,
    now_ms: i64,
) -> crate::store::Result<Vec<Lapsed>> {
    let lapsed = workspace::record_write(conn, write, now_ms)?;
    for grant in &lapsed {
        crate::audit::append(
            conn,
            actor,
            "grant.lapsed",
            &format!("grant:{}", grant.grant),
            &json!({"reason": grant.reason, "agent": write.agent, "written_by": write.what}),
        )?;
    }
    Ok(lapsed)
}

/// Tells the audit log's watchers and open pages about grants that lapsed (after the commit).
pub fn announce(events: &EventBus, lapsed: &[Lapsed]) {
    for grant in lapsed {
        let subject = format!("grant:{}", grant.grant);
        crate::audit::announce(events, "grant.lapsed", &subject);
        events.publish_data(
            EventKind::PolicyChanged,
            &subject,
            &format!("grant lapsed: {}", grant.reason),
            EventData::GrantLapsed { grant: grant.grant },
        );
    }
}

/// What the model is told when a call cleared by a grant finds, just before it runs, that the
/// grant no longer applies.
pub fn lapsed_refusal(grant: i64) -> String {
    format!(
        "Not run: grant {grant} no longer applies, because something wrote in the workspace since it was given. Call it again to ask for approval."
    )
}

/// Records that files sent in a chat are about to be saved into `agent`'s workspace (before they
/// are, so a crash while saving cannot lose the bump), and announces the grants that lapsed.
pub async fn record_inbound_files(
    store: &crate::store::Store,
    events: &EventBus,
    agent: &str,
    update_id: i64,
) -> crate::store::Result<()> {
    let agent = agent.to_string();
    let now = crate::clock::now_ms();
    let lapsed = store
        .write(move |conn| {
            let what = format!("a file sent in a chat was saved (update {update_id})");
            let write = WorkspaceWrite {
                agent: &agent,
                what: &what,
                action: None,
            };
            record(conn, &write, "system", now)
        })
        .await?;
    announce(events, &lapsed);
    Ok(())
}
