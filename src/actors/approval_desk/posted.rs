//! Recording where an approval prompt was posted (its Telegram message id), so that the prompt
//! can be resolved (its buttons removed) when it is decided or expires.
//!
//! The prompt is already in the chat when its id arrives, so the record is retried (100 ms,
//! doubling to 1 s, by `send_after` to this actor), never the post: a store that refuses writes
//! leaves the desk working and the chat without a second copy of the prompt. (Before, the
//! failed write stopped the desk, and its restart posted every pending prompt again.)

use std::time::Duration;

use ractor::{ActorProcessingErr, ActorRef};

use super::{DeskMsg, DeskState, decide, resolve_message};
use crate::store::approvals::{self as queries, ApprovalStatus};

/// The first wait before a failed record is tried again, and the longest.
const FIRST_WAIT: Duration = Duration::from_millis(100);
const LONGEST_WAIT: Duration = Duration::from_secs(1);

/// A prompt that was posted, waiting for its record.
#[derive(Debug, Clone)]
pub struct PostedPrompt {
    pub id: String,
    pub chat_id: i64,
    pub message_id: i32,
    /// Tries so far (0 before the first).
    pub tries: u32,
}

/// Records that request `posted.id`'s prompt is message `message_id` in `chat_id`; a failure
/// schedules the next try. A prompt decided before its id was stored is resolved now.
pub(super) async fn record_posted(
    myself: &ActorRef<DeskMsg>,
    state: &mut DeskState,
    mut posted: PostedPrompt,
) -> Result<(), ActorProcessingErr> {
    posted.tries += 1;
    let (id, chat_id, message_id) = (posted.id.clone(), posted.chat_id, posted.message_id);
    let written = state
        .args
        .store
        .write(move |conn| {
            queries::set_posted(conn, &id, chat_id, message_id as i64)?;
            let row = queries::get(conn, &id)?;
            let granted = queries::granted(conn, &id)?;
            Ok(row.map(|row| (row, granted)))
        })
        .await;
    let recorded = match written {
        Ok(recorded) => recorded,
        Err(error) => {
            if posted.tries == 1 {
                tracing::warn!(approval = %posted.id, %error, "an approval prompt was posted, but recording its message failed; it is not posted again, the record is retried");
            }
            let wait = FIRST_WAIT
                .saturating_mul(1 << (posted.tries - 1).min(6))
                .min(LONGEST_WAIT);
            myself.send_after(wait, move || DeskMsg::RecordPosted(posted));
            return Ok(());
        }
    };
    if posted.tries > 1 {
        tracing::info!(approval = %posted.id, tries = posted.tries, "an approval prompt's message is recorded now");
    }
    // A quick approver may have decided before the prompt's message id was stored: the
    // prompt is resolved now, so it never keeps offering its buttons.
    if let Some((row, granted)) = recorded
        && row.status != ApprovalStatus::Pending
    {
        let by = row
            .decided_by
            .clone()
            .unwrap_or_else(|| "an approver".to_string());
        let text = decide::decided_text(&row, row.status, &by, granted);
        resolve_message(&state.args, &row, &text);
    }
    Ok(())
}
