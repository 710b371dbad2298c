//! LLM providers against servers that speak the real protocols over loopback HTTP: the scripted
//! OpenAI-compatible server from `clawvisor::testkit`, and small Anthropic Messages and Gemini
//! generateContent fakes written here. The fakes check each request the way the real APIs do
//! (headers, roles, system placement, tool declarations, call/result pairing) and answer in the
//! exact shapes the real APIs send, streamed and not.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use clawvisor::config::{Config, Dur, PriceConfig, ProviderConfig, ProviderKind};
use clawvisor::llm::{
    ChatMessage, ChatRequest, ChatResponse, FinishReason, LlmError, ModelRef, Provider, Providers,
    StreamDelta, TimeoutKind, ToolCall, ToolSpec, Usage, chat_with_fallback, cost_usd,
};
use clawvisor::secrets::Secret;
use clawvisor::testkit::scripted_llm::{Rule, Script, ScriptedLlm};

const ANTHROPIC_KEY: &str = "sk-ant-test-key-0123456789";
const GEMINI_KEY: &str = "AIza-test-gemini-key-0123456789";

fn config(kind: ProviderKind, base_url: &str, api_key_env: &str) -> ProviderConfig {
    ProviderConfig {
        kind,
        base_url: base_url.to_string(),
        api_key_env: api_key_env.to_string(),
        timeout: Dur::secs(5),
        max_retries: 2,
        embeddings_model: String::new(),
        transcription_model: String::new(),
        speech_model: String::new(),
        speech_voice: String::new(),
        free: false,
    }
}

/// An OpenAI-compatible provider on the scripted server, with millisecond backoffs.
fn openai_provider(name: &str, server: &ScriptedLlm) -> Provider {
    Provider::from_config(name, &config(ProviderKind::Openai, &server.base_url(), ""))
        .with_retry_base(Duration::from_millis(5))
}

fn request(model: &str, user_text: &str) -> ChatRequest {
    ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system("You are terse."),
            ChatMessage::user(user_text),
        ],
        tools: Vec::new(),
        temperature: None,
        max_tokens: None,
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "get_weather".into(),
        description: "Current weather for a city".into(),
        parameters: json!({
            "type": "object",
            "properties": { "city": { "type": "string" } },
            "required": ["city"],
            "additionalProperties": false,
        }),
    }
}

fn drain(receiver: &mut UnboundedReceiver<StreamDelta>) -> Vec<StreamDelta> {
    let mut deltas = Vec::new();
    while let Ok(delta) = receiver.try_recv() {
        deltas.push(delta);
    }
    deltas
}

/// The text a streaming consumer ends up showing: pieces since the last Reset.
fn shown_text(deltas: &[StreamDelta]) -> String {
    let mut shown = String::new();
    for delta in deltas {
        match delta {
            StreamDelta::Text(text) => shown.push_str(text),
            StreamDelta::Reset => shown.clear(),
        }
    }
    shown
}

fn tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}

// ---------------------------------------------------------------------------------------------
// OpenAI-compatible, through the scripted server
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn openai_plain_answer_reports_text_usage_and_sends_the_key() {
    let server = ScriptedLlm::start(Script::new().rule(Rule::text("Hello there.")))
        .await
        .unwrap();
    server.require_api_key("sk-openai-plain-key-123");
    let provider =
        openai_provider("openai", &server).with_key(Secret::new("sk-openai-plain-key-123"));

    let response = provider
        .chat(&request("gpt-test", "hi"), None)
        .await
        .unwrap();

    assert_eq!(response.text, "Hello there.");
    assert_eq!(response.finish, FinishReason::Stop);
    assert!(response.tool_calls.is_empty());
    assert_eq!(response.model, "gpt-test");
    let prompt_chars = "You are terse.".len() + "hi".len();
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: tokens(prompt_chars),
            output_tokens: tokens("Hello there.".len()),
        }
    );
    let sent = server.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["model"], "gpt-test");
    assert_eq!(
        sent[0]["messages"][0],
        json!({"role":"system","content":"You are terse."})
    );
    assert_eq!(
        sent[0]["messages"][1],
        json!({"role":"user","content":"hi"})
    );
    assert!(sent[0].get("stream").is_none());
    assert!(sent[0].get("tools").is_none());
}

