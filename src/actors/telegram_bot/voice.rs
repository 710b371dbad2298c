//! A voice note on its way to the agent: downloaded into the workspace (the audio stays there and
//! on the stored message as a `Voice` attachment), then transcribed; the wording of what the agent
//! reads and what the user is told is `crate::voice`'s.
//!
//! Nothing the user said is dropped: every outcome but a transient provider failure reaches the
//! agent, with a note when it could not be heard. A transient failure (timeout, unreachable
//! server, 429, 5xx) leaves the update pending; the sweep tries again (downloading and
//! transcribing afresh — the session's uniqueness on the update id makes a second hand-over a
//! no-op) until [`RETRY_WINDOW`] after it arrived, after which the failure is told like any other.
//! Downloads failing for now (network, Telegram's 5xx) are retried the same way. A restart does
//! not end the retries: the next incarnation still owes an answer to a note an earlier one
//! stored promptly (`late.rs`). In a group, the
//! earlier messages are taken as the note's context only at the hand-over, so a retry keeps them.

use std::path::Path;
use std::time::Duration;

use teloxide::Bot;

use crate::domain::Attachment;
use crate::telegram::intake::RemoteFile;
use crate::voice::{Audio, VoiceOutcome, VoiceSettings};

/// How long after a voice note arrived a transient transcription failure is still retried.
pub(super) const RETRY_WINDOW: Duration = Duration::from_secs(10 * 60);

/// What became of a voice note: the agent may have it now, or it waits for the sweep.
pub(super) enum VoiceStep {
    /// Hand it to the agent: the downloaded audio (if any) and what became of it.
    Ready {
        attachment: Option<Attachment>,
        outcome: VoiceOutcome,
    },
    /// The provider failed transiently; leave the update pending (the reason goes in its note).
    Retry(String),
}

/// Downloads `file` into `inbox` and transcribes it when a provider is configured and the note is
/// not too long. `received_ms` (when the update was stored) bounds the retries.
pub(super) async fn receive_voice(
    bot: &Bot,
    file: &RemoteFile,
    inbox: &Path,
    update_id: i64,
    received_ms: i64,
    settings: &VoiceSettings,
) -> VoiceStep {
    let within_window = || crate::clock::now_ms() - received_ms < RETRY_WINDOW.as_millis() as i64;
    let attachment = match super::download(bot, file, inbox, update_id).await {
        Ok(attachment) => attachment,
        // Telegram or the line failing for now: tried again like a transcription.
        Err(error) if error.transient && within_window() => {
            return VoiceStep::Retry(format!("download failed: {}", error.reason));
        }
        Err(error) => {
            return VoiceStep::Ready {
                attachment: None,
                outcome: VoiceOutcome::NotDownloaded {
                    reason: error.reason,
                    too_big: error.too_big,
                },
            };
        }
    };
    let ready = |outcome| VoiceStep::Ready {
        attachment: Some(attachment.clone()),
        outcome,
    };
    let transcriber = match &settings.transcriber {
        Ok(transcriber) => transcriber,
        Err(unavailable) => return ready(VoiceOutcome::Unavailable(unavailable.clone())),
    };
    if file.duration_secs > settings.max_duration.as_secs() {
        return ready(VoiceOutcome::TooLong {
            limit: settings.max_duration,
        });
    }
    // `attachment.path` is relative to the workspace, whose `inbox/` is `inbox`.
    let on_disk = inbox.join(
        attachment
            .path
            .file_name()
            .map(Path::new)
            .unwrap_or(Path::new("")),
    );
    let bytes = match tokio::fs::read(&on_disk).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return ready(VoiceOutcome::Failed {
                reason: format!("the saved audio could not be read back: {error}"),
                unreadable: false,
            });
        }
    };
    let audio = Audio {
        bytes,
        file_name: file.name.clone(),
        mime: file.mime.clone(),
    };
    match transcriber.transcribe(&audio).await {
        Ok(text) => ready(VoiceOutcome::Transcribed(text)),
        Err(error) if error.is_transient() && within_window() => {
            VoiceStep::Retry(format!("transcription failed: {error}"))
        }
        Err(error) => ready(VoiceOutcome::Failed {
            unreadable: error.is_unreadable_audio(),
            reason: error.to_string(),
        }),
    }
}
