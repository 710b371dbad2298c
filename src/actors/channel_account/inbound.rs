//! Stored messages on their way to the agent: read in order, screened (blocked, strangers and
//! their pairing codes, claims, pairing answers, approval buttons and the text form), media fetched into the workspace's `inbox/` and
//! voice notes transcribed, then handed to the agent once (`InboundSource::Channel`).
//!
//! A message that cannot be handed over now (the agent restarting, a download failing for now)
//! stays `pending` and the sweep tries again; one that never may reach the model (a stranger, a
//! blocked person, an unsupported type) is `ignored` with a note Studio shows.

use std::path::PathBuf;

use super::sender::Job;
use super::{AccountState, queue};
use crate::channel::screen::{self, ClaimOutcome, Standing};
use crate::channel::{Incoming, IncomingMedia, OutPart, approval};
use crate::domain::{Attachment, AttachmentKind, ChatKey, Inbound, InboundSource, Sender};
use crate::protocol::agent::AgentMsg;
use crate::protocol::approvals::{Approvals, DecideOutcome, Decider};
use crate::store::channels::{self as queries, ChannelInboundRow, ChannelInboundStatus};
use crate::voice::{Audio, VoiceOutcome};

/// Logs the claim code of an account that names nobody (Studio's People page shows it too).
pub(super) async fn announce_claim_code(state: &AccountState) {
    let args = &state.args;
    match screen::ensure_claim_code(
        &args.store,
        &args.events,
        &args.agent,
        args.adapter.channel(),
    )
    .await
    {
        Ok(Some(code)) => tracing::info!(
            agent = %args.agent,
            "the {} account names nobody: its owner claims it by sending it the code {}",
            args.adapter.channel(),
            crate::telegram::pairing::display(&code)
        ),
        Ok(None) => {}
        Err(error) => tracing::warn!(agent = %args.agent, %error, "could not read the claim code"),
    }
}

/// Dispatches every open message of the account, oldest first.
pub(super) async fn dispatch_open(state: &mut AccountState) {
    let (channel, account) = (
        state.args.adapter.channel(),
        state.args.adapter.account().to_string(),
    );
    let open = match state
        .args
        .store
        .read(move |conn| queries::inbound_open(conn, channel, &account))
        .await
    {
        Ok(open) => open,
        Err(error) => {
            tracing::debug!(agent = %state.args.agent, %error, "could not read stored messages; the sweep tries again");
            return;
        }
    };
    for row in open {
        let (status, note) = screen_and_forward(state, &row).await;
        let (id, now) = (row.id, crate::clock::now_ms());
        let note = note.map(str::to_string);
        let _ = state
            .args
            .store
            .write(move |conn| queries::set_inbound_status(conn, id, status, note.as_deref(), now))
            .await;
    }
}

fn reply(state: &AccountState, row: &ChannelInboundRow, text: String) {
    queue(
        state,
        Job::Part {
            peer: row.sender.clone(),
            part: OutPart::Text(text),
        },
    );
}