#[tokio::test]
async fn openai_streamed_answer_arrives_in_pieces_before_the_end() {
    let answer = "The quick brown fox jumps over the lazy dog.";
    let server = ScriptedLlm::start(
        Script::new().rule(Rule::text(answer).chunk_delay(Duration::from_millis(25))),
    )
    .await
    .unwrap();
    let provider = Arc::new(openai_provider("openai", &server));
    let (sender, mut receiver) = unbounded_channel();
    let call = tokio::spawn({
        let provider = provider.clone();
        async move {
            provider
                .chat(&request("gpt-test", "fox?"), Some(&sender))
                .await
        }
    });

    let first = receiver.recv().await.unwrap();
    assert!(
        !call.is_finished(),
        "the first piece must arrive while the answer is still streaming"
    );
    let response = call.await.unwrap().unwrap();
    let mut deltas = vec![first];
    deltas.extend(drain(&mut receiver));

    assert!(deltas.len() > 3, "{deltas:?}");
    assert!(!deltas.contains(&StreamDelta::Reset));
    assert_eq!(shown_text(&deltas), answer);
    assert_eq!(response.text, answer);
    assert_eq!(response.finish, FinishReason::Stop);
    assert_eq!(response.usage.output_tokens, tokens(answer.len()));
    let sent = server.requests();
    assert_eq!(sent[0]["stream"], true);
    assert_eq!(sent[0]["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn openai_single_and_parallel_tool_calls_streamed_and_not() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(
                Rule::tool_call("get_weather", r#"{"city":"Paris"}"#)
                    .when_last_user_contains("one")
                    .when_tools_include("get_weather"),
            )
            .rule(
                Rule::tool_calls([
                    ("get_weather", r#"{"city":"Paris"}"#),
                    (
                        "get_weather",
                        r#"{"city":"Tokyo","units":"metric and a long tail"}"#,
                    ),
                    ("get_time", "{}"),
                ])
                .with_text("Checking three things.")
                .when_last_user_contains("three"),
            ),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server);
    let mut one = request("gpt-test", "one city please");
    one.tools = vec![weather_tool()];
    let mut three = request("gpt-test", "three things please");
    three.tools = vec![weather_tool()];

    for streaming in [false, true] {
        let (sender, _receiver) = unbounded_channel();
        let stream = streaming.then_some(&sender);

        let single = provider.chat(&one, stream).await.unwrap();
        assert_eq!(
            single.finish,
            FinishReason::ToolCalls,
            "streaming {streaming}"
        );
        assert_eq!(single.text, "");
        assert_eq!(single.tool_calls.len(), 1);
        assert_eq!(single.tool_calls[0].name, "get_weather");
        assert_eq!(single.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
        assert!(!single.tool_calls[0].id.is_empty());

        let parallel = provider.chat(&three, stream).await.unwrap();
        assert_eq!(parallel.finish, FinishReason::ToolCalls);
        assert_eq!(parallel.text, "Checking three things.");
        let calls: Vec<(&str, &str)> = parallel
            .tool_calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("get_weather", r#"{"city":"Paris"}"#),
                (
                    "get_weather",
                    r#"{"city":"Tokyo","units":"metric and a long tail"}"#
                ),
                ("get_time", "{}"),
            ]
        );
        let ids: std::collections::BTreeSet<&str> = parallel
            .tool_calls
            .iter()
            .map(|call| call.id.as_str())
            .collect();
        assert_eq!(ids.len(), 3, "call ids must be distinct");
    }
    let sent = server.requests();
    assert_eq!(sent[0]["tools"][0]["type"], "function");
    assert_eq!(sent[0]["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        sent[0]["tools"][0]["function"]["parameters"]["required"],
        json!(["city"])
    );
}

#[tokio::test]
async fn openai_tool_error_turn_is_sent_as_a_tool_message_answering_the_call() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(
                Rule::text("The weather service is down; try again later.")
                    .when_after_tool_result("get_weather"),
            )
            .rule(Rule::tool_call("get_weather", r#"{"city":"Paris"}"#)),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server);
    let mut conversation = request("gpt-test", "weather in Paris?");
    conversation.tools = vec![weather_tool()];

    let first = provider.chat(&conversation, None).await.unwrap();
    let call = first.tool_calls[0].clone();
    conversation
        .messages
        .push(ChatMessage::assistant_tool_calls(
            first.text,
            first.tool_calls,
        ));
    conversation.messages.push(ChatMessage::tool_result(
        &call,
        "error: upstream weather API returned 503",
    ));
    let second = provider.chat(&conversation, None).await.unwrap();

    assert_eq!(second.text, "The weather service is down; try again later.");
    let sent = server.requests();
    let messages = sent[1]["messages"].as_array().unwrap();
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["tool_calls"][0]["id"], call.id.as_str());
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Paris"}"#
    );
    assert_eq!(
        messages[3],
        json!({
            "role": "tool",
            "tool_call_id": call.id,
            "content": "error: upstream weather API returned 503",
        })
    );
}

#[tokio::test]
async fn openai_a_conversation_with_an_unanswered_call_is_refused_like_openai_does() {
    let server = ScriptedLlm::start(Script::new()).await.unwrap();
    let provider = openai_provider("openai", &server);
    let call = ToolCall {
        id: "call_1".into(),
        name: "get_weather".into(),
        arguments: "{}".into(),
    };
    let mut conversation = request("gpt-test", "hi");
    conversation
        .messages
        .push(ChatMessage::assistant_tool_calls("", vec![call]));
    conversation.messages.push(ChatMessage::user("and?"));

    let error = provider.chat(&conversation, None).await.unwrap_err();

    assert!(
        matches!(error, LlmError::Http { status: 400, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("call_1"), "{error}");
    assert!(!error.is_retryable());
    assert_eq!(server.request_count(), 1, "a 400 is not retried");
}

#[tokio::test]
async fn openai_429_with_retry_after_is_waited_for_then_succeeds() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(
                Rule::error(429, "Rate limit reached")
                    .with_retry_after("1")
                    .times(1),
            )
            .rule(Rule::text("finally")),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server);

    let started = Instant::now();
    let response = provider
        .chat(&request("gpt-test", "hi"), None)
        .await
        .unwrap();
    let elapsed = started.elapsed();

    assert_eq!(response.text, "finally");
    assert_eq!(server.request_count(), 2);
    assert!(elapsed >= Duration::from_secs(1), "waited only {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "waited {elapsed:?}");
}

#[tokio::test]
async fn openai_a_retry_after_beyond_the_cap_fails_at_once_for_the_fallback() {
    let server = ScriptedLlm::start(
        Script::new().rule(Rule::error(429, "Quota exceeded").with_retry_after("3600")),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server);

    let started = Instant::now();
    let error = provider
        .chat(&request("gpt-test", "hi"), None)
        .await
        .unwrap_err();

    assert!(started.elapsed() < Duration::from_secs(1));
    match &error {
        LlmError::RateLimited {
            retry_after,
            message,
            ..
        } => {
            assert_eq!(*retry_after, Some(Duration::from_secs(3600)));
            assert_eq!(message, "Quota exceeded");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_500_is_retried_then_the_chain_falls_back_to_the_next_model() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(Rule::error(500, "The server had an error").when_model("model-a"))
            .rule(Rule::text("answer from b").when_model("model-b")),
    )
    .await
    .unwrap();
    let mut providers = Providers::default();
    providers.insert(openai_provider("primary", &server));
    providers.insert(openai_provider("backup", &server));
    let chain = [
        ModelRef::new("primary", "model-a"),
        ModelRef::new("missing", "model-x"),
        ModelRef::new("backup", "model-b"),
    ];

    let outcome = chat_with_fallback(&providers, &chain, request("ignored", "hi"), None)
        .await
        .unwrap();

    assert_eq!(outcome.response.text, "answer from b");
    assert_eq!(outcome.model, ModelRef::new("backup", "model-b"));
    assert_eq!(outcome.failed.len(), 2);
    assert_eq!(outcome.failed[0].0, chain[0]);
    assert!(
        matches!(outcome.failed[0].1, LlmError::Http { status: 500, .. }),
        "{:?}",
        outcome.failed[0].1
    );
    assert_eq!(
        outcome.failed[1].1,
        LlmError::UnknownProvider("missing".into())
    );
    // One try and two retries of model-a, then model-b once.
    assert_eq!(server.request_count(), 4);
    let models: Vec<Value> = server
        .requests()
        .iter()
        .map(|body| body["model"].clone())
        .collect();
    assert_eq!(
        models,
        vec![json!("model-a"); 3]
            .into_iter()
            .chain([json!("model-b")])
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn when_every_model_fails_the_error_lists_them_all() {
    let server = ScriptedLlm::start(Script::new().rule(Rule::error(503, "overloaded")))
        .await
        .unwrap();
    let mut providers = Providers::default();
    providers.insert(openai_provider("only", &server).with_max_retries(0));
    let chain = [ModelRef::new("only", "m1"), ModelRef::new("only", "m2")];

    let error = chat_with_fallback(&providers, &chain, request("m", "hi"), None)
        .await
        .unwrap_err();

    let LlmError::AllModelsFailed { failures } = &error else {
        panic!("expected AllModelsFailed, got {error:?}");
    };
    assert_eq!(failures.len(), 2);
    assert!(error.is_retryable());
    let text = error.to_string();
    assert!(
        text.contains("[only/m1]") && text.contains("[only/m2]"),
        "{text}"
    );
    assert_eq!(
        chat_with_fallback(&providers, &[], request("m", "hi"), None)
            .await
            .unwrap_err(),
        LlmError::EmptyChain
    );
}

#[tokio::test]
async fn a_stream_cut_mid_way_is_a_broken_stream_and_is_retried_with_a_reset() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(Rule::cut_stream_after("This answer will be cut").times(1))
            .rule(Rule::text("Complete answer.")),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server);
    let (sender, mut receiver) = unbounded_channel();

    let response = provider
        .chat(&request("gpt-test", "hi"), Some(&sender))
        .await
        .unwrap();
    let deltas = drain(&mut receiver);

    assert_eq!(response.text, "Complete answer.");
    assert_eq!(server.request_count(), 2);
    let reset_at = deltas
        .iter()
        .position(|delta| *delta == StreamDelta::Reset)
        .expect("a Reset withdraws the cut text");
    assert_eq!(shown_text(&deltas[..reset_at]), "This answer will be cut");
    assert_eq!(shown_text(&deltas), "Complete answer.");

    // Without retries the cut is reported, never passed off as a short answer.
    server.set_script(Script::new().rule(Rule::cut_stream_after("half an ans")));
    let (sender, mut receiver) = unbounded_channel();
    let error = provider
        .clone()
        .with_max_retries(0)
        .chat(&request("gpt-test", "hi"), Some(&sender))
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::BrokenStream(_)), "{error:?}");
    assert!(error.is_retryable());
    let deltas = drain(&mut receiver);
    assert_eq!(deltas.last(), Some(&StreamDelta::Reset), "{deltas:?}");

    // The same cut on a non-streaming call is a connection error (retryable too).
    let error = provider
        .clone()
        .with_max_retries(0)
        .chat(&request("gpt-test", "hi"), None)
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::Connection(_)), "{error:?}");
    assert!(error.is_retryable());
}

