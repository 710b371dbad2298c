//! What arrives: stored updates become messages to the agent (with their attachments downloaded
//! into the workspace), unknown private users get one pairing reply (or claim an unclaimed bot
//! with `/start <code>`, `claim.rs`), blocked ones nothing, and the sweep re-dispatches updates
//! that never reached a session.

use super::*;

/// What to do with one stored message: ignore it (stale, blocked, unknown sender), keep it as
/// group context, handle a command, or hand it to the agent (after its files are fetched). The
/// status to record with the batch, or `None` when a fetch task owns the update's status (its
/// writes must not be overwritten by the batch's, which commits later).
pub(super) async fn on_message(
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    update: &StoredUpdate,
    message: IncomingMessage,
) -> Option<(UpdateStatus, Option<String>)> {
    if let Some(outcome) = screen(state, update, &message).await {
        return Some(outcome);
    }
    if !message.addressed {
        return Some((UpdateStatus::Context, None));
    }
    if let Some((command, args)) = message.command.clone() {
        return Some(on_command(state, &message, &command, &args).await);
    }
    let inbound = Inbound {
        agent: state.args.spec.name.clone(),
        chat: message.chat(),
        sender: Sender::new(message.user_id.to_string(), message.user_name.clone()),
        text: message.text.clone(),
        attachments: Vec::new(),
        source: InboundSource::Telegram {
            inbound_id: update.id,
        },
        received_ms: update.received_ms,
        context: None,
        correlation: None,
    };
    if message.files.is_empty() {
        return Some(hand_over_text(state, &message, inbound).await);
    }
    fetch_then_hand_over(myself, state, update, message, inbound).await;
    None
}

/// Stops a message that must not be answered: sent long before the daemon started (the person is
/// told it came too late, `late.rs`, unless an earlier incarnation accepted it and still owes the
/// answer), from a blocked user, or from an unknown one (who gets one pairing reply in a private
/// chat, or claims an unclaimed bot with `/start <code>`).
async fn screen(
    state: &mut TelegramBotState,
    update: &StoredUpdate,
    message: &IncomingMessage,
) -> Option<(UpdateStatus, Option<String>)> {
    let grace = state.args.config.stale_grace.0.as_millis() as i64;
    let lateness = late::judge(
        message.date_ms,
        update.received_ms,
        state.args.boot_ms,
        grace,
        crate::clock::now_ms(),
    );
    let standing = claim::standing(state, message.user_id).await;
    if lateness == late::Lateness::TooLate {
        let allowed = standing == claim::Standing::Allowed;
        return Some(late::tell_too_late(state, message, allowed));
    }
    match standing {
        claim::Standing::Allowed => None,
        // Not a word, not even a pairing reply.
        claim::Standing::Blocked => Some((
            UpdateStatus::Ignored,
            Some("blocked by the operator: not answered".into()),
        )),
        claim::Standing::Unknown => {
            if message.private {
                if let Some(("start", args)) = message
                    .command
                    .as_ref()
                    .map(|(command, args)| (command.as_str(), args.as_str()))
                {
                    return Some(claim::on_start(state, message, args).await);
                }
                pairing_reply(state, message).await;
            }
            Some((UpdateStatus::Ignored, Some("unauthorized sender".into())))
        }
    }
}

/// Hands a message without files to the agent, with the group's conversation since the bot's last
/// answer before it.
async fn hand_over_text(
    state: &mut TelegramBotState,
    message: &IncomingMessage,
    mut inbound: Inbound,
) -> (UpdateStatus, Option<String>) {
    // The group context is taken (marked used) only when the agent is there to get it.
    let reachable = state
        .args
        .registry
        .lookup(&crate::protocol::agent::name(&inbound.agent))
        .is_some();
    if reachable {
        let frame = take_group_frame(
            &state.args.store,
            &state.args.spec.name,
            state.bot_id,
            message,
        )
        .await;
        inbound.text = format!("{frame}{}", inbound.text);
    }
    forward(state, inbound)
}

