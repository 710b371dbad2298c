//! The memory service: saves, searches and governs memories (facts and notes with an optional
//! embedding). Served by `actors/memory/`, the one owner of the vector index.

use std::time::Duration;

use ractor::RpcReplyPort;

use super::{CallError, ServiceName};
use crate::registry::Registry;
use crate::store::memory::{self as queries, FactRow};

/// Where the memory service is registered.
pub const NAME: ServiceName<MemoryMsg> = ServiceName::fixed("memory");
/// How long a save, a search or a governance change may take (embedding included).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The owner of memories every agent reads.
pub const PLATFORM: &str = "platform";
/// Longest memory accepted, in characters: memories are facts and notes, not documents.
pub const MAX_TEXT_CHARS: usize = 4_000;
pub const CLASSES: &[&str] = &[
    "working",
    "durable",
    "shared",
    "session_recap",
    "restricted",
];
pub const SENSITIVITIES: &[&str] = &["normal", "personal", "secret"];

/// A memory to save.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveRequest {
    /// An agent's name, or [`PLATFORM`].
    pub owner: String,
    pub class: String,
    pub sensitivity: String,
    /// `user_said`, `agent_saved`, `imported`, `recap`, `operator`.
    pub source: String,
    pub chat: Option<String>,
    pub text: String,
    pub run_id: Option<i64>,
    pub message_id: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SaveOutcome {
    Saved {
        id: i64,
        surprise: Option<f32>,
    },
    /// Not saved: too close to memory `of`.
    Duplicate {
        of: i64,
        similarity: Option<f32>,
    },
}

/// Who searches, for what.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRequest {
    /// The reading agent (`None`: the operator, who sees every owner and chat).
    pub agent: Option<String>,
    pub chat: Option<String>,
    pub query: String,
    pub limit: usize,
    /// Include memories marked `secret` (never for the prompt's automatic recall).
    pub include_secret: bool,
}

/// One search result, with its scores and where it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryHit {
    pub fact: FactRow,
    /// Reciprocal-rank-fusion score.
    pub score: f64,
    pub full_text_rank: Option<usize>,
    pub vector_rank: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    pub hits: Vec<MemoryHit>,
    /// `hybrid`, or `full_text` with the reason when vectors were not used.
    pub mode: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Governance {
    Archive,
    Restore,
    Redact,
    Purge,
    Reclassify(String),
}

impl Governance {
    pub fn name(&self) -> &'static str {
        match self {
            Governance::Archive => "archive",
            Governance::Restore => "restore",
            Governance::Redact => "redact",
            Governance::Purge => "purge",
            Governance::Reclassify(_) => "reclassify",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MemoryStats {
    pub facts: queries::Stats,
    /// `semantic (model, dimension)` or `full-text only (why)`.
    pub mode: String,
    pub indexed: usize,
    pub tombstones: usize,
    /// `full_text`, `provider` or `local`.
    pub embeddings: &'static str,
    /// The model recorded with each vector (empty in full text).
    pub model: String,
    /// Why this mode, in words (`[memory] embeddings`, the provider, the model directory).
    pub why: String,
    /// Local mode: whether the model is in memory now (it is unloaded when idle).
    pub local_loaded: Option<bool>,
    /// The re-embedding of memories after a model change, while it runs and after it ended.
    pub reindex: Option<ReindexProgress>,
}

/// How far memory is in embedding every memory with the current model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReindexProgress {
    pub model: String,
    /// Memories to embed when it started.
    pub total: u64,
    pub done: u64,
    pub running: bool,
    /// Why it stopped early (it resumes at the next start or `reindex`).
    pub error: Option<String>,
}

/// What others may ask of the memory service.
pub enum MemoryMsg {
    Save(SaveRequest, RpcReplyPort<Result<SaveOutcome, MemoryError>>),
    Search(
        SearchRequest,
        RpcReplyPort<Result<SearchResult, MemoryError>>,
    ),
    /// A governance operation by `by` (audited).
    Govern {
        id: i64,
        operation: Governance,
        by: String,
        reply: RpcReplyPort<Result<(), MemoryError>>,
    },
    /// A save by the operator (`by`): checked and gated like any save, and audited
    /// (`memory.added`) in the transaction that stores it.
    Add {
        request: SaveRequest,
        by: String,
        reply: RpcReplyPort<Result<SaveOutcome, MemoryError>>,
    },
    /// The operator (`by`) replaces memory `id`'s text: its origin (owner, class, source, chat,
    /// run, message) stays, the text is embedded again, the edit is audited (`memory.edited`)
    /// in the same transaction and the index updated. Answers the memory as it now is.
    Edit {
        id: i64,
        text: String,
        by: String,
        reply: RpcReplyPort<Result<FactRow, MemoryError>>,
    },
    /// The owners an agent may read (the read model), for queries made outside this actor.
    ReadableOwners(String, RpcReplyPort<Vec<String>>),
    Stats(RpcReplyPort<MemoryStats>),
    /// Rebuild the index from SQLite now and embed the memories that have no vector of the
    /// current model (in the background, with progress); the number of memories indexed.
    Reindex(RpcReplyPort<Result<usize, MemoryError>>),
}

/// Why the memory service could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    Unavailable(#[from] CallError),
    /// The request was refused; the text says why (empty, too long, unknown memory, ...).
    #[error("{0}")]
    Refused(String),
}

