//! `[memory]`'s choice of embeddings: how memories become vectors (issue #33).
//!
//! `embeddings = "auto"` (the default) uses a provider's `embeddings_model` when one has it and
//! full text otherwise (what memory did before); `"provider"` insists on a provider; `"local"`
//! runs the sentence-embedding model in `local_model` on the CPU inside the daemon; `"off"` keeps
//! memory on full text. Changing any of these needs a restart (the reload plan says so); a model
//! change re-embeds every memory at the next start, visibly (Studio's Memory page, events).

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError};

/// How memories are embedded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbeddingsMode {
    /// A provider's `embeddings_model` if one has it; full text otherwise.
    #[default]
    Auto,
    /// A provider's `embeddings_model` (`embeddings_provider` or the first that has one).
    Provider,
    /// The model in `local_model`, on the CPU, in-process.
    Local,
    /// Full text only.
    Off,
}

/// `[memory]`'s embeddings keys: `local_model` is named when local mode is chosen, the batch is
/// at least 1 and the idle period at least a second.
pub(super) fn validate_embeddings(config: &Config, origin: &str) -> Result<(), ConfigError> {
    let memory = &config.memory;
    if memory.embeddings == EmbeddingsMode::Local && memory.local_model.trim().is_empty() {
        return Err(ConfigError::key(
            origin,
            "[memory].local_model",
            "`embeddings = \"local\"` needs `local_model`: a model directory (config.json, \
             tokenizer.json, model.safetensors), or a name under <data dir>/models/ such as \
             \"all-MiniLM-L6-v2\" (`clawvisor memory fetch-model all-MiniLM-L6-v2` puts it there)",
        ));
    }
    if memory.local_batch == 0 || memory.local_batch > 256 {
        return Err(ConfigError::key(
            origin,
            "[memory].local_batch",
            format!(
                "must be between 1 and 256 texts, not {}",
                memory.local_batch
            ),
        ));
    }
    if memory.local_idle_unload.0 < std::time::Duration::from_secs(1) {
        return Err(ConfigError::key(
            origin,
            "[memory].local_idle_unload",
            "must be at least 1s (\"10m\" keeps the model for ten idle minutes)",
        ));
    }
    Ok(())
}
