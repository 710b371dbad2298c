//! The OpenAI chat-completions wire format, spoken by OpenAI, Ollama (`/v1`), vLLM, LM Studio,
//! OpenRouter and the llama.cpp server.
//!
//! Only fields every one of those servers accepts are sent: `max_completion_tokens` goes to
//! api.openai.com only (its newer models reject `max_tokens`), `stream_options` only with
//! `stream: true`, `tools` only when there are tools. Answers are read leniently: missing usage
//! counts as zero, a missing tool-call id gets one, arguments sent as a JSON object (some local
//! servers do) become text.

use serde_json::{Map, Value, json};

use crate::llm::wire::{CallMode, StreamProgress, portable_call_id, token_count};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, LlmError, Role, ToolCall, Usage,
};

/// `POST {base_url}/chat/completions`; `base_url` ends in `/v1`.
pub(crate) fn endpoint(base_url: &str) -> String {
    format!("{}/chat/completions", base_url.trim_end_matches('/'))
}

pub(crate) fn request_body(base_url: &str, request: &ChatRequest, mode: CallMode) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = request.max_tokens {
        let field = if base_url.contains("api.openai.com") {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(field.into(), json!(max_tokens));
    }
    if mode == CallMode::Stream {
        body.insert("stream".into(), Value::Bool(true));
        body.insert("stream_options".into(), json!({ "include_usage": true }));
    }
    Value::Object(body)
}

fn messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut wire = Vec::with_capacity(messages.len());
    // Tool messages carry text only; images a tool returned follow the run of tool messages as
    // one user message (a tool message may not sit between an assistant's calls and the other
    // answers).
    let mut pending_tool_images = Vec::new();
    for message in messages {
        if message.role != Role::Tool && !pending_tool_images.is_empty() {
            wire.push(json!({
                "role": "user",
                "content": std::mem::take(&mut pending_tool_images),
            }));
        }
        match message.role {
            Role::System => wire.push(json!({ "role": "system", "content": message.content })),
            Role::User => wire.push(json!({ "role": "user", "content": user_content(message) })),
            Role::Assistant => {
                let mut entry = Map::new();
                entry.insert("role".into(), Value::String("assistant".into()));
                entry.insert("content".into(), Value::String(message.content.clone()));
                if !message.tool_calls.is_empty() {
                    let calls = message
                        .tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": portable_call_id(&call.id),
                                "type": "function",
                                "function": { "name": call.name, "arguments": call.arguments },
                            })
                        })
                        .collect();
                    entry.insert("tool_calls".into(), Value::Array(calls));
                }
                wire.push(Value::Object(entry));
            }
            Role::Tool => {
                wire.push(json!({
                    "role": "tool",
                    "tool_call_id": portable_call_id(message.tool_call_id.as_deref().unwrap_or("")),
                    "content": message.content,
                }));
                pending_tool_images.extend(message.images.iter().map(image_part));
            }
        }
    }
    if !pending_tool_images.is_empty() {
        wire.push(json!({ "role": "user", "content": pending_tool_images }));
    }
    wire
}

fn user_content(message: &ChatMessage) -> Value {
    if message.images.is_empty() {
        return Value::String(message.content.clone());
    }
    let mut parts = Vec::with_capacity(message.images.len() + 1);
    if !message.content.is_empty() {
        parts.push(json!({ "type": "text", "text": message.content }));
    }
    parts.extend(message.images.iter().map(image_part));
    Value::Array(parts)
}

