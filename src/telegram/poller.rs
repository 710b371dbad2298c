//! The long-poll loop of one bot, on the raw Bot API (not teloxide's `Polling`, which confirms
//! updates to Telegram before we have stored them).
//!
//! Invariant: the offset sent to `getUpdates` — which confirms everything below it to Telegram —
//! is only ever advanced after the batch below it and that offset are committed in one
//! transaction (`store::telegram::store_batch`). A crash at any point loses nothing (Telegram
//! resends the unconfirmed batch) and duplicates nothing (updates are unique on (bot,
//! update_id)).
//!
//! Liveness is judged by completed `getUpdates` calls only: a call that does not answer within the
//! long-poll timeout plus a grace period ends the loop as `Stuck`, and the bot actor is restarted.

use std::time::Duration;

use teloxide::prelude::*;
use teloxide::types::AllowedUpdate;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::client::TelegramError;
use super::intake;
use crate::store::Store;
use crate::store::telegram::{self as queries, NewUpdate, StoredUpdate};

/// Extra time a `getUpdates` call may take beyond its long-poll timeout before it counts as stuck
/// (at most this, at least the poll timeout itself for short polls).
const STUCK_GRACE: Duration = Duration::from_secs(15);
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What the poll loop tells its bot actor.
#[derive(Debug, Clone, PartialEq)]
pub enum PollEvent {
    /// Newly stored updates (already committed with their offset).
    Stored(Vec<StoredUpdate>),
    /// A `getUpdates` call completed successfully (empty or not) at `at_ms`: the bot's polling
    /// lag is the time since the last one. Sent on every poll, so it stays in memory (no write).
    Polled {
        at_ms: i64,
    },
    /// The polling status changed: `polling`, `conflict`, `rate_limited`, `network_error`, `store_error`.
    Status {
        state: &'static str,
        detail: String,
    },
    Ended(PollEnd),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollEnd {
    /// `getUpdates` did not answer in time: the connection is dead in a way the client did not see.
    Stuck(Duration),
    Unauthorized,
}

pub struct Poller {
    pub bot: Bot,
    pub bot_id: i64,
    pub agent: String,
    pub poll_timeout: Duration,
    /// At boot, keep retrying quickly on 409 for this long (a previous instance is shutting down).
    pub wait_for_previous: Duration,
    pub store: Store,
    pub report: Box<dyn Fn(PollEvent) + Send + Sync>,
    pub cancel: CancellationToken,
}

/// What the loop keeps between polls.
struct LoopState {
    /// The offset the next `getUpdates` confirms up to (only ever advanced after a commit).
    offset: Option<i64>,
    started: Instant,
    backoff: Duration,
    /// The last status reported (`polling` is said once, every other status each time).
    status: &'static str,
}

impl LoopState {
    fn set_status(&mut self, state: &'static str, detail: String, report: &dyn Fn(PollEvent)) {
        if state != self.status || state != "polling" {
            report(PollEvent::Status { state, detail });
        }
        self.status = state;
    }

