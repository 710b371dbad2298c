//! Helpers shared by the three wire formats: call modes, tool-call ids that every provider
//! accepts, and tool arguments as JSON objects.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::llm::{ChatMessage, Role};

/// Whether a call streams its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallMode {
    Complete,
    Stream,
}

/// What a stream decoder wants after an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamProgress {
    /// Keep reading.
    Continue,
    /// The end marker arrived: the answer is complete, stop reading.
    Done,
}

/// A tool-call id as OpenAI (at most 40 characters) and Anthropic (`^[a-zA-Z0-9_-]+$`) accept
/// it. Ids made by another provider (a Gemini id carries its thought signature, see gemini.rs)
/// are replaced by a digest, the same for the assistant's call and the tool's answer, so a
/// conversation can move between providers in a fallback chain.
pub(crate) fn portable_call_id(id: &str) -> String {
    let acceptable = !id.is_empty()
        && id.len() <= 40
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-');
    if acceptable {
        return id.to_string();
    }
    let digest = Sha256::digest(id.as_bytes());
    format!("call_{}", &hex::encode(digest)[..32])
}

/// Tool arguments as the JSON object Anthropic (`input`) and Gemini (`args`) require. Arguments
/// that are not a JSON object (the model produced malformed JSON earlier in the conversation)
/// are kept as text under `invalid_json`, so the model can see what it sent.
pub(crate) fn arguments_as_object(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => serde_json::json!({ "invalid_json": arguments }),
    }
}

/// The tool name a tool-result message answers: its own `name`, or else the name of the call
/// with its id in an earlier assistant message.
pub(crate) fn tool_name_of_result(messages: &[ChatMessage], result: &ChatMessage) -> String {
    if let Some(name) = result.name.as_deref().filter(|name| !name.is_empty()) {
        return name.to_string();
    }
    let Some(id) = result.tool_call_id.as_deref() else {
        return "tool".to_string();
    };
    messages
        .iter()
        .filter(|message| message.role == Role::Assistant)
        .flat_map(|message| message.tool_calls.iter())
        .find(|call| call.id == id)
        .map(|call| call.name.clone())
        .unwrap_or_else(|| "tool".to_string())
}

/// All system messages joined, in order.
pub(crate) fn system_text(messages: &[ChatMessage]) -> String {
    messages
        .iter()
        .filter(|message| message.role == Role::System && !message.content.is_empty())
        .map(|message| message.content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A number from a JSON field, 0 when absent or not a number.
pub(crate) fn token_count(value: Option<&Value>) -> u64 {
    value.and_then(Value::as_u64).unwrap_or(0)
}

/// Appends `block` to the content list of the last message when it has the same role, else
/// starts a new message. Anthropic and Gemini require alternating roles.
pub(crate) fn push_merged(
    messages: &mut Vec<Value>,
    role: &str,
    role_key: &str,
    content_key: &str,
    mut blocks: Vec<Value>,
) {
    if blocks.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut()
        && last.get(role_key).and_then(Value::as_str) == Some(role)
        && let Some(Value::Array(content)) = last.get_mut(content_key)
    {
        content.append(&mut blocks);
        return;
    }
    let mut message = Map::new();
    message.insert(role_key.to_string(), Value::String(role.to_string()));
    message.insert(content_key.to_string(), Value::Array(blocks));
    messages.push(Value::Object(message));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn foreign_call_ids_become_portable_and_stable() {
        assert_eq!(portable_call_id("call_abc-123"), "call_abc-123");
        let gemini = "gc_0123456789abcdef.c2lnbmF0dXJl+/==";
        let portable = portable_call_id(gemini);
        assert_eq!(portable, portable_call_id(gemini));
        assert!(portable.len() <= 40);
        assert!(portable.starts_with("call_"));
        assert_ne!(portable, portable_call_id("another"));
    }

    #[test]
    fn arguments_that_are_not_an_object_are_kept_as_text() {
        assert_eq!(
            arguments_as_object(r#"{"city":"Paris"}"#),
            serde_json::json!({"city":"Paris"})
        );
        assert_eq!(arguments_as_object(""), serde_json::json!({}));
        assert_eq!(
            arguments_as_object("{city: Paris"),
            serde_json::json!({"invalid_json": "{city: Paris"})
        );
    }
}
