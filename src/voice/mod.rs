//! Voice: notes in (which provider transcribes them, and what the agent and the user are told)
//! and spoken replies out (`speech`).
//!
//! A Telegram voice note is downloaded into the agent's workspace like any attachment (the audio
//! stays there, and stays on the stored message as an `AttachmentKind::Voice` attachment); then
//! [`transcribe::Transcriber`] turns it into text through the OpenAI-compatible
//! `POST /v1/audio/transcriptions`. The bot (`actors/telegram_bot/voice.rs`) decides with
//! [`VoiceOutcome`] what the agent reads ([`agent_text`]) and the one sentence the user gets
//! ([`user_notice`]); the wording lives here so that it is written once and tested without a bot.
//!
//! The transcription provider is the one `[transcription] provider` names, else the first
//! `[providers.NAME]` by name with a `transcription_model`.
//!
//! The agent reads a transcribed note as `[voice note, 0:07] <transcript>` followed by
//! `[audio saved to inbox/<file>]` (a caption, if any, comes first); a note it cannot hear says so
//! in brackets, with where the audio is and that the user was told. The user gets at most one
//! sentence, sent by the bot before the agent gets the message: the setup hint, that the note is
//! too long, too big to download or unreadable, that the service failed, or (with
//! `echo_transcripts`) the quote `🎙 "…"` of what was understood, at most [`QUOTE_MAX_CHARS`]
//! characters of it. Whether a reply is spoken back is `speech`'s ([`speech::reply_is_spoken`]:
//! the agent's `voice_replies` and the answered messages' voice-note attachments).
//!
//! Architecture Invariant: `voice` knows nothing about Telegram or actors; transcription errors
//! never carry the key or the URL (see `transcribe`).

pub mod speech;
pub mod transcribe;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::config::{Config, ProviderKind};
use crate::secrets::Secret;

pub use transcribe::{Audio, Transcriber, TranscriptionError};

/// The sentence a user gets when a voice note arrives and no provider transcribes.
pub const NO_PROVIDER_HINT: &str = "I can't listen to voice notes yet: my operator needs to set `transcription_model` on a provider in clawvisor's config (for example \"whisper-1\").";

/// What the bot knows about transcription: the client, or why there is none; and the longest note.
#[derive(Debug, Clone)]
pub struct VoiceSettings {
    pub transcriber: Result<Transcriber, Unavailable>,
    /// `[transcription].max_duration`.
    pub max_duration: Duration,
}

/// Why voice notes cannot be transcribed: for the operator (logs, doctor) and for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
    pub user_hint: String,
}

impl VoiceSettings {
    /// From `[transcription]` and `[providers]`: the named provider, else the first by name with
    /// a `transcription_model` (the config's validation already refused a named provider without
    /// one, or one that is not OpenAI-compatible).
    pub fn from_config(config: &Config, secrets: &BTreeMap<String, Secret>) -> VoiceSettings {
        VoiceSettings {
            transcriber: transcriber(config, secrets),
            max_duration: config.transcription.max_duration.0,
        }
    }
}

fn not_configured() -> Unavailable {
    Unavailable {
        reason:
            "no transcription provider: set `transcription_model` on an OpenAI-compatible provider"
                .into(),
        user_hint: NO_PROVIDER_HINT.into(),
    }
}

fn transcriber(
    config: &Config,
    secrets: &BTreeMap<String, Secret>,
) -> Result<Transcriber, Unavailable> {
    let chosen = if config.transcription.provider.is_empty() {
        config.providers.iter().find(|(_, provider)| {
            !provider.transcription_model.trim().is_empty() && provider.kind == ProviderKind::Openai
        })
    } else {
        config
            .providers
            .get_key_value(&config.transcription.provider)
    };
    let Some((name, provider)) = chosen else {
        return Err(not_configured());
    };
    if provider.transcription_model.trim().is_empty() || provider.kind != ProviderKind::Openai {
        return Err(not_configured());
    }
    let env = provider.api_key_env.trim();
    let key = secrets.get(env).cloned();
    if !env.is_empty() && key.is_none() {
        return Err(Unavailable {
            reason: format!("provider `{name}` needs its key in ${env} for transcription"),
            user_hint: format!(
                "I can't listen to voice notes yet: my operator needs to set the environment variable {env} (the key of the transcription provider `{name}`)."
            ),
        });
    }
    Ok(Transcriber::new(
        name,
        &provider.base_url,
        &provider.transcription_model,
        key,
        provider.timeout.0,
        provider.max_retries,
    ))
}

