//! Reading one `receive` object of signal-cli — an SSE event's data, or one element of the JSON-RPC
//! `receive` method's answer — into a typed [`SignalInbound`], or saying why it is not a message.
//!
//! The wire shapes are signal-cli's own (`JsonReceiveMessageHandler`, `JsonMessageEnvelope`,
//! `JsonDataMessage`, `JsonGroupInfo`, `JsonMention`, `JsonQuote`, `JsonAttachment`):
//! `{"account":"+49…","envelope":{"sourceNumber","sourceUuid","sourceName","timestamp",
//! "dataMessage":{"timestamp","message","mentions":[{"number","uuid","start","length"}],
//! "quote":{"id","authorNumber","authorUuid","text"},"attachments":[{"contentType","filename",
//! "id","size","caption"}],"groupInfo":{"groupId","groupName","type"}}}}`, and typing, receipt,
//! sync, call and story envelopes, which are [`Received::Ignored`] with the reason.
//!
//! Text: Signal writes each mention into the text as U+FFFC and names it in `mentions` by
//! `start`/`length` in UTF-16 units; [`SignalInbound::text`] has a mention of our own account
//! removed (as Telegram's intake removes a leading `@bot`) and every other one written as
//! `@name-or-number`.
//!
//! Voice notes: signal-cli's JSON has no voice-note flag (only D-Bus has `isVoiceNote`); Signal's
//! apps send a voice note as `audio/aac` (or another `audio/*`) without a file name, while an
//! audio *file* keeps its name, so that is what [`SignalAttachment::voice_note`] means.
//!
//! Invariants: never panics on any input; an error names the field that is wrong (through
//! `serde_path_to_error`); nothing here does I/O.

use serde::{Deserialize, Serialize};

/// Who we are on Signal: the number the account is registered under, and its ACI (uuid) when known.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OwnAccount {
    pub number: String,
    pub uuid: Option<String>,
}

impl OwnAccount {
    /// Whether `number`/`uuid` (either may be missing) name this account.
    pub fn is(&self, number: Option<&str>, uuid: Option<&str>) -> bool {
        number.is_some_and(|number| !number.is_empty() && number == self.number)
            || matches!((uuid, self.uuid.as_deref()), (Some(theirs), Some(ours)) if !ours.is_empty() && theirs.eq_ignore_ascii_case(ours))
    }
}

/// A Signal group a message was sent in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalGroup {
    /// The group id, base64 as signal-cli writes it and takes back in `groupId`.
    pub id: String,
    pub name: String,
}

/// A person named in a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalMention {
    pub number: Option<String>,
    pub uuid: Option<String>,
    /// Position and length in the raw text, in UTF-16 units.
    pub start: u32,
    pub length: u32,
}

/// The message a reply quotes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalQuote {
    /// The quoted message's timestamp (its id).
    pub id: i64,
    pub author_number: Option<String>,
    pub author_uuid: Option<String>,
    pub text: String,
}

/// A file attached to a message, still in signal-cli's attachment store (`getAttachment`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalAttachment {
    pub id: String,
    pub content_type: String,
    pub file_name: Option<String>,
    pub size: u64,
    pub caption: Option<String>,
    /// Audio without a file name: how Signal's apps send a voice note.
    pub voice_note: bool,
}

/// A data message addressed to an account of ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalInbound {
    /// Our account it arrived at (signal-cli's `account`).
    pub account: String,
    pub source_number: Option<String>,
    pub source_uuid: Option<String>,
    /// The sender's profile or contact name, possibly empty.
    pub source_name: String,
    /// The message's timestamp: Signal's id of the message (with its author).
    pub timestamp: i64,
    pub group: Option<SignalGroup>,
    /// The text with our own mentions removed and other mentions written out.
    pub text: String,
    pub mentions: Vec<SignalMention>,
    pub quote: Option<SignalQuote>,
    pub attachments: Vec<SignalAttachment>,
}

impl SignalInbound {
    /// The sender as signal-cli accepts it back in `recipient`: the number, else the uuid.
    pub fn source(&self) -> &str {
        self.source_number
            .as_deref()
            .or(self.source_uuid.as_deref())
            .unwrap_or("")
    }