#[tokio::test]
async fn a_malformed_chunk_breaks_the_stream_and_a_malformed_body_is_reported() {
    let server = ScriptedLlm::start(Script::new().rule(Rule::malformed_chunk()))
        .await
        .unwrap();
    let provider = openai_provider("openai", &server).with_max_retries(0);
    let (sender, _receiver) = unbounded_channel();

    let streamed = provider
        .chat(&request("gpt-test", "hi"), Some(&sender))
        .await
        .unwrap_err();
    assert!(
        matches!(streamed, LlmError::BrokenStream(_)),
        "{streamed:?}"
    );
    assert!(streamed.to_string().contains("not JSON"), "{streamed}");

    let complete = provider
        .chat(&request("gpt-test", "hi"), None)
        .await
        .unwrap_err();
    assert!(matches!(complete, LlmError::Malformed(_)), "{complete:?}");
    assert!(!complete.is_retryable());
}

#[tokio::test]
async fn malformed_tool_arguments_pass_through_as_raw_text() {
    let broken = r#"{"city": "Par"#;
    let server = ScriptedLlm::start(Script::new().rule(Rule::tool_call("get_weather", broken)))
        .await
        .unwrap();
    let provider = openai_provider("openai", &server);
    let mut asking = request("gpt-test", "weather?");
    asking.tools = vec![weather_tool()];

    let complete = provider.chat(&asking, None).await.unwrap();
    let (sender, _receiver) = unbounded_channel();
    let streamed = provider.chat(&asking, Some(&sender)).await.unwrap();

    for response in [complete, streamed] {
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(response.tool_calls[0].arguments, broken);
        assert_eq!(response.finish, FinishReason::ToolCalls);
    }
}

