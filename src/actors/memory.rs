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
//! embeddings provider, memory works in full-text mode and an exact duplicate is not saved.
//!
//! Searching: FTS5 (BM25) and, with embeddings, the index (re-ranked by the surprise each memory
//! had when saved) are merged by reciprocal rank fusion. The read model is enforced in the store's
//! queries: an agent reads its own memories, its direct reports' and the platform's, and private
//! ones (`restricted`, `session_recap`) only in the chat they came from.
//!
//! Governance (archive, restore, redact, purge, reclassify) writes its audit row in the same
//! transaction and removes what must go from the index at once.
//!
//! Background job: the maintenance tick (owner: this actor; every 5 min; dumps a changed index and
//! rebuilds it when tombstones pile up; cancelled with the actor; idempotent).
//!
//! Restart policy: permanent. A restart reloads the index from its dump or SQLite.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde_json::json;

use crate::events::{EventBus, EventData, EventKind};
use crate::memory::embeddings::{EmbeddingsClient, EmbeddingsConfig};
use crate::memory::index::{
    ChunkVector, IndexParams, LoadOutcome, OwnerFilter, VectorIndex, Watermark,
};
use crate::memory::scoring::{self, GateDecision};
pub use crate::protocol::memory::{
    CLASSES, Governance, MAX_TEXT_CHARS, MemoryError, MemoryHit, MemoryMsg, MemoryStats, PLATFORM,
    SENSITIVITIES, SaveOutcome, SaveRequest, SearchRequest, SearchResult,
};
use crate::store::Store;
use crate::store::memory::{self as queries, FactRow, NewFact, Scope};

/// Neighbours consulted by the surprise gate.
const GATE_NEIGHBOURS: usize = 5;
/// Candidates each source contributes to a hybrid search.
const CANDIDATES: usize = 30;
const MAINTAIN_EVERY: Duration = Duration::from_secs(300);

#[derive(Clone)]
pub struct MemoryArgs {
    pub store: Store,
    /// Where the index is dumped.
    pub dir: PathBuf,
    pub embeddings: Option<EmbeddingsConfig>,
    /// Why there are no embeddings, when there are none (shown by stats, doctor, Studio).
    pub full_text_reason: String,
    pub surprise_threshold: f32,
    /// Each agent and the agent it reports to.
    pub hierarchy: BTreeMap<String, Option<String>>,
    /// `memory_changed` after a save or a governance operation (and the audit row's announcement).
    pub events: EventBus,
}

pub struct MemoryActor;