    /// A key that is the same every time signal-cli hands over this message: account, sender
    /// (the uuid when known — a number can be hidden by the sender's privacy settings — else the
    /// number) and the message's timestamp. Store inbound rows unique on it.
    pub fn dedupe_key(&self) -> String {
        let sender = self
            .source_uuid
            .as_deref()
            .map(str::to_ascii_lowercase)
            .or_else(|| self.source_number.clone())
            .unwrap_or_default();
        format!("{}/{}/{}", self.account, sender, self.timestamp)
    }

    /// Whether the message is for us: every direct message; in a group, one that mentions our
    /// account, replies to one of our messages, or is a `/command` — as Telegram's intake decides.
    pub fn addressed_to(&self, own: &OwnAccount) -> bool {
        if self.group.is_none() {
            return true;
        }
        let mentioned = self
            .mentions
            .iter()
            .any(|mention| own.is(mention.number.as_deref(), mention.uuid.as_deref()));
        let replies_to_us = self.quote.as_ref().is_some_and(|quote| {
            own.is(quote.author_number.as_deref(), quote.author_uuid.as_deref())
        });
        let command = self.text.starts_with('/') && self.text.len() > 1;
        mentioned || replies_to_us || command
    }
}

/// What a `receive` object is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Boxed: a message is much larger than the other variant.
    Message(Box<SignalInbound>),
    /// Not a message for the agent (typing, receipts, our own sent copies, calls, stories,
    /// reactions, group updates, a message signal-cli could not decrypt); `what` says which.
    Ignored { account: String, what: String },
}

/// Why a `receive` object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboundError {
    #[error("a Signal event is not valid JSON of signal-cli's shape (at {path}: {detail})")]
    Shape { path: String, detail: String },
    #[error("a Signal event has no {field}, so it cannot be stored or answered")]
    Missing { field: &'static str },
}

#[derive(Deserialize)]
struct WireReceive {
    account: Option<String>,
    envelope: Option<WireEnvelope>,
    exception: Option<WireError>,
}

