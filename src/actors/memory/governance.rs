//! Governance: archive, restore, redact, purge, reclassify — audited in the same transaction,
//! and what must go leaves the index at once.

use serde_json::json;

use super::{MemoryArgs, MemoryState};
use crate::events::{EventData, EventKind};
use crate::protocol::memory::{Governance, SENSITIVITIES};
use crate::store::memory::{self as queries};

pub(super) async fn govern(
    state: &mut MemoryState,
    id: i64,
    operation: Governance,
    by: String,
) -> Result<(), String> {
    if let Governance::Reclassify(sensitivity) = &operation
        && !SENSITIVITIES.contains(&sensitivity.as_str())
    {
        return Err(format!(
            "unknown sensitivity `{sensitivity}` (one of: {})",
            SENSITIVITIES.join(", ")
        ));
    }
    let op = operation.clone();
    let changed = state
        .args
        .store
        .write(move |conn| {
            let now = crate::clock::now_ms();
            let changed = match &op {
                Governance::Archive => queries::set_archived(conn, id, true, now)?,
                Governance::Restore => queries::set_archived(conn, id, false, now)?,
                Governance::Redact => queries::redact(conn, id, now)?,
                Governance::Purge => queries::purge(conn, id)?,
                Governance::Reclassify(sensitivity) => {
                    queries::reclassify(conn, id, sensitivity, now)?
                }
            };
            if changed {
                let details = match &op {
                    Governance::Reclassify(sensitivity) => json!({"sensitivity": sensitivity}),
                    _ => json!({}),
                };
                crate::audit::append(
                    conn,
                    &by,
                    &format!("memory.{}", op.name()),
                    &format!("memory:{id}"),
                    &details,
                )?;
            }
            Ok(changed)
        })
        .await
        .map_err(|error| error.to_string())?;
    if !changed {
        return Err(format!(
            "memory {id} does not exist or is already in that state ({})",
            operation.name()
        ));
    }
    match operation {
        Governance::Archive | Governance::Redact | Governance::Purge => {
            if let Some(index) = state.index.as_mut()
                && index.remove(id)
            {
                state.dirty = true;
            }
        }
        Governance::Restore => {
            let found = state
                .args
                .store
                .read(move |conn| queries::embedding_of(conn, id))
                .await
                .map_err(|error| error.to_string())?;
            if let (Some((owner, vector)), Some(index)) = (found, state.index.as_mut())
                && index.insert(id, &owner, &vector).is_ok()
            {
                state.dirty = true;
            }
        }
        Governance::Reclassify(_) => {}
    }
    Ok(())
}

/// A governance operation went through: audit announcement and `memory_changed` for Studio.
pub(super) fn announce_governed(args: &MemoryArgs, id: i64, name: &str) {
    let subject = format!("memory:{id}");
    let action = format!("memory.{name}");
    crate::audit::announce(&args.events, &action, &subject);
    args.events.publish_data(
        EventKind::MemoryChanged,
        &subject,
        &action,
        EventData::MemoryChanged {
            id,
            change: name.to_string(),
        },
    );
}
