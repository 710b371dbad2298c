//! What the seam channels' eval sides share (`whatsapp.rs`, `signal.rs`): the newest run of a
//! conversation, and whether a stored message is done with and nothing else is under way.

use crate::domain::ChatKey;
use crate::store::Store;
use crate::testkit::harness::OPEN_WORK_SQL;

/// What a turn says on a seam channel: text, or a voice note in which the transcription server
/// hears the text.
pub(super) enum Said<'a> {
    Text(&'a str),
    Voice(&'a str),
}

/// The newest run in the conversation with `chat`.
pub(super) async fn last_run_id(store: &Store, chat: &ChatKey) -> Result<Option<i64>, String> {
    let chat = chat.as_str().to_string();
    store
        .read(move |conn| {
            Ok(
                conn.query_row("SELECT MAX(id) FROM runs WHERE chat = ?1", [&chat], |row| {
                    row.get(0)
                })?,
            )
        })
        .await
        .map_err(|error| format!("cannot read the runs: {error}"))
}

/// The message (its `channel_inbound.message_id`) is done with and nothing else is under way
/// (`harness::OPEN_WORK_SQL`, and no stored channel message waiting).
pub(super) async fn settled(store: &Store, message_id: &str) -> Result<bool, String> {
    let message_id = message_id.to_string();
    store
        .read(move |conn| {
            let status: Option<String> = conn
                .query_row(
                    "SELECT status FROM channel_inbound WHERE message_id = ?1",
                    [&message_id],
                    |row| row.get(0),
                )
                .ok();
            if !matches!(status.as_deref(), Some("processed" | "ignored")) {
                return Ok(false);
            }
            let open: i64 = conn.query_row(OPEN_WORK_SQL, [], |row| row.get(0))?;
            let waiting: i64 = conn.query_row(
                "SELECT COUNT(*) FROM channel_inbound WHERE status IN ('pending', 'dispatched')",
                [],
                |row| row.get(0),
            )?;
            Ok(open == 0 && waiting == 0)
        })
        .await
        .map_err(|error| format!("cannot read the stored messages: {error}"))
}