#[derive(Deserialize)]
struct WireError {
    message: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEnvelope {
    source_number: Option<String>,
    source_uuid: Option<String>,
    source_name: Option<String>,
    #[serde(default)]
    timestamp: i64,
    data_message: Option<WireDataMessage>,
    edit_message: Option<serde_json::Value>,
    story_message: Option<serde_json::Value>,
    sync_message: Option<serde_json::Value>,
    call_message: Option<serde_json::Value>,
    receipt_message: Option<serde_json::Value>,
    typing_message: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireDataMessage {
    #[serde(default)]
    timestamp: i64,
    message: Option<String>,
    reaction: Option<serde_json::Value>,
    remote_delete: Option<serde_json::Value>,
    mentions: Option<Vec<WireMention>>,
    quote: Option<WireQuote>,
    attachments: Option<Vec<WireAttachment>>,
    group_info: Option<WireGroupInfo>,
}

#[derive(Deserialize)]
struct WireMention {
    name: Option<String>,
    number: Option<String>,
    uuid: Option<String>,
    #[serde(default)]
    start: u32,
    #[serde(default)]
    length: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireQuote {
    #[serde(default)]
    id: i64,
    author_number: Option<String>,
    author_uuid: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireAttachment {
    content_type: Option<String>,
    filename: Option<String>,
    id: Option<String>,
    size: Option<u64>,
    caption: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireGroupInfo {
    group_id: Option<String>,
    group_name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

/// Reads one `receive` object (an SSE event's `data`). `own` is the account the link serves,
/// used when signal-cli left `account` out and to remove our own mentions from the text.
pub fn parse_receive(data: &str, own: &OwnAccount) -> Result<Received, InboundError> {
    let mut deserializer = serde_json::Deserializer::from_str(data);
    let wire: WireReceive =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
            InboundError::Shape {
                path: error.path().to_string(),
                detail: error.inner().to_string(),
            }
        })?;
    from_wire(wire, own)
}

/// Reads one `receive` object already parsed as JSON (an element of the `receive` method's answer).
pub fn parse_receive_value(
    value: serde_json::Value,
    own: &OwnAccount,
) -> Result<Received, InboundError> {
    let wire: WireReceive =
        serde_path_to_error::deserialize(value).map_err(|error| InboundError::Shape {
            path: error.path().to_string(),
            detail: error.inner().to_string(),
        })?;
    from_wire(wire, own)
}

fn from_wire(wire: WireReceive, own: &OwnAccount) -> Result<Received, InboundError> {
    let account = wire
        .account
        .filter(|account| !account.is_empty())
        .unwrap_or_else(|| own.number.clone());
    let ignored = |what: &str| {
        Ok(Received::Ignored {
            account: account.clone(),
            what: what.to_string(),
        })
    };
    let Some(mut envelope) = wire.envelope else {
        return match wire.exception {
            Some(error) => ignored(&exception_text(&error)),
            None => Err(InboundError::Missing { field: "envelope" }),
        };
    };
    let Some(data) = envelope.data_message.take() else {
        return ignored(&non_message_reason(&envelope, wire.exception.as_ref()));
    };
    if let Some(what) = not_for_the_agent(&data) {
        return ignored(what);
    }
    let source_number = envelope.source_number.filter(|text| !text.is_empty());
    let source_uuid = envelope.source_uuid.filter(|text| !text.is_empty());
    if source_number.is_none() && source_uuid.is_none() {
        return Err(InboundError::Missing {
            field: "envelope.sourceNumber or envelope.sourceUuid",
        });
    }
    let timestamp = if envelope.timestamp > 0 {
        envelope.timestamp
    } else {
        data.timestamp
    };
    if timestamp <= 0 {
        return Err(InboundError::Missing {
            field: "envelope.timestamp",
        });
    }
    let group = match data.group_info {
        Some(group) => Some(SignalGroup {
            id: group
                .group_id
                .filter(|id| !id.is_empty())
                .ok_or(InboundError::Missing {
                    field: "dataMessage.groupInfo.groupId",
                })?,
            name: group.group_name.unwrap_or_default(),
        }),
        None => None,
    };
    let wire_mentions = data.mentions.unwrap_or_default();
    let text = written_text(data.message.as_deref().unwrap_or(""), &wire_mentions, own);
    let mentions = wire_mentions
        .into_iter()
        .map(|mention| SignalMention {
            number: mention.number.filter(|text| !text.is_empty()),
            uuid: mention.uuid.filter(|text| !text.is_empty()),
            start: mention.start,
            length: mention.length,
        })
        .collect();
    let quote = data.quote.map(|quote| SignalQuote {
        id: quote.id,
        author_number: quote.author_number.filter(|text| !text.is_empty()),
        author_uuid: quote.author_uuid.filter(|text| !text.is_empty()),
        text: quote.text.unwrap_or_default(),
    });
    let attachments = data
        .attachments
        .unwrap_or_default()
        .into_iter()
        .filter_map(attachment)
        .collect();
    Ok(Received::Message(Box::new(SignalInbound {
        account,
        source_number,
        source_uuid,
        source_name: envelope.source_name.unwrap_or_default(),
        timestamp,
        group,
        text,
        mentions,
        quote,
        attachments,
    })))
}

/// Why an envelope without a data message is not for the agent.
fn non_message_reason(envelope: &WireEnvelope, exception: Option<&WireError>) -> String {
    if let Some(error) = exception {
        return exception_text(error);
    }
    let what = if envelope.typing_message.is_some() {
        "a typing notice"
    } else if envelope.receipt_message.is_some() {
        "a receipt"
    } else if envelope.sync_message.is_some() {
        "a copy of a message sent from another of our devices"
    } else if envelope.edit_message.is_some() {
        "an edit of an earlier message"
    } else if envelope.call_message.is_some() {
        "a call"
    } else if envelope.story_message.is_some() {
        "a story"
    } else {
        "an envelope without a message"
    };
    what.to_string()
}

/// Data messages that are not something said to the agent: reactions, deletions, group updates.
fn not_for_the_agent(data: &WireDataMessage) -> Option<&'static str> {
    if data.reaction.is_some() {
        Some("a reaction")
    } else if data.remote_delete.is_some() {
        Some("a deletion of an earlier message")
    } else if data
        .group_info
        .as_ref()
        .is_some_and(|group| group.kind.as_deref() == Some("UPDATE"))
    {
        Some("a group update")
    } else {
        None
    }
}

fn exception_text(error: &WireError) -> String {
    format!(
        "a message signal-cli could not read ({}: {})",
        error.kind.as_deref().unwrap_or("error"),
        crate::secrets::redact(error.message.as_deref().unwrap_or("no detail"))
    )
}

/// An attachment signal-cli stored (one without an id was not downloaded and cannot be fetched).
fn attachment(wire: WireAttachment) -> Option<SignalAttachment> {
    let id = wire.id.filter(|id| !id.is_empty())?;
    let content_type = wire
        .content_type
        .filter(|text| !text.is_empty())
        .unwrap_or_else(|| "application/octet-stream".to_string());
    let file_name = wire.filename.filter(|name| !name.is_empty());
    let voice_note = content_type.to_ascii_lowercase().starts_with("audio/") && file_name.is_none();
    Some(SignalAttachment {
        id,
        content_type,
        file_name,
        size: wire.size.unwrap_or(0),
        caption: wire.caption.filter(|text| !text.is_empty()),
        voice_note,
    })
}

/// The text with each mention's placeholder replaced: ours removed, others as `@name`.
/// Mentions whose range is not inside the text are left out; the result is trimmed.
fn written_text(raw: &str, mentions: &[WireMention], own: &OwnAccount) -> String {
    if mentions.is_empty() {
        return raw.trim().to_string();
    }
    let units: Vec<u16> = raw.encode_utf16().collect();
    let mut ordered: Vec<&WireMention> = mentions.iter().collect();
    ordered.sort_by_key(|mention| mention.start);
    let mut out: Vec<u16> = Vec::with_capacity(units.len());
    let mut position = 0usize;
    for mention in ordered {
        let start = mention.start as usize;
        let end = start.saturating_add(mention.length as usize);
        if start < position || end > units.len() {
            continue;
        }
        out.extend_from_slice(&units[position..start]);
        let mut end = end;
        if own.is(mention.number.as_deref(), mention.uuid.as_deref()) {
            // "@us hello" reads "hello", "hi @us there" reads "hi there".
            let space_before = out.last().is_none_or(|unit| *unit == u16::from(b' '));
            if space_before && units.get(end) == Some(&u16::from(b' ')) {
                end += 1;
            }
        } else {
            let name = mention
                .name
                .as_deref()
                .or(mention.number.as_deref())
                .or(mention.uuid.as_deref())
                .unwrap_or("someone");
            out.extend(format!("@{name}").encode_utf16());
        }
        position = end;
    }
    out.extend_from_slice(&units[position.min(units.len())..]);
    String::from_utf16_lossy(&out).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us() -> OwnAccount {
        OwnAccount {
            number: "+4915100000000".into(),
            uuid: Some("aaaaaaaa-0000-0000-0000-000000000001".into()),
        }
    }

    fn message(data_message: serde_json::Value) -> String {
        serde_json::json!({
            "account": "+4915100000000",
            "envelope": {
                "source": "+4917200000001", "sourceNumber": "+4917200000001",
                "sourceUuid": "BBBBBBBB-0000-0000-0000-000000000002", "sourceName": "Ana",
                "sourceDevice": 1, "timestamp": 1700000000123_i64,
                "serverReceivedTimestamp": 1700000000200_i64, "serverDeliveredTimestamp": 1700000000300_i64,
                "dataMessage": data_message
            }
        })
        .to_string()
    }

    fn read(data: &str) -> SignalInbound {
        match parse_receive(data, &us()) {
            Ok(Received::Message(inbound)) => *inbound,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn a_direct_text_is_addressed_and_keyed_by_account_sender_and_timestamp() {
        let inbound = read(&message(serde_json::json!({
            "timestamp": 1700000000123_i64, "message": "hello", "expiresInSeconds": 0,
            "viewOnce": false
        })));
        assert_eq!(inbound.text, "hello");
        assert_eq!(inbound.source(), "+4917200000001");
        assert!(inbound.addressed_to(&us()));
        assert_eq!(
            inbound.dedupe_key(),
            "+4915100000000/bbbbbbbb-0000-0000-0000-000000000002/1700000000123"
        );
    }

    #[test]
    fn in_a_group_only_a_mention_a_reply_to_us_or_a_command_is_addressed() {
        let group = serde_json::json!({"groupId": "Z3JvdXA=", "groupName": "Home", "revision": 3, "type": "DELIVER"});
        let plain = read(&message(serde_json::json!({
            "timestamp": 1, "message": "dinner at 7", "groupInfo": group
        })));
        assert!(!plain.addressed_to(&us()));
        assert_eq!(
            plain.group.as_ref().map(|group| group.id.as_str()),
            Some("Z3JvdXA=")
        );

        let mentioned = read(&message(serde_json::json!({
            "timestamp": 1, "message": "\u{FFFC} what's for dinner, ask \u{FFFC}", "groupInfo": group,
            "mentions": [
                {"name": "+4915100000000", "number": "+4915100000000", "uuid": "aaaaaaaa-0000-0000-0000-000000000001", "start": 0, "length": 1},
                {"name": "Bo", "number": "+4917200000009", "uuid": "c", "start": 25, "length": 1}
            ]
        })));
        assert!(mentioned.addressed_to(&us()));
        assert_eq!(mentioned.text, "what's for dinner, ask @Bo");

        let reply = read(&message(serde_json::json!({
            "timestamp": 1, "message": "yes please", "groupInfo": group,
            "quote": {"id": 42, "author": "+4915100000000", "authorNumber": "+4915100000000",
                      "authorUuid": "aaaaaaaa-0000-0000-0000-000000000001", "text": "Tea?", "attachments": []}
        })));
        assert!(reply.addressed_to(&us()));
        assert_eq!(reply.quote.as_ref().map(|quote| quote.id), Some(42));

        let reply_to_someone_else = read(&message(serde_json::json!({
            "timestamp": 1, "message": "yes please", "groupInfo": group,
            "quote": {"id": 42, "authorNumber": "+4917200000009", "text": "Tea?"}
        })));
        assert!(!reply_to_someone_else.addressed_to(&us()));

        let command = read(&message(serde_json::json!({
            "timestamp": 1, "message": "/status", "groupInfo": group
        })));
        assert!(command.addressed_to(&us()));
    }

    #[test]
    fn a_voice_note_is_audio_without_a_file_name() {
        let inbound = read(&message(serde_json::json!({
            "timestamp": 1, "message": null,
            "attachments": [
                {"contentType": "audio/aac", "filename": null, "id": "v1.aac", "size": 5120},
                {"contentType": "audio/mpeg", "filename": "song.mp3", "id": "s1.mp3", "size": 9},
                {"contentType": "image/jpeg", "id": null, "size": 3}
            ]
        })));
        assert_eq!(
            inbound.attachments.len(),
            2,
            "the one without an id cannot be fetched"
        );
        assert!(inbound.attachments[0].voice_note);
        assert!(!inbound.attachments[1].voice_note);
        assert_eq!(inbound.text, "");
    }

    #[test]
    fn typing_receipts_and_sync_copies_are_ignored_with_a_reason() {
        for (key, value, expected) in [
            (
                "typingMessage",
                serde_json::json!({"action": "STARTED", "timestamp": 1}),
                "a typing notice",
            ),
            (
                "receiptMessage",
                serde_json::json!({"when": 1, "isDelivery": true, "isRead": false, "isViewed": false, "timestamps": [1]}),
                "a receipt",
            ),
            (
                "syncMessage",
                serde_json::json!({"sentMessage": {"message": "x"}}),
                "a copy of a message sent from another of our devices",
            ),
        ] {
            let data = serde_json::json!({"account": "+4915100000000", "envelope": {"sourceNumber": "+1", "timestamp": 5, key: value}});
            assert_eq!(
                parse_receive(&data.to_string(), &us()),
                Ok(Received::Ignored {
                    account: "+4915100000000".into(),
                    what: expected.into()
                })
            );
        }
    }

    #[test]
    fn a_wrong_shape_names_the_field() {
        let error = parse_receive(r#"{"envelope":{"timestamp":"soon"}}"#, &us()).expect_err("bad");
        assert!(error.to_string().contains("envelope.timestamp"), "{error}");
        let error = parse_receive(
            r#"{"envelope":{"timestamp":5,"dataMessage":{"message":"x"}}}"#,
            &us(),
        )
        .expect_err("no sender");
        assert!(error.to_string().contains("sourceNumber"), "{error}");
    }

    #[test]
    fn mentions_outside_the_text_are_left_alone() {
        let inbound = read(&message(serde_json::json!({
            "timestamp": 1, "message": "hi \u{FFFC}",
            "mentions": [{"number": "+1", "start": 3, "length": 1}, {"number": "+2", "start": 99, "length": 4000000000_u32}]
        })));
        assert_eq!(inbound.text, "hi @+1");
    }
}
