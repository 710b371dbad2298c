//! Reading a chat-completions request the way the script's matchers and OpenAI's validation see
//! it: its messages, the last user text or tool result, and its approximate token counts.

use serde_json::Value;

use super::{Matcher, ScriptedToolCall};

/// The 400s OpenAI answers for a conversation that does not hold together.
pub(super) fn validate(request: &Value) -> Result<(), String> {
    if request.get("model").and_then(Value::as_str).is_none() {
        return Err("you must provide a model parameter".to_string());
    }
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Err("Missing required parameter: 'messages'.".to_string());
    };
    if messages.is_empty() {
        return Err(
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead."
                .to_string(),
        );
    }
    let mut unanswered: Vec<&str> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "tool" && !unanswered.is_empty() {
            return Err(unanswered_error(&unanswered));
        }
        match role {
            "system" | "developer" | "user" => {}
            "assistant" => {
                if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
                    unanswered = calls
                        .iter()
                        .filter_map(|call| call.get("id").and_then(Value::as_str))
                        .collect();
                }
            }
            "tool" => {
                let id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                match unanswered.iter().position(|pending| *pending == id) {
                    Some(found) => {
                        unanswered.remove(found);
                    }
                    None => {
                        return Err(format!(
                            "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'. (messages[{index}], tool_call_id `{id}`)"
                        ));
                    }
                }
            }
            other => {
                return Err(format!(
                    "Invalid value: '{other}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'. (messages[{index}].role)"
                ));
            }
        }
    }
    if !unanswered.is_empty() {
        return Err(unanswered_error(&unanswered));
    }
    Ok(())
}

pub(super) fn unanswered_error(unanswered: &[&str]) -> String {
    format!(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
        unanswered.join(", ")
    )
}

/// The text of a message's `content`: a string, or the text parts of a list.
pub(super) fn content_text(message: &Value) -> Option<std::borrow::Cow<'_, str>> {
    match message.get("content")? {
        Value::String(text) => Some(std::borrow::Cow::Borrowed(text)),
        Value::Array(parts) => Some(std::borrow::Cow::Owned(
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
        _ => None,
    }
}

pub(super) fn messages(request: &Value) -> &[Value] {
    request
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub(super) fn role(message: &Value) -> &str {
    message.get("role").and_then(Value::as_str).unwrap_or("")
}

pub(super) fn last_user_text(request: &Value) -> Option<String> {
    messages(request)
        .iter()
        .rev()
        .find(|message| role(message) == "user")
        .and_then(content_text)
        .map(|text| text.into_owned())
}

/// The tool a trailing tool message answers, found by its call id (or its `name`).
pub(super) fn last_tool_result_name(request: &Value) -> Option<&str> {
    let all = messages(request);
    let last = all.last()?;
    if role(last) != "tool" {
        return None;
    }
    if let Some(name) = last.get("name").and_then(Value::as_str) {
        return Some(name);
    }
    let id = last.get("tool_call_id").and_then(Value::as_str)?;
    all.iter()
        .rev()
        .filter(|message| role(message) == "assistant")
        .filter_map(|message| message.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .find(|call| call.get("id").and_then(Value::as_str) == Some(id))
        .and_then(|call| call.pointer("/function/name").and_then(Value::as_str))
}

pub(super) fn matches(matcher: &Matcher, request: &Value) -> bool {
    if let Some(model) = &matcher.model
        && request.get("model").and_then(Value::as_str) != Some(model.as_str())
    {
        return false;
    }
    if let Some(tool) = &matcher.tools_include {
        let offered = request
            .get("tools")
            .and_then(Value::as_array)
            .is_some_and(|tools| {
                tools.iter().any(|offered| {
                    offered.pointer("/function/name").and_then(Value::as_str) == Some(tool.as_str())
                })
            });
        if !offered {
            return false;
        }
    }
    if let Some(needle) = &matcher.last_user_contains {
        let found = messages(request)
            .iter()
            .rev()
            .find(|message| role(message) == "user")
            .and_then(content_text)
            .is_some_and(|text| text.contains(needle.as_str()));
        if !found {
            return false;
        }
    }
    if let Some(needle) = &matcher.system_contains {
        let found = messages(request).iter().any(|message| {
            matches!(role(message), "system" | "developer")
                && content_text(message).is_some_and(|text| text.contains(needle.as_str()))
        });
        if !found {
            return false;
        }
    }
    if let Some(needle) = &matcher.any_message_contains {
        let found = messages(request).iter().any(|message| {
            content_text(message).is_some_and(|text| text.contains(needle.as_str()))
        });
        if !found {
            return false;
        }
    }
    if let Some(tool) = &matcher.after_tool_result
        && last_tool_result_name(request) != Some(tool.as_str())
    {
        return false;
    }
    if let Some(needle) = &matcher.last_tool_result_contains {
        let found = messages(request)
            .iter()
            .rev()
            .take_while(|message| role(message) == "tool")
            .any(|message| {
                content_text(message).is_some_and(|text| text.contains(needle.as_str()))
            });
        if !found {
            return false;
        }
    }
    true
}

pub(super) fn prompt_chars(request: &Value) -> usize {
    messages(request)
        .iter()
        .map(|message| {
            let content = content_text(message).map_or(0, |text| text.chars().count());
            let arguments: usize = message
                .get("tool_calls")
                .and_then(Value::as_array)
                .map(|calls| {
                    calls
                        .iter()
                        .filter_map(|call| call.pointer("/function/arguments"))
                        .filter_map(Value::as_str)
                        .map(|arguments| arguments.chars().count())
                        .sum()
                })
                .unwrap_or(0);
            content + arguments
        })
        .sum()
}

pub(super) fn approximate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

pub(super) fn completion_tokens(text: &str, tool_calls: &[ScriptedToolCall]) -> u64 {
    let chars = text.chars().count()
        + tool_calls
            .iter()
            .map(|call| call.name.chars().count() + call.arguments.chars().count())
            .sum::<usize>();
    approximate_tokens(chars)
}
