//! Whether a run's answer is spoken (the agent's `voice_replies`): decided from the user messages
//! the run answers — at its start, so that a spoken answer is not streamed as text first, and
//! again when it ends, in the transaction that queues the reply (`outbox.speak`).

use super::RunCtx;
use crate::config::VoiceReplies;
use crate::domain::ChatKind;
use crate::store::sessions::{self, EventKindRow};

/// Whether the answer to these events (a run's) is spoken, by the agent's `voice_replies`.
pub(super) fn spoken_to(mode: VoiceReplies, answered: &[sessions::EventRow]) -> bool {
    crate::voice::speech::reply_is_spoken(
        mode,
        answered
            .iter()
            .filter(|event| event.kind == EventKindRow::User)
            .map(|event| event.data.as_deref()),
    )
}

/// Whether this run's answer will be spoken (decided again, in the same way, when it ends).
pub(super) async fn answer_is_spoken(ctx: &RunCtx) -> bool {
    let mode = ctx.runtime.spec.voice_replies;
    if ctx.chat.kind() != ChatKind::Telegram || mode == VoiceReplies::Never {
        return false;
    }
    let run_id = ctx.run_id;
    ctx.runtime
        .store
        .read(move |conn| Ok(spoken_to(mode, &sessions::run_events(conn, run_id)?)))
        .await
        .unwrap_or(false)
}
