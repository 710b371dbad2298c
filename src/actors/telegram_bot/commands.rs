//! Chat commands (`/new`, `/stop`, `/status`, `/approve`, `/deny`, `/pair`, `/timezone`,
//! `/help`) and the approval buttons' callbacks.

use super::*;
use crate::protocol::CallError;
use crate::protocol::approvals::ApprovalsError;

pub(super) async fn on_command(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    command: &str,
    args: &str,
) -> (UpdateStatus, Option<String>) {
    // In a forum topic, `/new` and `/stop` act on that topic's conversation only.
    let chat = message.chat();
    let agent_ref = state
        .args
        .registry
        .lookup(&crate::protocol::agent::name(&state.args.spec.name));
    let reply: Option<String> = match command {
        "start" => Some(format!(
            "Hi {}, I'm {}. {}\nJust write to me. /help lists what else I understand.",
            message.user_name,
            state.args.spec.name,
            state.args.spec.description
        )),
        "help" => Some(
            "Write to me in plain words.\n/new starts a fresh conversation\n/stop stops what I am doing\n/status shows how I am doing\n/approve <id> or /deny <id> decides a pending action\n/pair <code> lets a new user talk to me (approvers only)\n/timezone shows your time zone; /timezone Europe/Berlin sets it, /timezone reset forgets it".into(),
        ),
        "new" | "stop" => {
            let command = if command == "new" { SessionCommand::New } else { SessionCommand::Stop };
            match agent_ref {
                Some(agent) => {
                    let _ = agent.cast(AgentMsg::Command(chat, command));
                    None
                }
                None => Some("I am restarting; try again in a moment.".into()),
            }
        }
        "status" => Some(match agent_ref {
            Some(agent) => match ractor::call_t!(agent, AgentMsg::View, 2_000) {
                Ok(view) => format!(
                    "{}: model {}, {} mode{}. {} active conversation(s).",
                    view.name,
                    view.model,
                    view.autonomy.as_str(),
                    if view.paused { ", paused by the operator" } else { "" },
                    view.sessions
                ),
                Err(_) => "I am busy right now; try again.".into(),
            },
            None => "I am restarting; try again in a moment.".into(),
        }),
        "approve" | "deny" => Some(decide_by_text(state, message, command, args).await),
        "pair" => Some(pair(state, message, args).await),
        "timezone" => Some(timezone(state, message, args).await),
        other => Some(format!("I don't know /{other}. /help lists what I understand.")),
    };
    if let Some(text) = reply {
        let _ = worker(state, &message.chat()).send(SendJob::Notice { text });
    }
    (UpdateStatus::Processed, Some(format!("command /{command}")))
}

pub(super) async fn decide_by_text(
    state: &TelegramBotState,
    message: &IncomingMessage,
    command: &str,
    args: &str,
) -> String {
    let id = args
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    if id.is_empty() {
        return format!("Usage: /{command} <id> (the id is shown in the approval request).");
    }
    let decision = if command == "approve" {
        Decision::Approve
    } else {
        Decision::Deny
    };
    decide(state, id, decision, message.user_id, &message.user_name).await
}

pub(super) async fn decide(
    state: &TelegramBotState,
    id: String,
    decision: Decision,
    user_id: i64,
    name: &str,
) -> String {
    let decider = Decider::Telegram {
        agent: state.args.spec.name.clone(),
        user_id,
        name: name.to_string(),
        approver: claim::is_approver(state, user_id).await,
    };
    match Approvals::new(&state.args.registry)
        .decide(&id, decision, decider)
        .await
    {
        Ok(outcome) => outcome.message(),
        Err(ApprovalsError::Unavailable(CallError::NotRunning { .. })) => {
            "Approvals are not available right now; try again in a moment.".into()
        }
        Err(_) => "Approvals did not answer; try again.".into(),
    }
}