pub struct MemoryState {
    args: MemoryArgs,
    client: Option<Arc<EmbeddingsClient>>,
    model: String,
    index: Option<VectorIndex>,
    dirty: bool,
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
    type Msg = MemoryMsg;
    type State = MemoryState;
    type Arguments = MemoryArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: MemoryArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let client = match &args.embeddings {
            Some(config) => match EmbeddingsClient::new(config.clone()) {
                Ok(client) => Some(Arc::new(client)),
                Err(error) => {
                    tracing::warn!(%error, "memory: embeddings are not usable; full-text mode");
                    None
                }
            },
            None => None,
        };
        let model = args
            .embeddings
            .as_ref()
            .map(|config| config.model.clone())
            .unwrap_or_default();
        myself.send_interval(MAINTAIN_EVERY, || MemoryMsg::Maintain);
        Ok(MemoryState {
            args,
            client,
            model,
            index: None,
            dirty: false,
        })
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.client.is_none() {
            tracing::info!(reason = %state.args.full_text_reason, "memory: full-text mode");
            return Ok(());
        }
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

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            MemoryMsg::Save(request, reply) => {
                let request = match validate(request) {
                    Ok(request) => request,
                    Err(error) => {
                        let _ = reply.send(Err(MemoryError::from(error)));
                        return Ok(());
                    }
                };
                match &state.client {
                    Some(client) => {
                        let client = client.clone();
                        let myself = myself.clone();
                        tokio::spawn(async move {
                            let vector = client
                                .embed_one(&request.text)
                                .await
                                .map_err(|error| error.to_string());
                            let _ = myself.cast(MemoryMsg::SaveEmbedded(request, vector, reply));
                        });
                    }
                    None => {
                        let outcome = save_full_text(state, request).await;
                        announce_saved(&state.args, &outcome);
                        let _ = reply.send(outcome.map_err(MemoryError::from));
                    }
                }
            }
            MemoryMsg::SaveEmbedded(request, vector, reply) => {
                let outcome = match vector {
                    Ok(vector) => save_embedded(state, request, vector).await,
                    Err(error) => Err(format!(
                        "the memory was not saved: the embeddings provider failed ({error})"
                    )),
                };
                announce_saved(&state.args, &outcome);
                let _ = reply.send(outcome.map_err(MemoryError::from));
            }
            MemoryMsg::Search(request, reply) => {
                if request.query.trim().is_empty() {
                    let _ = reply.send(Err(MemoryError::Refused(
                        "the search query is empty".into(),
                    )));
                    return Ok(());
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
                            let _ = myself.cast(MemoryMsg::SearchEmbedded(request, vector, reply));
                        });
                    }
                    _ => {
                        let mode = if state.client.is_some() {
                            "full_text (no memory has an embedding yet)".to_string()
                        } else {
                            format!("full_text ({})", state.args.full_text_reason)
                        };
                        let result = search(state, request, None, mode).await;
                        let _ = reply.send(result.map_err(MemoryError::from));
                    }
                }
            }
            MemoryMsg::SearchEmbedded(request, vector, reply) => {
                let result = match vector {
                    Ok(vector) => search(state, request, Some(vector), "hybrid".into()).await,
                    Err(error) => {
                        tracing::warn!(%error, "memory: could not embed a query; full-text only");
                        let mode = format!("full_text (the embeddings provider failed: {error})");
                        search(state, request, None, mode).await
                    }
                };
                let _ = reply.send(result.map_err(MemoryError::from));
            }
            MemoryMsg::Govern {
                id,
                operation,
                by,
                reply,
            } => {
                let name = operation.name();
                let result = govern(state, id, operation, by).await;
                if result.is_ok() {
                    let subject = format!("memory:{id}");
                    let action = format!("memory.{name}");
                    crate::audit::announce(&state.args.events, &action, &subject);
                    state.args.events.publish_data(
                        EventKind::MemoryChanged,
                        &subject,
                        &action,
                        EventData::MemoryChanged {
                            id,
                            change: name.to_string(),
                        },
                    );
                }
                let _ = reply.send(result.map_err(MemoryError::from));
            }
            MemoryMsg::ReadableOwners(agent, reply) => {
                let _ = reply.send(state.args.readable_owners(&agent));
            }
            MemoryMsg::Stats(reply) => {
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
                    (None, _) => format!("full-text only ({})", state.args.full_text_reason),
                };
                let _ = reply.send(MemoryStats {
                    facts,
                    mode,
                    indexed: state.index.as_ref().map_or(0, VectorIndex::len),
                    tombstones: state.index.as_ref().map_or(0, VectorIndex::tombstones),
                });
            }
            MemoryMsg::Reindex(reply) => {
                let result = rebuild(state)
                    .await
                    .map(|()| state.index.as_ref().map_or(0, VectorIndex::len))
                    .map_err(|error| error.to_string());
                if result.is_ok() {
                    dump(state).await;
                }
                let _ = reply.send(result.map_err(MemoryError::from));
            }
            MemoryMsg::Maintain => {
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

/// Checks a save before anything is stored; the error names what to fix.
fn validate(mut request: SaveRequest) -> Result<SaveRequest, String> {
    request.text = request.text.trim().to_string();
    if request.text.is_empty() {
        return Err("nothing to save: the text is empty".into());
    }
    let length = request.text.chars().count();
    if length > MAX_TEXT_CHARS {
        return Err(format!(
            "the text is {length} characters long; memories hold at most {MAX_TEXT_CHARS}: save a summary"
        ));
    }
    if request.text.contains('\0') {
        return Err("the text contains a NUL character".into());
    }
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

fn new_fact(
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

async fn save_full_text(
    state: &mut MemoryState,
    request: SaveRequest,
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
            let id = queries::insert(conn, &fact, crate::clock::now_ms())?;
            Ok(SaveOutcome::Saved { id, surprise: None })
        })
        .await
        .map_err(|error| format!("the memory was not saved: {error}"))
        .inspect(|outcome| log_outcome(&request, outcome))
}

async fn save_embedded(
    state: &mut MemoryState,
    request: SaveRequest,
    vector: Vec<f32>,
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
        .write(move |conn| queries::insert(conn, &fact, crate::clock::now_ms()))
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

/// `memory_changed` for a memory that was saved (a skipped duplicate changes nothing).
fn announce_saved(args: &MemoryArgs, outcome: &Result<SaveOutcome, String>) {
    if let Ok(SaveOutcome::Saved { id, .. }) = outcome {
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

fn log_outcome(request: &SaveRequest, outcome: &SaveOutcome) {
    match outcome {
        SaveOutcome::Saved { id, surprise } => {
            tracing::debug!(owner = %request.owner, id, ?surprise, "memory saved");
        }
        SaveOutcome::Duplicate { of, similarity } => {
            tracing::info!(owner = %request.owner, duplicate_of = of, ?similarity, "memory not saved: a near duplicate exists");
        }
    }
}

async fn search(
    state: &mut MemoryState,
    request: SearchRequest,
    vector: Option<Vec<f32>>,
    mode: String,
) -> Result<SearchResult, String> {
    let scope = match &request.agent {
        Some(agent) => Scope {
            owners: state.args.readable_owners(agent),
            chat: request.chat.clone(),
        },
        None => Scope {
            owners: all_owners(&state.args),
            chat: None,
        },
    };
    let vector_ranked: Vec<i64> = match (&vector, &state.index) {
        (Some(vector), Some(index)) => {
            let hits = index
                .search(vector, CANDIDATES, &OwnerFilter::only(scope.owners.clone()))
                .unwrap_or_default();
            let ids: Vec<i64> = hits.iter().map(|hit| hit.id).collect();
            let surprises: BTreeMap<i64, f32> = state
                .args
                .store
                .read(move |conn| queries::surprises(conn, &ids))
                .await
                .map_err(|error| error.to_string())?
                .into_iter()
                .collect();
            scoring::rerank(&hits, |id| surprises.get(&id).copied())
                .into_iter()
                .map(|hit| hit.id)
                .collect()
        }
        _ => Vec::new(),
    };
    let (query, limit, include_secret) = (
        request.query.clone(),
        request.limit.clamp(1, 50),
        request.include_secret,
    );
    state
        .args
        .store
        .read(move |conn| {
            let full_text = queries::search_text(conn, &scope, &query, CANDIDATES as u32)?;
            // Vector hits know only their owner: the chat rule is applied here.
            let visible: std::collections::HashSet<i64> =
                queries::visible_ids(conn, &scope, &vector_ranked)?
                    .into_iter()
                    .collect();
            let vector_ranked: Vec<i64> = vector_ranked
                .into_iter()
                .filter(|id| visible.contains(id))
                .collect();
            let fused = scoring::hybrid(&full_text, &vector_ranked);
            let ids: Vec<i64> = fused.iter().map(|hit| hit.id).collect();
            let rows: BTreeMap<i64, FactRow> = queries::by_ids(conn, &ids)?
                .into_iter()
                .map(|row| (row.id, row))
                .collect();
            Ok(fused
                .into_iter()
                .filter_map(|hit| {
                    let fact = rows.get(&hit.id)?.clone();
                    (include_secret || fact.sensitivity != "secret").then_some(MemoryHit {
                        fact,
                        score: hit.score,
                        full_text_rank: hit.full_text_rank,
                        vector_rank: hit.vector_rank,
                    })
                })
                .take(limit)
                .collect::<Vec<_>>())
        })
        .await
        .map(|hits| SearchResult { hits, mode })
        .map_err(|error| error.to_string())
}

fn all_owners(args: &MemoryArgs) -> Vec<String> {
    let mut owners: Vec<String> = args.hierarchy.keys().cloned().collect();
    owners.push(PLATFORM.to_string());
    owners
}

async fn govern(
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

/// Builds the index anew from SQLite (off the async threads).
async fn rebuild(state: &mut MemoryState) -> Result<(), ActorProcessingErr> {
    if state.client.is_none() {
        return Ok(());
    }
    let model = state.model.clone();
    let rows = state
        .args
        .store
        .read(move |conn| queries::embedded_vectors(conn, &model))
        .await?;
    let Some(dimension) = rows.first().map(|(_, _, vector)| vector.len()) else {
        state.index = None;
        return Ok(());
    };
    let built = tokio::task::spawn_blocking(move || {
        VectorIndex::build(
            dimension,
            IndexParams::default(),
            rows.into_iter()
                .map(|(id, owner, vector)| ChunkVector { id, owner, vector }),
        )
    })
    .await?;
    match built {
        Ok((index, report)) => {
            for (id, error) in &report.rejected {
                tracing::warn!(id, %error, "memory: a stored embedding could not be indexed");
            }
            tracing::info!(
                memories = report.inserted,
                "memory: index rebuilt from SQLite"
            );
            state.index = Some(index);
            state.dirty = true;
        }
        Err(error) => {
            tracing::warn!(%error, "memory: the index could not be rebuilt; full-text search only until it can");
            state.index = None;
        }
    }
    Ok(())
}

/// Writes the index's dump (a failure is logged: the dump is only a cache of SQLite).
async fn dump(state: &mut MemoryState) {
    let Some(index) = &state.index else {
        state.dirty = false;
        return;
    };
    if let Err(error) = std::fs::create_dir_all(&state.args.dir) {
        tracing::warn!(%error, "memory: cannot create the index directory");
        return;
    }
    match index.dump(&state.args.dir, &state.model) {
        Ok(_) => state.dirty = false,
        Err(error) => tracing::warn!(%error, "memory: could not dump the index"),
    }
}