#[tokio::test]
async fn a_slow_answer_times_out_and_a_stalled_stream_hits_the_idle_timeout() {
    let server = ScriptedLlm::start(
        Script::new()
            .rule(
                Rule::text("too late")
                    .delay(Duration::from_secs(3))
                    .when_model("slow"),
            )
            .rule(
                Rule::text("one two three four five")
                    .chunk_delay(Duration::from_millis(400))
                    .when_model("stalling"),
            ),
    )
    .await
    .unwrap();
    let provider = openai_provider("openai", &server)
        .with_max_retries(0)
        .with_timeout(Duration::from_millis(300))
        .with_idle_timeout(Duration::from_millis(100));

    let started = Instant::now();
    let whole = provider
        .chat(&request("slow", "hi"), None)
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(
        whole,
        LlmError::Timeout {
            provider: "openai".into(),
            kind: TimeoutKind::WholeCall,
            after: Duration::from_millis(300),
        }
    );
    assert!(whole.is_retryable());

    let patient = provider.clone().with_timeout(Duration::from_secs(5));
    let (sender, _receiver) = unbounded_channel();
    let idle = patient
        .chat(&request("stalling", "hi"), Some(&sender))
        .await
        .unwrap_err();
    assert!(
        matches!(
            idle,
            LlmError::Timeout {
                kind: TimeoutKind::BetweenChunks,
                ..
            }
        ),
        "{idle:?}"
    );
}

#[tokio::test]
async fn a_missing_key_names_the_variable_and_the_chain_moves_on() {
    let server = ScriptedLlm::start(Script::new().rule(Rule::text("local answer")))
        .await
        .unwrap();
    let keyed = Provider::from_config(
        "cloud",
        &config(
            ProviderKind::Openai,
            &server.base_url(),
            "CLAWVISOR_TEST_KEY_THAT_IS_NEVER_SET",
        ),
    );
    let error = keyed.chat(&request("m", "hi"), None).await.unwrap_err();
    assert_eq!(
        error,
        LlmError::MissingKey {
            provider: "cloud".into(),
            env: "CLAWVISOR_TEST_KEY_THAT_IS_NEVER_SET".into()
        }
    );
    assert!(
        error
            .to_string()
            .contains("CLAWVISOR_TEST_KEY_THAT_IS_NEVER_SET")
    );
    assert_eq!(server.request_count(), 0);

    let mut providers = Providers::default();
    providers.insert(keyed);
    providers.insert(openai_provider("local", &server));
    let outcome = chat_with_fallback(
        &providers,
        &[
            ModelRef::new("cloud", "big"),
            ModelRef::new("local", "small"),
        ],
        request("m", "hi"),
        None,
    )
    .await
    .unwrap();
    assert_eq!(outcome.response.text, "local answer");
    assert!(matches!(outcome.failed[0].1, LlmError::MissingKey { .. }));
}

#[tokio::test]
async fn providers_are_built_from_the_config() {
    let mut config_file = Config::default();
    config_file.providers.insert(
        "local".into(),
        config(ProviderKind::Openai, "http://127.0.0.1:11434/v1/", ""),
    );
    config_file.providers.insert(
        "claude".into(),
        config(ProviderKind::Anthropic, "https://api.anthropic.com", "X"),
    );
    let providers = Providers::from_config(&config_file);
    assert_eq!(
        providers.names().collect::<Vec<_>>(),
        vec!["claude", "local"]
    );
    let local = providers.get("local").unwrap();
    assert_eq!(local.name(), "local");
    assert_eq!(local.base_url(), "http://127.0.0.1:11434/v1");
    assert_eq!(
        providers.get("claude").unwrap().kind(),
        ProviderKind::Anthropic
    );
    assert!(providers.get("nope").is_none());
}

#[tokio::test]
async fn no_error_text_ever_contains_the_api_key() {
    let key = "sk-never-show-this-key-0123456789";
    let wrong_key = "sk-wrong-key-the-server-repeats-back";
    let server = ScriptedLlm::start(
        Script::new()
            .rule(Rule::error(500, "boom").when_model("server-error"))
            .rule(Rule::error(429, "slow").when_model("rate-limited"))
            .rule(Rule::cut_stream_after("par").when_model("cut"))
            .rule(Rule::malformed_chunk().when_model("malformed"))
            .rule(
                Rule::text("late")
                    .delay(Duration::from_secs(2))
                    .when_model("slow"),
            ),
    )
    .await
    .unwrap();
    // A wrong key is answered 401 with a message repeating the key the server received.
    server.require_api_key(key);
    let provider = openai_provider("openai", &server)
        .with_key(Secret::new(key))
        .with_max_retries(0)
        .with_timeout(Duration::from_millis(300));
    let wrong = provider.clone().with_key(Secret::new(wrong_key));
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let unreachable = Provider::from_config(
        "unreachable",
        &config(
            ProviderKind::Openai,
            &format!("http://127.0.0.1:{closed_port}/v1?key={key}"),
            "",
        ),
    )
    .with_key(Secret::new(key))
    .with_max_retries(0);

    let mut errors = Vec::new();
    for model in ["server-error", "rate-limited", "cut", "malformed", "slow"] {
        let (sender, _receiver) = unbounded_channel();
        errors.push(
            provider
                .chat(&request(model, "hi"), Some(&sender))
                .await
                .unwrap_err(),
        );
        errors.push(
            provider
                .chat(&request(model, "hi"), None)
                .await
                .unwrap_err(),
        );
    }
    errors.push(wrong.chat(&request("m", "hi"), None).await.unwrap_err());
    errors.push(
        unreachable
            .chat(&request("m", "hi"), None)
            .await
            .unwrap_err(),
    );

    let unauthorized = errors
        .iter()
        .find(|error| matches!(error, LlmError::Http { status: 401, .. }))
        .expect("the wrong key is refused");
    assert!(
        unauthorized
            .to_string()
            .contains("Incorrect API key provided: ***"),
        "{unauthorized}"
    );
    assert!(
        errors
            .iter()
            .any(|error| matches!(error, LlmError::Connection(_)))
    );
    assert!(
        errors
            .iter()
            .any(|error| matches!(error, LlmError::Timeout { .. }))
    );
    for error in &errors {
        let display = error.to_string();
        let debug = format!("{error:?}");
        for secret in [key, wrong_key] {
            assert!(!display.contains(secret), "key leaked in {display}");
            assert!(!debug.contains(secret), "key leaked in {debug}");
        }
        assert!(!display.contains("?key="), "URL leaked in {display}");
    }
}