/// What became of one voice note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoiceOutcome {
    /// The transcript (trimmed; empty when the server heard nothing).
    Transcribed(String),
    /// No provider transcribes (or its key is missing); the user gets `user_hint`.
    Unavailable(Unavailable),
    /// Longer than `[transcription].max_duration`.
    TooLong { limit: Duration },
    /// The audio could not be downloaded: `too_big` for the Bot API's 20 MB, else refused by
    /// Telegram or still failing at the end of the retries.
    NotDownloaded { reason: String, too_big: bool },
    /// The provider refused or failed for good; `unreadable` when it said the audio is unusable.
    Failed { reason: String, unreadable: bool },
}

/// The most of a transcript the `🎙` quote shows: the notice is one Telegram message (at most
/// 4096 characters), and the agent has the whole transcript anyway.
pub const QUOTE_MAX_CHARS: usize = 3500;

/// A transcript for the quote: whole, or its first [`QUOTE_MAX_CHARS`] characters and "…".
fn quoted_transcript(text: &str) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(QUOTE_MAX_CHARS) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", text[..cut].trim_end())),
    }
}

/// `m:ss` (or `h:mm:ss`) of a duration in seconds.
pub fn clock_text(seconds: u64) -> String {
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

/// What the agent reads for a voice note of `duration_secs` whose audio is at `saved` (relative
/// to the workspace; `None` when it could not be downloaded), after the `caption` if any.
pub fn agent_text(
    caption: &str,
    duration_secs: u64,
    saved: Option<&Path>,
    outcome: &VoiceOutcome,
) -> String {
    let length = clock_text(duration_secs);
    let saved_text = match saved {
        Some(path) => format!("saved to {}", path.display()),
        None => "not saved".to_string(),
    };
    let body = match outcome {
        VoiceOutcome::Transcribed(text) if !text.is_empty() => match saved {
            Some(path) => format!(
                "[voice note, {length}] {text}\n[audio saved to {}]",
                path.display()
            ),
            None => format!("[voice note, {length}] {text}"),
        },
        VoiceOutcome::Transcribed(_) => format!(
            "[voice note, {length}, {saved_text}: the transcription is empty; nothing could be heard in it]"
        ),
        VoiceOutcome::Unavailable(_) => format!(
            "[voice note, {length}, {saved_text}: you cannot hear it, no transcription provider is configured; the user was told how to set one up]"
        ),
        VoiceOutcome::TooLong { limit } => format!(
            "[voice note, {length}, {saved_text}: not transcribed, it is longer than the {} limit; the user was told]",
            clock_text(limit.as_secs())
        ),
        VoiceOutcome::NotDownloaded { reason, .. } => format!(
            "[voice note, {length}: it could not be downloaded ({reason}); the user was told]"
        ),
        VoiceOutcome::Failed { reason, .. } => format!(
            "[voice note, {length}, {saved_text}: it could not be transcribed ({reason}); the user was told]"
        ),
    };
    if caption.trim().is_empty() {
        body
    } else {
        format!("{}\n{body}", caption.trim())
    }
}

/// The one sentence the user gets about a voice note, if any: the hint, the error, or (with
/// `echo_transcripts`) the quote of what was understood.
pub fn user_notice(duration_secs: u64, outcome: &VoiceOutcome, echo: bool) -> Option<String> {
    match outcome {
        VoiceOutcome::Transcribed(text) if text.is_empty() => Some(
            "I couldn't hear anything in that voice note. Could you record it again or type it?"
                .into(),
        ),
        VoiceOutcome::Transcribed(text) => echo.then(|| {
            format!("🎙 \u{201C}{}\u{201D}", quoted_transcript(text))
        }),
        VoiceOutcome::Unavailable(unavailable) => Some(unavailable.user_hint.clone()),
        VoiceOutcome::TooLong { limit } => Some(format!(
            "That voice note is {} long; I can only transcribe notes up to {}. Please send a shorter one or type it.",
            clock_text(duration_secs),
            clock_text(limit.as_secs())
        )),
        VoiceOutcome::NotDownloaded { too_big: true, .. } => Some(
            "I couldn't download that voice note from Telegram: it is over 20 MB. Please send a shorter one or type it."
                .into(),
        ),
        VoiceOutcome::NotDownloaded { too_big: false, .. } => Some(
            "I couldn't download that voice note from Telegram. Please send it again or type it."
                .into(),
        ),
        VoiceOutcome::Failed {
            unreadable: true, ..
        } => Some(
            "I couldn't make out that voice note: the audio could not be read. Please record it again or type it."
                .into(),
        ),
        VoiceOutcome::Failed { .. } => Some(
            "I couldn't transcribe that voice note: the transcription service failed. Please try again later or type it."
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_a_clock() {
        assert_eq!(clock_text(7), "0:07");
        assert_eq!(clock_text(600), "10:00");
        assert_eq!(clock_text(3725), "1:02:05");
    }

    #[test]
    fn a_transcript_is_the_text_and_the_audio_is_named() {
        let text = agent_text(
            "",
            7,
            Some(Path::new("inbox/5-voice-9.ogg")),
            &VoiceOutcome::Transcribed("remind me at nine".into()),
        );
        assert_eq!(
            text,
            "[voice note, 0:07] remind me at nine\n[audio saved to inbox/5-voice-9.ogg]"
        );
        let captioned = agent_text("for you", 7, None, &VoiceOutcome::Transcribed("hi".into()));
        assert_eq!(captioned, "for you\n[voice note, 0:07] hi");
        assert_eq!(
            user_notice(7, &VoiceOutcome::Transcribed("hi".into()), true).as_deref(),
            Some("🎙 \u{201C}hi\u{201D}")
        );
        assert_eq!(
            user_notice(7, &VoiceOutcome::Transcribed("hi".into()), false),
            None
        );
    }

    #[test]
    fn every_note_that_is_not_heard_is_explained_to_both() {
        let saved = Some(Path::new("inbox/1-voice-1.ogg"));
        let outcomes = [
            VoiceOutcome::Transcribed(String::new()),
            VoiceOutcome::Unavailable(not_configured()),
            VoiceOutcome::TooLong {
                limit: Duration::from_secs(600),
            },
            VoiceOutcome::NotDownloaded {
                reason: "too big".into(),
                too_big: true,
            },
            VoiceOutcome::NotDownloaded {
                reason: "Bad Request: wrong file_id".into(),
                too_big: false,
            },
            VoiceOutcome::Failed {
                reason: "HTTP 400".into(),
                unreadable: true,
            },
            VoiceOutcome::Failed {
                reason: "HTTP 500".into(),
                unreadable: false,
            },
        ];
        for outcome in &outcomes {
            let text = agent_text("", 900, saved, outcome);
            assert!(text.starts_with("[voice note, 15:00"), "{text}");
            assert!(
                user_notice(900, outcome, false).is_some_and(|notice| !notice.is_empty()),
                "{outcome:?}"
            );
        }
        assert!(
            user_notice(900, &outcomes[2], false)
                .unwrap()
                .contains("15:00 long; I can only transcribe notes up to 10:00")
        );
        assert_eq!(
            user_notice(1, &outcomes[1], false).as_deref(),
            Some(NO_PROVIDER_HINT)
        );
    }

    #[test]
    fn the_first_openai_provider_with_a_model_transcribes_and_a_missing_key_is_explained() {
        let config = crate::config::parse_file(
            r#"
[providers.a_chat]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
[providers.b_whisper]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
transcription_model = "whisper-1"
api_key_env = "VOICE_TEST_KEY_UNSET"
[providers.c_groq]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
transcription_model = "whisper-large-v3"
"#,
            "test.toml",
        )
        .unwrap();
        let without_key = VoiceSettings::from_config(&config, &BTreeMap::new());
        let unavailable = without_key.transcriber.unwrap_err();
        assert!(
            unavailable.reason.contains("b_whisper")
                && unavailable.reason.contains("VOICE_TEST_KEY_UNSET")
        );
        let secrets = BTreeMap::from([(
            "VOICE_TEST_KEY_UNSET".to_string(),
            Secret::new("sk-voice-test-0000"),
        )]);
        let with_key = VoiceSettings::from_config(&config, &secrets);
        let transcriber = with_key.transcriber.unwrap();
        assert_eq!(
            (transcriber.provider(), transcriber.model()),
            ("b_whisper", "whisper-1")
        );
        assert_eq!(with_key.max_duration, Duration::from_secs(600));
    }

    #[test]
    fn a_long_transcript_is_quoted_in_part_within_one_message() {
        let long = "word ".repeat(2000);
        let notice = user_notice(
            60,
            &VoiceOutcome::Transcribed(long.trim().to_string()),
            true,
        )
        .expect("a quote");
        assert!(notice.chars().count() <= 4096, "{}", notice.chars().count());
        assert!(notice.ends_with("…\u{201D}"), "{notice}");
        let short = user_notice(3, &VoiceOutcome::Transcribed("hello there".into()), true);
        assert_eq!(short.as_deref(), Some("🎙 \u{201C}hello there\u{201D}"));
        let exact = "é".repeat(QUOTE_MAX_CHARS);
        let notice = user_notice(3, &VoiceOutcome::Transcribed(exact.clone()), true).unwrap();
        assert!(notice.contains(&exact) && !notice.contains('…'));
    }
}
