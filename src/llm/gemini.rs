//! The Gemini generateContent wire format (`POST /v1beta/models/{model}:generateContent`, and
//! `:streamGenerateContent?alt=sse` for streams).
//!
//! The key goes in the `x-goog-api-key` header, never in the URL (URLs end up in error texts).
//! Mapping rules: the system prompt is `systemInstruction`; roles are `user` and `model`, merged
//! when consecutive; tool results are `functionResponse` parts of a user turn, whose `response`
//! must be an object (a result that is not a JSON object goes under `result`); tools are declared
//! with `parametersJsonSchema`, which takes our JSON Schemas as they are.
//!
//! Gemini has no tool-call ids. We make one per call (`gc_<random hex>`), and when the model
//! attached a thought signature to the call (Gemini 3 requires it back on the next request) the
//! id carries it after a `.`: `gc_<hex>.<signature>`. Ids are opaque to everyone else; results
//! are matched back to calls by name and order, which is how Gemini pairs them.

use serde_json::{Map, Value, json};

use crate::llm::wire::{
    CallMode, StreamProgress, arguments_as_object, push_merged, system_text, token_count,
    tool_name_of_result,
};
use crate::llm::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, ImageInput, LlmError, Role, ToolCall,
    Usage,
};

/// The URL for `model`, refusing names that would change the URL's meaning.
pub(crate) fn endpoint(
    provider: &str,
    base_url: &str,
    model: &str,
    mode: CallMode,
) -> Result<String, LlmError> {
    let model = model.strip_prefix("models/").unwrap_or(model);
    let acceptable = !model.is_empty()
        && model
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_' | b'@'));
    if !acceptable {
        return Err(LlmError::InvalidRequest(format!(
            "provider `{provider}`: `{}` is not a Gemini model name (letters, digits, `.`, `-`, `_` only)",
            crate::llm::error::clean_text(model)
        )));
    }
    let base = base_url.trim_end_matches('/');
    let versioned = if base.ends_with("/v1beta") || base.ends_with("/v1") {
        base.to_string()
    } else {
        format!("{base}/v1beta")
    };
    Ok(match mode {
        CallMode::Complete => format!("{versioned}/models/{model}:generateContent"),
        CallMode::Stream => format!("{versioned}/models/{model}:streamGenerateContent?alt=sse"),
    })
}

pub(crate) fn request_body(request: &ChatRequest) -> Value {
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(&request.messages)));
    let system = system_text(&request.messages);
    if !system.is_empty() {
        body.insert(
            "systemInstruction".into(),
            json!({ "parts": [{ "text": system }] }),
        );
    }
    if !request.tools.is_empty() {
        let declarations: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "parametersJsonSchema": tool.parameters,
                })
            })
            .collect();
        body.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
    }
    let mut generation = Map::new();
    if let Some(temperature) = request.temperature {
        generation.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = request.max_tokens {
        generation.insert("maxOutputTokens".into(), json!(max_tokens));
    }
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    Value::Object(body)
}

fn inline_data(image: &ImageInput) -> Value {
    json!({ "inlineData": { "mimeType": image.mime, "data": image.base64 } })
}

