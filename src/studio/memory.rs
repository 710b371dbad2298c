//! Memory review and governance: `/api/v1/memory...`.
//!
//! The operator sees every owner's memories (archived and redacted included), searches them
//! (full text stems words: "plants" finds "plant"), adds memories and edits their text, and
//! governs them — all through the memory service, which writes the audit row with each change
//! (`memory.added`, `memory.edited`, `memory.archive`, ...) and announces `memory_changed`.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{array, boolean, described, integer, nullable, number, object, string};
use super::{ApiError, StudioState, json_body};
use crate::protocol::memory::{
    Governance, Memory, MemoryError, PLATFORM, SENSITIVITIES, SaveOutcome, SaveRequest,
    SearchRequest,
};
use crate::store::memory::{self as queries, FactRow};

const OPERATOR: &str = "operator (studio)";

fn memory(state: &StudioState) -> Memory {
    Memory::new(&state.registry)
}

/// A refusal in the words `refused` gives it; anything else: memory is not available.
fn api_error(error: MemoryError, refused: fn(String) -> ApiError) -> ApiError {
    match error {
        MemoryError::Unavailable(_) => ApiError::unavailable("memory"),
        MemoryError::Refused(reason) => refused(reason),
    }
}

fn fact_json(fact: &FactRow) -> Value {
    json!({
        "id": fact.id, "owner": fact.owner, "class": fact.class, "sensitivity": fact.sensitivity,
        "source": fact.source, "chat": fact.chat, "text": fact.text, "run_id": fact.run_id,
        "created_ms": fact.created_ms, "updated_ms": fact.updated_ms,
        "archived_ms": fact.archived_ms, "redacted_ms": fact.redacted_ms,
        "surprise": fact.surprise, "embedded": fact.embedded,
        "edited_ms": fact.edited_ms, "edited_by": fact.edited_by,
    })
}

/// A memory as [`fact_json`] shows it (the answer of add and edit).
pub fn fact_schema() -> Value {
    object([
        ("id", integer()),
        (
            "owner",
            described(
                "an agent's name, or `platform` (every agent reads it)",
                string(),
            ),
        ),
        ("class", string()),
        (
            "sensitivity",
            described("`normal`, `personal` or `secret`", string()),
        ),
        ("source", string()),
        ("chat", nullable(string())),
        ("text", string()),
        ("run_id", nullable(integer())),
        ("created_ms", integer()),
        ("updated_ms", integer()),
        ("archived_ms", nullable(integer())),
        ("redacted_ms", nullable(integer())),
        ("surprise", nullable(number())),
        ("embedded", boolean()),
        ("edited_ms", nullable(integer())),
        ("edited_by", nullable(string())),
    ])
}

/// Whose memories `GET /api/v1/memory` lists.
#[derive(Deserialize, JsonSchema)]
pub struct ReviewQuery {
    /// Only this owner's (an agent's name, or `platform`).
    owner: Option<String>,
    /// How many (default 200).
    limit: Option<u32>,
    /// Only memories older than this id (the previous page's `next_before`).
    before: Option<i64>,
}

/// `GET /api/v1/memory?owner=assistant&limit=200`: every memory, newest first.
pub async fn review(
    State(state): State<StudioState>,
    Query(query): Query<ReviewQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.unwrap_or(200).clamp(1, 10_000);
    let owner = query.owner.filter(|owner| !owner.is_empty());
    let before = query.before;
    let facts = state
        .store
        .read(move |conn| queries::review(conn, owner.as_deref(), before, limit))
        .await?;
    let next_before = (facts.len() == limit as usize)
        .then(|| facts.last().map(|fact| fact.id))
        .flatten();
    Ok(Json(json!({
        "memories": facts.iter().map(fact_json).collect::<Vec<_>>(),
        "next_before": next_before,
    })))
}

/// What `GET /api/v1/memory` answers.
pub fn review_schema() -> Value {
    object([
        ("memories", array(fact_schema())),
        (
            "next_before",
            described(
                "the `before` of the next (older) page; null: this is the last",
                nullable(integer()),
            ),
        ),
    ])
}

