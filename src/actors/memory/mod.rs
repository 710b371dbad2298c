//! Memory: the one owner of the semantic index; saves, searches and governs memories.
//!
//! SQLite (`memory_facts`, with each memory's embedding, and its FTS5 index `memory_fts`) is the
//! source of truth. This actor holds the hnsw index built from it: loaded from its dump at start
//! when the dump matches SQLite's watermark, rebuilt from SQLite otherwise (missing, stale or
//! corrupt dump — the last two with a warning); dumped every few minutes when changed and at stop.
//!
//! Saving: the text is embedded (in a spawned task: the mailbox stays responsive), then the five
//! nearest memories of the same owner decide (surprise gating): below the threshold it is a near
//! duplicate, not saved, and the skip is logged naming the memory it duplicates. Without an
//! embeddings provider, memory works in full-text mode (`doctor`, `clawvisor memory stats` and
//! Studio say so) and an exact duplicate is not saved.
//!
//! Searching: FTS5 (BM25) and, with embeddings, the index (re-ranked by the surprise each memory
//! had when saved) are merged by reciprocal rank fusion. The read model is enforced in the store's
//! queries: an agent reads its own memories, its direct reports' and the platform's, and private
//! ones (`restricted`, `session_recap`) only in the chat they came from.
//!
//! Governance: archive, restore, redact, purge, reclassify (`governance.rs`). The operator also
//! adds memories (`Add`: a save audited as `memory.added`) and edits them (`Edit`,
//! `editing.rs`: the text replaced, its origin kept, audited as `memory.edited`, re-embedded and
//! re-indexed); both are announced as `memory_changed`.
//!
//! Architecture Invariant: a memory is stored only after its vector was validated
//! (`memory::embeddings`); governance changes carry their audit row in the same transaction and
//! leave the index at once.
//!
//! Background job: the maintenance tick (owner: this actor; every 5 min; reads `memory_facts`;
//! dumps a changed index and rebuilds it when tombstones pile up; cancelled with the actor, which
//! dumps the index at stop; idempotent).
//!
//! Restart policy: permanent. A restart reloads the index from its dump or SQLite.

mod editing;
mod governance;
mod reembed;
mod retrieval;
mod saving;
mod upkeep;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

use editing::{Edit, announce_edited, apply_edit, check_edit};
use governance::{announce_governed, govern};
use retrieval::search;
use saving::{announce_saved, save_embedded, save_full_text, validate};
use upkeep::{dump, rebuild};

use crate::events::EventBus;
use crate::memory::index::{IndexParams, LoadOutcome, VectorIndex, Watermark};
use crate::memory::{Embedder, EmbeddingsChoice};
use crate::protocol::memory::{
    MemoryError, MemoryMsg, MemoryStats, PLATFORM, ReindexProgress, SaveOutcome, SaveRequest,
    SearchRequest, SearchResult,
};
use crate::store::Store;
use crate::store::memory::{self as queries, FactRow};

/// Neighbours consulted by the surprise gate.
pub(super) const GATE_NEIGHBOURS: usize = 5;
/// Candidates each source contributes to a hybrid search.
pub(super) const CANDIDATES: usize = 30;
const MAINTAIN_EVERY: Duration = Duration::from_secs(300);

/// What makes the memory actor act: others' requests, embeddings its tasks computed, and its
/// maintenance timer.
pub enum MemoryEvent {
    Request(MemoryMsg),
    /// The embedding of a save arrived (from the spawned task); with who saved it, for a save
    /// by the operator (audited).
    SaveEmbedded(
        SaveRequest,
        Option<String>,
        Result<Vec<f32>, String>,
        RpcReplyPort<Result<SaveOutcome, MemoryError>>,
    ),
    /// The embedding of an edited memory's new text arrived (from the spawned task).
    EditEmbedded(
        Edit,
        Result<Vec<f32>, String>,
        RpcReplyPort<Result<FactRow, MemoryError>>,
    ),
    SearchEmbedded(
        SearchRequest,
        Result<Vec<f32>, String>,
        RpcReplyPort<Result<SearchResult, MemoryError>>,
    ),
    /// Every 5 minutes: rebuild the index when it is worn, dump it when it changed.
    Maintain,
    /// The re-embedding task stored a batch of vectors of the current model (`reembed.rs`).
    Reembedded(reembed::Embedded),
    /// The re-embedding task ended (an error: it stopped early and resumes later).
    ReembedEnded(Result<(), String>),
}