fn contents(messages: &[ChatMessage]) -> Vec<Value> {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len());
    for message in messages {
        match message.role {
            Role::System => {}
            Role::User => {
                let mut parts = Vec::with_capacity(1 + message.images.len());
                if !message.content.is_empty() {
                    parts.push(json!({ "text": message.content }));
                }
                parts.extend(message.images.iter().map(inline_data));
                push_merged(&mut wire, "user", "role", "parts", parts);
            }
            Role::Assistant => {
                let mut parts = Vec::with_capacity(1 + message.tool_calls.len());
                if !message.content.is_empty() {
                    parts.push(json!({ "text": message.content }));
                }
                for call in &message.tool_calls {
                    let mut part = Map::new();
                    part.insert(
                        "functionCall".into(),
                        json!({ "name": call.name, "args": arguments_as_object(&call.arguments) }),
                    );
                    if let Some((_, signature)) = call.id.split_once('.')
                        && call.id.starts_with("gc_")
                        && !signature.is_empty()
                    {
                        part.insert(
                            "thoughtSignature".into(),
                            Value::String(signature.to_string()),
                        );
                    }
                    parts.push(Value::Object(part));
                }
                push_merged(&mut wire, "model", "role", "parts", parts);
            }
            Role::Tool => {
                let response = match serde_json::from_str::<Value>(&message.content) {
                    Ok(Value::Object(object)) => Value::Object(object),
                    _ => json!({ "result": message.content }),
                };
                let mut parts = Vec::with_capacity(1 + message.images.len());
                parts.push(json!({
                    "functionResponse": {
                        "name": tool_name_of_result(messages, message),
                        "response": response,
                    }
                }));
                parts.extend(message.images.iter().map(inline_data));
                push_merged(&mut wire, "user", "role", "parts", parts);
            }
        }
    }
    wire
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            FinishReason::ContentFilter
        }
        other => FinishReason::Other(other.to_string()),
    }
}

fn usage(metadata: &Value) -> Usage {
    Usage {
        input_tokens: token_count(metadata.get("promptTokenCount"))
            + token_count(metadata.get("toolUsePromptTokenCount")),
        // Thinking tokens are billed as output.
        output_tokens: token_count(metadata.get("candidatesTokenCount"))
            + token_count(metadata.get("thoughtsTokenCount")),
    }
}

fn new_call_id(signature: Option<&str>) -> String {
    let random = rand::random::<u64>();
    match signature {
        Some(signature) if !signature.is_empty() => format!("gc_{random:016x}.{signature}"),
        _ => format!("gc_{random:016x}"),
    }
}

/// What one response (whole, or one stream chunk) contributes.
#[derive(Debug, Default)]
struct Accumulated {
    text: String,
    tool_calls: Vec<ToolCall>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    model: Option<String>,
}

impl Accumulated {
    /// Adds one GenerateContentResponse, emitting its new text.
    fn add(&mut self, response: &Value, emit: &mut dyn FnMut(&str)) {
        if let Some(metadata) = response.get("usageMetadata") {
            self.usage = Some(usage(metadata));
        }
        if let Some(model) = response.get("modelVersion").and_then(Value::as_str) {
            self.model = Some(model.to_string());
        }
        let Some(candidate) = response
            .get("candidates")
            .and_then(|candidates| candidates.get(0))
        else {
            if response.pointer("/promptFeedback/blockReason").is_some() {
                self.finish = Some(FinishReason::ContentFilter);
            }
            return;
        };
        if let Some(parts) = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array)
        {
            for part in parts {
                let is_thought = part.get("thought").and_then(Value::as_bool) == Some(true);
                if let Some(text) = part.get("text").and_then(Value::as_str)
                    && !is_thought
                    && !text.is_empty()
                {
                    self.text.push_str(text);
                    emit(text);
                }
                if let Some(call) = part.get("functionCall") {
                    let signature = part.get("thoughtSignature").and_then(Value::as_str);
                    self.tool_calls.push(ToolCall {
                        id: new_call_id(signature),
                        name: call
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        arguments: call
                            .get("args")
                            .map(Value::to_string)
                            .unwrap_or_else(|| "{}".to_string()),
                    });
                }
            }
        }
        if let Some(reason) = candidate.get("finishReason").and_then(Value::as_str) {
            self.finish = Some(finish_reason(reason));
        }
    }

    fn into_response(self, requested_model: &str) -> ChatResponse {
        let mut finish = self.finish.unwrap_or(FinishReason::Stop);
        // Gemini says STOP when it calls functions.
        if !self.tool_calls.is_empty() && finish == FinishReason::Stop {
            finish = FinishReason::ToolCalls;
        }
        ChatResponse {
            text: self.text,
            tool_calls: self.tool_calls,
            finish,
            usage: self.usage.unwrap_or_default(),
            model: self.model.unwrap_or_else(|| requested_model.to_string()),
        }
    }
}