pub(super) async fn on_callback(state: &mut TelegramBotState, callback: IncomingCallback) {
    let decision = ApprovalButton::parse(&callback.data).map(|button| match button {
        ApprovalButton::Approve { id } => (id, Decision::Approve),
        ApprovalButton::ApproveExactFor { id, minutes } => (
            id,
            Decision::ApproveFor(Duration::from_secs(u64::from(minutes) * 60)),
        ),
        ApprovalButton::Deny { id } => (id, Decision::Deny),
    });
    // The decision (and its audit row) is stored before the button press is answered.
    let text = match decision {
        Some((id, decision)) => {
            decide(state, id, decision, callback.user_id, &callback.user_name).await
        }
        None => "This button is no longer active.".to_string(),
    };
    let bot = state.bot.clone();
    let callback_id = callback.callback_id.clone();
    tokio::spawn(async move {
        let short: String = text.chars().take(190).collect();
        if let Err(error) = bot
            .answer_callback_query(teloxide::types::CallbackQueryId(callback_id))
            .text(short)
            .await
        {
            tracing::debug!(error = %TelegramError::from(error), "could not answer a button press");
        }
    });
}

pub(super) async fn pair(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    args: &str,
) -> String {
    if !claim::is_approver(state, message.user_id).await {
        return crate::people::PAIR_NOT_APPROVER.into();
    }
    let code = args.trim().to_string();
    if code.is_empty() {
        return "Usage: /pair <code> (the code the new user received).".into();
    }
    let by = format!("telegram:{}", message.user_id);
    match crate::people::approve_pairing(
        &state.args.store,
        &state.args.events,
        &code,
        Some(&state.args.spec.name),
        &by,
    )
    .await
    {
        Ok(row) => {
            let _ = worker(state, &ChatKey::telegram(row.chat_id)).send(SendJob::Notice {
                text: crate::people::paired_reply(&row.name),
            });
            crate::people::paired_confirmation(&row.name, &row.user_id.to_string())
        }
        Err(crate::people::PeopleError::NotFound(_)) => crate::people::PAIR_CODE_UNKNOWN.into(),
        Err(error) => format!("Could not pair: {error}"),
    }
}

/// `/timezone`: without an argument, the person's zone and where it comes from; with an IANA
/// name, stores it as their zone (daemon-wide, audited) and confirms with their local time;
/// `reset` forgets it. An unknown name is refused with the reason and a close match.
pub(super) async fn timezone(
    state: &TelegramBotState,
    message: &IncomingMessage,
    args: &str,
) -> String {
    use crate::agent::zone::{local_time_text, resolve, set_user_zone};
    let user_id = message.user_id;
    let wanted = args.trim();
    let now = chrono::Utc::now();
    let agent_zone = state.args.spec.timezone.as_deref();
    if wanted.is_empty() {
        let stored = state
            .args
            .store
            .read(move |conn| crate::store::timezones::user_timezone(conn, user_id))
            .await;
        let stored = match stored {
            Ok(stored) => stored,
            Err(error) => return format!("Could not read your time zone: {error}"),
        };
        let zone = resolve(stored.as_deref(), agent_zone, &state.args.timezone);
        return format!(
            "Your time zone is {} ({}). It is {} now.\nChange it with /timezone <zone>, like /timezone Europe/Berlin{}.",
            zone.zone.name(),
            zone.describe_source(),
            local_time_text(now, zone.zone),
            if stored.is_some() {
                "; /timezone reset goes back to the default"
            } else {
                ""
            }
        );
    }
    let zone = if ["reset", "default", "clear"].contains(&wanted.to_ascii_lowercase().as_str()) {
        None
    } else {
        match crate::schedule::parse_timezone(wanted) {
            Ok(zone) => Some(zone),
            Err(error) => return format!("I can't use that time zone: {error}"),
        }
    };
    let actor = format!("telegram:{user_id}");
    if let Err(error) =
        set_user_zone(&state.args.store, &state.args.events, user_id, zone, &actor).await
    {
        return format!("Could not save your time zone: {error}");
    }
    let effective = resolve(
        zone.map(|zone| zone.name()),
        agent_zone,
        &state.args.timezone,
    );
    match zone {
        Some(zone) => format!(
            "Your time zone is now {}. It is {} there; times you give me without a zone are read in it.",
            zone.name(),
            local_time_text(now, zone)
        ),
        None => format!(
            "Forgot your time zone: you are on {} ({}) again. It is {} now.",
            effective.zone.name(),
            effective.describe_source(),
            local_time_text(now, effective.zone)
        ),
    }
}
