//! Turns through Signal. With `signal = true` the main agent gets a Signal account on the fake
//! signal-cli (`testkit::fake_signal`), and a turn to an `sg:<number>` chat is a message pushed
//! into its event stream from that number (a voice note with `voice`): what the turn heard is what
//! the daemon sent to the number by JSON-RPC until the message was answered. Approval requests
//! arrive as text, and the turn's `approval` answers in words as the person would: `yes <id>`
//! (`approve`) or `no <id>` (`deny`).
//!
//! The people: +4917200000001 ("Ana") may talk to the agent and approve; anyone else is a
//! stranger, who gets a pairing code. `{{pairing_code}}` in a turn's text is the newest pending
//! request's code (for `pair {{pairing_code}}`).

use std::collections::HashSet;
use std::time::Duration;

use super::judge::Heard;
use super::scenario::ApprovalAction;
use super::seam::{Said, last_run_id, settled};
use crate::domain::ChatKey;
use crate::store::Store;
use crate::testkit::fake_signal::{FakeSignal, SentSignal, SignalPerson};
use crate::testkit::fake_transcription::FakeTranscription;
use crate::testkit::wait::poll_until;

/// The agent's own number.
const ACCOUNT: &str = "+4915100000000";
/// The number that talks to the agent and approves.
pub(super) const OWNER: &str = "+4917200000001";
const POLL: Duration = Duration::from_millis(100);

/// In a turn's text: the code of the newest pending Signal pairing request.
const PAIRING_CODE: &str = "{{pairing_code}}";

/// The newest pending Signal pairing request's code, as people read it (`ABCD-EFGH`).
async fn pairing_code(store: &Store) -> Result<String, String> {
    let now = crate::clock::now_ms();
    let pending = store
        .read(move |conn| crate::store::channels::pending_pairings(conn, now))
        .await
        .map_err(|error| format!("cannot read the pairing requests: {error}"))?;
    pending
        .iter()
        .rev()
        .find(|pairing| pairing.channel == "sg")
        .map(|pairing| crate::telegram::pairing::display(&pairing.code))
        .ok_or_else(|| "`{{pairing_code}}`: no Signal pairing request is pending".to_string())
}

/// The fake signal-cli and the main agent's account on it.
pub(super) struct SignalSide {
    pub(super) fake: FakeSignal,
}

impl SignalSide {
    pub(super) async fn start() -> SignalSide {
        SignalSide {
            fake: FakeSignal::start(ACCOUNT).await,
        }
    }

    /// The main agent's `[signal]` table.
    pub(super) fn agent_table(&self) -> String {
        format!(
            "\n[signal]\naccount = \"{ACCOUNT}\"\nrpc_url = \"{}\"\nallow_users = [\"{OWNER}\"]\n",
            self.fake.base_url()
        )
    }

    /// Says the turn's message from the chat's number (nothing: only listens) and collects what
    /// the daemon sent back until the message is answered and nothing is under way; answers
    /// approval prompts as `approval` says. The ids of the requests it decided go to `decided`.
    #[allow(clippy::too_many_arguments)] // The turn's pieces, each used once.
    pub(super) async fn converse(
        &self,
        store: &Store,
        chat: &ChatKey,
        said: Option<Said<'_>>,
        transcription: Option<&FakeTranscription>,
        approval: Option<ApprovalAction>,
        decided: &mut HashSet<String>,
        limit: Duration,
    ) -> Result<Heard, String> {
        let person = SignalPerson::new(chat.id(), "Ana");
        let expanded;
        let said = match said {
            Some(Said::Text(text)) if text.contains(PAIRING_CODE) => {
                expanded = text.replace(PAIRING_CODE, &pairing_code(store).await?);
                Some(Said::Text(&expanded))
            }
            other => other,
        };
        let already = self.fake.sent().len();
        let last_run = last_run_id(store, chat).await?;
        let timestamp = match said {
            Some(Said::Text(text)) => Some(self.fake.push_text(&person, text)),
            Some(Said::Voice(heard)) => {
                let audio = format!("OggS voice note: {heard}").into_bytes();
                if let Some(transcription) = transcription {
                    transcription.set_transcript(&audio, heard);
                }
                Some(self.fake.push_voice_note(&person, &audio).0)
            }
            None => None,
        };
        let message_id = timestamp.map(|at| format!("{ACCOUNT}/{}/{at}", person.uuid));
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            self.answer_prompts(&person, already, approval, decided);
            match &message_id {
                None => break,
                Some(id) if settled(store, id).await? => break,
                Some(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                let rows = store
                    .read(|conn| {
                        let mut statement = conn.prepare(
                            "SELECT message_id || ' ' || status || ' ' || coalesce(note, '') FROM channel_inbound ORDER BY id",
                        )?;
                        let rows = statement
                            .query_map([], |row| row.get::<_, String>(0))?
                            .collect::<Result<Vec<_>, _>>()?;
                        Ok(rows)
                    })
                    .await
                    .unwrap_or_default();
                return Err(format!(
                    "no answer within {} s (stored messages: {})",
                    limit.as_secs(),
                    rows.join("; ")
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        if message_id.is_none() {
            let _ = poll_until(limit, || async { self.fake.sent().len() > already }).await;
        }
        let mut heard = Heard::default();
        for sent in self.sent_since(already, &person.number) {
            if !sent.attachments.is_empty() {
                heard.sent_files.push(if sent.voice_note {
                    "voice".into()
                } else {
                    "document".into()
                });
            } else if sent.text.starts_with("Approval needed")
                || sent.text.contains("Approval needed:")
            {
                heard.notices.push(sent.text);
            } else {
                if !heard.text.is_empty() {
                    heard.text.push('\n');
                }
                heard.text.push_str(&sent.text);
            }
        }
        heard.run_id = match last_run_id(store, chat).await? {
            Some(run) if Some(run) != last_run => Some(run),
            _ => None,
        };
        Ok(heard)
    }

    fn sent_since(&self, skip: usize, number: &str) -> Vec<SentSignal> {
        self.fake
            .sent()
            .into_iter()
            .skip(skip)
            .filter(|sent| sent.recipients.iter().any(|r| r == number))
            .collect()
    }

    /// Replies `yes <id>` or `no <id>` to each prompt not answered yet.
    fn answer_prompts(
        &self,
        person: &SignalPerson,
        skip: usize,
        approval: Option<ApprovalAction>,
        decided: &mut HashSet<String>,
    ) {
        let word = match approval {
            Some(ApprovalAction::Approve) => "yes",
            Some(ApprovalAction::Deny) | None => "no",
            Some(ApprovalAction::Expire) => return,
        };
        for sent in self.sent_since(skip, &person.number) {
            let Some(id) = sent
                .text
                .split("Reply \"yes ")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .map(str::to_string)
            else {
                continue;
            };
            if decided.insert(id.clone()) {
                self.fake.push_text(person, &format!("{word} {id}"));
            }
        }
    }
}
