//! The send governor of one bot: Telegram's flood limits, applied before every message and edit.
//!
//! Limits (Telegram's documented ones, with a margin): at most one message per second in one chat
//! (1.05 s); at most 20 per minute in one group (19); at most 30 per second for the whole bot (25 per
//! 1.1 s). Sends and
//! edits share the per-chat slot. A 429 freezes the whole bot for the `retry_after` it names.
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
    pub per_chat_interval: Duration,
    pub per_group_per_minute: usize,
    pub per_bot_per_second: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            per_chat_interval: Duration::from_millis(1050),
            per_group_per_minute: 19,
            per_bot_per_second: 25,
        }
    }
}

const BOT_WINDOW: Duration = Duration::from_millis(1100);

#[derive(Default)]
struct State {
    chat_next: HashMap<i64, Instant>,
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
            let wait = self.try_take(chat_id, Instant::now());
            match wait {
                None => return,
                Some(wait) => tokio::time::sleep(wait).await,
            }
        }
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
        let mut wait = Duration::ZERO;
        if let Some(next) = state.chat_next.get(&chat_id)
            && *next > now
        {
            wait = wait.max(*next - now);
        }
        // Requests leave a little after their slot is taken and may bunch up on the way: the
        // bot-wide window is counted over 1.1 s for a margin.
        while state
            .bot_sends
            .front()
            .is_some_and(|at| now.duration_since(*at) >= BOT_WINDOW)
        {
            state.bot_sends.pop_front();
        }
        if state.bot_sends.len() >= self.limits.per_bot_per_second
            && let Some(oldest) = state.bot_sends.front()
        {
            wait = wait.max(BOT_WINDOW.saturating_sub(now.duration_since(*oldest)));
        }
        if chat_id < 0 {
            let window = state.group_sends.entry(chat_id).or_default();
            while window
                .front()
                .is_some_and(|at| now.duration_since(*at) >= Duration::from_secs(60))
            {
                window.pop_front();
            }
            if window.len() >= self.limits.per_group_per_minute
                && let Some(oldest) = window.front()
            {
                wait =
                    wait.max(Duration::from_secs(60).saturating_sub(now.duration_since(*oldest)));
            }
        }
        if !wait.is_zero() {
            return Some(wait);
        }
        state
            .chat_next
            .insert(chat_id, now + self.limits.per_chat_interval);
        state.bot_sends.push_back(now);
        if chat_id < 0 {
            state.group_sends.entry(chat_id).or_default().push_back(now);
        }
        // Forget chats that have been quiet for a while, so the maps stay small.
        if state.chat_next.len() > 1_024 {
            state
                .chat_next
                .retain(|_, next| *next + Duration::from_secs(120) > now);
            state.group_sends.retain(|_, window| {
                window
                    .back()
                    .is_some_and(|at| now.duration_since(*at) < Duration::from_secs(60))
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_chat_is_paced_a_second_apart_and_others_are_not_held_up() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        governor.acquire(1).await;
        governor.acquire(2).await;
        assert_eq!(Instant::now(), start, "different chats go at once");
        governor.acquire(1).await;
        assert!(Instant::now() - start >= Duration::from_millis(1050));
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
    async fn a_freeze_holds_every_chat() {
        let governor = Governor::new(Limits::default());
        let start = Instant::now();
        governor.freeze(Duration::from_secs(7));
        governor.acquire(3).await;
        assert!(Instant::now() - start >= Duration::from_secs(7));
    }
}