#[tokio::test]
async fn cost_follows_the_reported_usage_and_the_pricing_table() {
    let server = ScriptedLlm::start(Script::new().rule(Rule::text("x".repeat(400))))
        .await
        .unwrap();
    let provider = openai_provider("openai", &server);
    let response = provider
        .chat(&request("priced", &"y".repeat(786)), None)
        .await
        .unwrap();
    // 14 + 786 = 800 prompt characters, 400 answer characters.
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 200,
            output_tokens: 100
        }
    );
    let mut pricing = BTreeMap::new();
    pricing.insert(
        "priced".to_string(),
        PriceConfig {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
        },
    );
    let cost = cost_usd(&pricing, &response.model, &response.usage);
    assert!(
        (cost - (200.0 * 3.0 + 100.0 * 15.0) / 1e6).abs() < 1e-12,
        "{cost}"
    );
    assert_eq!(cost_usd(&pricing, "unpriced", &response.usage), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Anthropic Messages fake
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct FakeLog {
    requests: Mutex<Vec<Value>>,
    uris: Mutex<Vec<String>>,
}

type FakeState = Arc<FakeLog>;

fn bad_request(message: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [("content-type", "application/json")],
        json!({"type":"error","error":{"type":"invalid_request_error","message":message}})
            .to_string(),
    )
        .into_response()
}

/// Checks a Messages request the way the API does; `Err` is the API's complaint.
fn check_anthropic_request(headers: &HeaderMap, body: &Value) -> Result<(), String> {
    if headers.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(ANTHROPIC_KEY) {
        return Err("x-api-key header is missing or wrong".into());
    }
    if headers
        .get("anthropic-version")
        .and_then(|v| v.to_str().ok())
        != Some("2023-06-01")
    {
        return Err("anthropic-version header is required".into());
    }
    if headers.get("authorization").is_some() {
        return Err("unexpected authorization header".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: Field required".into());
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for tool in tools {
            if !tool["input_schema"].is_object() || !tool["name"].is_string() {
                return Err("tools: each tool needs name and input_schema".into());
            }
        }
    }
    let messages = body["messages"]
        .as_array()
        .ok_or("messages: Field required")?;
    let mut expected_role = "user";
    let mut pending_tool_uses: Vec<String> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        if role == "system" {
            return Err(
                "messages: system is not a valid role; use the top-level system parameter".into(),
            );
        }
        if role != expected_role {
            return Err(format!(
                "messages.{index}: roles must alternate between user and assistant"
            ));
        }
        let blocks = message["content"]
            .as_array()
            .ok_or("content must be a list here")?;
        if blocks.is_empty() {
            return Err(format!("messages.{index}: content must not be empty"));
        }
        let mut seen_other = false;
        let mut answered = Vec::new();
        for block in blocks {
            match block["type"].as_str().unwrap_or("") {
                "text" => {
                    if block["text"].as_str().unwrap_or("").is_empty() {
                        return Err("text content blocks must be non-empty".into());
                    }
                    seen_other = true;
                }
                "tool_result" => {
                    if seen_other {
                        return Err("tool_result blocks must come first".into());
                    }
                    answered.push(block["tool_use_id"].as_str().unwrap_or("").to_string());
                }
                "tool_use" => {
                    let id = block["id"].as_str().unwrap_or("");
                    if id.is_empty()
                        || !id
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                    {
                        return Err(
                            "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'".into(),
                        );
                    }
                    if !block["input"].is_object() {
                        return Err("tool_use.input: Input should be a valid dictionary".into());
                    }
                }
                "image" => seen_other = true,
                other => return Err(format!("unknown block type {other}")),
            }
        }
        if role == "user" && answered != pending_tool_uses {
            return Err(format!(
                "messages.{index}: tool_use ids were found without tool_result blocks immediately after: {pending_tool_uses:?}"
            ));
        }
        pending_tool_uses = if role == "assistant" {
            blocks
                .iter()
                .filter(|block| block["type"] == "tool_use")
                .map(|block| block["id"].as_str().unwrap_or("").to_string())
                .collect()
        } else {
            Vec::new()
        };
        expected_role = if role == "user" { "assistant" } else { "user" };
    }
    if !pending_tool_uses.is_empty() {
        return Err("the last assistant tool_use has no tool_result".into());
    }
    Ok(())
}

fn sse_event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

async fn anthropic_messages(
    State(log): State<FakeState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return bad_request(error.to_string()),
    };
    log.requests.lock().unwrap().push(body.clone());
    if let Err(message) = check_anthropic_request(&headers, &body) {
        return bad_request(message);
    }
    let model = body["model"].as_str().unwrap_or("").to_string();
    if model == "claude-overloaded" {
        return (
            StatusCode::from_u16(529).unwrap(),
            [("content-type", "application/json")],
            json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})
                .to_string(),
        )
            .into_response();
    }
    let last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let after_tool_result = last["content"][0]["type"] == "tool_result";
    let streaming = body["stream"] == true;
    if !streaming {
        let answer = if after_tool_result {
            json!({
                "id": "msg_02", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": "It is sunny in Paris."}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 120, "output_tokens": 9, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            })
        } else {
            json!({
                "id": "msg_01", "type": "message", "role": "assistant", "model": model,
                "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}}
                ],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 30}
            })
        };
        return ([("content-type", "application/json")], answer.to_string()).into_response();
    }
    let mut events = vec![
        sse_event(
            "message_start",
            json!({"type":"message_start","message":{"id":"msg_03","type":"message","role":"assistant","content":[],"model":model,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}}}),
        ),
        sse_event(
            "content_block_start",
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
        ),
        sse_event("ping", json!({"type":"ping"})),
        sse_event(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}),
        ),
        sse_event(
            "content_block_delta",
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}),
        ),
    ];
    if model == "claude-cut" {
        // Send the first events, pause so they are flushed, then cut the connection (a
        // deliberate gap in a fake server, not a wait for a state).
        let cut = futures::stream::once(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Err(std::io::Error::other("cut"))
        });
        let body = Body::from_stream(
            futures::stream::iter(events.into_iter().map(Ok::<_, std::io::Error>)).chain(cut),
        );
        return ([("content-type", "text/event-stream")], body).into_response();
    }
    events.extend([
        sse_event("content_block_stop", json!({"type":"content_block_stop","index":0})),
        sse_event("content_block_start", json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}})),
        sse_event("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}})),
        sse_event("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}})),
        sse_event("content_block_delta", json!({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}})),
        sse_event("content_block_stop", json!({"type":"content_block_stop","index":1})),
        sse_event("message_delta", json!({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}})),
    ]);
    if model != "claude-no-stop" {
        events.push(sse_event("message_stop", json!({"type":"message_stop"})));
    }
    ([("content-type", "text/event-stream")], events.concat()).into_response()
}

