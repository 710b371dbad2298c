//! Telegram's flood limits, modelled and counted (never enforced) by the fake Bot API server.
//!
//! Telegram's documented limits for bots are: about one message per second to one chat ("we may
//! allow short bursts that go over this limit"), at most 20 messages per minute to one group,
//! and about 30 messages per second per bot overall. Modelled here as: per chat, a token bucket
//! of [`PER_CHAT_BURST`] messages refilling at one per second (a message that finds it empty is
//! a violation); per group, more than 20 in any minute; per bot, more than 30 in any second.
//! The fake answers every request normally and counts each message that would have gone over a
//! limit, so a test can assert that the daemon's send governor kept to them. Sends
//! (`sendMessage`, `sendDocument`, `sendPhoto`) and edits (`editMessageText`,
//! `editMessageReplyMarkup`) are counted in separate buckets and windows, and the spacing between
//! successive versions of one message is recorded, because streaming a reply by editing is paced
//! separately from sending. Drafts (`sendMessageDraft`) post no message: they count towards the
//! bot's per-second limit only.
//!
//! The windows slide on real time ([`Instant`]): the fake is driven over real sockets, where
//! tokio's paused clock does not apply.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

const ONE_SECOND: Duration = Duration::from_secs(1);
const ONE_MINUTE: Duration = Duration::from_secs(60);
/// The messages one chat may get at once; the bucket refills at one per [`ONE_SECOND`]. (The
/// daemon's governor allows one fewer: the margin for requests that bunch up on the way.)
pub const PER_CHAT_BURST: u32 = 4;
/// More than this many messages to one group within a minute is a violation.
const PER_GROUP_PER_MINUTE: usize = 20;
/// More than this many messages by one bot within a second is a violation.
const PER_BOT_PER_SECOND: usize = 30;
/// Examples kept per bot; the counts go on past it.
const MAX_EXAMPLES: usize = 32;

/// Which limit a message went over.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ViolationKind {
    /// A message to a chat whose bucket was empty (more than [`PER_CHAT_BURST`] at once, or
    /// faster than one a second after that).
    ChatPerSecond,
    /// A 21st message to the same group (negative chat id) within one minute.
    GroupPerMinute,
    /// A 31st message by the same bot within one second.
    BotPerSecond,
    /// The same three limits, counted over edits instead of sends.
    EditChatPerSecond,
    EditGroupPerMinute,
    EditBotPerSecond,
}

/// One message that went over a limit, for a test's failure message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViolationExample {
    pub kind: ViolationKind,
    pub chat_id: i64,
    /// The Bot API method, e.g. `sendMessage`.
    pub method: String,
    /// When it happened, measured from the fake server's start.
    pub at: Duration,
    /// How many earlier messages were already in the window.
    pub earlier_in_window: usize,
}

/// Flood-limit violations of one bot, per kind, with the first few examples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Violations {
    pub chat_per_second: u64,
    pub group_per_minute: u64,
    pub bot_per_second: u64,
    pub edit_chat_per_second: u64,
    pub edit_group_per_minute: u64,
    pub edit_bot_per_second: u64,
    /// The shortest time between two successive versions of one message (the send and its first
    /// edit, or two edits), over all messages of the bot; `None` before any edit.
    pub shortest_edit_interval: Option<Duration>,
    /// How many edits came less than one second after the previous version of their message.
    pub edits_under_one_second: u64,
    pub examples: Vec<ViolationExample>,
}

impl Violations {
    /// Violations of the send limits.
    pub fn sends(&self) -> u64 {
        self.chat_per_second + self.group_per_minute + self.bot_per_second
    }

    /// Violations of the limits counted over edits.
    pub fn edits(&self) -> u64 {
        self.edit_chat_per_second + self.edit_group_per_minute + self.edit_bot_per_second
    }

    /// Every violation of every kind.
    pub fn total(&self) -> u64 {
        self.sends() + self.edits()
    }
}

/// Whether a message was sent or edited: the two are counted in separate windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Activity {
    Send,
    Edit,
    /// A draft: counted in the sends' bot-wide window only.
    Draft,
}

/// Sliding windows of one kind of activity.
#[derive(Default)]
struct Windows {
    /// Per chat, the times of the messages of the last minute.
    by_chat: HashMap<i64, VecDeque<Instant>>,
    /// Per chat, the bucket's theoretical arrival time (full again at that instant).
    bucket_full_at: HashMap<i64, Instant>,
    /// The times of the bot's messages of the last second.
    by_bot: VecDeque<Instant>,
}

/// The flood model of one bot.
#[derive(Default)]
pub(super) struct FloodTracker {
    sends: Windows,
    edits: Windows,
    /// When each message (chat, message id) last got a new version.
    last_version: HashMap<(i64, i32), Instant>,
    violations: Violations,
}