impl From<String> for MemoryError {
    fn from(reason: String) -> Self {
        MemoryError::Refused(reason)
    }
}

/// The memory service, by name. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Memory {
    registry: Registry,
}

impl Memory {
    pub fn new(registry: &Registry) -> Self {
        Self {
            registry: registry.clone(),
        }
    }

    pub async fn save(&self, request: SaveRequest) -> Result<SaveOutcome, MemoryError> {
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            MemoryMsg::Save(request, reply)
        })
        .await?
    }

    pub async fn search(&self, request: SearchRequest) -> Result<SearchResult, MemoryError> {
        self.search_within(request, TIMEOUT).await
    }

    /// A search that may take at most `within` (the prompt's recall has a budget of its own).
    pub async fn search_within(
        &self,
        request: SearchRequest,
        within: Duration,
    ) -> Result<SearchResult, MemoryError> {
        super::ask(&self.registry, &NAME, Some(within), |reply| {
            MemoryMsg::Search(request, reply)
        })
        .await?
    }

    /// A governance operation by `by` (audited).
    pub async fn govern(
        &self,
        id: i64,
        operation: Governance,
        by: &str,
    ) -> Result<(), MemoryError> {
        let by = by.to_string();
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            MemoryMsg::Govern {
                id,
                operation,
                by,
                reply,
            }
        })
        .await?
    }

    /// A save by the operator `by`, audited (`memory.added`).
    pub async fn add(&self, request: SaveRequest, by: &str) -> Result<SaveOutcome, MemoryError> {
        let by = by.to_string();
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            MemoryMsg::Add { request, by, reply }
        })
        .await?
    }

    /// The operator `by` replaces memory `id`'s text (origin kept, audited `memory.edited`);
    /// the memory as it now is.
    pub async fn edit(&self, id: i64, text: &str, by: &str) -> Result<FactRow, MemoryError> {
        let (text, by) = (text.to_string(), by.to_string());
        super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            MemoryMsg::Edit {
                id,
                text,
                by,
                reply,
            }
        })
        .await?
    }

    /// The owners `agent` may read (the read model).
    pub async fn readable_owners(&self, agent: &str) -> Result<Vec<String>, MemoryError> {
        let agent = agent.to_string();
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), |reply| {
            MemoryMsg::ReadableOwners(agent, reply)
        })
        .await?)
    }

    pub async fn stats(&self) -> Result<MemoryStats, MemoryError> {
        Ok(super::ask(&self.registry, &NAME, Some(TIMEOUT), MemoryMsg::Stats).await?)
    }

    /// Rebuilds the index from SQLite now; the number of memories indexed.
    pub async fn reindex(&self) -> Result<usize, MemoryError> {
        super::ask(&self.registry, &NAME, None, MemoryMsg::Reindex).await?
    }
}
