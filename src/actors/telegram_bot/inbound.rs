//! What arrives: stored updates become messages to the agent (with their attachments downloaded
//! into the workspace), unknown private users get one pairing reply, and the sweep re-dispatches
//! updates that never reached a session.

use super::*;

pub(super) async fn on_message(
    myself: &ActorRef<TelegramMsg>,
    state: &mut TelegramBotState,
    update: &StoredUpdate,
    message: IncomingMessage,
) -> (UpdateStatus, Option<String>) {
    let grace = state.args.config.stale_grace.0.as_millis() as i64;
    if message.date_ms < state.args.boot_ms - grace {
        tracing::info!(agent = %state.args.spec.name, update = update.update_id, "stale update stored but not answered");
        return (
            UpdateStatus::Ignored,
            Some("stale: sent long before the daemon started".into()),
        );
    }
    let agent = state.args.spec.name.clone();
    let user_id = message.user_id;
    let allowed = state.args.allowed_by_file(user_id)
        || state
            .args
            .store
            .read(move |conn| queries::user_allowed(conn, &agent, user_id))
            .await
            .unwrap_or(false);
    if !allowed {
        if message.private {
            pairing_reply(state, &message).await;
        }
        return (UpdateStatus::Ignored, Some("unauthorized sender".into()));
    }
    if !message.addressed {
        return (UpdateStatus::Context, None);
    }
    if let Some((command, args)) = message.command.clone() {
        return on_command(state, &message, &command, &args).await;
    }

    // Group answers get the conversation since the bot's last answer, with names and times.
    let mut text = message.text.clone();
    if !message.private {
        let (agent, chat_id, now) = (
            state.args.spec.name.clone(),
            message.chat_id,
            crate::clock::now_ms(),
        );
        let context = state
            .args
            .store
            .write(move |conn| queries::take_context(conn, &agent, chat_id, GROUP_CONTEXT, now))
            .await
            .unwrap_or_default();
        let lines: Vec<String> = context
            .iter()
            .filter_map(
                |stored| match intake::read(&stored.payload, state.bot_id, "") {
                    Intake::Message(earlier) => Some(format!(
                        "{} ({}): {}",
                        earlier.user_name,
                        crate::clock::to_datetime(earlier.date_ms).format("%H:%M"),
                        earlier.text
                    )),
                    _ => None,
                },
            )
            .collect();
        let now_text = crate::clock::to_datetime(message.date_ms).format("%H:%M");
        text = if lines.is_empty() {
            format!(
                "{} ({now_text}) in {}: {}",
                message.user_name, message.chat_title, message.text
            )
        } else {
            format!(
                "[Conversation in {} since your last answer]\n{}\n\n{} ({now_text}) to you: {}",
                message.chat_title,
                lines.join("\n"),
                message.user_name,
                message.text
            )
        };
    }
    let inbound = Inbound {
        agent: state.args.spec.name.clone(),
        chat: ChatKey::telegram(message.chat_id),
        sender: Sender::new(message.user_id.to_string(), message.user_name.clone()),
        text,
        attachments: Vec::new(),
        source: InboundSource::Telegram {
            inbound_id: update.id,
        },
        received_ms: update.received_ms,
        context: None,
        correlation: None,
    };
    if message.files.is_empty() {
        return forward(state, inbound);
    }
    // Files are downloaded in a task; the update is dispatched when they are in the workspace.
    let bot = state.bot.clone();
    let registry = state.args.registry.clone();
    let inbox = state.args.workspace.join("inbox");
    let files = message.files.clone();
    let update_id = update.update_id;
    let store = state.args.store.clone();
    let row_id = update.id;
    let _ = myself;
    tokio::spawn(async move {
        let mut inbound = inbound;
        let mut notes = Vec::new();
        for file in files {
            match download(&bot, &file, &inbox, update_id).await {
                Ok(attachment) => {
                    notes.push(format!(
                        "[{} saved to {}]",
                        file.name,
                        attachment.path.display()
                    ));
                    inbound.attachments.push(attachment);
                }
                Err(error) => {
                    notes.push(format!("[{} could not be downloaded: {error}]", file.name))
                }
            }
        }
        if !notes.is_empty() {
            inbound.text = format!("{}\n{}", inbound.text, notes.join("\n"))
                .trim()
                .to_string();
        }
        if let Some(agent) = registry.lookup(&crate::protocol::agent::name(&inbound.agent))
            && agent.cast(AgentMsg::Inbound(inbound)).is_ok()
        {
            let now = crate::clock::now_ms();
            let _ = store
                .write(move |conn| {
                    queries::set_status(conn, row_id, UpdateStatus::Dispatched, None, now)
                })
                .await;
        }
    });
    (
        UpdateStatus::Pending,
        Some("downloading attachments".into()),
    )
}

pub(super) fn forward(
    state: &TelegramBotState,
    inbound: Inbound,
) -> (UpdateStatus, Option<String>) {
    match state
        .args
        .registry
        .lookup(&crate::protocol::agent::name(&inbound.agent))
    {
        Some(agent) if agent.cast(AgentMsg::Inbound(inbound)).is_ok() => {
            (UpdateStatus::Dispatched, None)
        }
        // The agent is restarting: the sweep dispatches the update once it is back.
        _ => (
            UpdateStatus::Pending,
            Some("agent not reachable; will retry".into()),
        ),
    }
}

