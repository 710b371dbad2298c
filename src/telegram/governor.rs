//! The send governor of one bot: Telegram's flood limits, applied before every message, edit and
//! draft — and nothing stricter, because every wait here is a reply the user sees later.
//!
//! Telegram's limits for bots (its FAQ): "avoid sending more than one message per second" in one
//! chat, where short bursts are tolerated; at most 20 messages per minute in one group; about 30
//! messages per second for the whole bot. Modelled here as:
//!
//! - per chat, a token bucket of [`Limits::per_chat_burst`] (3) messages refilling at one per
//!   [`Limits::per_chat_interval`] (1 s; the generic cell rate algorithm, on exact durations). A
//!   chat that had no message in the last interval always has a token: a reply after a quiet
//!   second is never held. Sends and edits take from the same bucket;
//! - per group (negative chat id), at most [`Limits::per_group_per_minute`] (19) in any 60 s;
//! - per bot, at most [`Limits::per_bot_per_second`] (25) in any [`BOT_WINDOW`] (1.1 s, a little
//!   over a second, for requests that bunch up on the way), drafts included.
//!
//! Drafts (`sendMessageDraft`) do not post a message and take no chat token, only the bot-wide
//! one, and only while the bot has half its per-second budget to spare
//! ([`Governor::try_acquire_draft`]): a draft is never worth waiting for, nor worth crowding out
//! a message. A 429 freezes the whole bot for the `retry_after` it names.
//!
//! The fake Bot API (`testkit::fake_telegram::flood`) counts violations against the same model
//! with one more message of burst, the margin that keeps this governor at zero violations there.
//!
//! (Not teloxide's `Throttle`: it applies a 20-per-minute limit to private chats as well — five
//! times slower than Telegram allows there — and does not pace edits at all.)

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The limits, with their margins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Messages one chat may get at once before the one-per-interval pace applies.
    pub per_chat_burst: u32,
    /// The long-run pace of one chat: one message per this interval.
    pub per_chat_interval: Duration,
    pub per_group_per_minute: usize,
    pub per_bot_per_second: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_chat_burst: 3,
            per_chat_interval: Duration::from_secs(1),
            per_group_per_minute: 19,
            per_bot_per_second: 25,
        }
    }
}

/// The window of the bot-wide limit: over a second, since requests leave a little after their
/// slot is taken and may bunch up on the way.
const BOT_WINDOW: Duration = Duration::from_millis(1100);
const GROUP_WINDOW: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    /// Per chat, the bucket's theoretical arrival time: the chat is back to a full bucket then.
    chat_full_at: HashMap<i64, Instant>,
    group_sends: HashMap<i64, VecDeque<Instant>>,
    bot_sends: VecDeque<Instant>,
    frozen_until: Option<Instant>,
}

pub struct Governor {
    limits: Limits,
    state: Mutex<State>,
}

impl Governor {
    pub fn new(limits: Limits) -> Governor {
        Governor {
            limits,
            state: Mutex::new(State::default()),
        }
    }