impl FloodTracker {
    /// Records one message sent (or edited) at `now`, counting any limit it goes over.
    pub(super) fn record(
        &mut self,
        activity: Activity,
        chat_id: i64,
        message_id: i32,
        method: &str,
        now: Instant,
        server_start: Instant,
    ) {
        let windows = match activity {
            Activity::Send | Activity::Draft => &mut self.sends,
            Activity::Edit => &mut self.edits,
        };
        while windows
            .by_bot
            .front()
            .is_some_and(|&at| now.duration_since(at) >= ONE_SECOND)
        {
            windows.by_bot.pop_front();
        }
        let bot_in_last_second = windows.by_bot.len();
        windows.by_bot.push_back(now);
        let at = now.duration_since(server_start);
        if activity == Activity::Draft {
            if bot_in_last_second >= PER_BOT_PER_SECOND {
                self.count(
                    ViolationKind::BotPerSecond,
                    chat_id,
                    method,
                    at,
                    bot_in_last_second,
                );
            }
            return;
        }

        let chat_window = windows.by_chat.entry(chat_id).or_default();
        while chat_window
            .front()
            .is_some_and(|&at| now.duration_since(at) >= ONE_MINUTE)
        {
            chat_window.pop_front();
        }
        let in_last_minute = chat_window.len();
        chat_window.push_back(now);
        // The bucket: a message is allowed while the chat's theoretical arrival time is at most
        // `burst - 1` seconds ahead; a violation does not take a token it did not have.
        let full_at = windows
            .bucket_full_at
            .get(&chat_id)
            .copied()
            .unwrap_or(now)
            .max(now);
        let ahead = full_at.duration_since(now);
        let bucket_empty = ahead > ONE_SECOND * (PER_CHAT_BURST - 1);
        if !bucket_empty {
            windows.bucket_full_at.insert(chat_id, full_at + ONE_SECOND);
        }
        // How many messages the bucket is behind by: what a failure message shows.
        let in_bucket = (ahead.as_millis() / ONE_SECOND.as_millis()) as usize;

        let (chat_kind, group_kind, bot_kind) = match activity {
            Activity::Send | Activity::Draft => (
                ViolationKind::ChatPerSecond,
                ViolationKind::GroupPerMinute,
                ViolationKind::BotPerSecond,
            ),
            Activity::Edit => (
                ViolationKind::EditChatPerSecond,
                ViolationKind::EditGroupPerMinute,
                ViolationKind::EditBotPerSecond,
            ),
        };
        if bucket_empty {
            self.count(chat_kind, chat_id, method, at, in_bucket);
        }
        if chat_id < 0 && in_last_minute >= PER_GROUP_PER_MINUTE {
            self.count(group_kind, chat_id, method, at, in_last_minute);
        }
        if bot_in_last_second >= PER_BOT_PER_SECOND {
            self.count(bot_kind, chat_id, method, at, bot_in_last_second);
        }

        let previous = self.last_version.insert((chat_id, message_id), now);
        if activity == Activity::Edit
            && let Some(previous) = previous
        {
            let interval = now.duration_since(previous);
            let shortest = self
                .violations
                .shortest_edit_interval
                .map_or(interval, |shortest| shortest.min(interval));
            self.violations.shortest_edit_interval = Some(shortest);
            if interval < ONE_SECOND {
                self.violations.edits_under_one_second += 1;
            }
        }
    }

    /// Forgets a deleted message's last version time.
    pub(super) fn forget_message(&mut self, chat_id: i64, message_id: i32) {
        self.last_version.remove(&(chat_id, message_id));
    }

    pub(super) fn violations(&self) -> Violations {
        self.violations.clone()
    }