async fn start_fake(router: Router<FakeState>) -> (String, FakeState) {
    let log = FakeState::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let app = router.with_state(log.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), log)
}

async fn start_anthropic() -> (Provider, FakeState) {
    let (base_url, log) =
        start_fake(Router::new().route("/v1/messages", post(anthropic_messages))).await;
    let provider = Provider::from_config("claude", &config(ProviderKind::Anthropic, &base_url, ""))
        .with_key(Secret::new(ANTHROPIC_KEY))
        .with_retry_base(Duration::from_millis(5));
    (provider, log)
}

/// A conversation with two user messages in a row, an image and two system messages: the
/// mappers must merge, place and convert all of it.
fn weather_conversation(model: &str) -> ChatRequest {
    let mut photo = ChatMessage::user("This is my street.");
    photo.images.push(clawvisor::llm::ImageInput {
        mime: "image/png".into(),
        base64: "iVBORw0KGgo=".into(),
    });
    ChatRequest {
        model: model.to_string(),
        messages: vec![
            ChatMessage::system("You are a weather bot."),
            ChatMessage::system("Answer in one sentence."),
            photo,
            ChatMessage::user("What is the weather in Paris?"),
        ],
        tools: vec![weather_tool()],
        temperature: Some(0.2),
        max_tokens: None,
    }
}

fn continue_with_result(
    mut conversation: ChatRequest,
    first: &ChatResponse,
    result: &str,
) -> ChatRequest {
    conversation
        .messages
        .push(ChatMessage::assistant_tool_calls(
            first.text.clone(),
            first.tool_calls.clone(),
        ));
    conversation
        .messages
        .push(ChatMessage::tool_result(&first.tool_calls[0], result));
    conversation
}

#[tokio::test]
async fn anthropic_tool_round_trip_maps_system_roles_tools_and_results() {
    let (provider, log) = start_anthropic().await;
    let conversation = weather_conversation("claude-test");

    let first = provider.chat(&conversation, None).await.unwrap();
    assert_eq!(first.text, "Let me check.");
    assert_eq!(first.finish, FinishReason::ToolCalls);
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(first.tool_calls[0].id, "toolu_01A09q90qw90lq917835lq9");
    assert_eq!(first.tool_calls[0].name, "get_weather");
    assert_eq!(
        serde_json::from_str::<Value>(&first.tool_calls[0].arguments).unwrap(),
        json!({"city": "Paris"})
    );
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: 100,
            output_tokens: 30
        }
    );

    let second = provider
        .chat(
            &continue_with_result(conversation, &first, "sunny, 24°C"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(second.text, "It is sunny in Paris.");
    assert_eq!(second.finish, FinishReason::Stop);

    let requests = log.requests.lock().unwrap().clone();
    let sent = &requests[1];
    assert_eq!(
        sent["system"],
        "You are a weather bot.\n\nAnswer in one sentence."
    );
    assert_eq!(sent["max_tokens"], 4096);
    assert!((sent["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(sent.get("stream").is_none());
    assert_eq!(
        sent["tools"][0],
        json!({
            "name": "get_weather",
            "description": "Current weather for a city",
            "input_schema": weather_tool().parameters,
        })
    );
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(
        messages[0],
        json!({"role": "user", "content": [
            {"type": "text", "text": "This is my street."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "What is the weather in Paris?"},
        ]})
    );
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris"}},
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "sunny, 24°C"},
        ]})
    );
}

#[tokio::test]
async fn anthropic_streamed_text_and_tool_input_are_assembled() {
    let (provider, log) = start_anthropic().await;
    let (sender, mut receiver) = unbounded_channel();

    let response = provider
        .chat(&weather_conversation("claude-test"), Some(&sender))
        .await
        .unwrap();

    assert_eq!(
        drain(&mut receiver),
        vec![
            StreamDelta::Text("Let me ".into()),
            StreamDelta::Text("check.".into())
        ]
    );
    assert_eq!(response.text, "Let me check.");
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(
        response.tool_calls,
        vec![ToolCall {
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
            name: "get_weather".into(),
            arguments: "{\"city\": \"Paris\"}".into(),
        }]
    );
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 100,
            output_tokens: 42
        }
    );
    assert_eq!(log.requests.lock().unwrap()[0]["stream"], true);
}

#[tokio::test]
async fn anthropic_streams_without_message_stop_or_cut_are_broken_and_529_is_retried() {
    let (provider, log) = start_anthropic().await;
    let provider = provider.with_max_retries(1);
    for model in ["claude-no-stop", "claude-cut"] {
        let (sender, mut receiver) = unbounded_channel();
        let error = provider
            .chat(&weather_conversation(model), Some(&sender))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::BrokenStream(_)),
            "{model}: {error:?}"
        );
        let deltas = drain(&mut receiver);
        assert_eq!(
            deltas
                .iter()
                .filter(|delta| **delta == StreamDelta::Reset)
                .count(),
            2,
            "{model}: each failed attempt withdraws its text: {deltas:?}"
        );
    }
    let overloaded = provider
        .chat(&weather_conversation("claude-overloaded"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&overloaded, LlmError::Http { status: 529, message, .. } if message == "Overloaded"),
        "{overloaded:?}"
    );
    assert!(overloaded.is_retryable());
    // Two attempts for each of the three models.
    assert_eq!(log.requests.lock().unwrap().len(), 6);
}

