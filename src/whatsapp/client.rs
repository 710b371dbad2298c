//! The Graph API for one WhatsApp phone number: the seam's [`Adapter`].
//!
//! Sends go to `POST {api_url}/{phone_number_id}/messages` (text, interactive reply buttons,
//! media by an uploaded id, templates, read receipts); files are uploaded first
//! (`POST …/media`, multipart); received media is fetched by id (`GET {api_url}/{media_id}`, then
//! its URL with the token). Meta's errors map onto the seam's: 130429 (throughput), 131056 (pair
//! rate), 4 and 80007 (rate limits) → `Paced`; 131047 (re-engagement: outside the 24-hour
//! window) → `OutsideWindow`; 190 (token) and other 4xx → `Rejected`; 5xx and the network →
//! `Unreachable`. The token is sent only in the `Authorization` header and never formatted.

use std::time::Duration;

use serde_json::{Value, json};

use super::Account;
use crate::channel::{
    Adapter, AdapterFuture, ButtonLimits, Capabilities, Incoming, IncomingMedia, OutPart, SendError,
};
use crate::domain::AttachmentKind;
use crate::store::channels::ChannelInboundRow;
use crate::store::outbox::OutboxFileKind;

/// A text message's limit (characters).
pub const TEXT_LIMIT: usize = 4096;
/// An interactive message's body limit (characters).
pub const BUTTON_BODY_LIMIT: usize = 1024;
/// The largest media downloaded (Meta's own limit for documents is 100 MB; 20 MB as for Telegram).
const MAX_DOWNLOAD: u64 = 20 * 1024 * 1024;

/// The Graph API client of one account.
#[derive(Clone)]
pub struct WhatsAppAdapter {
    account: Account,
    http: reqwest::Client,
}

impl WhatsAppAdapter {
    pub fn new(account: Account) -> WhatsAppAdapter {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            .build()
            // Only a TLS back end that fails to initialise can fail here; the default one does not.
            .unwrap_or_else(|_| reqwest::Client::new());
        WhatsAppAdapter { account, http }
    }

    fn base(&self) -> &str {
        self.account.spec.api_url.trim_end_matches('/')
    }