    /// Waits until a message (or edit) to `chat_id` is allowed, and takes the slot.
    pub async fn acquire(&self, chat_id: i64) {
        loop {
            match self.try_take(chat_id, Instant::now()) {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
    }

    /// Takes a draft's slot (the bot-wide rate only) if the bot is not frozen and has used at
    /// most half of its per-second budget; false: skip this version of the draft.
    pub fn try_acquire_draft(&self) -> bool {
        let now = Instant::now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.frozen_until.is_some_and(|until| until > now) {
            return false;
        }
        prune_bot_window(&mut state.bot_sends, now);
        if state.bot_sends.len() >= self.limits.per_bot_per_second / 2 {
            return false;
        }
        state.bot_sends.push_back(now);
        true
    }

    /// Pauses every send of this bot (Telegram answered 429).
    pub fn freeze(&self, duration: Duration) {
        let until = Instant::now() + duration;
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if state.frozen_until.is_none_or(|current| current < until) {
            state.frozen_until = Some(until);
        }
    }

    /// `None` when the slot was taken now; otherwise how long to wait before trying again.
    fn try_take(&self, chat_id: i64, now: Instant) -> Option<Duration> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(until) = state.frozen_until {
            if until > now {
                return Some(until - now);
            }
            state.frozen_until = None;
        }
        let interval = self.limits.per_chat_interval;
        // The bucket holds `burst` tokens: a message is allowed while the chat's theoretical
        // arrival time is at most `burst - 1` intervals ahead of now.
        let tolerance = interval * self.limits.per_chat_burst.saturating_sub(1);
        let mut wait = Duration::ZERO;
        let full_at = state
            .chat_full_at
            .get(&chat_id)
            .copied()
            .unwrap_or(now)
            .max(now);
        wait = wait.max((full_at - now).saturating_sub(tolerance));
        prune_bot_window(&mut state.bot_sends, now);
        if state.bot_sends.len() >= self.limits.per_bot_per_second
            && let Some(oldest) = state.bot_sends.front()
        {
            wait = wait.max(BOT_WINDOW.saturating_sub(now.duration_since(*oldest)));
        }
        if chat_id < 0 {
            let window = state.group_sends.entry(chat_id).or_default();
            while window
                .front()
                .is_some_and(|at| now.duration_since(*at) >= GROUP_WINDOW)
            {
                window.pop_front();
            }
            if window.len() >= self.limits.per_group_per_minute
                && let Some(oldest) = window.front()
            {
                wait = wait.max(GROUP_WINDOW.saturating_sub(now.duration_since(*oldest)));
            }
        }
        if !wait.is_zero() {
            return Some(wait);
        }
        state.bot_sends.push_back(now);
        state.chat_full_at.insert(chat_id, full_at + interval);
        if chat_id < 0 {
            state.group_sends.entry(chat_id).or_default().push_back(now);
        }
        // Forget chats whose bucket is full again, so the maps stay small.
        if state.chat_full_at.len() > 1_024 {
            state.chat_full_at.retain(|_, full_at| *full_at > now);
            state.group_sends.retain(|_, window| {
                window
                    .back()
                    .is_some_and(|at| now.duration_since(*at) < GROUP_WINDOW)
            });
        }
        None
    }
}

/// Drops the bot's requests older than the window.
fn prune_bot_window(bot_sends: &mut VecDeque<Instant>, now: Instant) {
    while bot_sends
        .front()
        .is_some_and(|at| now.duration_since(*at) >= BOT_WINDOW)
    {
        bot_sends.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_private_chat_gets_a_burst_then_one_a_second_and_others_are_not_held_up() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        for _ in 0..3 {
            governor.acquire(1).await;
        }
        governor.acquire(2).await;
        assert_eq!(
            Instant::now(),
            start,
            "a burst of three and another chat go at once"
        );
        governor.acquire(1).await;
        assert_eq!(
            Instant::now() - start,
            Duration::from_secs(1),
            "the fourth waits for a token"
        );
        governor.acquire(1).await;
        assert_eq!(
            Instant::now() - start,
            Duration::from_secs(2),
            "then one a second"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reply_after_a_quiet_second_is_never_held() {
        let governor = Governor::new(Limits::default());
        // Drain the bucket completely, then keep the chat at its long-run pace for a while.
        for _ in 0..8 {
            governor.acquire(7).await;
        }
        for gap_ms in [1_000, 1_300, 2_500, 1_000] {
            tokio::time::advance(Duration::from_millis(gap_ms)).await;
            let before = Instant::now();
            governor.acquire(7).await;
            assert_eq!(Instant::now(), before, "after {gap_ms} ms of quiet");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_chat_refills_to_its_burst_and_no_further() {
        let governor = Governor::new(Limits::default());
        governor.acquire(9).await;
        tokio::time::advance(Duration::from_secs(30)).await;
        let start = Instant::now();
        for _ in 0..3 {
            governor.acquire(9).await;
        }
        assert_eq!(Instant::now(), start);
        governor.acquire(9).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn drafts_take_no_chat_token_count_for_the_bot_and_yield_when_it_is_busy() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        for _ in 0..10 {
            assert!(governor.try_acquire_draft());
        }
        for _ in 0..3 {
            governor.acquire(4).await;
        }
        assert_eq!(
            Instant::now(),
            start,
            "drafts left the chat's burst untouched"
        );
        assert!(
            !governor.try_acquire_draft(),
            "13 of 25 used: no room for a draft"
        );
        for chat in 0..12 {
            governor.acquire(100 + chat).await;
        }
        // 25 in the bot's window: the 26th request waits for it to slide.
        assert_eq!(Instant::now(), start);
        governor.acquire(5).await;
        assert_eq!(Instant::now() - start, BOT_WINDOW);
        tokio::time::advance(BOT_WINDOW).await;
        assert!(
            governor.try_acquire_draft(),
            "room again once the window slid"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_gets_at_most_nineteen_a_minute_and_the_bot_twenty_five_a_second() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        for _ in 0..20 {
            governor.acquire(-5).await;
        }
        assert!(
            Instant::now() - start >= Duration::from_secs(60),
            "the 20th waits for the window"
        );
        let start = Instant::now();
        for chat in 0..26 {
            governor.acquire(1_000 + chat).await;
        }
        assert!(Instant::now() - start >= Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_freeze_holds_every_chat_and_drafts() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        governor.freeze(Duration::from_secs(7));
        governor.acquire(3).await;
        assert!(Instant::now() - start >= Duration::from_secs(7));
        governor.freeze(Duration::from_secs(2));
        assert!(!governor.try_acquire_draft(), "no draft while frozen");
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(governor.try_acquire_draft());
    }
}
