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
//! - [`local`]: a sentence-embedding model on the CPU, in-process (`[memory] embeddings =
//!   "local"`), loaded lazily and unloaded when idle; `fetch-model`'s checked download.
//! - [`Embedder`]: whichever of the two `[memory]` chose, behind one `embed`.
//! - [`scoring`]: surprise gating, re-ranking and reciprocal rank fusion (pure functions).
//!
//! Architecture Invariant: `memory` knows nothing about SQLite, actors or Telegram; the index
//! and the scoring are synchronous and CPU-bound (callers use `spawn_blocking` or a thread).

mod dump_check;

pub mod dump;
pub mod embeddings;
pub mod index;
pub mod local;
pub mod scoring;

use std::collections::BTreeMap;

use crate::config::{Config, EmbeddingsMode, ProviderKind};
use crate::secrets::Secret;

/// What embeds memories: a provider over HTTP or a local model.
#[derive(Debug, Clone)]
pub enum EmbeddingsChoice {
    Provider(embeddings::EmbeddingsConfig),
    Local(local::LocalSettings),
}

impl EmbeddingsChoice {
    /// The model name recorded with each vector (`local:<dir name>` for a local model).
    pub fn model(&self) -> String {
        match self {
            EmbeddingsChoice::Provider(config) => config.model.clone(),
            EmbeddingsChoice::Local(settings) => local::model_name(&settings.dir),
        }
    }

    /// `provider` or `local`, as Studio and `doctor` name the mode.
    pub fn mode(&self) -> &'static str {
        match self {
            EmbeddingsChoice::Provider(_) => "provider",
            EmbeddingsChoice::Local(_) => "local",
        }
    }
}

/// The embeddings `[memory]` chose, and in words why this mode (for full text: why not more).
pub fn embeddings_choice(
    config: &Config,
    secrets: &BTreeMap<String, Secret>,
) -> (Option<EmbeddingsChoice>, String) {
    match config.memory.embeddings {
        EmbeddingsMode::Off => (
            None,
            "`[memory] embeddings = \"off\"` keeps memory on full text".into(),
        ),
        EmbeddingsMode::Local => {
            let dir = local::model_dir(&config.data_dir, &config.memory.local_model);
            let settings = local::LocalSettings {
                dir: dir.clone(),
                batch_size: config.memory.local_batch as usize,
                idle_unload: config.memory.local_idle_unload.0,
            };
            let why = format!(
                "`[memory] embeddings = \"local\"`: the model in {} runs on this machine's CPU",
                dir.display()
            );
            (Some(EmbeddingsChoice::Local(settings)), why)
        }
        EmbeddingsMode::Auto | EmbeddingsMode::Provider => match embeddings_config(config, secrets)
        {
            (Some(provider), _) => {
                let why = format!(
                    "a provider embeds memories with `{}` (`[memory] embeddings = \"{}\"`)",
                    provider.model,
                    if config.memory.embeddings == EmbeddingsMode::Auto {
                        "auto"
                    } else {
                        "provider"
                    }
                );
                (Some(EmbeddingsChoice::Provider(provider)), why)
            }
            (None, reason) => (
                None,
                format!("{reason}, or set `[memory] embeddings = \"local\"` with a local model"),
            ),
        },
    }
}

/// What embeds: the built client or local model, ready to use.
#[derive(Debug)]
pub enum Embedder {
    Provider(embeddings::EmbeddingsClient),
    Local(local::LocalEmbedder),
}

impl Embedder {
    /// Builds the embedder of `choice` (a local model is not read until first used).
    pub fn new(choice: &EmbeddingsChoice) -> Result<Embedder, String> {
        match choice {
            EmbeddingsChoice::Provider(config) => embeddings::EmbeddingsClient::new(config.clone())
                .map(Embedder::Provider)
                .map_err(|error| error.to_string()),
            EmbeddingsChoice::Local(settings) => {
                local::model::check_dir(&settings.dir)?;
                Ok(Embedder::Local(local::LocalEmbedder::new(settings.clone())))
            }
        }
    }

    /// The model name recorded with each vector.
    pub fn model(&self) -> &str {
        match self {
            Embedder::Provider(client) => client.model(),
            Embedder::Local(local) => local.model(),
        }
    }

    /// `provider` or `local`.
    pub fn mode(&self) -> &'static str {
        match self {
            Embedder::Provider(_) => "provider",
            Embedder::Local(_) => "local",
        }
    }

    /// The local model, when this is one.
    pub fn local(&self) -> Option<&local::LocalEmbedder> {
        match self {
            Embedder::Local(local) => Some(local),
            Embedder::Provider(_) => None,
        }
    }

    /// One vector for `text`.
    pub async fn embed_one(&self, text: &str) -> Result<Vec<f32>, String> {
        match self {
            Embedder::Provider(client) => client
                .embed_one(text)
                .await
                .map_err(|error| error.to_string()),
            Embedder::Local(local) => local.embed_one(text).await,
        }
    }

    /// One vector per text, in order.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, String> {
        match self {
            Embedder::Provider(client) => client
                .embed(&texts)
                .await
                .map_err(|error| error.to_string()),
            Embedder::Local(local) => local.embed(texts).await,
        }
    }
}

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
