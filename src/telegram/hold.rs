//! Retry the record, not the send: what happens when Telegram accepted something (a reply, a
//! voice message, a streamed message) but the store could not record it.
//!
//! Sending again would show the person the same reply twice, and again after every sweep for as
//! long as the store refuses writes. Instead the record is kept in memory and retried
//! ([`until_recorded`]: 100 ms, doubling to 1 s, so the chat goes on within a second of the store
//! coming back) until it lands. The chat's send worker waits in
//! that retry, so nothing else is sent in the chat meanwhile: a store that cannot record costs at
//! most the one send that was already in flight, never a stream of sends it cannot record.
//!
//! Invariants:
//! - an outbox row whose accepted delivery is still unrecorded is in the bot's [`HeldDeliveries`]
//!   while its worker retries, and the sweep never re-sends a row that is there;
//! - when the worker is cancelled (the bot stops or restarts) the record is tried once more,
//!   bounded by [`LAST_TRY`]; the bot's stop waits (bounded) until no record is held. Only a
//!   process that dies between a send and its record sends it again (at most once per chat).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The first wait before a failed record is tried again.
pub const FIRST_WAIT: Duration = Duration::from_millis(100);
/// The longest wait between two tries.
pub const LONGEST_WAIT: Duration = Duration::from_secs(1);
/// How long the last try on cancellation may take.
pub const LAST_TRY: Duration = Duration::from_secs(3);

/// How a held record ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// The record landed after this many tries (1: the first one).
    Landed { tries: u32 },
    /// The worker was cancelled and the last try failed too: the delivery is unrecorded, so the
    /// next incarnation may send it once more.
    Abandoned { tries: u32 },
}

impl Recorded {
    pub fn landed(self) -> bool {
        matches!(self, Recorded::Landed { .. })
    }
}

/// Runs `record` until it succeeds, waiting 100 ms, then twice as long each time up to 1 s,
/// between tries. `what` says in a sentence what Telegram accepted (for the log). When `cancel`
/// fires, `record` is tried once more (at most [`LAST_TRY`]) and the outcome returned.
pub async fn until_recorded<F, Fut, E>(
    what: &str,
    cancel: &CancellationToken,
    mut record: F,
) -> Recorded
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut wait = FIRST_WAIT;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let error = match record().await {
            Ok(()) => {
                if tries > 1 {
                    tracing::info!(tries, "{what}: recorded now; the chat's replies continue");
                }
                return Recorded::Landed { tries };
            }
            Err(error) => error,
        };
        if tries == 1 {
            tracing::warn!(%error, "{what}, but recording it failed; it is not sent again, the chat's next replies wait, and the record is retried until it lands");
        } else {
            tracing::debug!(tries, %error, "{what}: still not recorded");
        }
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = cancel.cancelled() => return last_try(what, tries, &mut record).await,
        }
        wait = (wait * 2).min(LONGEST_WAIT);
    }
}

/// The one try left when the worker is stopped.
async fn last_try<F, Fut, E>(what: &str, tries: u32, record: &mut F) -> Recorded
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let tries = tries + 1;
    match tokio::time::timeout(LAST_TRY, record()).await {
        Ok(Ok(())) => Recorded::Landed { tries },
        Ok(Err(error)) => {
            tracing::error!(tries, %error, "{what}, but it could not be recorded before stopping; after a restart it may be sent once more");
            Recorded::Abandoned { tries }
        }
        Err(_) => {
            tracing::error!(
                tries,
                "{what}, but recording it did not finish before stopping; after a restart it may be sent once more"
            );
            Recorded::Abandoned { tries }
        }
    }
}

/// The outbox rows of one bot whose delivery Telegram accepted but the store has not recorded
/// yet (their workers are retrying the record). Cheap to clone; every clone is the same set.
#[derive(Clone, Default)]
pub struct HeldDeliveries {
    inner: Arc<HeldInner>,
}

#[derive(Default)]
struct HeldInner {
    ids: Mutex<HashSet<i64>>,
    /// Woken whenever a row leaves the set.
    released: Notify,
}

impl HeldDeliveries {
    /// Marks outbox row `id` as held; the returned guard releases it when dropped.
    pub fn hold(&self, id: i64) -> HeldGuard {
        self.ids().insert(id);
        HeldGuard {
            held: self.clone(),
            id,
        }
    }

    /// True while row `id`'s accepted delivery waits for its record (the sweep leaves it alone).
    pub fn contains(&self, id: i64) -> bool {
        self.ids().contains(&id)
    }

    /// How many records are held now.
    pub fn len(&self) -> usize {
        self.ids().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until no record is held, at most `limit`; true when none is.
    pub async fn wait_released(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let released = self.inner.released.notified();
            if self.is_empty() {
                return true;
            }
            if tokio::time::timeout_at(deadline, released).await.is_err() {
                return self.is_empty();
            }
        }
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<i64>> {
        // A panic while the lock is held cannot leave the set half-changed (one insert or
        // remove), so a poisoned lock is used as it is.
        self.inner
            .ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Keeps one outbox row in [`HeldDeliveries`] while it lives.
pub struct HeldGuard {
    held: HeldDeliveries,
    id: i64,
}

impl Drop for HeldGuard {
    fn drop(&mut self) {
        self.held.ids().remove(&self.id);
        self.held.inner.released.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_record_that_fails_three_times_lands_on_the_fourth_with_growing_waits() {
        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let outcome = until_recorded("a test reply was sent", &CancellationToken::new(), || {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            async move { if call < 3 { Err("disk full") } else { Ok(()) } }
        })
        .await;
        assert_eq!(outcome, Recorded::Landed { tries: 4 });
        // 100 + 200 + 400 ms of waiting, nothing more.
        assert_eq!(started.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn waits_never_grow_past_a_second() {
        let calls = AtomicU32::new(0);
        let started = tokio::time::Instant::now();
        let outcome = until_recorded("a test reply was sent", &CancellationToken::new(), || {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            async move { if call < 9 { Err("read-only") } else { Ok(()) } }
        })
        .await;
        assert_eq!(outcome, Recorded::Landed { tries: 10 });
        // 0.1 + 0.2 + 0.4 + 0.8 s, then 1 s five times: a store that comes back is noticed
        // within a second.
        assert_eq!(started.elapsed(), Duration::from_millis(6_500));
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_retry_tries_once_more_and_says_whether_it_landed() {
        let cancel = CancellationToken::new();
        let calls = AtomicU32::new(0);
        let stopper = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(250)).await;
            stopper.cancel();
        });
        let outcome = until_recorded("a test reply was sent", &cancel, || {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            // Fails at 0 and 100 ms; the stop comes at 250 ms and the last try lands.
            async move { if call < 2 { Err("disk full") } else { Ok(()) } }
        })
        .await;
        assert_eq!(outcome, Recorded::Landed { tries: 3 });

        let never = until_recorded("a test reply was sent", &cancel, || async {
            Err::<(), _>("read-only")
        })
        .await;
        assert_eq!(never, Recorded::Abandoned { tries: 2 });
    }

    #[tokio::test]
    async fn a_held_row_is_released_when_its_guard_drops() {
        let held = HeldDeliveries::default();
        let guard = held.hold(7);
        assert!(held.contains(7) && !held.contains(8));
        assert!(!held.wait_released(Duration::from_millis(20)).await);
        let waiter = {
            let held = held.clone();
            tokio::spawn(async move { held.wait_released(Duration::from_secs(5)).await })
        };
        drop(guard);
        assert!(waiter.await.unwrap());
        assert!(held.is_empty());
    }
}
