//! Editing a memory: the operator replaces its text. The memory keeps its origin — owner,
//! class, sensitivity, source, chat, run and message (its lineage), when it was saved — and
//! records who edited it and when; the audit row (`memory.edited`, without the text) is written
//! in the same transaction as the new text, and the index follows at once: the old vector leaves
//! it and the new text's enters (a live memory with an embeddings provider), so a search finds
//! the memory by what it now says.
//!
//! Invariant: a redacted memory is never edited (its text is gone for good), and an edit whose
//! text cannot be embedded while a provider is configured changes nothing.

use serde_json::json;

use super::saving::check_text;
use super::{MemoryArgs, MemoryState};
use crate::events::{EventData, EventKind};
use crate::memory::index::{IndexParams, VectorIndex};
use crate::store::memory::{self as queries, FactRow};

/// An edit checked against the stored memory, waiting for its text's embedding.
pub struct Edit {
    pub id: i64,
    /// The new text, trimmed.
    pub text: String,
    pub by: String,
    /// The memory's owner (the index keys vectors by owner).
    pub owner: String,
    /// Whether the memory is live (archived ones are not in the index).
    pub live: bool,
    pub chars_before: usize,
}

/// Checks an edit of memory `id` against what is stored: it exists, is not redacted, and the new
/// text is a memory's text and differs from the old one.
pub(super) async fn check_edit(
    state: &MemoryState,
    id: i64,
    text: &str,
    by: String,
) -> Result<Edit, String> {
    let text = check_text(text)?;
    let fact = state
        .args
        .store
        .read(move |conn| queries::get(conn, id))
        .await
        .map_err(|error| error.to_string())?
        .ok_or_else(|| format!("memory {id} does not exist"))?;
    if fact.redacted_ms.is_some() {
        return Err(format!(
            "memory {id} was redacted: its text is gone for good; add a new memory instead"
        ));
    }
    if fact.text == text {
        return Err(format!("memory {id} already says exactly that"));
    }
    Ok(Edit {
        id,
        text,
        by,
        owner: fact.owner,
        live: fact.archived_ms.is_none(),
        chars_before: fact.text.chars().count(),
    })
}

/// Stores the edit (with its audit row) and brings the index along; `vector`: the new text's
/// embedding, when there is a provider.
pub(super) async fn apply_edit(
    state: &mut MemoryState,
    edit: Edit,
    vector: Option<Vec<f32>>,
) -> Result<FactRow, String> {
    let normalized = match vector {
        Some(vector) => {
            if state.index.is_none() {
                let index = VectorIndex::new(vector.len(), IndexParams::default())
                    .map_err(|error| format!("the memory was not changed: {error}"))?;
                state.index = Some(index);
            }
            let dimension = state
                .index
                .as_ref()
                .map_or(vector.len(), VectorIndex::dimension);
            Some(
                crate::memory::index::normalize(&vector, dimension).map_err(|error| {
                    format!("the memory was not changed: the embeddings provider returned an unusable vector ({error})")
                })?,
            )
        }
        None => None,
    };
    let model = state.model.clone();
    let Edit {
        id,
        text,
        by,
        owner,
        live,
        chars_before,
    } = edit;
    let stored_vector = normalized.clone();
    let details = json!({
        "owner": owner, "chars_before": chars_before, "chars_after": text.chars().count(),
    });
    let fact = state
        .args
        .store
        .write(move |conn| {
            let embedding = stored_vector
                .as_deref()
                .map(|vector| (vector, model.as_str()));
            let now = crate::clock::now_ms();
            if !queries::edit_text(conn, id, &text, embedding, &by, now)? {
                return Ok(None);
            }
            crate::audit::append(
                conn,
                &by,
                "memory.edited",
                &format!("memory:{id}"),
                &details,
            )?;
            queries::get(conn, id)
        })
        .await
        .map_err(|error| format!("the memory was not changed: {error}"))?
        .ok_or_else(|| format!("memory {id} does not exist or was redacted"))?;
    if let Some(index) = state.index.as_mut() {
        let removed = index.remove(id);
        let inserted = match (&normalized, live) {
            (Some(vector), true) => match index.insert(id, &owner, vector) {
                Ok(()) => true,
                Err(error) => {
                    // Stored in SQLite (the source of truth): the next rebuild indexes it.
                    tracing::warn!(id, %error, "memory: edited but not indexed; the next rebuild will");
                    false
                }
            },
            _ => false,
        };
        state.dirty |= removed || inserted;
    }
    Ok(fact)
}

/// An edit went through: its audit row's announcement and `memory_changed` for Studio.
pub(super) fn announce_edited(args: &MemoryArgs, result: &Result<FactRow, String>) {
    if let Ok(fact) = result {
        let subject = format!("memory:{}", fact.id);
        crate::audit::announce(&args.events, "memory.edited", &subject);
        args.events.publish_data(
            EventKind::MemoryChanged,
            &subject,
            "memory.edited",
            EventData::MemoryChanged {
                id: fact.id,
                change: "edited".to_string(),
            },
        );
    }
}