    fn phone(&self) -> &str {
        self.account.spec.phone_number_id.trim()
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.account.access_token.expose())
    }

    async fn post_message(&self, body: Value) -> Result<String, SendError> {
        let url = format!("{}/{}/messages", self.base(), self.phone());
        let response = self
            .http
            .post(url)
            .header(reqwest::header::AUTHORIZATION, self.bearer())
            .json(&body)
            .send()
            .await
            .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
        let answer = read_answer(response).await?;
        Ok(answer["messages"][0]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    async fn upload(&self, path: &std::path::Path, name: &str) -> Result<String, SendError> {
        let bytes = tokio::fs::read(path)
            .await
            .map_err(|error| SendError::Rejected(format!("the file to send is gone: {error}")))?;
        let mime = mime_guess::from_path(name)
            .first_or_octet_stream()
            .essence_str()
            .to_string();
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(name.to_string())
            .mime_str(&mime)
            .map_err(|error| SendError::Rejected(error.to_string()))?;
        let form = reqwest::multipart::Form::new()
            .text("messaging_product", "whatsapp")
            .text("type", mime)
            .part("file", part);
        let url = format!("{}/{}/media", self.base(), self.phone());
        let response = self
            .http
            .post(url)
            .header(reqwest::header::AUTHORIZATION, self.bearer())
            .multipart(form)
            .send()
            .await
            .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
        let answer = read_answer(response).await?;
        answer["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| SendError::Unreachable("the upload's answer has no media id".into()))
    }

    async fn send_file(
        &self,
        peer: &str,
        kind: OutboxFileKind,
        path: &std::path::Path,
        name: &str,
        caption: &str,
    ) -> Result<String, SendError> {
        let media = self.upload(path, name).await?;
        let body = match kind {
            OutboxFileKind::Photo => {
                json!({"type": "image", "image": {"id": media, "caption": caption}})
            }
            OutboxFileKind::Voice => json!({"type": "audio", "audio": {"id": media}}),
            OutboxFileKind::Document => {
                json!({"type": "document", "document": {"id": media, "filename": name, "caption": caption}})
            }
        };
        let id = self.post_message(envelope(peer, body)).await?;
        if kind == OutboxFileKind::Voice && !caption.trim().is_empty() {
            // Audio carries no caption on WhatsApp: the text follows it.
            let text = json!({"type": "text", "text": {"body": caption, "preview_url": false}});
            return self.post_message(envelope(peer, text)).await;
        }
        Ok(id)
    }

    async fn fetch_media(&self, media: &IncomingMedia) -> Result<(Vec<u8>, String), SendError> {
        let url = format!("{}/{}", self.base(), media.reference);
        let response = self
            .http
            .get(url)
            .header(reqwest::header::AUTHORIZATION, self.bearer())
            .send()
            .await
            .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
        let answer = read_answer(response).await?;
        let location = answer["url"]
            .as_str()
            .ok_or_else(|| SendError::Rejected("the media has no URL".into()))?;
        if answer["file_size"].as_u64().unwrap_or(0) > MAX_DOWNLOAD {
            return Err(SendError::Rejected("the file is larger than 20 MB".into()));
        }
        let mime = answer["mime_type"]
            .as_str()
            .unwrap_or(&media.mime)
            .to_string();
        let response = self
            .http
            .get(location)
            .header(reqwest::header::AUTHORIZATION, self.bearer())
            .send()
            .await
            .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
        if !response.status().is_success() {
            return Err(classify(response.status().as_u16(), &Value::Null));
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
        if bytes.len() as u64 > MAX_DOWNLOAD {
            return Err(SendError::Rejected("the file is larger than 20 MB".into()));
        }
        Ok((bytes.to_vec(), mime))
    }
}

fn envelope(peer: &str, mut body: Value) -> Value {
    body["messaging_product"] = json!("whatsapp");
    body["recipient_type"] = json!("individual");
    body["to"] = json!(peer);
    body
}

/// The answer's JSON when it succeeded; the seam's error otherwise.
async fn read_answer(response: reqwest::Response) -> Result<Value, SendError> {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if (200..300).contains(&status) {
        return Ok(body);
    }
    Err(classify(status, &body))
}

/// Meta's error (HTTP status, `error.code`) in the seam's terms.
pub fn classify(status: u16, body: &Value) -> SendError {
    let code = body["error"]["code"].as_i64().unwrap_or(0);
    let message: String = body["error"]["message"]
        .as_str()
        .unwrap_or("no message")
        .chars()
        .take(300)
        .collect();
    let reason = format!("WhatsApp error {code} (HTTP {status}): {message}");
    match code {
        130429 | 4 | 80007 => SendError::Paced {
            retry_after: Duration::from_secs(2),
            reason,
        },
        // One message per 6 seconds to the same person.
        131056 => SendError::Paced {
            retry_after: Duration::from_secs(6),
            reason,
        },
        131047 => SendError::OutsideWindow,
        _ if status == 429 => SendError::Paced {
            retry_after: Duration::from_secs(2),
            reason,
        },
        _ if status >= 500 => SendError::Unreachable(reason),
        _ => SendError::Rejected(reason),
    }
}

impl Adapter for WhatsAppAdapter {
    fn channel(&self) -> &'static str {
        "wa"
    }

    fn account(&self) -> &str {
        self.phone()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            text_limit: TEXT_LIMIT,
            buttons: Some(ButtonLimits {
                max: 3,
                title_chars: 20,
            }),
            window: Some(Duration::from_secs(24 * 3600)),
        }
    }

    fn check(&self) -> AdapterFuture<'_, Result<String, SendError>> {
        Box::pin(async move {
            let url = format!(
                "{}/{}?fields=display_phone_number,verified_name",
                self.base(),
                self.phone()
            );
            let response = self
                .http
                .get(url)
                .header(reqwest::header::AUTHORIZATION, self.bearer())
                .send()
                .await
                .map_err(|error| SendError::Unreachable(crate::cause::explain(&error)))?;
            let answer = read_answer(response).await?;
            let number = answer["display_phone_number"].as_str().unwrap_or("");
            let name = answer["verified_name"].as_str().unwrap_or("");
            Ok(format!("{name} {number}").trim().to_string())
        })
    }

    fn send<'a>(
        &'a self,
        peer: &'a str,
        part: &'a OutPart,
    ) -> AdapterFuture<'a, Result<String, SendError>> {
        Box::pin(async move {
            match part {
                OutPart::Text(text) => {
                    let body =
                        json!({"type": "text", "text": {"body": text, "preview_url": false}});
                    self.post_message(envelope(peer, body)).await
                }
                OutPart::Buttons { body, buttons } => {
                    let buttons: Vec<Value> = buttons
                        .iter()
                        .map(|b| json!({"type": "reply", "reply": {"id": b.id, "title": b.title}}))
                        .collect();
                    let body = json!({"type": "interactive", "interactive": {
                        "type": "button", "body": {"text": body}, "action": {"buttons": buttons}}});
                    self.post_message(envelope(peer, body)).await
                }
                OutPart::File {
                    kind,
                    path,
                    name,
                    caption,
                } => self.send_file(peer, *kind, path, name, caption).await,
                OutPart::Template {
                    name,
                    language,
                    text,
                } => {
                    let body = json!({"type": "template", "template": {
                        "name": name, "language": {"code": language},
                        "components": [{"type": "body", "parameters": [{"type": "text", "text": text}]}]}});
                    self.post_message(envelope(peer, body)).await
                }
            }
        })
    }

    fn mark_read<'a>(&'a self, message_id: &'a str) -> AdapterFuture<'a, Result<(), SendError>> {
        Box::pin(async move {
            let body = json!({"messaging_product": "whatsapp", "status": "read", "message_id": message_id});
            self.post_message(body).await.map(|_| ())
        })
    }

    fn download<'a>(
        &'a self,
        media: &'a IncomingMedia,
    ) -> AdapterFuture<'a, Result<(Vec<u8>, String), SendError>> {
        Box::pin(self.fetch_media(media))
    }

    fn parse(&self, row: &ChannelInboundRow) -> Result<Incoming, String> {
        parse_message(&row.payload)
    }
}