pub(crate) fn parse_response(
    provider: &str,
    body: &Value,
    requested_model: &str,
) -> Result<ChatResponse, LlmError> {
    let has_candidates = body.get("candidates").and_then(Value::as_array).is_some();
    let blocked = body.pointer("/promptFeedback/blockReason").is_some();
    if !has_candidates && !blocked {
        return Err(LlmError::Malformed(format!(
            "provider `{provider}`: the answer has no `candidates` (is base_url the Gemini API?)"
        )));
    }
    let mut accumulated = Accumulated::default();
    accumulated.add(body, &mut |_| {});
    Ok(accumulated.into_response(requested_model))
}

/// Assembles a streamed answer: every `data:` event is a whole GenerateContentResponse carrying
/// the next piece; the last one has `finishReason` and `usageMetadata`; the stream then ends.
#[derive(Debug)]
pub(crate) struct StreamDecoder {
    accumulated: Accumulated,
    requested_model: String,
}

impl StreamDecoder {
    pub(crate) fn new(requested_model: &str) -> StreamDecoder {
        StreamDecoder {
            accumulated: Accumulated::default(),
            requested_model: requested_model.to_string(),
        }
    }

    pub(crate) fn on_data(
        &mut self,
        provider: &str,
        data: &str,
        emit: &mut dyn FnMut(&str),
    ) -> Result<StreamProgress, LlmError> {
        let chunk: Value = serde_json::from_str(data).map_err(|error| {
            LlmError::BrokenStream(format!(
                "provider `{provider}`: a stream chunk is not JSON ({error})"
            ))
        })?;
        if let Some(error) = chunk.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(LlmError::BrokenStream(format!(
                "provider `{provider}`: the stream reported an error: {}",
                crate::llm::error::clean_text(message)
            )));
        }
        self.accumulated.add(&chunk, emit);
        Ok(StreamProgress::Continue)
    }

    /// The stream ended. Complete only when a chunk carried a finish reason.
    pub(crate) fn finish(self, provider: &str) -> Result<ChatResponse, LlmError> {
        if self.accumulated.finish.is_none() {
            return Err(LlmError::BrokenStream(format!(
                "provider `{provider}`: the stream ended without a finishReason (connection cut mid-answer)"
            )));
        }
        Ok(self.accumulated.into_response(&self.requested_model))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_that_would_change_the_url_are_refused() {
        assert_eq!(
            endpoint(
                "g",
                "https://generativelanguage.googleapis.com/",
                "models/gemini-2.5-flash",
                CallMode::Stream
            )
            .unwrap(),
            "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert!(matches!(
            endpoint("g", "http://x", "../admin?key=1", CallMode::Complete),
            Err(LlmError::InvalidRequest(_))
        ));
    }

    #[test]
    fn thought_signatures_travel_in_the_call_id_and_come_back() {
        let body = json!({
            "candidates": [{
                "content": { "role": "model", "parts": [
                    { "functionCall": { "name": "lookup", "args": { "q": "x" } }, "thoughtSignature": "c2ln" }
                ]},
                "finishReason": "STOP"
            }],
            "usageMetadata": { "promptTokenCount": 10, "candidatesTokenCount": 3, "thoughtsTokenCount": 2 }
        });
        let response = parse_response("g", &body, "gemini-test").unwrap();
        assert_eq!(response.finish, FinishReason::ToolCalls);
        assert_eq!(response.usage.output_tokens, 5);
        let call = response.tool_calls[0].clone();
        assert!(call.id.starts_with("gc_") && call.id.ends_with(".c2ln"));
        let request = ChatRequest {
            model: "gemini-test".into(),
            messages: vec![
                ChatMessage::user("find x"),
                ChatMessage::assistant_tool_calls("", vec![call.clone()]),
                ChatMessage::tool_result(&call, "not json"),
            ],
            tools: Vec::new(),
            temperature: None,
            max_tokens: None,
        };
        let wire = request_body(&request);
        assert_eq!(wire["contents"][1]["parts"][0]["thoughtSignature"], "c2ln");
        assert_eq!(
            wire["contents"][2]["parts"][0]["functionResponse"],
            json!({ "name": "lookup", "response": { "result": "not json" } })
        );
    }
}