async fn screen_and_forward(
    state: &mut AccountState,
    row: &ChannelInboundRow,
) -> (ChannelInboundStatus, Option<&'static str>) {
    let incoming = match state.args.adapter.parse(row) {
        Ok(incoming) => incoming,
        Err(_) => return (ChannelInboundStatus::Ignored, Some("unsupported message")),
    };
    let args = &state.args;
    let channel = args.adapter.channel();
    let standing =
        screen::standing(&args.store, &args.agent, channel, &args.people, &row.sender).await;
    let approver = match standing {
        Err(_) => {
            return (
                ChannelInboundStatus::Pending,
                Some("store not readable; will retry"),
            );
        }
        Ok(Standing::Blocked) => return (ChannelInboundStatus::Ignored, Some("blocked")),
        Ok(Standing::Stranger { claimable }) => {
            return stranger(state, row, &incoming, claimable).await;
        }
        Ok(Standing::Allowed { approver }) => approver,
    };
    mark_read(state, row);
    if incoming.button.is_none()
        && let Some(screened) = super::pairing::answer(state, row, &incoming.text, approver).await
    {
        return screened;
    }
    let decision = match &incoming.button {
        Some(id) => approval::from_button(id),
        None => approval::from_text(&incoming.text),
    };
    if let Some(decision) = decision {
        let decider = Decider::Channel {
            channel: channel.to_string(),
            agent: args.agent.clone(),
            user: row.sender.clone(),
            name: row.sender_name.clone(),
            approver,
        };
        let outcome = Approvals::new(&args.registry)
            .decide(&decision.id, decision.decision, decider)
            .await;
        match outcome {
            // No such request: the text was an ordinary message after all.
            Ok(DecideOutcome::NotPending { status: None, .. }) if incoming.button.is_none() => {}
            Ok(outcome) => {
                if !matches!(
                    outcome,
                    DecideOutcome::Approved { .. } | DecideOutcome::Denied { .. }
                ) {
                    reply(state, row, outcome.message());
                }
                return (ChannelInboundStatus::Processed, Some("approval reply"));
            }
            Err(_) => {
                reply(
                    state,
                    row,
                    "The approval desk is not reachable right now; try again in a minute.".into(),
                );
                return (
                    ChannelInboundStatus::Processed,
                    Some("approval desk unreachable"),
                );
            }
        }
    }
    if incoming.button.is_some() {
        return (
            ChannelInboundStatus::Processed,
            Some("a button of no request"),
        );
    }
    forward(state, row, incoming).await
}

fn mark_read(state: &AccountState, row: &ChannelInboundRow) {
    let adapter = state.args.adapter.clone();
    let message_id = row.message_id.clone();
    tokio::spawn(async move {
        let _ = adapter.mark_read(&message_id).await;
    });
}

async fn stranger(
    state: &AccountState,
    row: &ChannelInboundRow,
    incoming: &Incoming,
    claimable: bool,
) -> (ChannelInboundStatus, Option<&'static str>) {
    if super::pairing::in_group(row) {
        return (
            ChannelInboundStatus::Ignored,
            Some(
                "a stranger in a group: not answered there (claims and pairing are in a private chat)",
            ),
        );
    }
    if !claimable {
        return super::pairing::stranger(state, row).await;
    }
    let args = &state.args;
    let outcome = screen::claim(
        &args.store,
        &args.events,
        &args.agent,
        args.adapter.channel(),
        &row.sender,
        &row.sender_name,
        &incoming.text,
    )
    .await;
    match outcome {
        Ok(ClaimOutcome::Claimed) => {
            reply(
                state,
                row,
                format!(
                    "Welcome! You own {} now: write to it here, and you approve what it asks.",
                    args.agent
                ),
            );
            (ChannelInboundStatus::Processed, Some("claimed the account"))
        }
        Ok(ClaimOutcome::Wrong { left }) => {
            reply(state, row, crate::people::wrong_code_reply(left));
            (ChannelInboundStatus::Ignored, Some("a wrong claim code"))
        }
        Ok(ClaimOutcome::NowLimited { until_ms }) => {
            reply(state, row, crate::people::now_limited_reply(until_ms));
            (
                ChannelInboundStatus::Ignored,
                Some("a wrong claim code; now rate-limited"),
            )
        }
        Ok(ClaimOutcome::Limited) => (
            ChannelInboundStatus::Ignored,
            Some("a claim code while rate-limited: not checked"),
        ),
        Ok(ClaimOutcome::NotAClaim) => {
            reply(state, row, "This assistant has no owner yet. If it is yours, send it the claim code shown in Studio's People page.".into());
            (
                ChannelInboundStatus::Ignored,
                Some("a stranger: the account is not claimed"),
            )
        }
        Err(_) => (
            ChannelInboundStatus::Pending,
            Some("store not writable; will retry"),
        ),
    }
}