wraps_requests!(MemoryEvent, MemoryMsg);

#[derive(Clone)]
pub struct MemoryArgs {
    pub store: Store,
    /// Where the index is dumped.
    pub dir: PathBuf,
    /// What embeds memories (a provider or a local model); none: full text.
    pub embeddings: Option<EmbeddingsChoice>,
    /// Why this mode, in words (shown by stats, doctor, Studio).
    pub mode_reason: String,
    pub surprise_threshold: f32,
    /// Each agent and the agent it reports to.
    pub hierarchy: BTreeMap<String, Option<String>>,
    /// `memory_changed` after a save or a governance operation (and the audit row's announcement).
    pub events: EventBus,
}

pub struct MemoryActor;

pub struct MemoryState {
    args: MemoryArgs,
    client: Option<Arc<Embedder>>,
    model: String,
    index: Option<VectorIndex>,
    dirty: bool,
    /// Embedding memories with the current model after a change (`reembed.rs`).
    reindex: Option<ReindexProgress>,
}

impl MemoryArgs {
    /// The owners `agent` may read: itself, its direct reports, the platform.
    pub fn readable_owners(&self, agent: &str) -> Vec<String> {
        let mut owners = vec![agent.to_string(), PLATFORM.to_string()];
        owners.extend(
            self.hierarchy
                .iter()
                .filter(|(_, boss)| boss.as_deref() == Some(agent))
                .map(|(name, _)| name.clone()),
        );
        owners
    }
}

