//! Semantic memory: the vector index, the embeddings providers, and the scoring math.
//!
//! SQLite (facts, chunks with their embeddings, FTS5) is the source of truth and belongs to the
//! store and to the memory actor; this module holds the parts that need no database:
//! - [`index`]: an hnsw_rs cosine index over `(chunk id, owner, vector)` with tombstones, an
//!   owner filter applied inside the search, and a dump that is checked before it is trusted.
//!   It is derived data: whenever a dump is missing, stale or corrupt, the caller rebuilds it
//!   from SQLite.
//! - [`embeddings`]: an HTTP client for OpenAI-compatible `/embeddings` and Gemini
//!   `batchEmbedContents`, with batching, retries and validation of every vector.
//! - [`scoring`]: surprise gating, re-ranking and reciprocal rank fusion (pure functions).
//!
//! Architecture Invariant: `memory` knows nothing about SQLite, actors or Telegram; the index
//! and the scoring are synchronous and CPU-bound (callers use `spawn_blocking` or a thread).

mod dump_check;

pub mod embeddings;
pub mod index;
pub mod scoring;