/// Starts the task that fetches a message's files (and transcribes its voice notes) and then hands
/// it over; the update is recorded pending first, so that the task's own status (dispatched, or
/// a reason to retry) is always the later write.
async fn fetch_then_hand_over(
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    update: &StoredUpdate,
    message: IncomingMessage,
    inbound: Inbound,
) {
    // One fetch per update at a time: a sweep while a slow transcription is still running must
    // not start a second one (nor touch the status that fetch owns).
    let Some(in_flight) = InFlight::claim(&state.fetching, update.id) else {
        return;
    };
    let (row_id, now) = (update.id, crate::clock::now_ms());
    let recorded = state
        .args
        .store
        .write(move |conn| {
            queries::set_status(
                conn,
                row_id,
                UpdateStatus::Pending,
                Some("downloading attachments"),
                now,
            )
        })
        .await;
    if let Err(error) = recorded {
        // The sweep hands the update over again; nothing is fetched twice at once meanwhile.
        tracing::warn!(update = update.update_id, %error, "could not record an update as pending; the sweep retries it");
        return;
    }
    // Files are downloaded (and voice notes transcribed) in a task; the update is dispatched when
    // they are in the workspace.
    let fetch = Fetch {
        bot: state.bot.clone(),
        registry: state.args.registry.clone(),
        store: state.args.store.clone(),
        events: state.args.events.clone(),
        myself: myself.clone(),
        inbox: state.args.workspace.join("inbox"),
        voice: state.args.voice.clone(),
        echo_transcripts: state.args.spec.echo_transcripts,
        bot_id: state.bot_id,
        row_id: update.id,
        update_id: update.update_id,
        received_ms: update.received_ms,
    };
    // Stopped with the bot (a stopped bot's task would hand over into a restarted one's chats;
    // the sweep of the next incarnation picks the update up instead).
    let cancel = state.cancel.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = fetch.run(message, inbound, in_flight) => {}
            _ = cancel.cancelled() => {}
        }
    });
}

/// Update rows whose attachments are being fetched; an entry leaves when its task ends (even by
/// panic or cancellation).
pub(super) type Fetching = std::sync::Arc<std::sync::Mutex<std::collections::HashSet<i64>>>;

pub(super) struct InFlight {
    fetching: Fetching,
    row_id: i64,
}

