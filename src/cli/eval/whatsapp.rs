//! Turns through WhatsApp. With `whatsapp = true` the main agent gets a WhatsApp account on the
//! fake Graph API (`testkit::fake_whatsapp`), and a turn to a `wa:<number>` chat is a signed
//! webhook delivery from that number: what the turn heard is what the daemon sent to the number
//! until the message was answered. Approval requests arrive as reply buttons, and the turn's
//! `approval` presses one (`approve`: the first, `deny`: the second) as the person would.
//!
//! The people: +4915100000001 ("Ada") may talk to the agent and approve.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use crate::domain::ChatKey;
use crate::store::Store;
use crate::testkit::fake_transcription::FakeTranscription;
use crate::testkit::fake_whatsapp::FakeWhatsApp;
use crate::testkit::wait::poll_until;

use super::judge::Heard;
use super::scenario::ApprovalAction;
use super::seam::{Said, last_run_id, settled};

/// The number that talks to the agent and approves.
pub(super) const OWNER: &str = "4915100000001";
const PHONE_ID: &str = "1000000001";
const TOKEN: &str = "EAAG-eval-whatsapp-token-000001";
const APP_SECRET: &str = "eval-whatsapp-app-secret";
const POLL: Duration = Duration::from_millis(100);

/// The fake Graph API and the main agent's account on it.
pub(super) struct WhatsAppSide {
    pub(super) fake: FakeWhatsApp,
}

impl WhatsAppSide {
    pub(super) async fn start() -> WhatsAppSide {
        WhatsAppSide {
            fake: FakeWhatsApp::start(PHONE_ID, TOKEN, APP_SECRET).await,
        }
    }

    /// The main agent's `[whatsapp]` table.
    pub(super) fn agent_table(&self) -> String {
        format!(
            "\n[whatsapp]\nphone_number_id = \"{PHONE_ID}\"\naccess_token_env = \"EVAL_WA_TOKEN\"\napp_secret_env = \"EVAL_WA_SECRET\"\nverify_token_env = \"EVAL_WA_VERIFY\"\napi_url = \"{}\"\nallow_users = [\"+{OWNER}\"]\n",
            self.fake.api_url()
        )
    }

    /// The variables the table names, with their values.
    pub(super) fn env() -> [(String, String); 3] {
        [
            ("EVAL_WA_TOKEN".into(), TOKEN.into()),
            ("EVAL_WA_SECRET".into(), APP_SECRET.into()),
            ("EVAL_WA_VERIFY".into(), "eval-verify".into()),
        ]
    }

    /// Says the turn's message (text or a voice note) from the chat's number (nothing: only listens) and collects what the daemon
    /// sent back until the message is answered and nothing is under way; presses the approval
    /// buttons as `approval` says. The ids of the requests it decided are added to `decided`.
    #[allow(clippy::too_many_arguments)] // The turn's pieces, each used once.
    pub(super) async fn converse(
        &self,
        store: &Store,
        hook: &str,
        chat: &ChatKey,
        said: Option<Said<'_>>,
        transcription: Option<&FakeTranscription>,
        approval: Option<ApprovalAction>,
        decided: &mut HashSet<String>,
        limit: Duration,
    ) -> Result<Heard, String> {
        let number = chat.id().to_string();
        let already = self.fake.sent().len();
        let last_run = last_run_id(store, chat).await?;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let message_id = format!(
            "wamid.eval{}",
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let message = match said {
            Some(Said::Text(text)) => Some(FakeWhatsApp::text_message(&number, &message_id, text)),
            Some(Said::Voice(heard)) => {
                let audio = format!("OggS voice note: {heard}").into_bytes();
                if let Some(transcription) = transcription {
                    transcription.set_transcript(&audio, heard);
                }
                let media = self.fake.add_media(audio, "audio/ogg");
                Some(FakeWhatsApp::voice_message(&number, &message_id, &media))
            }
            None => None,
        };
        let listens_only = message.is_none();
        if let Some(message) = message
            && self.fake.deliver(hook, &number, message).await != 200
        {
            return Err("the webhook did not accept the message".into());
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            self.press(hook, &number, already, approval, decided).await;
            if listens_only || settled(store, &message_id).await? {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(format!("no answer within {} s", limit.as_secs()));
            }
            tokio::time::sleep(POLL).await;
        }
        if listens_only {
            let _ = poll_until(limit, || async { self.fake.sent().len() > already }).await;
        }
        let mut heard = Heard::default();
        for body in self.sent_since(already, &number) {
            match body["type"].as_str() {
                Some("interactive") => heard.notices.push(
                    body["interactive"]["body"]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                ),
                Some("document" | "image" | "audio") => heard
                    .sent_files
                    .push(body["type"].as_str().unwrap_or("").to_string()),
                _ => {
                    let part = body["text"]["body"].as_str().unwrap_or("");
                    if !heard.text.is_empty() {
                        heard.text.push('\n');
                    }
                    heard.text.push_str(part);
                }
            }
        }
        heard.run_id = match last_run_id(store, chat).await? {
            Some(run) if Some(run) != last_run => Some(run),
            _ => None,
        };
        Ok(heard)
    }

    fn sent_since(&self, skip: usize, number: &str) -> Vec<Value> {
        self.fake
            .sent()
            .into_iter()
            .skip(skip)
            .filter(|body| body["to"] == number)
            .collect()
    }

    /// Presses the first (approve) or second (deny) button of each prompt not pressed yet.
    async fn press(
        &self,
        hook: &str,
        number: &str,
        skip: usize,
        approval: Option<ApprovalAction>,
        decided: &mut HashSet<String>,
    ) {
        let index = match approval {
            Some(ApprovalAction::Approve) => 0,
            Some(ApprovalAction::Deny) | None => 1,
            Some(ApprovalAction::Expire) => return,
        };
        for prompt in self
            .sent_since(skip, number)
            .into_iter()
            .filter(|body| body["type"] == "interactive")
        {
            let button = &prompt["interactive"]["action"]["buttons"][index]["reply"];
            let (Some(id), Some(title)) = (button["id"].as_str(), button["title"].as_str()) else {
                continue;
            };
            let request = id.rsplit(':').next().unwrap_or(id).to_string();
            if !decided.insert(request.clone()) {
                continue;
            }
            let press =
                FakeWhatsApp::button_message(number, &format!("wamid.press.{request}"), id, title);
            let _ = self.fake.deliver(hook, number, press).await;
        }
    }
}