pub(super) async fn download(
    bot: &Bot,
    file: &intake::RemoteFile,
    inbox: &std::path::Path,
    update_id: i64,
) -> Result<Attachment, String> {
    use teloxide::net::Download;
    if file.size > MAX_DOWNLOAD {
        return Err(format!(
            "{} bytes is over the {} MB limit",
            file.size,
            MAX_DOWNLOAD / 1024 / 1024
        ));
    }
    let remote = bot
        .get_file(teloxide::types::FileId(file.file_id.clone()))
        .await
        .map_err(|e| TelegramError::from(e).to_string())?;
    tokio::fs::create_dir_all(inbox)
        .await
        .map_err(|e| e.to_string())?;
    let safe_name: String = file
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(80)
        .collect();
    let relative = PathBuf::from("inbox").join(format!("{update_id}-{safe_name}"));
    let path = inbox.join(format!("{update_id}-{safe_name}"));
    let mut output = tokio::fs::File::create(&path)
        .await
        .map_err(|e| e.to_string())?;
    bot.download_file(&remote.path, &mut output)
        .await
        .map_err(|e| crate::secrets::redact(&e.to_string()).into_owned())?;
    Ok(Attachment {
        kind: file.kind,
        path: relative,
        mime: file.mime.clone(),
        bytes: remote.size as u64,
    })
}

pub(super) async fn pairing_reply(state: &mut TelegramBotState, message: &IncomingMessage) {
    let (agent, user_id, now) = (
        state.args.spec.name.clone(),
        message.user_id,
        crate::clock::now_ms(),
    );
    let row = PairingRow {
        code: pairing::new_code(),
        agent: agent.clone(),
        user_id,
        chat_id: message.chat_id,
        name: message.user_name.clone(),
        created_ms: now,
        expires_ms: now + pairing::VALIDITY_MS,
        approved_ms: None,
    };
    // One reply per pairing request: a user who already has a live code hears nothing more.
    let created = state
        .args
        .store
        .write(move |conn| {
            if queries::live_pairing(conn, &agent, user_id, now)?.is_some() {
                return Ok(None);
            }
            queries::create_pairing(conn, &row)?;
            Ok(Some(row))
        })
        .await;
    if let Ok(Some(row)) = created {
        let text = format!(
            "Hi {}! I only talk to people my owner approved. Ask them to approve code {} (in Studio, or by sending /pair {} to me). The code is valid for an hour.",
            message.user_name,
            pairing::display(&row.code),
            pairing::display(&row.code)
        );
        state.args.events.publish_data(
            EventKind::BotStatus,
            &state.args.subject(),
            &format!("pairing requested by {} ({})", row.name, row.user_id),
            EventData::BotPairingRequested {
                agent: row.agent.clone(),
                code: row.code.clone(),
                user_id: row.user_id,
            },
        );
        let _ = worker(state, message.chat_id).send(SendJob::Notice { text });
    }
}

/// What a sweep picks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recovery {
    /// Right after start: every undelivered update and reply, however recent.
    Everything,
    /// Periodically: only what has waited long enough to be stuck (not merely in flight).
    Stale,
}

/// Re-dispatches stored updates that never reached a session, and re-delivers replies still in
/// the outbox (with a growing delay per attempt).
pub(super) async fn sweep(
    myself: &ActorRef<TelegramMsg>,
    state: &mut TelegramBotState,
    recovery: Recovery,
) -> Result<(), ActorProcessingErr> {
    if state.username.is_none() {
        return Ok(());
    }
    let agent = state.args.spec.name.clone();
    let now = crate::clock::now_ms();
    let threshold = match recovery {
        Recovery::Everything => now,
        Recovery::Stale => now - 20_000,
    };
    let (stuck, pending) = state
        .args
        .store
        .read(move |conn| {
            Ok((
                queries::undelivered(conn, &agent, threshold)?,
                outbox::outbox_pending(conn, &agent)?,
            ))
        })
        .await?;
    if recovery == Recovery::Everything {
        remove_spool_leftovers(&state.args.store).await;
    }
    if !stuck.is_empty() {
        tracing::info!(agent = %state.args.spec.name, count = stuck.len(), "re-dispatching stored updates");
        dispatch(myself, state, stuck).await?;
    }
    for row in pending {
        let delay = 20_000i64.saturating_mul(1 << row.attempts.clamp(0, 8));
        if recovery == Recovery::Stale && now - row.created_ms < delay {
            continue;
        }
        let Some(chat) = ChatKey::parse(&row.chat) else {
            continue;
        };
        deliver(
            state,
            Outbound {
                agent: row.agent.clone(),
                chat,
                run_id: row.run_id,
                correlation: None,
                event: OutEvent::Final {
                    text: row.text.clone(),
                    outbox_id: Some(row.id),
                },
            },
        )
        .await;
    }
    Ok(())
}

/// Removes spool copies no undelivered outbox row needs (left by a crash between a row's end and
/// the copy's removal, or between the copy and its row). Copies younger than an hour are kept:
/// a `send_file` call may be between its copy and its row right now.
async fn remove_spool_leftovers(store: &crate::store::Store) {
    let spool = outbox::spool_dir(store.path());
    let Ok(needed) = store.read(outbox::pending_files).await else {
        return;
    };
    let Ok(mut entries) = tokio::fs::read_dir(&spool).await else {
        return;
    };
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    while let Ok(Some(entry)) = entries.next_entry().await {
        let path = entry.path();
        let old = entry
            .metadata()
            .await
            .and_then(|metadata| metadata.modified())
            .is_ok_and(|modified| modified < hour_ago);
        if old && !needed.contains(&path) {
            let _ = tokio::fs::remove_file(&path).await;
        }
    }
}