impl InFlight {
    fn claim(fetching: &Fetching, row_id: i64) -> Option<InFlight> {
        // A poisoned lock only means a task panicked while inserting; the set is still valid.
        let mut set = fetching.lock().unwrap_or_else(|poison| poison.into_inner());
        set.insert(row_id).then(|| InFlight {
            fetching: fetching.clone(),
            row_id,
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut set = self
            .fetching
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        set.remove(&self.row_id);
    }
}

/// What the fetching task needs of the bot.
struct Fetch {
    bot: Bot,
    registry: Registry,
    store: Store,
    events: crate::events::EventBus,
    myself: ActorRef<BotMsg>,
    inbox: PathBuf,
    voice: crate::voice::VoiceSettings,
    echo_transcripts: bool,
    bot_id: i64,
    row_id: i64,
    update_id: i64,
    received_ms: i64,
}

impl Fetch {
    async fn run(self, message: IncomingMessage, mut inbound: Inbound, _in_flight: InFlight) {
        let Some(notice) = self.receive_files(&message, &mut inbound).await else {
            return;
        };
        self.hand_over(&message, inbound, notice).await;
    }

    /// Downloads the message's files into the inbox and transcribes its voice notes, each noted
    /// in the text; answers the notice for the person (a transcript's quote or a hint), or
    /// `None` when a voice note is left for the sweep to retry.
    async fn receive_files(
        &self,
        message: &IncomingMessage,
        inbound: &mut Inbound,
    ) -> Option<Option<String>> {
        let mut notes = Vec::new();
        let mut notice = None;
        if !message.files.is_empty()
            && let Err(error) = crate::agent::workspace_writes::record_inbound_files(
                &self.store,
                &self.events,
                &inbound.agent,
                self.update_id,
            )
            .await
        {
            // Nothing lands in the workspace unrecorded: the sweep hands the update over again.
            tracing::warn!(update = self.update_id, %error, "could not record incoming files; the sweep retries");
            return None;
        }
        for file in &message.files {
            if file.kind == crate::domain::AttachmentKind::Voice {
                notice = Some(self.receive_voice(file, message, inbound).await?);
                continue;
            }
            match download(&self.bot, file, &self.inbox, self.update_id).await {
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
        Some(notice.flatten())
    }

    /// Saves and transcribes one voice note; the text the agent reads says what was heard. Answers
    /// the person's notice, or `None` when the note must be retried (the update is left pending).
    async fn receive_voice(
        &self,
        file: &intake::RemoteFile,
        message: &IncomingMessage,
        inbound: &mut Inbound,
    ) -> Option<Option<String>> {
        let step = voice::receive_voice(
            &self.bot,
            file,
            &self.inbox,
            self.update_id,
            self.received_ms,
            &self.voice,
        )
        .await;
        let (attachment, outcome) = match step {
            voice::VoiceStep::Ready {
                attachment,
                outcome,
            } => (attachment, outcome),
            voice::VoiceStep::Retry(reason) => {
                tracing::warn!(update = self.update_id, %reason, "a voice note is not heard yet; the sweep retries");
                let (row_id, now) = (self.row_id, crate::clock::now_ms());
                let note = format!("{reason}; will retry");
                let _ = self
                    .store
                    .write(move |conn| {
                        queries::set_status(conn, row_id, UpdateStatus::Pending, Some(&note), now)
                    })
                    .await;
                return None;
            }
        };
        inbound.text = crate::voice::agent_text(
            &message.text,
            file.duration_secs,
            attachment
                .as_ref()
                .map(|attachment| attachment.path.as_path()),
            &outcome,
        );
        inbound.attachments.extend(attachment);
        Some(crate::voice::user_notice(
            file.duration_secs,
            &outcome,
            self.echo_transcripts,
        ))
    }

    /// Hands the message to the agent (the person's notice queued first) and marks the update
    /// dispatched. An agent that is not running gets it from the sweep later, and only then is
    /// the person told anything, so they hear it once.
    async fn hand_over(
        &self,
        message: &IncomingMessage,
        mut inbound: Inbound,
        notice: Option<String>,
    ) {
        let Some(agent) = self
            .registry
            .lookup(&crate::protocol::agent::name(&inbound.agent))
        else {
            return;
        };
        // Queued with the bot before the agent has the message, so the quote or the hint comes
        // before any answer in the chat's send queue.
        if let Some(text) = notice {
            let _ = self.myself.cast(BotMsg::Request(TelegramMsg::Notify {
                chat: inbound.chat.clone(),
                text,
            }));
        }
        // The group context is taken now, at the hand-over: a fetch left for a retry (or
        // cancelled) must leave it for the next attempt.
        let frame = take_group_frame(&self.store, &inbound.agent, self.bot_id, message).await;
        inbound.text = format!("{frame}{}", inbound.text);
        if agent.cast(AgentMsg::Inbound(inbound)).is_err() {
            return;
        }
        let (row_id, now) = (self.row_id, crate::clock::now_ms());
        let _ = self
            .store
            .write(move |conn| {
                queries::set_status(conn, row_id, UpdateStatus::Dispatched, None, now)
            })
            .await;
    }
}

/// The group frame of an addressed message (empty in private chats): the conversation since the
/// bot's last answer, with names and times, before the message's own text. Taking it marks those
/// context rows used, so it is taken right before the message is handed to the agent.
async fn take_group_frame(
    store: &Store,
    agent: &str,
    bot_id: i64,
    message: &IncomingMessage,
) -> String {
    if message.private {
        return String::new();
    }
    let (agent, chat_id, thread_id, now) = (
        agent.to_string(),
        message.chat_id,
        message.thread_id,
        crate::clock::now_ms(),
    );
    // A forum topic is its own conversation: only what was said in it is its context.
    let context = store
        .write(move |conn| {
            queries::take_context(conn, &agent, chat_id, thread_id, GROUP_CONTEXT, now)
        })
        .await
        .unwrap_or_default();
    let earlier: Vec<IncomingMessage> = context
        .iter()
        .filter_map(|stored| match intake::read(&stored.payload, bot_id, "") {
            Intake::Message(earlier) => Some(earlier),
            _ => None,
        })
        .collect();
    group_frame(message, &earlier)
}

/// A time in a group frame: `HH:MM UTC` (the frame does not know whose local time the run
/// speaks in, so it says which zone it uses).
fn frame_time(ms: i64) -> String {
    format!("{} UTC", crate::clock::to_datetime(ms).format("%H:%M"))
}

/// The frame's text for `message` with the `earlier` messages of the conversation.
fn group_frame(message: &IncomingMessage, earlier: &[IncomingMessage]) -> String {
    let now_text = frame_time(message.date_ms);
    if earlier.is_empty() {
        return format!(
            "{} ({now_text}) in {}: ",
            message.user_name, message.chat_title
        );
    }
    let lines: Vec<String> = earlier
        .iter()
        .map(|earlier| {
            format!(
                "{} ({}): {}",
                earlier.user_name,
                frame_time(earlier.date_ms),
                context_text(earlier)
            )
        })
        .collect();
    format!(
        "[Conversation in {} since your last answer]\n{}\n\n{} ({now_text}) to you: ",
        message.chat_title,
        lines.join("\n"),
        message.user_name,
    )
}

/// An earlier group message as context: its text, and a voice note said as such (only messages
/// addressed to the bot are transcribed).
fn context_text(message: &IncomingMessage) -> String {
    let voice_notes = message
        .files
        .iter()
        .filter(|file| file.kind == crate::domain::AttachmentKind::Voice)
        .map(|file| {
            format!(
                "[voice note, {}, not transcribed]",
                crate::voice::clock_text(file.duration_secs)
            )
        });
    std::iter::once(message.text.clone())
        .chain(voice_notes)
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
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

/// Why a file could not be downloaded, and whether trying again later may help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DownloadError {
    pub reason: String,
    /// Over the Bot API's download limit.
    pub too_big: bool,
    /// A network failure or a server error: another try may succeed.
    pub transient: bool,
}

impl std::fmt::Display for DownloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl DownloadError {
    fn lasting(reason: String) -> DownloadError {
        DownloadError {
            reason,
            too_big: false,
            transient: false,
        }
    }
}

pub(super) async fn download(
    bot: &Bot,
    file: &intake::RemoteFile,
    inbox: &std::path::Path,
    update_id: i64,
) -> Result<Attachment, DownloadError> {
    use teloxide::net::Download;
    if file.size > MAX_DOWNLOAD {
        return Err(DownloadError {
            reason: format!(
                "{} bytes is over the {} MB limit",
                file.size,
                MAX_DOWNLOAD / 1024 / 1024
            ),
            too_big: true,
            transient: false,
        });
    }
    let remote = bot
        .get_file(teloxide::types::FileId(file.file_id.clone()))
        .await
        .map_err(|error| {
            let transient = match &error {
                teloxide::RequestError::Api(teloxide::ApiError::Unknown(description)) => {
                    !crate::telegram::client::is_refusal(description)
                }
                teloxide::RequestError::Api(_) | teloxide::RequestError::MigrateToChatId(_) => {
                    false
                }
                _ => true,
            };
            let reason = TelegramError::from(error).to_string();
            DownloadError {
                too_big: reason.to_ascii_lowercase().contains("file is too big"),
                reason,
                transient,
            }
        })?;
    tokio::fs::create_dir_all(inbox)
        .await
        .map_err(|e| DownloadError::lasting(e.to_string()))?;
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
        .map_err(|e| DownloadError::lasting(e.to_string()))?;
    bot.download_file(&remote.path, &mut output)
        .await
        .map_err(|error| {
            // A 4xx for the file's path is lasting; a lost connection or a 5xx is not.
            let transient = match &error {
                teloxide::DownloadError::Network(network) => !network
                    .status()
                    .is_some_and(|status| status.is_client_error()),
                teloxide::DownloadError::Io(_) => false,
            };
            DownloadError {
                reason: crate::secrets::redact(&error.to_string()).into_owned(),
                too_big: false,
                transient,
            }
        })?;
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
        let text = crate::people::pairing_request_reply(&message.user_name, &row.code, "/pair");
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
        let _ = worker(state, &message.chat()).send(SendJob::Notice { text });
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
    myself: &ActorRef<BotMsg>,
    state: &mut TelegramBotState,
    recovery: Recovery,
) -> Result<(), ActorProcessingErr> {
    if state.username.is_none() {
        return Ok(());
    }
    // A claim code that expired is renewed (and logged); right after start it is logged anyway.
    claim::check_claim(state, recovery == Recovery::Everything).await;
    if recovery == Recovery::Everything {
        super::backlog::answer_crashed_runs(state).await;
    }
    let agent = state.args.spec.name.clone();
    let now = crate::clock::now_ms();
    let threshold = match recovery {
        Recovery::Everything => now,
        Recovery::Stale => now - 20_000,
    };
    let found = state
        .args
        .store
        .read(move |conn| {
            Ok((
                queries::undelivered(conn, &agent, threshold)?,
                outbox::outbox_pending(conn, &agent)?,
            ))
        })
        .await;
    // A store that cannot be read now is the store's fault, not the bot's: the next sweep tries.
    let (stuck, pending) = match found {
        Ok(found) => found,
        Err(error) => {
            tracing::debug!(agent = %state.args.spec.name, %error, "sweep: could not read what waits; the next sweep tries again");
            return Ok(());
        }
    };
    if recovery == Recovery::Everything {
        remove_spool_leftovers(&state.args.store).await;
    }
    if !stuck.is_empty() {
        tracing::info!(agent = %state.args.spec.name, count = stuck.len(), "re-dispatching stored updates");
        dispatch(myself, state, stuck).await?;
    }
    for row in pending {
        // Sent already; its worker is retrying the record (`telegram::hold`): never again.
        if state.held.contains(row.id) {
            continue;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn said(user_name: &str, date_ms: i64, text: &str) -> IncomingMessage {
        IncomingMessage {
            chat_id: -100,
            thread_id: None,
            private: false,
            chat_title: "Family".into(),
            user_id: 7,
            user_name: user_name.into(),
            date_ms,
            text: text.into(),
            addressed: false,
            command: None,
            files: Vec::new(),
        }
    }

    #[test]
    fn group_frame_times_say_their_zone() {
        // 2026-11-26 09:05 and 09:07 UTC.
        let earlier = said("Bob", 1_795_683_900_000, "dinner at 8?");
        let message = said("Ada", 1_795_684_020_000, "what do you think");
        assert_eq!(
            group_frame(&message, std::slice::from_ref(&earlier)),
            "[Conversation in Family since your last answer]\nBob (09:05 UTC): dinner at 8?\n\nAda (09:07 UTC) to you: "
        );
        assert_eq!(group_frame(&message, &[]), "Ada (09:07 UTC) in Family: ");
    }
}