    fn count(
        &mut self,
        kind: ViolationKind,
        chat_id: i64,
        method: &str,
        at: Duration,
        earlier_in_window: usize,
    ) {
        let counter = match kind {
            ViolationKind::ChatPerSecond => &mut self.violations.chat_per_second,
            ViolationKind::GroupPerMinute => &mut self.violations.group_per_minute,
            ViolationKind::BotPerSecond => &mut self.violations.bot_per_second,
            ViolationKind::EditChatPerSecond => &mut self.violations.edit_chat_per_second,
            ViolationKind::EditGroupPerMinute => &mut self.violations.edit_group_per_minute,
            ViolationKind::EditBotPerSecond => &mut self.violations.edit_bot_per_second,
        };
        *counter += 1;
        if self.violations.examples.len() < MAX_EXAMPLES {
            self.violations.examples.push(ViolationExample {
                kind,
                chat_id,
                method: method.to_string(),
                at,
                earlier_in_window,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_count_each_message_over_a_limit_once() {
        let start = Instant::now();
        let mut tracker = FloodTracker::default();
        let at = |millis: u64| start + Duration::from_millis(millis);
        // A burst of four to one chat is tolerated; a fifth at once is one violation, and does
        // not use up a token: the next, a second later, finds one.
        for index in 0..5 {
            tracker.record(Activity::Send, 7, index, "sendMessage", at(0), start);
        }
        assert_eq!(tracker.violations().chat_per_second, 1);
        tracker.record(Activity::Send, 7, 6, "sendMessage", at(1000), start);
        assert_eq!(tracker.violations().chat_per_second, 1);
        // After that the pace is one a second: two within one are one violation.
        tracker.record(Activity::Send, 7, 7, "sendMessage", at(1500), start);
        assert_eq!(tracker.violations().chat_per_second, 2);
        // A quiet minute refills the bucket to four, no more.
        for index in 0..5 {
            tracker.record(
                Activity::Send,
                7,
                10 + index,
                "sendMessage",
                at(61_500),
                start,
            );
        }
        assert_eq!(tracker.violations().chat_per_second, 3);

        // 21 messages to one group spread over 42 s: each 2 s apart, so only the group limit.
        let mut tracker = FloodTracker::default();
        for index in 0..21 {
            tracker.record(
                Activity::Send,
                -100,
                index,
                "sendMessage",
                at(index as u64 * 2000),
                start,
            );
        }
        let violations = tracker.violations();
        assert_eq!(violations.group_per_minute, 1);
        assert_eq!(violations.chat_per_second, 0);

        // 31 messages to 31 chats at the same instant: one bot-wide violation.
        let mut tracker = FloodTracker::default();
        for chat in 0..31 {
            tracker.record(Activity::Send, chat + 1, 1, "sendMessage", at(0), start);
        }
        assert_eq!(tracker.violations().bot_per_second, 1);
        assert_eq!(tracker.violations().total(), 1);
    }

    #[test]
    fn edits_are_counted_apart_and_their_spacing_is_recorded() {
        let start = Instant::now();
        let at = |millis: u64| start + Duration::from_millis(millis);
        let mut tracker = FloodTracker::default();
        tracker.record(Activity::Send, 5, 1, "sendMessage", at(0), start);
        tracker.record(Activity::Edit, 5, 1, "editMessageText", at(300), start);
        tracker.record(Activity::Edit, 5, 1, "editMessageText", at(1800), start);
        let violations = tracker.violations();
        assert_eq!(violations.sends(), 0);
        assert_eq!(violations.edits(), 0);
        assert_eq!(
            violations.shortest_edit_interval,
            Some(Duration::from_millis(300))
        );
        assert_eq!(violations.edits_under_one_second, 1);
        // Two edits in the last two seconds left three tokens: the fourth edit at once has none.
        for _ in 0..4 {
            tracker.record(Activity::Edit, 5, 1, "editMessageText", at(2000), start);
        }
        assert_eq!(tracker.violations().edit_chat_per_second, 1);
    }

    #[test]
    fn drafts_take_no_chat_token_but_count_for_the_bot() {
        let start = Instant::now();
        let mut tracker = FloodTracker::default();
        for _ in 0..20 {
            tracker.record(Activity::Draft, 5, 0, "sendMessageDraft", start, start);
        }
        for index in 0..4 {
            tracker.record(Activity::Send, 5, index, "sendMessage", start, start);
        }
        assert_eq!(tracker.violations().total(), 0);
        for _ in 0..7 {
            tracker.record(Activity::Draft, 5, 0, "sendMessageDraft", start, start);
        }
        assert_eq!(
            tracker.violations().bot_per_second,
            1,
            "the 31st of the second"
        );
    }

    /// The zero-violation guarantee: whatever a bot sends, when and where, the daemon's governor
    /// spaces it so that this model counts no violation (every request recorded the moment its
    /// slot was taken; sends and edits alike counted as sends, the stricter reading).
    #[test]
    fn the_governor_never_goes_over_this_model() {
        use crate::telegram::governor::{Governor, Limits};
        use proptest::prelude::*;

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime with paused time builds");
        let requests = proptest::collection::vec(
            (
                prop_oneof![Just(5i64), Just(6), Just(-7), Just(-8)],
                any::<bool>(),
                0u64..1500,
            ),
            1..150,
        );
        proptest!(ProptestConfig::with_cases(64), |(requests in requests)| {
            let violations = runtime.block_on(async {
                let governor = Governor::new(Limits::default());
                let mut tracker = FloodTracker::default();
                let start = tokio::time::Instant::now().into_std();
                for (index, (chat, draft, gap_ms)) in requests.iter().enumerate() {
                    tokio::time::advance(Duration::from_millis(*gap_ms / 10)).await;
                    let activity = if *draft && *chat > 0 {
                        if !governor.try_acquire_draft() {
                            continue;
                        }
                        Activity::Draft
                    } else {
                        governor.acquire(*chat).await;
                        Activity::Send
                    };
                    let now = tokio::time::Instant::now().into_std();
                    tracker.record(activity, *chat, index as i32, "sendMessage", now, start);
                }
                tracker.violations()
            });
            prop_assert_eq!(violations.total(), 0, "{:?}", violations);
        });
    }
}
