//! `[providers.NAME]` and `[pricing.MODEL]`: where models are called and what they cost.

use serde::{Deserialize, Serialize};

use super::Dur;

/// The wire protocol of an LLM provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, LM Studio, OpenRouter, llama.cpp.
    Openai,
    Anthropic,
    Gemini,
}

impl ProviderKind {
    /// The word the config file uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    pub base_url: String,
    /// Environment variable holding the API key (empty: no key, e.g. a local Ollama).
    #[serde(default)]
    pub api_key_env: String,
    /// Per-call timeout.
    #[serde(default = "default_provider_timeout")]
    pub timeout: Dur,
    /// Retries on 429 / 5xx / connection errors before the fallback chain moves on.
    #[serde(default = "default_provider_retries")]
    pub max_retries: u32,
    /// When set, this provider also serves embeddings with this model.
    #[serde(default)]
    pub embeddings_model: String,
    /// When set, this provider also transcribes voice notes with this model through the
    /// OpenAI-compatible `POST <base_url>/audio/transcriptions` (OpenAI, Groq, a local
    /// faster-whisper or whisper.cpp server). Only `kind = "openai"` providers may set it.
    #[serde(default)]
    pub transcription_model: String,
    /// When set, this provider also speaks replies with this model (OpenAI-compatible
    /// `POST /audio/speech`, e.g. `tts-1`); the first provider with one is the speech provider.
    #[serde(default)]
    pub speech_model: String,
    /// The voice of spoken replies (`alloy`, `nova`, ...; what the speech server offers).
    #[serde(default = "default_speech_voice")]
    pub speech_voice: String,
    /// Calls to this provider cost nothing (Ollama, a local server): its models are never
    /// "unpriced" and record $0. Their tokens still count against `daily_token_budget`.
    #[serde(default)]
    pub free: bool,
}

fn default_speech_voice() -> String {
    "alloy".to_string()
}

fn default_provider_timeout() -> Dur {
    Dur::secs(120)
}

fn default_provider_retries() -> u32 {
    3
}

/// Price of a model in US dollars per million tokens (`[pricing."model"]`, over the built-in
/// table `config/prices.toml`; see `llm::prices`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// `[transcription]`: which provider turns voice notes into text, and how long a note may be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TranscriptionConfig {
    /// The provider (from `[providers]`, with `transcription_model` set) that transcribes voice
    /// notes; empty: the first provider by name that has a `transcription_model`. None at all:
    /// voice notes are saved and the user is told what to configure.
    pub provider: String,
    /// Voice notes longer than this (by the duration Telegram reports) are saved but not
    /// transcribed; the user is told.
    pub max_duration: Dur,
}

impl Default for TranscriptionConfig {
    fn default() -> Self {
        Self {
            provider: String::new(),
            max_duration: Dur::secs(600),
        }
    }
}
