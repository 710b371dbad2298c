//! Who a sender is to this bot (the agent file's people, then the stored owner, paired and
//! blocked people — see `people`), and claiming an unclaimed bot: its code is logged when the
//! bot comes online (and renewed by the sweep when it expired), and `/start <code>` from an
//! unknown person in a private chat makes them the owner.

use super::*;
use crate::people::{self, ClaimCheck, ClaimOutcome, StartArgument};
use crate::store::people::{self as people_queries, PersonStatus};

/// What the bot does with a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Named in the agent file, the owner, or paired.
    Allowed,
    /// Blocked by the operator: never answered.
    Blocked,
    /// Anyone else: a pairing reply (or a claim) in a private chat, nothing in a group.
    Unknown,
}

impl TelegramBotArgs {
    /// Whether the agent file names anyone (then the bot is never claimable).
    pub(super) fn file_names_people(&self) -> bool {
        self.spec.telegram.as_ref().is_some_and(|telegram| {
            !telegram.allow_users.is_empty() || !telegram.approvers.is_empty()
        })
    }
}

async fn stored_status(state: &TelegramBotState, user_id: i64) -> Option<PersonStatus> {
    let agent = state.args.spec.name.clone();
    match state
        .args
        .store
        .read(move |conn| people_queries::person(conn, &agent, user_id))
        .await
    {
        Ok(person) => person.map(|person| person.status),
        Err(error) => {
            tracing::warn!(agent = %state.args.spec.name, %error, "could not read who a sender is; treated as unknown");
            None
        }
    }
}

pub(super) async fn standing(state: &TelegramBotState, user_id: i64) -> Standing {
    if state.args.allowed_by_file(user_id) {
        return Standing::Allowed;
    }
    match stored_status(state, user_id).await {
        Some(PersonStatus::Blocked) => Standing::Blocked,
        Some(_) => Standing::Allowed,
        None => Standing::Unknown,
    }
}

/// The file's approvers (or, without any, its allowed users) and the owner approve.
pub(super) async fn is_approver(state: &TelegramBotState, user_id: i64) -> bool {
    state.args.is_approver(user_id)
        || stored_status(state, user_id).await == Some(PersonStatus::Owner)
}

/// Makes sure an unclaimed bot has a live claim code and says it in the log: always when the
/// bot comes online (`at_boot`), else only when a new code was made.
pub(super) async fn check_claim(state: &TelegramBotState, at_boot: bool) {
    let agent = &state.args.spec.name;
    if state.args.file_names_people() {
        if let Err(error) =
            people::drop_claim_code(&state.args.store, &state.args.events, agent).await
        {
            tracing::warn!(%agent, %error, "could not withdraw the claim code");
        }
        return;
    }
    match people::ensure_claim_code(&state.args.store, &state.args.events, agent).await {
        Ok(ClaimCheck::Unclaimed { claim, fresh }) if at_boot || fresh => {
            let username = state.username.clone().unwrap_or_default();
            let hours = ((claim.expires_ms - crate::clock::now_ms()) as f64 / 3_600_000.0).ceil();
            tracing::info!(
                "agent {agent}'s bot @{username} is unclaimed: send /start {} to it within {hours} h to become its owner (or open https://t.me/{username}?start={}); Studio's People page shows the code too",
                pairing::display(&claim.code),
                claim.code,
            );
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%agent, %error, "could not check the bot's claim code"),
    }
}

/// Whether nobody can let people in through the chat yet: the file names nobody and nobody
/// claimed the bot.
async fn unclaimed(state: &TelegramBotState) -> bool {
    if state.args.file_names_people() {
        return false;
    }
    let agent = state.args.spec.name.clone();
    matches!(
        state
            .args
            .store
            .read(move |conn| people_queries::owner(conn, &agent))
            .await,
        Ok(None)
    )
}

fn say(state: &mut TelegramBotState, message: &IncomingMessage, text: String) {
    let _ = worker(state, &message.chat()).send(SendJob::Notice { text });
}

const ALREADY_CLAIMED: &str = "This bot already has an owner, so that code does nothing here.";

/// `/start` from an unknown person in a private chat.
pub(super) async fn on_start(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    args: &str,
) -> (UpdateStatus, Option<String>) {
    let argument = people::parse_start_argument(args);
    if !unclaimed(state).await {
        if argument != StartArgument::Missing {
            say(state, message, ALREADY_CLAIMED.into());
        }
        pairing_reply(state, message).await;
        return (UpdateStatus::Ignored, Some("unauthorized sender".into()));
    }
    if argument == StartArgument::Missing {
        say(
            state,
            message,
            format!(
                "Hi {}! I'm waiting to be claimed by my operator. If that's you, send /start followed by the claim code from the daemon's log or Studio's People page.",
                message.user_name
            ),
        );
        return (
            UpdateStatus::Ignored,
            Some("claim: /start without a code".into()),
        );
    }
    let outcome = people::claim(
        &state.args.store,
        &state.args.events,
        &state.args.spec.name,
        message.user_id,
        &message.user_name,
        &argument,
    )
    .await;
    let (reply, status, note) = match outcome {
        Ok(ClaimOutcome::Claimed) => {
            tracing::info!(agent = %state.args.spec.name, user = message.user_id, "the bot was claimed; its owner is {}", message.user_name);
            (
                Some(format!(
                    "Welcome, {}: you are my owner now. You can talk to me, approve what I ask to do, and let others in (/pair <code>, or on Studio's People page).",
                    message.user_name
                )),
                UpdateStatus::Processed,
                "claimed the bot",
            )
        }
        Ok(ClaimOutcome::Wrong { left }) => (
            Some(people::wrong_code_reply(left)),
            UpdateStatus::Ignored,
            "claim: wrong code",
        ),
        Ok(ClaimOutcome::NowLimited { until_ms }) => (
            Some(people::now_limited_reply(until_ms)),
            UpdateStatus::Ignored,
            "claim: wrong code; now rate-limited",
        ),
        Ok(ClaimOutcome::Limited) => (
            None,
            UpdateStatus::Ignored,
            "claim: rate-limited, code not checked",
        ),
        Ok(ClaimOutcome::Expired) => {
            check_claim(state, false).await;
            (
                Some("That claim code has expired. The operator finds the new one in the daemon's log or on Studio's People page.".into()),
                UpdateStatus::Ignored,
                "claim: expired code",
            )
        }
        Ok(ClaimOutcome::AlreadyClaimed) => (
            Some(ALREADY_CLAIMED.into()),
            UpdateStatus::Ignored,
            "claim: already claimed",
        ),
        Err(error) => {
            tracing::warn!(agent = %state.args.spec.name, %error, "could not check a claim code");
            (
                Some("I could not check that code just now; try again in a moment.".into()),
                UpdateStatus::Ignored,
                "claim: store error",
            )
        }
    };
    if let Some(reply) = reply {
        say(state, message, reply);
    }
    (status, Some(note.into()))
}
