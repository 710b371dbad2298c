//! The Anthropic Messages wire format (`POST /v1/messages`).
//!
//! Mapping rules the API imposes: the system prompt is a top-level field, not a message; roles
//! alternate user/assistant, so consecutive same-role messages are merged (tool results are user
//! content and merge with the user turn around them, results first); `max_tokens` is required
//! (4096 when the request leaves it open); text blocks must not be empty, so empty text is left
//! out; tool inputs are JSON objects.

use serde_json::{Map, Value, json};

use crate::llm::wire::{
    CallMode, StreamProgress, arguments_as_object, portable_call_id, push_merged, system_text,
    token_count,
};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ImageInput, LlmError, Role, ToolCall,
    Usage,
};

/// The API version every request names.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request does not set it.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 4096;

/// `POST {base_url}/v1/messages` (a base URL already ending in `/v1` is accepted too).
pub(crate) fn endpoint(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        format!("{base}/messages")
    } else {
        format!("{base}/v1/messages")
    }
}

pub(crate) fn request_body(request: &ChatRequest, mode: CallMode) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    body.insert(
        "max_tokens".into(),
        json!(request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let system = system_text(&request.messages);
    if !system.is_empty() {
        body.insert("system".into(), Value::String(system));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if mode == CallMode::Stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    Value::Object(body)
}

fn image_block(image: &ImageInput) -> Value {
    json!({
        "type": "image",
        "source": { "type": "base64", "media_type": image.mime, "data": image.base64 },
    })
}

fn messages(messages: &[ChatMessage]) -> Vec<Value> {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::System => {}
            Role::User => {
                let mut blocks = Vec::with_capacity(1 + message.images.len());
                if !message.content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": message.content }));
                }
                blocks.extend(message.images.iter().map(image_block));
                push_merged(&mut wire, "user", "role", "content", blocks);
            }
            Role::Assistant => {
                let mut blocks = Vec::with_capacity(1 + message.tool_calls.len());
                if !message.content.is_empty() {
                    blocks.push(json!({ "type": "text", "text": message.content }));
                }
                blocks.extend(message.tool_calls.iter().map(|call| {
                    json!({
                        "type": "tool_use",
                        "id": portable_call_id(&call.id),
                        "name": call.name,
                        "input": arguments_as_object(&call.arguments),
                    })
                }));
                push_merged(&mut wire, "assistant", "role", "content", blocks);
            }
            Role::Tool => {
                let mut block = Map::new();
                block.insert("type".into(), Value::String("tool_result".into()));
                block.insert(
                    "tool_use_id".into(),
                    Value::String(portable_call_id(
                        message.tool_call_id.as_deref().unwrap_or(""),
                    )),
                );
                if message.images.is_empty() {
                    if !message.content.is_empty() {
                        block.insert("content".into(), Value::String(message.content.clone()));
                    }
                } else {
                    let mut content = Vec::with_capacity(1 + message.images.len());
                    if !message.content.is_empty() {
                        content.push(json!({ "type": "text", "text": message.content }));
                    }
                    content.extend(message.images.iter().map(image_block));
                    block.insert("content".into(), Value::Array(content));
                }
                push_merged(
                    &mut wire,
                    "user",
                    "role",
                    "content",
                    vec![Value::Object(block)],
                );
            }
        }
    }
    wire
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// Input tokens: the uncached part plus cache writes and reads (all of it is the prompt).
fn input_tokens(usage: &Value) -> u64 {
    token_count(usage.get("input_tokens"))
        + token_count(usage.get("cache_creation_input_tokens"))
        + token_count(usage.get("cache_read_input_tokens"))
}

pub(crate) fn parse_response(
    provider: &str,
    body: &Value,
    requested_model: &str,
) -> Result<ChatResponse, LlmError> {
    let content = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            LlmError::Malformed(format!(
                "provider `{provider}`: the answer has no `content` list (is base_url the Anthropic API?)"
            ))
        })?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                name: block
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: block
                    .get("input")
                    .map(Value::to_string)
                    .unwrap_or_else(|| "{}".to_string()),
            }),
            // Thinking blocks and future block types are not part of the answer.
            _ => {}
        }
    }
    let usage = body.get("usage").unwrap_or(&Value::Null);
    Ok(ChatResponse {
        text,
        tool_calls,
        finish: body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason)
            .unwrap_or(FinishReason::Stop),
        usage: Usage {
            input_tokens: input_tokens(usage),
            output_tokens: token_count(usage.get("output_tokens")),
        },
        model: body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested_model)
            .to_string(),
    })
}

/// One content block being streamed.
#[derive(Debug)]
enum StreamBlock {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// The `input` of `content_block_start` (normally `{}`), used when no delta follows.
        initial_input: String,
        partial_json: String,
    },
    Other,
}

/// Assembles a streamed answer from `message_start`, `content_block_*`, `message_delta` and
/// `message_stop` events; `ping` is ignored and `error` breaks the stream.
#[derive(Debug)]
pub(crate) struct StreamDecoder {
    text: String,
    blocks: Vec<(u64, StreamBlock)>,
    finish: Option<FinishReason>,
    usage: Usage,
    model: String,
    stopped: bool,
}

impl StreamDecoder {
    pub(crate) fn new(requested_model: &str) -> StreamDecoder {
        StreamDecoder {
            text: String::new(),
            blocks: Vec::new(),
            finish: None,
            usage: Usage::default(),
            model: requested_model.to_string(),
            stopped: false,
        }
    }