fn image_part(image: &crate::llm::ImageInput) -> Value {
    json!({
        "type": "image_url",
        "image_url": { "url": format!("data:{};base64,{}", image.mime, image.base64) },
    })
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Some servers answer `finish_reason: "stop"` together with tool calls; the calls decide.
fn settle_finish(finish: FinishReason, tool_calls: &[ToolCall]) -> FinishReason {
    if !tool_calls.is_empty() && finish == FinishReason::Stop {
        return FinishReason::ToolCalls;
    }
    finish
}

fn usage(value: Option<&Value>) -> Usage {
    Usage {
        input_tokens: token_count(value.and_then(|usage| usage.get("prompt_tokens"))),
        output_tokens: token_count(value.and_then(|usage| usage.get("completion_tokens"))),
    }
}

/// Arguments as text: a string as is, anything else (an object from some local servers)
/// serialized.
fn arguments_text(arguments: Option<&Value>) -> String {
    match arguments {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Message content as text: a string, or the text parts of a list.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn fallback_call_id(index: usize) -> String {
    format!("call_{index}_{:016x}", rand::random::<u64>())
}

pub(crate) fn parse_response(
    provider: &str,
    body: &Value,
    requested_model: &str,
) -> Result<ChatResponse, LlmError> {
    let choice = body
        .get("choices")
        .and_then(|choices| choices.get(0))
        .ok_or_else(|| {
            LlmError::Malformed(format!(
                "provider `{provider}`: the answer has no `choices[0]` (is base_url an OpenAI-compatible /v1 endpoint?)"
            ))
        })?;
    let message = choice.get("message").unwrap_or(&Value::Null);
    let tool_calls: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(index, call)| ToolCall {
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .filter(|id| !id.is_empty())
                        .map(str::to_string)
                        .unwrap_or_else(|| fallback_call_id(index)),
                    name: call
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    arguments: arguments_text(call.pointer("/function/arguments")),
                })
                .collect()
        })
        .unwrap_or_default();
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(finish_reason)
        .unwrap_or(FinishReason::Stop);
    Ok(ChatResponse {
        text: content_text(message.get("content")),
        finish: settle_finish(finish, &tool_calls),
        tool_calls,
        usage: usage(body.get("usage")),
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested_model)
            .to_string(),
    })
}

/// A tool call being assembled from stream fragments.
#[derive(Debug, Default)]
struct PartialCall {
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed answer: text deltas, tool-call fragments by `index`, the finish reason,
/// the final usage chunk and `[DONE]`.
#[derive(Debug)]
pub(crate) struct StreamDecoder {
    text: String,
    calls: Vec<PartialCall>,
    finish: Option<FinishReason>,
    usage: Usage,
    model: String,
    done: bool,
}

impl StreamDecoder {
    pub(crate) fn new(requested_model: &str) -> StreamDecoder {
        StreamDecoder {
            text: String::new(),
            calls: Vec::new(),
            finish: None,
            usage: Usage::default(),
            model: requested_model.to_string(),
            done: false,
        }
    }

    pub(crate) fn on_data(
        &mut self,
        provider: &str,
        data: &str,
        emit: &mut dyn FnMut(&str),
    ) -> Result<StreamProgress, LlmError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(StreamProgress::Done);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            LlmError::BrokenStream(format!(
                "provider `{provider}`: a stream chunk is not JSON ({error})"
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(LlmError::BrokenStream(format!(
                "provider `{provider}`: the stream reported an error: {}",
                crate::llm::error::clean_text(&message)
            )));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str)
            && !model.is_empty()
        {
            model.clone_into(&mut self.model);
        }
        if let Some(usage_value) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = usage(Some(usage_value));
        }
        let Some(choice) = chunk.get("choices").and_then(|choices| choices.get(0)) else {
            return Ok(StreamProgress::Continue);
        };
        if let Some(delta) = choice.get("delta") {
            if let Some(text) = delta.get("content").and_then(Value::as_str)
                && !text.is_empty()
            {
                self.text.push_str(text);
                emit(text);
            }
            if let Some(fragments) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, fragment) in fragments.iter().enumerate() {
                    self.add_fragment(position, fragment);
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
        }
        Ok(StreamProgress::Continue)
    }