/// `GET /api/v1/memory/stats`: counts, and whether memory is semantic or full-text only.
pub async fn stats(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let stats = memory(&state)
        .stats()
        .await
        .map_err(|_| ApiError::unavailable("memory"))?;
    Ok(Json(json!({
        "mode": stats.mode, "live": stats.facts.live, "embedded": stats.facts.embedded,
        "archived": stats.facts.archived, "redacted": stats.facts.redacted,
        "indexed": stats.indexed, "tombstones": stats.tombstones,
        "by_owner": stats.facts.by_owner.iter().map(|(owner, count)| json!({"owner": owner, "live": count})).collect::<Vec<_>>(),
        "embeddings": {
            "mode": stats.embeddings, "model": stats.model, "why": stats.why,
            "loaded": stats.local_loaded,
            "reindex": stats.reindex.map(|progress| json!({
                "model": progress.model, "done": progress.done, "total": progress.total,
                "running": progress.running, "error": progress.error,
            })),
        },
    })))
}

/// What `GET /api/v1/memory/stats` answers.
pub fn stats_schema() -> Value {
    object([
        (
            "mode",
            described(
                "`semantic (model, dimension)` or `full-text only (why)`",
                string(),
            ),
        ),
        ("live", integer()),
        ("embedded", integer()),
        ("archived", integer()),
        ("redacted", integer()),
        ("indexed", integer()),
        ("tombstones", integer()),
        (
            "by_owner",
            array(object([("owner", string()), ("live", integer())])),
        ),
        (
            "embeddings",
            object([
                (
                    "mode",
                    described("`full_text`, `provider` or `local`", string()),
                ),
                (
                    "model",
                    described("recorded with each vector; empty in full text", string()),
                ),
                ("why", described("why this mode, in words", string())),
                (
                    "loaded",
                    described(
                        "local mode: whether the model is in memory now (null otherwise)",
                        nullable(boolean()),
                    ),
                ),
                (
                    "reindex",
                    described(
                        "embedding every memory with the current model after a change; null when none was needed",
                        nullable(object([
                            ("model", string()),
                            ("done", integer()),
                            ("total", integer()),
                            ("running", boolean()),
                            ("error", nullable(string())),
                        ])),
                    ),
                ),
            ]),
        ),
    ])
}

/// A search of `GET /api/v1/memory/search`.
#[derive(Deserialize, JsonSchema)]
pub struct SearchQuery {
    /// What to look for (words match their other forms: plurals, tenses).
    q: String,
    /// How many hits (default 20).
    limit: Option<usize>,
}

