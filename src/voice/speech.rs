//! Spoken replies through the OpenAI-compatible `POST {base_url}/audio/speech` (OpenAI, and the
//! local servers that copy it: openedai-speech, Kokoro-FastAPI, LocalAI), asking for Opus in an
//! Ogg container, which is what Telegram plays as a voice message.
//!
//! The speech provider is the first `[providers.NAME]` with a `speech_model` (OpenAI-compatible
//! providers only). Whether a reply is spoken is decided when the run ends
//! ([`reply_is_spoken`], from the agent's `voice_replies`); the sound is made when the reply is
//! delivered, and a reply whose synthesis fails is sent as text: a voice is a nicety, the answer
//! is not.
//!
//! Invariants: the key travels only in the `Authorization` header (marked sensitive); no
//! [`SpeechError`] contains the key or the URL; what comes back is checked to be an Ogg stream
//! before anyone sends it.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::json;

use crate::config::{Config, ProviderKind, VoiceReplies};
use crate::secrets::{Secret, redact};

/// OpenAI's limit on the text of one speech request, in characters.
pub const MAX_INPUT_CHARS: usize = 4096;
/// The largest audio accepted back (Telegram takes voice messages up to 50 MB; a reply is far less).
const MAX_AUDIO_BYTES: usize = 20 * 1024 * 1024;
/// The longest excerpt of an error body kept in an error.
const BODY_EXCERPT_CHARS: usize = 200;

/// Where and how replies are spoken.
#[derive(Debug, Clone)]
pub struct SpeechConfig {
    /// The provider's name in the config (for messages).
    pub provider: String,
    /// `https://api.openai.com/v1`; the request goes to `{base_url}/audio/speech`.
    pub base_url: String,
    pub model: String,
    pub voice: String,
    pub api_key: Option<Secret>,
    pub timeout: Duration,
}

/// The speech provider of `config`: the first provider with a `speech_model`. `Ok(None)` when
/// there is none; `Err` naming what to fix when it cannot work (not OpenAI-compatible, key missing).
pub fn speech_config(
    config: &Config,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Option<SpeechConfig>, String> {
    let Some((name, provider)) = config
        .providers
        .iter()
        .find(|(_, provider)| !provider.speech_model.trim().is_empty())
    else {
        return Ok(None);
    };
    if provider.kind != ProviderKind::Openai {
        return Err(format!(
            "provider `{name}` has a `speech_model` but is not OpenAI-compatible (kind = \"openai\"); spoken replies need `POST /audio/speech`"
        ));
    }
    let key_env = provider.api_key_env.trim();
    let api_key = secrets.get(key_env).cloned();
    if !key_env.is_empty() && api_key.is_none() {
        return Err(format!(
            "provider `{name}` needs its key in ${key_env} for spoken replies"
        ));
    }
    let voice = provider.speech_voice.trim();
    Ok(Some(SpeechConfig {
        provider: name.clone(),
        base_url: provider.base_url.trim_end_matches('/').to_string(),
        model: provider.speech_model.trim().to_string(),
        voice: if voice.is_empty() { "alloy" } else { voice }.to_string(),
        api_key,
        timeout: provider.timeout.0.min(Duration::from_secs(120)),
    }))
}

/// Why no sound came back. The texts name the provider, never its URL or key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpeechError {
    #[error("the text is empty; there is nothing to speak")]
    Empty,
    #[error("the text has {0} characters; speech takes at most {MAX_INPUT_CHARS}")]
    TooLong(usize),
    #[error("the speech provider `{provider}` could not be reached: {reason}")]
    Network { provider: String, reason: String },
    #[error("the speech provider `{provider}` answered {status}: {excerpt}")]
    Status {
        provider: String,
        status: u16,
        excerpt: String,
    },
    #[error("the speech provider `{provider}` did not answer with Ogg/Opus audio ({reason})")]
    NotAudio { provider: String, reason: String },
}

/// A client for one speech provider.
#[derive(Clone)]
pub struct SpeechClient {
    config: SpeechConfig,
    http: reqwest::Client,
}

impl SpeechClient {
    pub fn new(config: SpeechConfig) -> SpeechClient {
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        SpeechClient { config, http }
    }

    pub fn config(&self) -> &SpeechConfig {
        &self.config
    }

    /// Speaks `text`: Ogg/Opus bytes, checked to start like an Ogg stream.
    pub async fn synthesize(&self, text: &str) -> Result<Vec<u8>, SpeechError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SpeechError::Empty);
        }
        let characters = text.chars().count();
        if characters > MAX_INPUT_CHARS {
            return Err(SpeechError::TooLong(characters));
        }
        let provider = self.config.provider.clone();
        let body = json!({
            "model": self.config.model,
            "input": text,
            "voice": self.config.voice,
            "response_format": "opus",
        });
        let mut request = self
            .http
            .post(format!("{}/audio/speech", self.config.base_url))
            .json(&body);
        if let Some(key) = &self.config.api_key
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        {
            value.set_sensitive(true);
            request = request.header(AUTHORIZATION, value);
        }
        let network = |error: reqwest::Error| SpeechError::Network {
            provider: provider.clone(),
            reason: redact(&error.without_url().to_string()).into_owned(),
        };
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let excerpt: String = redact(&body).chars().take(BODY_EXCERPT_CHARS).collect();
            return Err(SpeechError::Status {
                provider,
                status: status.as_u16(),
                excerpt,
            });
        }
        let audio = response.bytes().await.map_err(network)?;
        if audio.len() > MAX_AUDIO_BYTES {
            return Err(SpeechError::NotAudio {
                provider,
                reason: format!("{} bytes is more than a reply can be", audio.len()),
            });
        }
        if !audio.starts_with(b"OggS") {
            return Err(SpeechError::NotAudio {
                provider,
                reason: "the answer does not start with an Ogg page".into(),
            });
        }
        Ok(audio.to_vec())
    }
}

/// Whether a run's answer is spoken: `always`, or `when_spoken_to` and one of the user messages
/// it answers (their stored `data`) carries a voice note.
pub fn reply_is_spoken<'a>(
    mode: VoiceReplies,
    answered: impl IntoIterator<Item = Option<&'a str>>,
) -> bool {
    match mode {
        VoiceReplies::Never => false,
        VoiceReplies::Always => true,
        VoiceReplies::WhenSpokenTo => answered.into_iter().flatten().any(carries_voice_note),
    }
}

/// A stored user message's `data` lists a voice attachment (`{"attachments":[{"kind":"voice"}]}`).
fn carries_voice_note(data: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(data)
        .ok()
        .and_then(|data| {
            data["attachments"].as_array().map(|attachments| {
                attachments
                    .iter()
                    .any(|attachment| attachment["kind"] == "voice")
            })
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_spoken_only_when_the_mode_and_the_messages_say_so() {
        let voice = Some(r#"{"attachments":[{"kind":"voice","path":"inbox/1-voice.ogg"}]}"#);
        let photo = Some(r#"{"attachments":[{"kind":"image","path":"inbox/2-photo.jpg"}]}"#);
        assert!(reply_is_spoken(VoiceReplies::WhenSpokenTo, [None, voice]));
        assert!(!reply_is_spoken(VoiceReplies::WhenSpokenTo, [None, photo]));
        assert!(!reply_is_spoken(
            VoiceReplies::WhenSpokenTo,
            [Some("not json")]
        ));
        assert!(!reply_is_spoken(VoiceReplies::Never, [voice]));
        assert!(reply_is_spoken(VoiceReplies::Always, [None]));
    }
}
