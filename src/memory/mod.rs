//! Semantic memory: the vector index, the embeddings providers, and the scoring math.
//!
//! SQLite (facts, chunks with their embeddings, FTS5) is the source of truth and belongs to the
//! store and to the memory actor; this module holds the parts that need no database:
//! - [`index`]: an hnsw_rs cosine index over `(chunk id, owner, vector)` with tombstones, an
//!   owner filter applied inside the search, and a dump that is checked before it is trusted.
//!   It is derived data: whenever a dump is missing, stale or corrupt, the caller rebuilds it
//!   from SQLite.
//! - [`dump`]: the index's dump format (sidecar, slot table) and its checked loading; the hnsw_rs
//!   files are walked by `dump_check` before hnsw_rs reads them.
//! - [`embeddings`]: an HTTP client for OpenAI-compatible `/embeddings` and Gemini
//!   `batchEmbedContents`, with batching, retries and validation of every vector.
//! - [`scoring`]: surprise gating, re-ranking and reciprocal rank fusion (pure functions).
//!
//! Architecture Invariant: `memory` knows nothing about SQLite, actors or Telegram; the index
//! and the scoring are synchronous and CPU-bound (callers use `spawn_blocking` or a thread).

mod dump_check;

pub mod dump;
pub mod embeddings;
pub mod index;
pub mod scoring;

use std::collections::BTreeMap;

use crate::config::{Config, ProviderKind};
use crate::secrets::Secret;

/// The embeddings client's configuration from `[memory]` and `[providers]`, or why there is none
/// (memory then works in full-text mode, and says so).
pub fn embeddings_config(
    config: &Config,
    secrets: &BTreeMap<String, Secret>,
) -> (Option<embeddings::EmbeddingsConfig>, String) {
    let chosen = if config.memory.embeddings_provider.is_empty() {
        config.providers.iter().find(|(_, provider)| {
            !provider.embeddings_model.trim().is_empty() && provider.kind != ProviderKind::Anthropic
        })
    } else {
        config
            .providers
            .get_key_value(&config.memory.embeddings_provider)
    };
    let Some((name, provider)) = chosen else {
        return (
            None,
            "no embeddings provider: set `embeddings_model` on an OpenAI-compatible or Gemini provider".into(),
        );
    };
    let protocol = match provider.kind {
        ProviderKind::Gemini => embeddings::EmbeddingsProtocol::Gemini,
        ProviderKind::Openai => embeddings::EmbeddingsProtocol::OpenAiCompatible,
        ProviderKind::Anthropic => {
            return (
                None,
                format!("provider `{name}` (Anthropic) serves no embeddings"),
            );
        }
    };
    let key = secrets.get(provider.api_key_env.trim()).cloned();
    if !provider.api_key_env.trim().is_empty() && key.is_none() {
        return (
            None,
            format!(
                "provider `{name}` needs its key in ${} for embeddings",
                provider.api_key_env.trim()
            ),
        );
    }
    let mut embeddings_config = embeddings::EmbeddingsConfig::new(
        protocol,
        provider.base_url.trim_end_matches('/'),
        provider.embeddings_model.trim(),
    );
    embeddings_config.api_key = key;
    embeddings_config.max_retries = provider.max_retries;
    embeddings_config.request_timeout = provider.timeout.0.min(std::time::Duration::from_secs(60));
    (Some(embeddings_config), String::new())
}
