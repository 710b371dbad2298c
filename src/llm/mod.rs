//! LLM providers over reqwest: OpenAI-compatible chat completions, Anthropic Messages, Gemini.
//!
//! `Provider` (provider.rs) makes one call with retries; each wire format has its own module
//! mapping the provider-neutral types (types.rs) to and from its JSON; `sse` parses event
//! streams. This module adds the set of configured providers, the fallback chain and costs
//! (`prices`: the price tables, free providers and unpriced models).
//!
//! Fallback policy: every failure of a model moves on to the next model of the chain, including
//! client errors (4xx) and missing keys. A request one model rejects (context too long, images or
//! tools unsupported, a revoked key) may suit another, and chains are short, so trying costs
//! little. Retries of the *same* model happen only for transient failures (see
//! `LlmError::is_retryable`).

mod anthropic;
mod error;
mod gemini;
mod openai;
pub mod prices;
mod provider;
pub mod sse;
mod types;
mod wire;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use crate::config::{Config, PriceConfig};

pub use error::{LlmError, TimeoutKind};
/// Shared with the transcription client (`voice`), which keeps the same no-key-no-URL invariant.
pub(crate) use error::{message_from_error_body, reqwest_error_text};
pub use provider::{ProbeOutcome, Provider};
pub use types::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ImageInput, Role, StreamDelta, ToolCall,
    ToolSpec, Usage,
};

/// A model in a fallback chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// A key of `[providers]` in the config.
    pub provider: String,
    pub model: String,
}

impl ModelRef {
    pub fn new(provider: impl Into<String>, model: impl Into<String>) -> ModelRef {
        ModelRef {
            provider: provider.into(),
            model: model.into(),
        }
    }
}

impl std::fmt::Display for ModelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// All configured providers by name.
#[derive(Debug, Default, Clone)]
pub struct Providers {
    by_name: BTreeMap<String, Arc<Provider>>,
}

impl Providers {
    pub fn from_config(config: &Config) -> Providers {
        let by_name = config
            .providers
            .iter()
            .map(|(name, provider)| {
                (
                    name.clone(),
                    Arc::new(Provider::from_config(name, provider)),
                )
            })
            .collect();
        Providers { by_name }
    }

    /// Like `from_config`, with the API keys taken from `secrets` (by variable name) — the
    /// environment as the config loader saw it — instead of the process environment.
    pub fn from_config_with_secrets(
        config: &Config,
        secrets: &BTreeMap<String, crate::secrets::Secret>,
    ) -> Providers {
        let mut providers = Providers::from_config(config);
        for (name, provider) in &config.providers {
            if let Some(secret) = secrets.get(provider.api_key_env.trim()) {
                providers.insert(Provider::from_config(name, provider).with_key(secret.clone()));
            }
        }
        providers
    }

    /// Adds (or replaces) a provider under its own name; tests use it to tune retries.
    pub fn insert(&mut self, provider: Provider) {
        self.by_name
            .insert(provider.name().to_string(), Arc::new(provider));
    }

    pub fn get(&self, name: &str) -> Option<Arc<Provider>> {
        self.by_name.get(name).cloned()
    }

    /// Probes every provider at once (see [`Provider::probe`]), in name order.
    pub async fn probe_all(&self) -> Vec<ProbeOutcome> {
        futures::future::join_all(self.by_name.values().map(|provider| provider.probe())).await
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// A successful call through a fallback chain.
#[derive(Debug, Clone)]
pub struct FallbackOutcome {
    pub response: ChatResponse,
    /// The model that answered.
    pub model: ModelRef,
    /// The models tried before it, each with its final error (after its own retries).
    pub failed: Vec<(ModelRef, LlmError)>,
}

/// Tries each model of the chain in order (each with its own retries); returns the first
/// success, the model that answered, and the failures of the models tried before it. When every
/// model fails the error is `LlmError::AllModelsFailed` listing them all. `request.model` is
/// replaced by each entry's model.
pub async fn chat_with_fallback(
    providers: &Providers,
    chain: &[ModelRef],
    mut request: ChatRequest,
    stream: Option<&UnboundedSender<StreamDelta>>,
) -> Result<FallbackOutcome, LlmError> {
    if chain.is_empty() {
        return Err(LlmError::EmptyChain);
    }
    let mut failed = Vec::new();
    for entry in chain {
        let Some(provider) = providers.get(&entry.provider) else {
            failed.push((
                entry.clone(),
                LlmError::UnknownProvider(entry.provider.clone()),
            ));
            continue;
        };
        entry.model.clone_into(&mut request.model);
        match provider.chat(&request, stream).await {
            Ok(response) => {
                return Ok(FallbackOutcome {
                    response,
                    model: entry.clone(),
                    failed,
                });
            }
            Err(error) => {
                tracing::warn!(
                    provider = %entry.provider,
                    model = %entry.model,
                    error = %error,
                    "model failed, trying the next one in the chain"
                );
                failed.push((entry.clone(), error));
            }
        }
    }
    Err(LlmError::AllModelsFailed { failures: failed })
}

/// Cost in US dollars from one pricing table keyed by the exact model name (0 when the model has
/// no price there). Runs price their calls with [`prices::Prices`], which adds the built-in
/// table, the matching rule and free providers.
pub fn cost_usd(pricing: &BTreeMap<String, PriceConfig>, model: &str, usage: &Usage) -> f64 {
    pricing
        .get(model)
        .map_or(0.0, |price| prices::cost_at(price, usage))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_tokens_times_price_per_million() {
        let mut pricing = BTreeMap::new();
        pricing.insert(
            "gpt-test".to_string(),
            PriceConfig {
                input_per_mtok: 2.5,
                output_per_mtok: 10.0,
            },
        );
        let usage = Usage {
            input_tokens: 1_000,
            output_tokens: 500,
        };
        let cost = cost_usd(&pricing, "gpt-test", &usage);
        assert!((cost - 0.0075).abs() < 1e-12, "{cost}");
        assert_eq!(cost_usd(&pricing, "gpt-test-mini", &usage), 0.0);
    }
}
