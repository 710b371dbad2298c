//! The script a [`super::ScriptedLlm`] answers from: rules, each a matcher on the request and
//! the reply it produces (text, tool calls, an error, a cut connection, a delay).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The rules a [`ScriptedLlm`] answers from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    #[serde(default)]
    pub rules: Vec<Rule>,
}

impl Script {
    pub fn new() -> Script {
        Script::default()
    }

    /// Appends a rule (tried after the ones already there).
    pub fn rule(mut self, rule: Rule) -> Script {
        self.rules.push(rule);
        self
    }

    pub fn from_toml(text: &str) -> Result<Script, toml::de::Error> {
        toml::from_str(text)
    }
}

/// When a rule applies. Every field set must fit (they are ANDed); an empty matcher fits all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// The last user message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_user_contains: Option<String>,
    /// A system (or developer) message contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_contains: Option<String>,
    /// Any message's text contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any_message_contains: Option<String>,
    /// The last message is the result of a call to this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_tool_result: Option<String>,
    /// The conversation ends with tool results (the answers to the model's last tool calls) and
    /// one of them contains this text. Unlike `any_message_contains`, text from earlier turns of
    /// the conversation does not count, so a rule can depend on what a tool just returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_tool_result_contains: Option<String>,
    /// The requested model is this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A tool of this name is offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_include: Option<String>,
}

/// A tool call the script makes the model produce. `arguments` is sent as is, so it may be
/// deliberately malformed JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: String,
}

fn empty_object() -> String {
    "{}".to_string()
}

/// An HTTP error answer with an OpenAI-shaped body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    pub status: u16,
    #[serde(default = "default_error_message")]
    pub message: String,
    /// The `Retry-After` header, verbatim (seconds or an HTTP date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// `error.type` in the body; derived from the status when absent.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
}

fn default_error_message() -> String {
    "scripted error".to_string()
}

/// One rule: a matcher, how often it may answer, and the answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub when: Matcher,
    /// Answers at most this many times, then is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// Wait before answering (before the status line).
    #[serde(default)]
    pub delay_ms: u64,
    /// Wait between streamed chunks.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptedToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// Streams this text, then closes the connection without a finish reason or `[DONE]` (a
    /// non-streaming request gets half a JSON body, then the cut).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_stream_after: Option<String>,
    /// Sends a data line that is not JSON (a non-streaming request gets a body that is not JSON).
    #[serde(default)]
    pub malformed_chunk: bool,
    /// Answers `echo: <last user message>`.
    #[serde(default)]
    pub echo: bool,
}

impl Rule {
    pub fn text(text: impl Into<String>) -> Rule {
        Rule {
            text: Some(text.into()),
            ..Rule::default()
        }
    }

    pub fn tool_call(name: impl Into<String>, arguments: impl Into<String>) -> Rule {
        Rule::tool_calls([(name, arguments)])
    }

    /// Several calls in one answer: parallel tool calls.
    pub fn tool_calls<N: Into<String>, A: Into<String>>(
        calls: impl IntoIterator<Item = (N, A)>,
    ) -> Rule {
        Rule {
            tool_calls: calls
                .into_iter()
                .map(|(name, arguments)| ScriptedToolCall {
                    name: name.into(),
                    arguments: arguments.into(),
                })
                .collect(),
            ..Rule::default()
        }
    }

    pub fn error(status: u16, message: impl Into<String>) -> Rule {
        Rule {
            error: Some(ScriptedError {
                status,
                message: message.into(),
                retry_after: None,
                error_type: None,
            }),
            ..Rule::default()
        }
    }

    pub fn cut_stream_after(text: impl Into<String>) -> Rule {
        Rule {
            cut_stream_after: Some(text.into()),
            ..Rule::default()
        }
    }

    pub fn malformed_chunk() -> Rule {
        Rule {
            malformed_chunk: true,
            ..Rule::default()
        }
    }

    pub fn echo() -> Rule {
        Rule {
            echo: true,
            ..Rule::default()
        }
    }

    /// Text sent along with tool calls.
    pub fn with_text(mut self, text: impl Into<String>) -> Rule {
        self.text = Some(text.into());
        self
    }

    /// Adds a `Retry-After` header to an error rule.
    pub fn with_retry_after(mut self, value: impl Into<String>) -> Rule {
        if let Some(error) = self.error.as_mut() {
            error.retry_after = Some(value.into());
        }
        self
    }

    pub fn times(mut self, times: u32) -> Rule {
        self.times = Some(times);
        self
    }

    pub fn delay(mut self, delay: Duration) -> Rule {
        self.delay_ms = delay.as_millis() as u64;
        self
    }

    pub fn chunk_delay(mut self, delay: Duration) -> Rule {
        self.chunk_delay_ms = delay.as_millis() as u64;
        self
    }

    pub fn when_last_user_contains(mut self, text: impl Into<String>) -> Rule {
        self.when.last_user_contains = Some(text.into());
        self
    }

    pub fn when_system_contains(mut self, text: impl Into<String>) -> Rule {
        self.when.system_contains = Some(text.into());
        self
    }

    pub fn when_any_message_contains(mut self, text: impl Into<String>) -> Rule {
        self.when.any_message_contains = Some(text.into());
        self
    }

    pub fn when_after_tool_result(mut self, tool: impl Into<String>) -> Rule {
        self.when.after_tool_result = Some(tool.into());
        self
    }

    pub fn when_last_tool_result_contains(mut self, text: impl Into<String>) -> Rule {
        self.when.last_tool_result_contains = Some(text.into());
        self
    }

    pub fn when_model(mut self, model: impl Into<String>) -> Rule {
        self.when.model = Some(model.into());
        self
    }

    pub fn when_tools_include(mut self, tool: impl Into<String>) -> Rule {
        self.when.tools_include = Some(tool.into());
        self
    }
}