/// Fetches media, transcribes a voice note, and hands the message to the agent.
async fn forward(
    state: &AccountState,
    row: &ChannelInboundRow,
    incoming: Incoming,
) -> (ChannelInboundStatus, Option<&'static str>) {
    let args = &state.args;
    let mut text = incoming.text.clone();
    let mut attachments = Vec::new();
    if let Some(media) = &incoming.media {
        match save_media(state, row, media).await {
            Ok(attachment) => {
                if media.kind == AttachmentKind::Voice {
                    let outcome = transcribe(state, &attachment, media).await;
                    if let Some(notice) =
                        crate::voice::user_notice(0, &outcome, args.echo_transcripts)
                    {
                        reply(state, row, notice);
                    }
                    text = crate::voice::agent_text(&text, 0, Some(&attachment.path), &outcome);
                }
                attachments.push(attachment);
            }
            Err(crate::channel::SendError::Unreachable(_)) => {
                return (
                    ChannelInboundStatus::Pending,
                    Some("media download failed for now; will retry"),
                );
            }
            Err(_) => {
                text = format!(
                    "{text}\n[a file came with this message, but it could not be downloaded]"
                )
            }
        }
    }
    // The person wrote: what was held for them may go now.
    let (agent, chat) = (args.agent.clone(), row.chat.clone());
    if let Ok(released) = args
        .store
        .write(move |conn| crate::store::outbox::release_held(conn, &agent, &chat))
        .await
    {
        for id in released {
            queue(state, Job::Outbox(id));
        }
    }
    let Some(chat) = ChatKey::parse(&row.chat) else {
        return (ChannelInboundStatus::Ignored, Some("unreadable chat key"));
    };
    let inbound = Inbound {
        agent: args.agent.clone(),
        chat,
        sender: Sender::new(
            format!("{}:{}", row.channel, row.sender),
            row.sender_name.clone(),
        ),
        text,
        attachments,
        source: InboundSource::Channel { inbound_id: row.id },
        received_ms: row.received_ms,
        context: None,
        correlation: None,
    };
    match args
        .registry
        .lookup(&crate::protocol::agent::name(&args.agent))
    {
        Some(agent) if agent.cast(AgentMsg::Inbound(inbound)).is_ok() => {
            (ChannelInboundStatus::Dispatched, None)
        }
        _ => (
            ChannelInboundStatus::Pending,
            Some("agent not reachable; will retry"),
        ),
    }
}

async fn save_media(
    state: &AccountState,
    row: &ChannelInboundRow,
    media: &IncomingMedia,
) -> Result<Attachment, crate::channel::SendError> {
    let (bytes, mime) = state.args.adapter.download(media).await?;
    let extension = mime_guess::get_mime_extensions_str(&mime)
        .and_then(|extensions| extensions.first())
        .copied()
        .unwrap_or("bin");
    let name = media
        .name
        .as_deref()
        .map(|name| {
            name.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                        c
                    } else {
                        '_'
                    }
                })
                .take(80)
                .collect::<String>()
        })
        .unwrap_or_else(|| format!("{}.{extension}", media.kind.as_str()));
    let file_name = format!("{}-{}-{name}", row.channel, row.id);
    let inbox = state.args.workspace.join("inbox");
    let lasting = |error: std::io::Error| crate::channel::SendError::Rejected(error.to_string());
    tokio::fs::create_dir_all(&inbox).await.map_err(lasting)?;
    tokio::fs::write(inbox.join(&file_name), &bytes)
        .await
        .map_err(lasting)?;
    Ok(Attachment {
        kind: media.kind,
        path: PathBuf::from("inbox").join(file_name),
        mime,
        bytes: bytes.len() as u64,
    })
}

async fn transcribe(
    state: &AccountState,
    attachment: &Attachment,
    media: &IncomingMedia,
) -> VoiceOutcome {
    let transcriber = match &state.args.voice.transcriber {
        Ok(transcriber) => transcriber,
        Err(unavailable) => return VoiceOutcome::Unavailable(unavailable.clone()),
    };
    let bytes = match tokio::fs::read(state.args.workspace.join(&attachment.path)).await {
        Ok(bytes) => bytes,
        Err(error) => {
            return VoiceOutcome::Failed {
                reason: format!("the saved audio could not be read back: {error}"),
                unreadable: false,
            };
        }
    };
    let file_name = attachment
        .path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "voice.ogg".into());
    let audio = Audio {
        bytes,
        file_name,
        mime: media.mime.clone(),
    };
    match transcriber.transcribe(&audio).await {
        Ok(text) => VoiceOutcome::Transcribed(text),
        Err(error) => VoiceOutcome::Failed {
            unreadable: error.is_unreadable_audio(),
            reason: error.to_string(),
        },
    }
}
