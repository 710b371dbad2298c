//! The account's one send worker: outbox rows and notices, in the order they were queued.
//!
//! An outbox row is read again before it is sent (a delivered or held one is skipped), its file
//! (if any) and its text split at the channel's limit are sent part by part, and only when every
//! part was accepted are the row delivered and the messages it answered processed, in one
//! transaction (retried until it lands: what the channel accepted is never sent again because
//! its record failed, as `telegram::hold` does for Telegram). A crash between a part accepted
//! and that record sends the row again at the next start: at most one duplicate.
//!
//! Pacing: a `Paced` error (WhatsApp 130429, 131056) makes this worker wait `retry_after` before
//! it sends to that person again, and the part is sent again — like Telegram's 429s.
//! Window: a row for someone who has not written within the channel's window is sent as the
//! configured template, or held with its reason (`outbox.held_*`, a warning event Studio shows)
//! until they write again; never dropped silently.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::channel::{Adapter, OutPart, SendError, split_text};
use crate::events::{EventBus, EventKind};
use crate::store::Store;
use crate::store::outbox::{self, OutboxRow};

/// Paced retries of one part before the row is left for the sweep.
const PACED_TRIES: u32 = 5;

pub(super) enum Job {
    /// An outbox row, by id.
    Outbox(i64),
    /// Something not in the outbox: a notice, an approval prompt.
    Part { peer: String, part: OutPart },
}

pub(super) struct SenderArgs {
    pub adapter: Arc<dyn Adapter>,
    pub agent: String,
    pub template: Option<(String, String)>,
    pub store: Store,
    pub events: EventBus,
}

/// Per person: not before this instant (after a rate error).
type Pace = HashMap<String, Instant>;

pub(super) async fn run(args: SenderArgs, mut jobs: mpsc::UnboundedReceiver<Job>) {
    let mut pace = Pace::new();
    while let Some(job) = jobs.recv().await {
        match job {
            Job::Outbox(id) => send_row(&args, &mut pace, id).await,
            Job::Part { peer, part } => {
                if let Err(error) = send_paced(&args, &mut pace, &peer, &part).await {
                    tracing::warn!(agent = %args.agent, channel = args.adapter.channel(), %error, "a notice could not be sent");
                }
            }
        }
    }
}

/// Sends one part, waiting out rate errors (at most [`PACED_TRIES`] times).
async fn send_paced(
    args: &SenderArgs,
    pace: &mut Pace,
    peer: &str,
    part: &OutPart,
) -> Result<String, SendError> {
    let mut tries = 0;
    loop {
        if let Some(until) = pace.get(peer) {
            tokio::time::sleep_until(*until).await;
        }
        match args.adapter.send(peer, part).await {
            Err(SendError::Paced {
                retry_after,
                reason,
            }) if tries < PACED_TRIES => {
                tries += 1;
                tracing::info!(agent = %args.agent, channel = args.adapter.channel(), %reason, "paced: waiting {retry_after:?}");
                pace.insert(peer.to_string(), Instant::now() + retry_after);
            }
            other => return other,
        }
    }
}

async fn send_row(args: &SenderArgs, pace: &mut Pace, id: i64) {
    let row = match args
        .store
        .read(move |conn| outbox::outbox_get(conn, id))
        .await
    {
        Ok(Some(row)) => row,
        // Delivered already, or unreadable now (the sweep queues it again).
        _ => return,
    };
    let peer = row
        .chat
        .split_once(':')
        .map_or("", |(_, peer)| peer)
        .to_string();
    let window_open = within_window(args, &peer).await;
    let parts = match (window_open, &args.template) {
        (true, _) => parts_of(&row, args.adapter.capabilities().text_limit),
        (false, Some((name, language))) => vec![OutPart::Template {
            name: name.clone(),
            language: language.clone(),
            text: row.text.chars().take(1000).collect(),
        }],
        (false, None) => return hold(args, &row, "outside_window").await,
    };
    for part in &parts {
        match send_paced(args, pace, &peer, part).await {
            Ok(_) => {}
            Err(SendError::OutsideWindow) => return hold(args, &row, "outside_window").await,
            Err(error) => {
                let text = error.to_string();
                tracing::warn!(agent = %args.agent, outbox = id, error = %text, "a reply could not be sent; the sweep tries again");
                let _ = args
                    .store
                    .write(move |conn| outbox::outbox_failed(conn, id, &text))
                    .await;
                return;
            }
        }
    }
    let answered = row.inbound_ids.clone();
    let record = move || {
        let answered = answered.clone();
        move |conn: &rusqlite::Connection| {
            let now = crate::clock::now_ms();
            outbox::outbox_delivered(conn, id, now)?;
            crate::store::channels::mark_answered(conn, &answered, now)
        }
    };
    let _ = args
        .store
        .write_until_committed(&format!("the delivery of outbox row {id}"), record)
        .await;
    if let Some(file) = &row.file {
        let _ = tokio::fs::remove_file(&file.path).await;
    }
}

/// Whether `peer` wrote within the channel's window (always, for a channel without one).
async fn within_window(args: &SenderArgs, peer: &str) -> bool {
    let Some(window) = args.adapter.capabilities().window else {
        return true;
    };
    let (channel, account, peer) = (
        args.adapter.channel(),
        args.adapter.account().to_string(),
        peer.to_string(),
    );
    let last = args
        .store
        .read(move |conn| crate::store::channels::last_inbound(conn, channel, &account, &peer))
        .await;
    match last {
        Ok(Some(last)) => crate::clock::now_ms() - last < window.as_millis() as i64,
        Ok(None) => false,
        // Unknown now: try to send; the channel says if it is outside.
        Err(_) => true,
    }
}

fn parts_of(row: &OutboxRow, limit: usize) -> Vec<OutPart> {
    if let Some(file) = &row.file {
        return vec![OutPart::File {
            kind: file.kind,
            path: file.path.clone(),
            name: file.name.clone(),
            caption: row.text.clone(),
        }];
    }
    split_text(&row.text, limit)
        .into_iter()
        .map(OutPart::Text)
        .collect()
}

/// Holds a row the channel cannot send now, and says so (Studio shows the warning).
async fn hold(args: &SenderArgs, row: &OutboxRow, reason: &'static str) {
    let id = row.id;
    let now = crate::clock::now_ms();
    if args
        .store
        .write(move |conn| outbox::hold(conn, id, reason, now))
        .await
        .is_err()
    {
        return;
    }
    let text = format!(
        "A message of agent {} to {} is held: they have not written in the last 24 hours, so WhatsApp accepts only an approved template, and none is configured. It is sent when they write again; or set `[whatsapp] template` in the agent's file.",
        args.agent, row.chat
    );
    tracing::warn!(agent = %args.agent, chat = %row.chat, outbox = id, "{text}");
    args.events
        .publish(EventKind::Warning, &format!("outbox:{id}"), &text);
}