    pub(crate) fn on_data(
        &mut self,
        provider: &str,
        data: &str,
        emit: &mut dyn FnMut(&str),
    ) -> Result<StreamProgress, LlmError> {
        let event: Value = serde_json::from_str(data).map_err(|error| {
            LlmError::BrokenStream(format!(
                "provider `{provider}`: a stream event is not JSON ({error})"
            ))
        })?;
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => self.on_message_start(&event),
            "content_block_start" => self.on_block_start(&event, emit),
            "content_block_delta" => self.on_block_delta(&event, emit),
            "message_delta" => self.on_message_delta(&event),
            "message_stop" => {
                self.stopped = true;
                return Ok(StreamProgress::Done);
            }
            "error" => return Err(stream_error(provider, &event)),
            // `ping`, `content_block_stop` and event types added later.
            _ => {}
        }
        Ok(StreamProgress::Continue)
    }

    /// `message_start`: the model that answers and the usage so far.
    fn on_message_start(&mut self, event: &Value) {
        let message = event.get("message").unwrap_or(&Value::Null);
        if let Some(model) = message.get("model").and_then(Value::as_str) {
            model.clone_into(&mut self.model);
        }
        if let Some(usage) = message.get("usage") {
            self.usage.input_tokens = input_tokens(usage);
            self.usage.output_tokens = token_count(usage.get("output_tokens"));
        }
    }

    /// `content_block_start`: a new text, tool-use or other block at its index.
    fn on_block_start(&mut self, event: &Value, emit: &mut dyn FnMut(&str)) {
        let index = token_count(event.get("index"));
        let block = event.get("content_block").unwrap_or(&Value::Null);
        let stream_block = match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                // The start block normally carries empty text, but take what it has.
                self.push_text(block.get("text"), emit);
                StreamBlock::Text
            }
            Some("tool_use") => tool_use_block(block),
            _ => StreamBlock::Other,
        };
        self.blocks.push((index, stream_block));
    }

    /// `content_block_delta`: more text, or more of a tool call's input JSON.
    fn on_block_delta(&mut self, event: &Value, emit: &mut dyn FnMut(&str)) {
        let index = token_count(event.get("index"));
        let delta = event.get("delta").unwrap_or(&Value::Null);
        match delta.get("type").and_then(Value::as_str) {
            Some("text_delta") => self.push_text(delta.get("text"), emit),
            Some("input_json_delta") => {
                let piece = delta
                    .get("partial_json")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if let Some((_, StreamBlock::ToolUse { partial_json, .. })) = self
                    .blocks
                    .iter_mut()
                    .find(|(block_index, _)| *block_index == index)
                {
                    partial_json.push_str(piece);
                }
            }
            // Thinking and signature deltas are not part of the answer.
            _ => {}
        }
    }

    /// `message_delta`: why the answer stopped, and the final usage.
    fn on_message_delta(&mut self, event: &Value) {
        if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
        }
        if let Some(usage) = event.get("usage") {
            if let Some(output) = usage.get("output_tokens").and_then(Value::as_u64) {
                self.usage.output_tokens = output;
            }
            if usage.get("input_tokens").and_then(Value::as_u64).is_some() {
                self.usage.input_tokens = input_tokens(usage);
            }
        }
    }

    /// Adds `text` (when it is a non-empty string) to the answer and emits it.
    fn push_text(&mut self, text: Option<&Value>, emit: &mut dyn FnMut(&str)) {
        if let Some(text) = text.and_then(Value::as_str)
            && !text.is_empty()
        {
            self.text.push_str(text);
            emit(text);
        }
    }

    /// The stream ended. Complete only after `message_stop`.
    pub(crate) fn finish(self, provider: &str) -> Result<ChatResponse, LlmError> {
        if !self.stopped {
            return Err(LlmError::BrokenStream(format!(
                "provider `{provider}`: the stream ended before message_stop (connection cut mid-answer)"
            )));
        }
        let mut blocks = self.blocks;
        blocks.sort_by_key(|(index, _)| *index);
        let tool_calls = blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                StreamBlock::ToolUse {
                    id,
                    name,
                    initial_input,
                    partial_json,
                } => Some(ToolCall {
                    id,
                    name,
                    arguments: if !partial_json.is_empty() {
                        partial_json
                    } else if !initial_input.is_empty() {
                        initial_input
                    } else {
                        "{}".to_string()
                    },
                }),
                StreamBlock::Text | StreamBlock::Other => None,
            })
            .collect();
        Ok(ChatResponse {
            text: self.text,
            tool_calls,
            finish: self.finish.unwrap_or(FinishReason::Stop),
            usage: self.usage,
            model: self.model,
        })
    }
}

/// A `tool_use` block as `content_block_start` opens it.
fn tool_use_block(block: &Value) -> StreamBlock {
    StreamBlock::ToolUse {
        id: block
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        name: block
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        initial_input: block.get("input").map(Value::to_string).unwrap_or_default(),
        partial_json: String::new(),
    }
}

/// The stream's `error` event as the error that breaks it.
fn stream_error(provider: &str, event: &Value) -> LlmError {
    let message = event
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error");
    LlmError::BrokenStream(format!(
        "provider `{provider}`: the stream reported an error: {}",
        crate::llm::error::clean_text(message)
    ))
}
