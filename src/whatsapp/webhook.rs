//! Meta's webhook for WhatsApp: the signature check over the raw body and the body read whole.
//!
//! `X-Hub-Signature-256: sha256=<hex>` is HMAC-SHA256 of the exact bytes received under the app
//! secret; it is checked (in constant time) before the body is parsed. [`parse`] reads every
//! message of every entry, or fails naming what is wrong — nothing is stored from a body it
//! refused. Statuses (sent/delivered/read of our messages) are accepted and not stored.

use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// The largest body accepted (Meta's deliveries are a few KiB; media come by reference).
pub const MAX_BODY: usize = 256 * 1024;

/// One inbound message of a delivery, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookMessage {
    pub phone_number_id: String,
    pub message_id: String,
    /// The sender's WhatsApp id (their number, digits).
    pub from: String,
    pub name: String,
    /// `text`, `button`, `voice`, `audio`, `image`, `document`, `other`.
    pub kind: &'static str,
    /// The message object as Meta sent it.
    pub payload: String,
    pub sent_ms: Option<i64>,
}

/// Whether `header` (the `X-Hub-Signature-256` value) signs `body` under `app_secret`.
pub fn signature_ok(app_secret: &[u8], body: &[u8], header: Option<&str>) -> bool {
    let Some(hex_digest) = header.and_then(|value| value.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Ok(expected) = hex::decode(hex_digest) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(app_secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// The signature header's value for `body` (the fake Graph API signs with it).
pub fn sign(app_secret: &[u8], body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let mut mac = Hmac::<Sha256>::new_from_slice(app_secret).expect("HMAC accepts any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

fn text_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(value, |value, key| value.get(key))?
        .as_str()
}

/// Reads a delivery whole: every message, or an error naming what is wrong (then nothing of it
/// may be stored).
pub fn parse(body: &[u8]) -> Result<Vec<WebhookMessage>, String> {
    let root: Value =
        serde_json::from_slice(body).map_err(|error| format!("the body is not JSON: {error}"))?;
    if root.get("object").and_then(Value::as_str) != Some("whatsapp_business_account") {
        return Err("`object` is not \"whatsapp_business_account\"".into());
    }
    let entries = root
        .get("entry")
        .and_then(Value::as_array)
        .ok_or("`entry` is missing or not a list")?;
    let mut messages = Vec::new();
    for (entry_index, entry) in entries.iter().enumerate() {
        let changes = entry
            .get("changes")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("`entry[{entry_index}].changes` is missing or not a list"))?;
        for (change_index, change) in changes.iter().enumerate() {
            let at = format!("entry[{entry_index}].changes[{change_index}]");
            if change.get("field").and_then(Value::as_str) != Some("messages") {
                continue;
            }
            let value = change
                .get("value")
                .ok_or_else(|| format!("`{at}.value` is missing"))?;
            read_change(value, &at, &mut messages)?;
        }
    }
    Ok(messages)
}

fn read_change(value: &Value, at: &str, messages: &mut Vec<WebhookMessage>) -> Result<(), String> {
    let phone_number_id = text_at(value, &["metadata", "phone_number_id"])
        .filter(|id| !id.is_empty())
        .ok_or_else(|| format!("`{at}.value.metadata.phone_number_id` is missing"))?;
    let Some(list) = value.get("messages") else {
        return Ok(());
    };
    let list = list
        .as_array()
        .ok_or_else(|| format!("`{at}.value.messages` is not a list"))?;
    for (index, message) in list.iter().enumerate() {
        let here = format!("{at}.value.messages[{index}]");
        let field = |name: &str| {
            text_at(message, &[name])
                .filter(|text| !text.is_empty() && text.len() <= 256)
                .ok_or_else(|| format!("`{here}.{name}` is missing or too long"))
        };
        let (message_id, from, kind) = (field("id")?, field("from")?, field("type")?);
        if !from.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("`{here}.from` is not a WhatsApp id (digits)"));
        }
        let name = value
            .get("contacts")
            .and_then(Value::as_array)
            .and_then(|contacts| {
                contacts
                    .iter()
                    .find(|contact| text_at(contact, &["wa_id"]) == Some(from))
            })
            .and_then(|contact| text_at(contact, &["profile", "name"]))
            .unwrap_or(from);
        let sent_ms = text_at(message, &["timestamp"])
            .and_then(|seconds| seconds.parse::<i64>().ok())
            .and_then(|seconds| seconds.checked_mul(1000));
        messages.push(WebhookMessage {
            phone_number_id: phone_number_id.to_string(),
            message_id: message_id.to_string(),
            from: from.to_string(),
            name: name.chars().take(128).collect(),
            kind: stored_kind(kind, message),
            payload: message.to_string(),
            sent_ms,
        });
    }
    Ok(())
}

/// The seam's kind of a message of WhatsApp type `kind`.
fn stored_kind(kind: &str, message: &Value) -> &'static str {
    match kind {
        "text" => "text",
        "interactive" | "button" => "button",
        "audio" if message["audio"]["voice"].as_bool() == Some(true) => "voice",
        "audio" => "audio",
        "image" => "image",
        "document" => "document",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_secret_signs_the_exact_body() {
        let body = br#"{"object":"whatsapp_business_account","entry":[]}"#;
        let header = sign(b"app-secret", body);
        assert!(signature_ok(b"app-secret", body, Some(&header)));
        assert!(!signature_ok(b"other", body, Some(&header)));
        assert!(!signature_ok(b"app-secret", b"{}", Some(&header)));
        assert!(!signature_ok(b"app-secret", body, None));
        assert!(!signature_ok(b"app-secret", body, Some("sha256=zz")));
    }

    #[test]
    fn a_body_is_read_whole_or_refused_naming_the_field() {
        let good = br#"{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"123"},"contacts":[{"wa_id":"4915","profile":{"name":"Olivia"}}],"messages":[{"id":"wamid.1","from":"4915","timestamp":"1700000000","type":"text","text":{"body":"hi"}}]}}]}]}"#;
        let messages = parse(good).expect("a good delivery parses");
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0].name, "Olivia");
        assert_eq!(messages[0].sent_ms, Some(1_700_000_000_000));
        let bad = br#"{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"123"},"messages":[{"id":"wamid.1","from":"4915","type":"text"},{"from":"4915","type":"text"}]}}]}]}"#;
        let error = parse(bad).expect_err("a message without an id refuses the body");
        assert!(error.contains("messages[1].id"), "{error}");
        assert!(parse(b"not json").is_err());
    }
}