/// `GET /api/v1/memory/search?q=...`: hybrid search over every owner, with scores and sources.
pub async fn search(
    State(state): State<StudioState>,
    Query(query): Query<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    let request = SearchRequest {
        agent: None,
        chat: None,
        query: query.q,
        limit: query.limit.unwrap_or(20),
        include_secret: true,
    };
    let result = memory(&state)
        .search(request)
        .await
        .map_err(|error| api_error(error, ApiError::bad_request))?;
    Ok(Json(json!({
        "mode": result.mode,
        "hits": result.hits.iter().map(|hit| json!({
            "memory": fact_json(&hit.fact), "score": hit.score,
            "full_text_rank": hit.full_text_rank, "vector_rank": hit.vector_rank,
        })).collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/memory/search` answers.
pub fn search_schema() -> Value {
    let hit = object([
        ("memory", fact_schema()),
        ("score", number()),
        ("full_text_rank", nullable(integer())),
        ("vector_rank", nullable(integer())),
    ]);
    object([
        (
            "mode",
            described(
                "`hybrid`, or `full_text` with why vectors were not used",
                string(),
            ),
        ),
        ("hits", array(hit)),
    ])
}

/// What a governance operation needs (only `reclassify` needs anything).
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GovernBody {
    /// For `reclassify`: `normal`, `personal` or `secret`.
    sensitivity: Option<String>,
}

/// `POST /api/v1/memory/{id}/{operation}` with operation `archive`, `restore`, `redact`,
/// `purge`, or `reclassify` (body `{"sensitivity": "secret"}`).
pub async fn govern(
    State(state): State<StudioState>,
    Path((id, operation)): Path<(i64, String)>,
    body: Option<Json<GovernBody>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = body.map(|Json(body)| body).unwrap_or_default();
    let operation = match operation.as_str() {
        "archive" => Governance::Archive,
        "restore" => Governance::Restore,
        "redact" => Governance::Redact,
        "purge" => Governance::Purge,
        "reclassify" => Governance::Reclassify(body.sensitivity.ok_or_else(|| {
            ApiError::bad_request("reclassify needs {\"sensitivity\": \"normal|personal|secret\"}")
        })?),
        other => {
            return Err(ApiError::not_found(format!(
                "unknown operation `{other}` (archive, restore, redact, purge, reclassify)"
            )));
        }
    };
    let name = operation.name();
    memory(&state)
        .govern(id, operation, OPERATOR)
        .await
        .map_err(|error| api_error(error, ApiError::not_found))?;
    Ok((StatusCode::OK, Json(json!({"id": id, "done": name}))))
}

/// What `POST /api/v1/memory/{id}/{operation}` answers.
pub fn govern_schema() -> Value {
    object([
        ("id", integer()),
        ("done", described("the operation done", string())),
    ])
}

/// A memory the operator adds.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AddBody {
    /// An agent's name, or `platform` (every agent reads it).
    owner: String,
    /// What to remember.
    text: String,
    /// `normal` (default), `personal` or `secret`.
    #[serde(default)]
    sensitivity: Option<String>,
}

/// `POST /api/v1/memory`: the operator adds a memory (201 with its id; 409 when the owner
/// already remembers the same thing, naming that memory). Kept like any save (class `durable`,
/// source `operator`, embedded when there is a provider) and audited as `memory.added`.
pub async fn add(
    State(state): State<StudioState>,
    body: Result<Json<AddBody>, axum::extract::rejection::JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = json_body(body)?;
    let owner = body.owner.trim().to_string();
    let agents = state.agents.get();
    if owner != PLATFORM && !agents.iter().any(|agent| agent.name == owner) {
        let mut known: Vec<&str> = agents.iter().map(|agent| agent.name.as_str()).collect();
        known.push(PLATFORM);
        return Err(ApiError::bad_request(format!(
            "`owner`: no agent is named `{owner}` (one of: {})",
            known.join(", ")
        )));
    }
    let sensitivity = body
        .sensitivity
        .map(|sensitivity| sensitivity.trim().to_string())
        .filter(|sensitivity| !sensitivity.is_empty())
        .unwrap_or_else(|| "normal".to_string());
    if !SENSITIVITIES.contains(&sensitivity.as_str()) {
        return Err(ApiError::bad_request(format!(
            "`sensitivity`: `{sensitivity}` is not one of {}",
            SENSITIVITIES.join(", ")
        )));
    }
    let request = SaveRequest {
        owner,
        class: "durable".to_string(),
        sensitivity,
        source: "operator".to_string(),
        chat: None,
        text: body.text,
        run_id: None,
        message_id: None,
    };
    let outcome = memory(&state)
        .add(request, OPERATOR)
        .await
        .map_err(|error| {
            api_error(error, |reason| {
                ApiError::bad_request(format!("`text`: {reason}"))
            })
        })?;
    match outcome {
        SaveOutcome::Saved { id, .. } => {
            let fact = state.store.read(move |conn| queries::get(conn, id)).await?;
            let body = fact
                .as_ref()
                .map(fact_json)
                .unwrap_or_else(|| json!({"id": id}));
            Ok((StatusCode::CREATED, Json(body)))
        }
        SaveOutcome::Duplicate { of, .. } => Err(ApiError::conflict(format!(
            "`text`: this is already remembered as memory #{of}; edit that one instead"
        ))),
    }
}

/// A memory's new text.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditBody {
    /// The text that replaces the old one.
    text: String,
}

/// `PATCH /api/v1/memory/{id}`: the operator replaces a memory's text. Its origin (owner, class,
/// source, chat, run) stays; the edit is audited as `memory.edited` and the memory re-indexed.
pub async fn edit(
    State(state): State<StudioState>,
    Path(id): Path<i64>,
    body: Result<Json<EditBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = json_body(body)?;
    if state
        .store
        .read(move |conn| queries::get(conn, id))
        .await?
        .is_none()
    {
        return Err(ApiError::not_found(format!("there is no memory #{id}")));
    }
    let fact = memory(&state)
        .edit(id, &body.text, OPERATOR)
        .await
        .map_err(|error| {
            api_error(error, |reason| {
                ApiError::bad_request(format!("`text`: {reason}"))
            })
        })?;
    Ok(Json(fact_json(&fact)))
}
