//! Messages that reach the bot late, and what becomes of them.
//!
//! A message sent long before the daemon started (more than `stale_grace` before boot) is not
//! answered as if it were new — but it is never dropped in silence either:
//! - if an earlier incarnation stored it promptly (within `stale_grace` of being sent, so it was
//!   confirmed to Telegram and the person expected an answer) less than [`OWED_FOR`] ago, it is
//!   answered now, late (a crash or a restart must not swallow what was accepted);
//! - otherwise (Telegram held it while the daemon was down, or it is older than that) the person
//!   is told, once per chat and incarnation, that it came too late and to send it again.
//!
//! Only a person the bot may talk to, in a message addressed to the bot, is told; blocked and
//! unknown senders hear nothing, as before.

use std::time::Duration;

use super::*;

/// How long a promptly stored message stays owed an answer across restarts.
pub(super) const OWED_FOR: Duration = Duration::from_secs(60 * 60);

/// What the bot's boot makes of a message's age.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lateness {
    /// Sent after (or just before) the daemon started: a message like any other.
    OnTime,
    /// Old, but stored promptly by an earlier incarnation not long ago: still answered.
    Owed,
    /// Too old to answer: the person is told.
    TooLate,
}

/// Judges a message sent at `date_ms` and stored at `received_ms`, for a daemon started at
/// `boot_ms` with `grace_ms` of `stale_grace`, at `now_ms`.
pub(super) fn judge(
    date_ms: i64,
    received_ms: i64,
    boot_ms: i64,
    grace_ms: i64,
    now_ms: i64,
) -> Lateness {
    if date_ms >= boot_ms - grace_ms {
        return Lateness::OnTime;
    }
    let stored_promptly = received_ms - date_ms <= grace_ms;
    let recently = now_ms - received_ms < OWED_FOR.as_millis() as i64;
    if stored_promptly && recently {
        Lateness::Owed
    } else {
        Lateness::TooLate
    }
}

/// What a person whose message came too late reads.
pub(super) const TOO_LATE: &str = "Some of what you sent while I was offline reached me too late to answer. Please send again anything you still need.";

/// Tells the person once per chat (this incarnation) that their message came too late; the
/// status to record for the update.
pub(super) fn tell_too_late(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    allowed: bool,
) -> (UpdateStatus, Option<String>) {
    let told = allowed && message.addressed;
    if told && state.told_late.insert(message.chat()) {
        let _ = worker(state, &message.chat()).send(SendJob::Notice {
            text: TOO_LATE.to_string(),
        });
    }
    tracing::info!(agent = %state.args.spec.name, chat = message.chat_id, told, "a message came too late to answer");
    let note = if told {
        "too late: sent long before the daemon started; the person was told"
    } else {
        "too late: sent long before the daemon started"
    };
    (UpdateStatus::Ignored, Some(note.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: i64 = 120_000;
    const BOOT: i64 = 10_000_000;

    #[test]
    fn a_message_sent_after_boot_or_within_the_grace_is_on_time() {
        assert_eq!(
            judge(BOOT + 5, BOOT + 6, BOOT, GRACE, BOOT + 10),
            Lateness::OnTime
        );
        assert_eq!(
            judge(BOOT - GRACE, BOOT + 6, BOOT, GRACE, BOOT + 10),
            Lateness::OnTime
        );
    }

    #[test]
    fn a_message_an_earlier_incarnation_stored_promptly_is_still_answered() {
        // Sent and stored five minutes before a restart: accepted then, answered now.
        let sent = BOOT - 300_000;
        assert_eq!(
            judge(sent, sent + 50, BOOT, GRACE, BOOT + 10),
            Lateness::Owed
        );
        // ... but not for ever.
        let long_ago = BOOT - 2 * OWED_FOR.as_millis() as i64;
        assert_eq!(
            judge(long_ago, long_ago + 50, BOOT, GRACE, BOOT + 10),
            Lateness::TooLate
        );
    }

    #[test]
    fn a_message_telegram_held_while_the_daemon_was_down_is_too_late() {
        let sent = BOOT - 3_600_000;
        assert_eq!(
            judge(sent, BOOT + 100, BOOT, GRACE, BOOT + 200),
            Lateness::TooLate
        );
    }
}