    fn add_fragment(&mut self, position: usize, fragment: &Value) {
        // Servers that omit `index` send each call whole, in order.
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or((self.calls.len() + position) as u64);
        let call = match self.calls.iter_mut().position(|call| call.index == index) {
            Some(found) => &mut self.calls[found],
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if let Some(id) = fragment.get("id").and_then(Value::as_str) {
            call.id.push_str(id);
        }
        if let Some(name) = fragment.pointer("/function/name").and_then(Value::as_str) {
            call.name.push_str(name);
        }
        match fragment.pointer("/function/arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            Some(other) => call.arguments.push_str(&other.to_string()),
        }
    }

    /// The stream ended (or `[DONE]` arrived). Complete only with `[DONE]` or a finish reason.
    pub(crate) fn finish(self, provider: &str) -> Result<ChatResponse, LlmError> {
        if !self.done && self.finish.is_none() {
            return Err(LlmError::BrokenStream(format!(
                "provider `{provider}`: the stream ended without a finish_reason or [DONE] (connection cut mid-answer)"
            )));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|call| call.index);
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| ToolCall {
                id: if call.id.is_empty() {
                    fallback_call_id(position)
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        let finish = self.finish.unwrap_or(FinishReason::Stop);
        Ok(ChatResponse {
            text: self.text,
            finish: settle_finish(finish, &tool_calls),
            tool_calls,
            usage: self.usage,
            model: self.model,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ImageInput, ToolSpec};

    #[test]
    fn requests_carry_tools_images_and_tool_turns_in_openai_shape() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "screenshot".into(),
            arguments: "{}".into(),
        };
        let mut user = ChatMessage::user("what is this?");
        user.images.push(ImageInput {
            mime: "image/png".into(),
            base64: "AAAA".into(),
        });
        let mut result = ChatMessage::tool_result(&call, "done");
        result.images.push(ImageInput {
            mime: "image/jpeg".into(),
            base64: "BBBB".into(),
        });
        let request = ChatRequest {
            model: "gpt-test".into(),
            messages: vec![
                ChatMessage::system("be brief"),
                user,
                ChatMessage::assistant_tool_calls("", vec![call.clone()]),
                result,
                ChatMessage::assistant("a cat"),
            ],
            tools: vec![ToolSpec {
                name: "screenshot".into(),
                description: "takes one".into(),
                parameters: json!({"type":"object"}),
            }],
            temperature: None,
            max_tokens: Some(100),
        };
        let body = request_body("http://127.0.0.1:1/v1", &request, CallMode::Stream);
        assert_eq!(body["max_tokens"], 100);
        assert!(body.get("temperature").is_none());
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert_eq!(body["tools"][0]["function"]["name"], "screenshot");
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 6);
        assert_eq!(
            messages[1]["content"][1]["image_url"]["url"],
            "data:image/png;base64,AAAA"
        );
        assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
        assert_eq!(messages[3]["role"], "tool");
        assert_eq!(messages[3]["tool_call_id"], "call_1");
        assert_eq!(messages[4]["role"], "user");
        assert_eq!(
            messages[4]["content"][0]["image_url"]["url"],
            "data:image/jpeg;base64,BBBB"
        );
        let openai = request_body("https://api.openai.com/v1", &request, CallMode::Complete);
        assert_eq!(openai["max_completion_tokens"], 100);
        assert!(openai.get("stream").is_none());
    }

    #[test]
    fn stream_fragments_assemble_into_tool_calls_by_index() {
        let mut decoder = StreamDecoder::new("m");
        let mut streamed = String::new();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"b","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"a","arguments":"{\"x\""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}},{"index":1,"function":{"arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}"#,
        ];
        for chunk in chunks {
            let progress = decoder
                .on_data("p", chunk, &mut |text| streamed.push_str(text))
                .unwrap();
            assert_eq!(progress, StreamProgress::Continue);
        }
        assert_eq!(
            decoder.on_data("p", "[DONE]", &mut |_| {}).unwrap(),
            StreamProgress::Done
        );
        let response = decoder.finish("p").unwrap();
        assert_eq!(streamed, "Hi");
        assert_eq!(response.finish, FinishReason::ToolCalls);
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 5
            }
        );
        let calls: Vec<_> = response
            .tool_calls
            .iter()
            .map(|call| {
                (
                    call.id.as_str(),
                    call.name.as_str(),
                    call.arguments.as_str(),
                )
            })
            .collect();
        assert_eq!(
            calls,
            vec![("call_a", "a", "{\"x\":1}"), ("call_b", "b", "{}")]
        );
    }

    #[test]
    fn a_stream_without_end_marker_is_broken() {
        let mut decoder = StreamDecoder::new("m");
        decoder
            .on_data(
                "p",
                r#"{"choices":[{"index":0,"delta":{"content":"half"}}]}"#,
                &mut |_| {},
            )
            .unwrap();
        assert!(matches!(
            decoder.finish("p"),
            Err(LlmError::BrokenStream(_))
        ));
    }
}