/// A stored message object read for the seam.
pub fn parse_message(payload: &str) -> Result<Incoming, String> {
    let message: Value =
        serde_json::from_str(payload).map_err(|error| format!("unreadable payload: {error}"))?;
    let kind = message["type"].as_str().unwrap_or("");
    let media = |kind: AttachmentKind, field: &str| {
        let object = &message[field];
        object["id"].as_str().map(|id| IncomingMedia {
            kind,
            reference: id.to_string(),
            mime: object["mime_type"]
                .as_str()
                .unwrap_or("application/octet-stream")
                .to_string(),
            name: object["filename"].as_str().map(str::to_string),
        })
    };
    let caption = |field: &str| message[field]["caption"].as_str().unwrap_or("").to_string();
    let incoming = match kind {
        "text" => Incoming {
            text: message["text"]["body"].as_str().unwrap_or("").to_string(),
            ..Incoming::default()
        },
        "interactive" => Incoming {
            text: message["interactive"]["button_reply"]["title"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            button: message["interactive"]["button_reply"]["id"]
                .as_str()
                .map(str::to_string),
            media: None,
        },
        "button" => Incoming {
            text: message["button"]["text"].as_str().unwrap_or("").to_string(),
            button: message["button"]["payload"].as_str().map(str::to_string),
            media: None,
        },
        "audio" => {
            let voice = message["audio"]["voice"].as_bool() == Some(true);
            let kind = if voice {
                AttachmentKind::Voice
            } else {
                AttachmentKind::Audio
            };
            Incoming {
                text: String::new(),
                button: None,
                media: media(kind, "audio"),
            }
        }
        "image" => Incoming {
            text: caption("image"),
            button: None,
            media: media(AttachmentKind::Image, "image"),
        },
        "document" => Incoming {
            text: caption("document"),
            button: None,
            media: media(AttachmentKind::Document, "document"),
        },
        other => return Err(format!("a WhatsApp `{other}` message is not supported")),
    };
    if incoming.text.is_empty() && incoming.button.is_none() && incoming.media.is_none() {
        return Err(format!("the `{kind}` message carries nothing to read"));
    }
    Ok(incoming)
}