// ---------------------------------------------------------------------------------------------
// Gemini generateContent fake
// ---------------------------------------------------------------------------------------------

/// Checks a generateContent request the way the API does; `Err` is the API's complaint.
fn check_gemini_request(headers: &HeaderMap, query: &str, body: &Value) -> Result<(), String> {
    if headers.get("x-goog-api-key").and_then(|v| v.to_str().ok()) != Some(GEMINI_KEY) {
        return Err("API key not valid. Please pass a valid API key.".into());
    }
    if query.contains("key=") {
        return Err("the key must not travel in the URL".into());
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        for declaration in tools[0]["functionDeclarations"]
            .as_array()
            .ok_or("functionDeclarations missing")?
        {
            if !declaration["parametersJsonSchema"].is_object() {
                return Err("function declaration without parametersJsonSchema".into());
            }
        }
    }
    let contents = body["contents"].as_array().ok_or("contents is required")?;
    let mut previous_role = "";
    let mut pending_calls: Vec<String> = Vec::new();
    for (index, content) in contents.iter().enumerate() {
        let role = content["role"].as_str().unwrap_or("");
        if role != "user" && role != "model" {
            return Err(format!(
                "contents[{index}].role must be user or model, got `{role}`"
            ));
        }
        if role == previous_role {
            return Err(format!("contents[{index}]: consecutive {role} turns"));
        }
        let parts = content["parts"].as_array().ok_or("parts is required")?;
        if parts.is_empty() {
            return Err(format!("contents[{index}].parts must not be empty"));
        }
        let responses: Vec<String> = parts
            .iter()
            .filter_map(|part| {
                part.pointer("/functionResponse/name")
                    .and_then(Value::as_str)
            })
            .map(str::to_string)
            .collect();
        if role == "user" && responses != pending_calls {
            return Err(format!(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn ({pending_calls:?} vs {responses:?})"
            ));
        }
        for part in parts {
            if let Some(response) = part.pointer("/functionResponse/response")
                && !response.is_object()
            {
                return Err("functionResponse.response must be an object".into());
            }
            if part.get("functionCall").is_some() && part.get("thoughtSignature").is_none() {
                return Err(
                    "Function call is missing a thought_signature in functionCall parts.".into(),
                );
            }
        }
        pending_calls = if role == "model" {
            parts
                .iter()
                .filter_map(|part| part.pointer("/functionCall/name").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        } else {
            Vec::new()
        };
        previous_role = role;
    }
    Ok(())
}

async fn gemini_generate(
    State(log): State<FakeState>,
    Path(target): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let query = query.unwrap_or_default();
    log.uris.lock().unwrap().push(format!("{target}?{query}"));
    let body: Value = match serde_json::from_slice(&body) {
        Ok(body) => body,
        Err(error) => return bad_request(error.to_string()),
    };
    log.requests.lock().unwrap().push(body.clone());
    if let Err(message) = check_gemini_request(&headers, &query, &body) {
        return (
            StatusCode::BAD_REQUEST,
            [("content-type", "application/json")],
            json!({"error":{"code":400,"message":message,"status":"INVALID_ARGUMENT"}}).to_string(),
        )
            .into_response();
    }
    let (model, method) = target.split_once(':').unwrap_or((&target, ""));
    let last_is_result = body["contents"]
        .as_array()
        .and_then(|contents| contents.last())
        .and_then(|content| content["parts"][0].get("functionResponse"))
        .is_some();
    match method {
        "generateContent" => {
            let answer = if last_is_result {
                json!({
                    "candidates": [{"content": {"parts": [{"text": "It is sunny in Paris."}], "role": "model"}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 80, "candidatesTokenCount": 7, "totalTokenCount": 87},
                    "modelVersion": model
                })
            } else {
                json!({
                    "candidates": [{"content": {"parts": [
                        {"text": "Checking both."},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLW9uZQ=="},
                        {"functionCall": {"name": "get_weather", "args": {"city": "Lyon"}}, "thoughtSignature": "c2lnLXR3bw=="}
                    ], "role": "model"}, "finishReason": "STOP", "index": 0}],
                    "usageMetadata": {"promptTokenCount": 60, "candidatesTokenCount": 20, "thoughtsTokenCount": 15, "totalTokenCount": 95},
                    "modelVersion": model
                })
            };
            ([("content-type", "application/json")], answer.to_string()).into_response()
        }
        "streamGenerateContent" if query == "alt=sse" => {
            let mut chunks = vec![
                json!({"candidates": [{"content": {"parts": [{"text": "Let me"}], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 60, "totalTokenCount": 60}, "modelVersion": model}),
                json!({"candidates": [{"content": {"parts": [{"text": " look."}], "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 60, "totalTokenCount": 60}, "modelVersion": model}),
            ];
            if model != "gemini-cut" {
                chunks.push(json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLXN0cmVhbQ=="}], "role": "model"}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 60, "candidatesTokenCount": 12, "totalTokenCount": 72}, "modelVersion": model}));
            }
            let text: String = chunks
                .iter()
                .map(|chunk| format!("data: {chunk}\r\n\r\n"))
                .collect();
            ([("content-type", "text/event-stream")], text).into_response()
        }
        _ => bad_request(format!("unknown method {method} with query {query}")),
    }
}

async fn start_gemini() -> (Provider, FakeState) {
    let (base_url, log) =
        start_fake(Router::new().route("/v1beta/models/{target}", post(gemini_generate))).await;
    let provider = Provider::from_config("gemini", &config(ProviderKind::Gemini, &base_url, ""))
        .with_key(Secret::new(GEMINI_KEY))
        .with_retry_base(Duration::from_millis(5));
    (provider, log)
}

#[tokio::test]
async fn gemini_parallel_function_calls_round_trip_with_signatures_and_results() {
    let (provider, log) = start_gemini().await;
    let conversation = weather_conversation("gemini-2.5-flash");

    let first = provider.chat(&conversation, None).await.unwrap();
    assert_eq!(first.text, "Checking both.");
    assert_eq!(first.finish, FinishReason::ToolCalls);
    assert_eq!(
        first.usage,
        Usage {
            input_tokens: 60,
            output_tokens: 35
        }
    );
    let arguments: Vec<Value> = first
        .tool_calls
        .iter()
        .map(|call| serde_json::from_str(&call.arguments).unwrap())
        .collect();
    assert_eq!(
        arguments,
        vec![json!({"city": "Paris"}), json!({"city": "Lyon"})]
    );
    assert_ne!(first.tool_calls[0].id, first.tool_calls[1].id);

    let mut follow_up = conversation.clone();
    follow_up.messages.push(ChatMessage::assistant_tool_calls(
        first.text.clone(),
        first.tool_calls.clone(),
    ));
    follow_up.messages.push(ChatMessage::tool_result(
        &first.tool_calls[0],
        r#"{"sky":"clear"}"#,
    ));
    follow_up
        .messages
        .push(ChatMessage::tool_result(&first.tool_calls[1], "rain"));
    let second = provider.chat(&follow_up, None).await.unwrap();
    assert_eq!(second.text, "It is sunny in Paris.");
    assert_eq!(second.finish, FinishReason::Stop);
    assert_eq!(second.model, "gemini-2.5-flash");

    assert_eq!(
        log.uris.lock().unwrap()[0],
        "gemini-2.5-flash:generateContent?"
    );
    let requests = log.requests.lock().unwrap().clone();
    let sent = &requests[1];
    assert_eq!(
        sent["systemInstruction"],
        json!({"parts": [{"text": "You are a weather bot.\n\nAnswer in one sentence."}]})
    );
    assert_eq!(
        sent["tools"][0]["functionDeclarations"][0],
        json!({
            "name": "get_weather",
            "description": "Current weather for a city",
            "parametersJsonSchema": weather_tool().parameters,
        })
    );
    assert_eq!(
        sent["generationConfig"]["temperature"]
            .as_f64()
            .map(|t| (t * 10.0).round()),
        Some(2.0)
    );
    let contents = sent["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    assert_eq!(
        contents[0],
        json!({"role": "user", "parts": [
            {"text": "This is my street."},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"text": "What is the weather in Paris?"},
        ]})
    );
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [
            {"text": "Checking both."},
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnLW9uZQ=="},
            {"functionCall": {"name": "get_weather", "args": {"city": "Lyon"}}, "thoughtSignature": "c2lnLXR3bw=="},
        ]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"sky": "clear"}}},
            {"functionResponse": {"name": "get_weather", "response": {"result": "rain"}}},
        ]})
    );
}

#[tokio::test]
async fn gemini_streams_text_then_a_function_call_over_crlf_events() {
    let (provider, log) = start_gemini().await;
    let (sender, mut receiver) = unbounded_channel();

    let response = provider
        .chat(&weather_conversation("gemini-2.5-flash"), Some(&sender))
        .await
        .unwrap();

    assert_eq!(
        drain(&mut receiver),
        vec![
            StreamDelta::Text("Let me".into()),
            StreamDelta::Text(" look.".into())
        ]
    );
    assert_eq!(response.text, "Let me look.");
    assert_eq!(response.finish, FinishReason::ToolCalls);
    assert_eq!(response.tool_calls.len(), 1);
    assert_eq!(response.tool_calls[0].name, "get_weather");
    assert_eq!(
        response.usage,
        Usage {
            input_tokens: 60,
            output_tokens: 12
        }
    );
    assert_eq!(
        log.uris.lock().unwrap()[0],
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
}

#[tokio::test]
async fn gemini_a_stream_without_finish_reason_is_broken_and_errors_carry_the_api_message() {
    let (provider, _log) = start_gemini().await;
    let provider = provider.with_max_retries(0);
    let (sender, _receiver) = unbounded_channel();
    let broken = provider
        .chat(&weather_conversation("gemini-cut"), Some(&sender))
        .await
        .unwrap_err();
    assert!(matches!(broken, LlmError::BrokenStream(_)), "{broken:?}");

    let wrong_key = provider.with_key(Secret::new("AIza-wrong-key-for-the-fake-000"));
    let refused = wrong_key
        .chat(&weather_conversation("gemini-2.5-flash"), None)
        .await
        .unwrap_err();
    match &refused {
        LlmError::Http {
            status, message, ..
        } => {
            assert_eq!(*status, 400);
            assert!(message.starts_with("API key not valid"), "{message}");
        }
        other => panic!("expected Http 400, got {other:?}"),
    }
    assert!(
        !refused
            .to_string()
            .contains("AIza-wrong-key-for-the-fake-000")
    );
}

// ---------------------------------------------------------------------------------------------
// A server that ignores `stream: true` (some local servers do for some requests)
// ---------------------------------------------------------------------------------------------

async fn complete_even_when_asked_to_stream(State(log): State<FakeState>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.requests.lock().unwrap().push(body);
    let answer = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "local-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "whole answer"}, "finish_reason": "stop"}]
    });
    ([("content-type", "application/json")], answer.to_string()).into_response()
}

#[tokio::test]
async fn an_answer_in_one_piece_to_a_streaming_request_is_one_delta_and_missing_usage_is_zero() {
    let (base_url, log) = start_fake(Router::new().route(
        "/v1/chat/completions",
        post(complete_even_when_asked_to_stream),
    ))
    .await;
    let provider = Provider::from_config(
        "local",
        &config(ProviderKind::Openai, &format!("{base_url}/v1"), ""),
    );
    let (sender, mut receiver) = unbounded_channel();

    let response = provider
        .chat(&request("local-model", "hi"), Some(&sender))
        .await
        .unwrap();

    assert_eq!(log.requests.lock().unwrap()[0]["stream"], true);
    assert_eq!(response.text, "whole answer");
    assert_eq!(response.usage, Usage::default());
    assert_eq!(
        drain(&mut receiver),
        vec![StreamDelta::Text("whole answer".into())]
    );
}