    /// The current backoff, doubled (up to the maximum) for the next time.
    fn next_backoff(&mut self) -> Duration {
        let wait = self.backoff;
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
        wait
    }
}

impl Poller {
    pub async fn run(self) {
        let bot_id = self.bot_id;
        let offset = self
            .store
            .read(move |conn| queries::next_offset(conn, bot_id))
            .await
            .ok()
            .flatten();
        let mut state = LoopState {
            offset,
            started: Instant::now(),
            backoff: BACKOFF_MIN,
            status: "",
        };
        loop {
            if self.cancel.is_cancelled() {
                return;
            }
            let deadline =
                self.poll_timeout + STUCK_GRACE.min(self.poll_timeout.max(Duration::from_secs(1)));
            let result = tokio::select! {
                result = tokio::time::timeout(deadline, self.request(state.offset).send()) => result,
                _ = self.cancel.cancelled() => return,
            };
            let wait = match result {
                Err(_) => {
                    (self.report)(PollEvent::Ended(PollEnd::Stuck(deadline)));
                    return;
                }
                Ok(Err(error)) => match self.wait_after(&mut state, TelegramError::from(error)) {
                    Some(wait) => wait,
                    None => return,
                },
                Ok(Ok(updates)) => {
                    let received = std::time::Instant::now();
                    state.backoff = BACKOFF_MIN;
                    (self.report)(PollEvent::Polled {
                        at_ms: crate::clock::now_ms(),
                    });
                    state.set_status("polling", String::new(), self.report.as_ref());
                    match self.store(&mut state, &updates, received).await {
                        Some(wait) => wait,
                        None => continue,
                    }
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.cancel.cancelled() => return,
            }
        }
    }

    /// The next `getUpdates` call, confirming everything below `offset`.
    fn request(
        &self,
        offset: Option<i64>,
    ) -> teloxide::requests::JsonRequest<teloxide::payloads::GetUpdates> {
        let mut request = self
            .bot
            .get_updates()
            .timeout(self.poll_timeout.as_secs() as u32)
            .limit(100)
            .allowed_updates(vec![
                AllowedUpdate::Message,
                AllowedUpdate::EditedMessage,
                AllowedUpdate::CallbackQuery,
            ]);
        if let Some(offset) = offset {
            request = request.offset(offset as i32);
        }
        request
    }

    /// How long to wait after a failed poll, with its status reported; `None` when polling must
    /// end (the token was rejected).
    fn wait_after(&self, state: &mut LoopState, error: TelegramError) -> Option<Duration> {
        let report = self.report.as_ref();
        let wait = match error {
            TelegramError::Unauthorized => {
                report(PollEvent::Ended(PollEnd::Unauthorized));
                return None;
            }
            TelegramError::Conflict => {
                state.set_status(
                    "conflict",
                    "another instance is polling this token; backing off".into(),
                    report,
                );
                if state.started.elapsed() < self.wait_for_previous {
                    Duration::from_secs(2)
                } else {
                    // Longer than a poll, so the other poller's request completes first.
                    self.poll_timeout + state.next_backoff()
                }
            }
            TelegramError::RetryAfter(wait) => {
                state.set_status(
                    "rate_limited",
                    format!("Telegram asked to wait {} s", wait.as_secs()),
                    report,
                );
                wait
            }
            other => {
                state.set_status("network_error", other.to_string(), report);
                state.next_backoff()
            }
        };
        Some(wait)
    }

    /// Commits a batch with the offset after it, then hands the stored updates to the bot; when
    /// the commit fails the offset stays (Telegram sends them again) and the wait before the next
    /// poll is returned.
    #[tracing::instrument(level = "debug", name = "store_updates", skip_all, fields(bot = self.bot_id, updates = updates.len()))]
    async fn store(
        &self,
        state: &mut LoopState,
        updates: &[Update],
        received: std::time::Instant,
    ) -> Option<Duration> {
        if updates.is_empty() {
            return None;
        }
        let batch: Vec<NewUpdate> = updates
            .iter()
            .map(|update| {
                let (kind, chat_id, user_id, sent_ms) = intake::summary(update);
                NewUpdate {
                    update_id: update.id.0 as i64,
                    kind: kind.to_string(),
                    chat_id,
                    thread_id: intake::topic(update),
                    user_id,
                    payload: serde_json::to_string(update).unwrap_or_else(|_| "{}".into()),
                    sent_ms,
                }
            })
            .collect();
        let next = batch
            .iter()
            .map(|update| update.update_id)
            .max()
            .map(|max| max + 1);
        let (bot_id, agent, now) = (self.bot_id, self.agent.clone(), crate::clock::now_ms());
        match self
            .store
            .write(move |conn| queries::store_batch(conn, bot_id, &agent, &batch, now))
            .await
        {
            Ok(stored) => {
                for update in &stored {
                    crate::reply_latency::stored(update.id, received);
                }
                state.offset = next.or(state.offset);
                if !stored.is_empty() {
                    (self.report)(PollEvent::Stored(stored));
                }
                None
            }
            Err(error) => {
                // Not stored means not confirmed: keep the old offset, Telegram sends them again.
                state.set_status(
                    "store_error",
                    format!("could not store updates: {error}"),
                    self.report.as_ref(),
                );
                Some(state.next_backoff())
            }
        }
    }
}
