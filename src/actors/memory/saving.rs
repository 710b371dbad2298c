//! Saving a memory: checks, the surprise gate (with embeddings) or the exact-duplicate check
//! (full text), the row and its index entry, and what is said about it. A save by the operator
//! (`MemoryMsg::Add`) carries who made it: its audit row (`memory.added`) is written in the
//! transaction that stores the memory.

use rusqlite::Connection;
use serde_json::json;

use super::{GATE_NEIGHBOURS, MemoryArgs, MemoryState};
use crate::events::{EventData, EventKind};
use crate::memory::index::{IndexParams, OwnerFilter, VectorIndex};
use crate::memory::scoring::{self, GateDecision};
use crate::protocol::memory::{CLASSES, MAX_TEXT_CHARS, SENSITIVITIES, SaveOutcome, SaveRequest};
use crate::store::memory::{self as queries, NewFact};

/// Checks a save before anything is stored; the error names what to fix.
pub(super) fn validate(mut request: SaveRequest) -> Result<SaveRequest, String> {
    request.text = check_text(&request.text)?;
    if !CLASSES.contains(&request.class.as_str()) {
        return Err(format!(
            "unknown class `{}` (one of: {})",
            request.class,
            CLASSES.join(", ")
        ));
    }
    if !SENSITIVITIES.contains(&request.sensitivity.as_str()) {
        return Err(format!(
            "unknown sensitivity `{}` (one of: {})",
            request.sensitivity,
            SENSITIVITIES.join(", ")
        ));
    }
    Ok(request)
}

/// A memory's text, trimmed, or why it cannot be stored (empty, too long, a NUL character).
pub(super) fn check_text(text: &str) -> Result<String, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("nothing to save: the text is empty".into());
    }
    let length = text.chars().count();
    if length > MAX_TEXT_CHARS {
        return Err(format!(
            "the text is {length} characters long; memories hold at most {MAX_TEXT_CHARS}: save a summary"
        ));
    }
    if text.contains('\0') {
        return Err("the text contains a NUL character".into());
    }
    Ok(text.to_string())
}

pub(super) fn new_fact(
    request: &SaveRequest,
    surprise: Option<f32>,
    embedding: Option<(Vec<f32>, String)>,
) -> NewFact {
    NewFact {
        owner: request.owner.clone(),
        class: request.class.clone(),
        sensitivity: request.sensitivity.clone(),
        source: request.source.clone(),
        chat: request.chat.clone(),
        text: request.text.clone(),
        run_id: request.run_id,
        message_id: request.message_id,
        surprise,
        embedding,
    }
}

/// Stores `fact` and, for a save by the operator (`by`), its audit row; the new id.
fn insert_audited(
    conn: &Connection,
    fact: &NewFact,
    by: Option<&str>,
) -> crate::store::Result<i64> {
    let id = queries::insert(conn, fact, crate::clock::now_ms())?;
    if let Some(by) = by {
        crate::audit::append(
            conn,
            by,
            "memory.added",
            &format!("memory:{id}"),
            &json!({"owner": fact.owner, "class": fact.class, "sensitivity": fact.sensitivity}),
        )?;
    }
    Ok(id)
}

pub(super) async fn save_full_text(
    state: &mut MemoryState,
    request: SaveRequest,
    by: Option<String>,
) -> Result<SaveOutcome, String> {
    let fact = new_fact(&request, None, None);
    state
        .args
        .store
        .write(move |conn| {
            if let Some(of) = queries::same_text(conn, &fact.owner, &fact.text)? {
                return Ok(SaveOutcome::Duplicate {
                    of,
                    similarity: None,
                });
            }
            let id = insert_audited(conn, &fact, by.as_deref())?;
            Ok(SaveOutcome::Saved { id, surprise: None })
        })
        .await
        .map_err(|error| format!("the memory was not saved: {error}"))
        .inspect(|outcome| log_outcome(&request, outcome))
}

pub(super) async fn save_embedded(
    state: &mut MemoryState,
    request: SaveRequest,
    vector: Vec<f32>,
    by: Option<String>,
) -> Result<SaveOutcome, String> {
    if state.index.is_none() {
        let index = VectorIndex::new(vector.len(), IndexParams::default())
            .map_err(|error| format!("the memory was not saved: {error}"))?;
        state.index = Some(index);
    }
    let Some(index) = state.index.as_mut() else {
        return Err("the memory index is not available".into());
    };
    // The vector is checked (dimension, finite, not zero) before anything is written.
    let normalized = crate::memory::index::normalize(&vector, index.dimension()).map_err(|error| {
        format!("the memory was not saved: the embeddings provider returned an unusable vector ({error})")
    })?;
    let nearest = index
        .search(
            &normalized,
            GATE_NEIGHBOURS,
            &OwnerFilter::only([request.owner.clone()]),
        )
        .map_err(|error| format!("the memory was not saved: {error}"))?;
    let surprise = match scoring::gate(&nearest, state.args.surprise_threshold) {
        GateDecision::Duplicate { of, similarity } => {
            let outcome = SaveOutcome::Duplicate {
                of,
                similarity: Some(similarity),
            };
            log_outcome(&request, &outcome);
            return Ok(outcome);
        }
        GateDecision::Save { surprise } => surprise,
    };
    let fact = new_fact(
        &request,
        Some(surprise),
        Some((normalized.clone(), state.model.clone())),
    );
    let id = state
        .args
        .store
        .write(move |conn| insert_audited(conn, &fact, by.as_deref()))
        .await
        .map_err(|error| format!("the memory was not saved: {error}"))?;
    if let Err(error) = index.insert(id, &request.owner, &normalized) {
        // Stored in SQLite (the source of truth): the next rebuild indexes it.
        tracing::warn!(id, %error, "memory: saved but not indexed; the next rebuild will");
    }
    state.dirty = true;
    let outcome = SaveOutcome::Saved {
        id,
        surprise: Some(surprise),
    };
    log_outcome(&request, &outcome);
    Ok(outcome)
}

/// `memory_changed` for a memory that was saved (a skipped duplicate changes nothing), and the
/// audit row's announcement for a save by the operator (`audited`).
pub(super) fn announce_saved(
    args: &MemoryArgs,
    outcome: &Result<SaveOutcome, String>,
    audited: bool,
) {
    if let Ok(SaveOutcome::Saved { id, .. }) = outcome {
        if audited {
            crate::audit::announce(&args.events, "memory.added", &format!("memory:{id}"));
        }
        args.events.publish_data(
            EventKind::MemoryChanged,
            &format!("memory:{id}"),
            "saved",
            EventData::MemoryChanged {
                id: *id,
                change: "saved".to_string(),
            },
        );
    }
}

pub(super) fn log_outcome(request: &SaveRequest, outcome: &SaveOutcome) {
    match outcome {
        SaveOutcome::Saved { id, surprise } => {
            tracing::debug!(owner = %request.owner, id, ?surprise, "memory saved");
        }
        SaveOutcome::Duplicate { of, similarity } => {
            tracing::info!(owner = %request.owner, duplicate_of = of, ?similarity, "memory not saved: a near duplicate exists");
        }
    }
}