impl Actor for MemoryActor {
    type Msg = MemoryEvent;
    type State = MemoryState;
    type Arguments = MemoryArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MemoryArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut args = args;
        let client = match &args.embeddings {
            Some(choice) => match Embedder::new(choice) {
                Ok(client) => Some(Arc::new(client)),
                Err(error) => {
                    tracing::warn!(%error, "memory: embeddings are not usable; full-text mode");
                    args.mode_reason = format!("the embeddings are not usable: {error}");
                    None
                }
            },
            None => None,
        };
        let model = client
            .as_ref()
            .map(|client| client.model().to_string())
            .unwrap_or_default();
        myself.send_interval(MAINTAIN_EVERY, || MemoryEvent::Maintain);
        Ok(MemoryState {
            args,
            client,
            model,
            index: None,
            dirty: false,
            reindex: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.client.is_none() {
            tracing::info!(reason = %state.args.mode_reason, "memory: full-text mode");
            return Ok(());
        }
        load_index(state).await?;
        reembed::start_if_needed(&myself, state).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MemoryEvent::Request(request) => on_request(&myself, state, request).await,
            MemoryEvent::SaveEmbedded(request, by, vector, reply) => {
                let audited = by.is_some();
                let outcome = match vector {
                    Ok(vector) => save_embedded(state, request, vector, by).await,
                    Err(error) => Err(format!(
                        "the memory was not saved: embedding it failed ({error})"
                    )),
                };
                announce_saved(&state.args, &outcome, audited);
                let _ = reply.send(outcome.map_err(MemoryError::from));
            }
            MemoryEvent::EditEmbedded(edit, vector, reply) => {
                let result = match vector {
                    Ok(vector) => apply_edit(state, edit, Some(vector)).await,
                    Err(error) => Err(format!(
                        "the memory was not changed: embedding it failed ({error})"
                    )),
                };
                announce_edited(&state.args, &result);
                let _ = reply.send(result.map_err(MemoryError::from));
            }
            MemoryEvent::SearchEmbedded(request, vector, reply) => {
                let result = match vector {
                    Ok(vector) => search(state, request, Some(vector), "hybrid".into()).await,
                    Err(error) => {
                        tracing::warn!(%error, "memory: could not embed a query; full-text only");
                        let mode = format!("full_text (embedding the query failed: {error})");
                        search(state, request, None, mode).await
                    }
                };
                let _ = reply.send(result.map_err(MemoryError::from));
            }
            MemoryEvent::Reembedded(embedded) => reembed::on_batch(state, embedded),
            MemoryEvent::ReembedEnded(outcome) => reembed::on_end(state, outcome),
            MemoryEvent::Maintain => {
                if state.index.as_ref().is_some_and(VectorIndex::needs_rebuild) {
                    rebuild(state).await?;
                }
                if state.dirty {
                    dump(state).await;
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.dirty {
            dump(state).await;
        }
        Ok(())
    }
}

/// A request from outside: save, search, govern, or a question about the memory.
async fn on_request(myself: &ActorRef<MemoryEvent>, state: &mut MemoryState, request: MemoryMsg) {
    match request {
        MemoryMsg::Save(request, reply) => start_save(myself, state, request, None, reply).await,
        MemoryMsg::Add { request, by, reply } => {
            start_save(myself, state, request, Some(by), reply).await
        }
        MemoryMsg::Edit {
            id,
            text,
            by,
            reply,
        } => start_edit(myself, state, id, text, by, reply).await,
        MemoryMsg::Search(request, reply) => start_search(myself, state, request, reply).await,
        MemoryMsg::Govern {
            id,
            operation,
            by,
            reply,
        } => {
            let name = operation.name();
            let result = govern(state, id, operation, by).await;
            if result.is_ok() {
                announce_governed(&state.args, id, name);
            }
            let _ = reply.send(result.map_err(MemoryError::from));
        }
        MemoryMsg::ReadableOwners(agent, reply) => {
            let _ = reply.send(state.args.readable_owners(&agent));
        }
        MemoryMsg::Stats(reply) => {
            let _ = reply.send(stats(state).await);
        }
        MemoryMsg::Reindex(reply) => {
            let result = rebuild(state)
                .await
                .map(|()| state.index.as_ref().map_or(0, VectorIndex::len))
                .map_err(|error| error.to_string());
            if result.is_ok() {
                dump(state).await;
            }
            reembed::start_if_needed(myself, state).await;
            let _ = reply.send(result.map_err(MemoryError::from));
        }
    }
}

/// Saves a memory (audited when `by`, the operator, saves it): embedded first by a task when
/// there is a provider (the answer comes back as `SaveEmbedded`), full text only otherwise.
async fn start_save(
    myself: &ActorRef<MemoryEvent>,
    state: &mut MemoryState,
    request: SaveRequest,
    by: Option<String>,
    reply: RpcReplyPort<Result<SaveOutcome, MemoryError>>,
) {
    let request = match validate(request) {
        Ok(request) => request,
        Err(error) => {
            let _ = reply.send(Err(MemoryError::from(error)));
            return;
        }
    };
    let audited = by.is_some();
    let Some(client) = state.client.clone() else {
        let outcome = save_full_text(state, request, by).await;
        announce_saved(&state.args, &outcome, audited);
        let _ = reply.send(outcome.map_err(MemoryError::from));
        return;
    };
    let myself = myself.clone();
    tokio::spawn(async move {
        let vector = client
            .embed_one(&request.text)
            .await
            .map_err(|error| error.to_string());
        let _ = myself.cast(MemoryEvent::SaveEmbedded(request, by, vector, reply));
    });
}

/// Edits a memory's text: checked against what is stored, then embedded first by a task when
/// there is a provider (the answer comes back as `EditEmbedded`), stored as it is otherwise.
async fn start_edit(
    myself: &ActorRef<MemoryEvent>,
    state: &mut MemoryState,
    id: i64,
    text: String,
    by: String,
    reply: RpcReplyPort<Result<FactRow, MemoryError>>,
) {
    let edit = match check_edit(state, id, &text, by).await {
        Ok(edit) => edit,
        Err(error) => {
            let _ = reply.send(Err(MemoryError::from(error)));
            return;
        }
    };
    let Some(client) = state.client.clone() else {
        let result = apply_edit(state, edit, None).await;
        announce_edited(&state.args, &result);
        let _ = reply.send(result.map_err(MemoryError::from));
        return;
    };
    let myself = myself.clone();
    tokio::spawn(async move {
        let vector = client
            .embed_one(&edit.text)
            .await
            .map_err(|error| error.to_string());
        let _ = myself.cast(MemoryEvent::EditEmbedded(edit, vector, reply));
    });
}

/// Searches: hybrid once the query is embedded by a task (`SearchEmbedded`) when there is a
/// provider and an index, full text only otherwise.
async fn start_search(
    myself: &ActorRef<MemoryEvent>,
    state: &mut MemoryState,
    request: SearchRequest,
    reply: RpcReplyPort<Result<SearchResult, MemoryError>>,
) {
    if request.query.trim().is_empty() {
        let _ = reply.send(Err(MemoryError::Refused(
            "the search query is empty".into(),
        )));
        return;
    }
    match (&state.client, &state.index) {
        (Some(client), Some(_)) => {
            let client = client.clone();
            let myself = myself.clone();
            tokio::spawn(async move {
                let vector = client
                    .embed_one(&request.query)
                    .await
                    .map_err(|error| error.to_string());
                let _ = myself.cast(MemoryEvent::SearchEmbedded(request, vector, reply));
            });
        }
        _ => {
            let mode = if state.client.is_some() {
                "full_text (no memory has an embedding yet)".to_string()
            } else {
                format!("full_text ({})", state.args.mode_reason)
            };
            let result = search(state, request, None, mode).await;
            let _ = reply.send(result.map_err(MemoryError::from));
        }
    }
}

/// The figures `stats` answers: facts by class, the mode, the index's size.
async fn stats(state: &MemoryState) -> MemoryStats {
    let facts = state
        .args
        .store
        .read(queries::stats)
        .await
        .unwrap_or_default();
    let mode = match (&state.client, &state.index) {
        (Some(_), Some(index)) => {
            format!(
                "semantic ({}, {} dimensions)",
                state.model,
                index.dimension()
            )
        }
        (Some(_), None) => format!("semantic ({}, nothing embedded yet)", state.model),
        (None, _) => format!("full-text only ({})", state.args.mode_reason),
    };
    MemoryStats {
        facts,
        mode,
        indexed: state.index.as_ref().map_or(0, VectorIndex::len),
        tombstones: state.index.as_ref().map_or(0, VectorIndex::tombstones),
        embeddings: state
            .client
            .as_ref()
            .map_or("full_text", |client| client.mode()),
        model: state.model.clone(),
        why: state.args.mode_reason.clone(),
        local_loaded: state
            .client
            .as_ref()
            .and_then(|client| client.local())
            .map(|local| local.is_loaded()),
        reindex: state.reindex.clone(),
    }
}

/// Loads the index of the current model from its dump, or rebuilds it from SQLite; none while
/// no memory has a vector of this model.
async fn load_index(state: &mut MemoryState) -> Result<(), ActorProcessingErr> {
    let model = state.model.clone();
    let (dimension, ids) = state
        .args
        .store
        .read(move |conn| {
            Ok((
                queries::stored_dimension(conn, &model)?,
                queries::embedded_ids(conn, &model)?,
            ))
        })
        .await?;
    let Some(dimension) = dimension else {
        return Ok(());
    };
    let expected = Watermark::from_chunks(
        dimension,
        &state.model,
        ids.iter().map(|(id, owner)| (*id, owner.as_str())),
    );
    let dir = state.args.dir.clone();
    let loaded = tokio::task::spawn_blocking(move || {
        VectorIndex::load(&dir, &expected, IndexParams::default())
    })
    .await?;
    match loaded {
        Ok(LoadOutcome::Loaded(index)) => {
            tracing::info!(memories = index.len(), "memory: index loaded from its dump");
            state.index = Some(*index);
        }
        Ok(LoadOutcome::Missing) => {
            rebuild(state).await?;
        }
        Ok(LoadOutcome::Stale { reason }) | Ok(LoadOutcome::Corrupt { reason }) => {
            tracing::warn!(%reason, "memory: the index dump does not match the database; rebuilding it from SQLite");
            rebuild(state).await?;
        }
        Err(error) => {
            tracing::warn!(%error, "memory: could not read the index dump; rebuilding it from SQLite");
            rebuild(state).await?;
        }
    }
    Ok(())
}
