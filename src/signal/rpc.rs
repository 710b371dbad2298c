//! The JSON-RPC 2.0 client for signal-cli's HTTP daemon: `POST <rpc_url>/api/v1/rpc`.
//!
//! Methods and parameters are signal-cli's (`man signal-cli-jsonrpc`: the CLI's options in
//! camelCase): `send` (`recipient` or `groupId`, `message`, `attachments` as RFC 2397 data URIs
//! with a `filename`, `voiceNote`, `quoteTimestamp`/`quoteAuthor`) answering `{"timestamp",
//! "results":[{"recipientAddress":{"number","uuid"},"type":"SUCCESS"|"RATE_LIMIT_FAILURE"|…,
//! "retryAfterSeconds"}]}`; `sendTyping` (`stop`); `sendReceipt` (`recipient`,
//! `targetTimestamp`, `type` read|viewed); `sendReaction` (`emoji`, `targetAuthor`,
//! `targetTimestamp`, `remove`); `getAttachment` (`id` and `recipient` or `groupId`, answering
//! `{"data": base64}`); `receive` (`timeout` seconds, `maxMessages`) for
//! `--receive-mode=manual`, answering the same objects the event stream carries. In multi-account
//! mode (a daemon started without `-a`) every call carries `params.account`.
//!
//! Errors: signal-cli answers failures as JSON-RPC errors (-1 user error, -3 I/O, -4 untrusted
//! key, -5 rate limit, -32602 invalid params such as an unknown account). [`SignalError`] says
//! what happened first and what to do, with the cause from `crate::cause`; every text from the
//! other side is redacted (`crate::secrets::redact`) and bounded.
//!
//! Invariants: a call never panics on any answer; the client holds no secret (signal-cli's HTTP
//! endpoint has no authentication — it must listen on loopback only, see the README).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::inbound::{InboundError, OwnAccount, Received, parse_receive_value};

/// signal-cli's JSON-RPC error code for a rate limit.
pub const RATE_LIMIT_ERROR: i64 = -5;
/// A call other than `receive` gives up after this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Text taken from an error answer at most.
const MAX_ERROR_TEXT: usize = 300;

/// Where a message goes: a person (number or uuid) or a group (its base64 id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recipient {
    Person(String),
    Group(String),
}

impl Recipient {
    fn add_to(&self, params: &mut Map<String, Value>) {
        match self {
            Recipient::Person(person) => params.insert("recipient".into(), json!([person])),
            Recipient::Group(group) => params.insert("groupId".into(), json!(group)),
        };
    }
}

/// A file to send, carried inline (signal-cli may run as another user or in a sandbox, so a
/// path of ours might not be readable by it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingAttachment {
    pub file_name: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

impl OutgoingAttachment {
    /// `data:<mime>;filename=<name>;base64,<data>` as signal-cli's `--attachment` takes it.
    pub fn data_uri(&self) -> String {
        let name: String = self
            .file_name
            .chars()
            .map(|c| {
                if matches!(c, ';' | ',' | '\n' | '\r') {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let mime = if self.mime.contains(['/']) && !self.mime.contains([';', ',']) {
            self.mime.as_str()
        } else {
            "application/octet-stream"
        };
        format!(
            "data:{mime};filename={name};base64,{}",
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        )
    }
}

/// One message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingMessage {
    pub to: Recipient,
    pub text: String,
    pub attachments: Vec<OutgoingAttachment>,
    /// Send the (single audio) attachment as a voice note.
    pub voice_note: bool,
    /// Quote (reply to) this message: its timestamp and author.
    pub quote: Option<(i64, String)>,
}

/// How one recipient fared.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendResult {
    #[serde(default)]
    pub recipient_address: Option<RecipientAddress>,
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
}

/// A recipient as signal-cli names it in a result.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RecipientAddress {
    pub number: Option<String>,
    pub uuid: Option<String>,
}

/// What `send`, `sendTyping`, `sendReceipt` and `sendReaction` answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SendOutcome {
    /// The sent message's timestamp: its id, to quote or react to it later.
    #[serde(default)]
    pub timestamp: i64,
    #[serde(default)]
    pub results: Vec<SendResult>,
}

impl SendOutcome {
    /// The longest wait a rate-limited recipient asks for, if any recipient was rate limited.
    pub fn rate_limited(&self) -> Option<Duration> {
        self.results
            .iter()
            .filter(|result| result.kind == "RATE_LIMIT_FAILURE")
            .map(|result| Duration::from_secs(result.retry_after_seconds.unwrap_or(1)))
            .max()
    }

    /// Whether every recipient got it (a group send may reach some members only).
    pub fn all_succeeded(&self) -> bool {
        self.results.iter().all(|result| result.kind == "SUCCESS")
    }
}

/// What went wrong talking to signal-cli.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error(
        "clawvisor could not reach signal-cli at {url}: {cause}. Check that `signal-cli daemon --http` runs and that rpc_url is its address."
    )]
    Unreachable { url: String, cause: String },
    #[error(
        "signal-cli at {url} answered HTTP {status} to {method}. Check that rpc_url points at signal-cli's HTTP daemon (not another service)."
    )]
    Status {
        url: String,
        method: String,
        status: u16,
    },
    #[error("signal-cli refused {method}: {message} (JSON-RPC error {code}).")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("Signal is rate limiting {method}; try again in {retry_after:?}.")]
    RateLimited {
        method: String,
        retry_after: Duration,
    },
    #[error(
        "signal-cli's answer to {method} is not what clawvisor expects ({detail}); check that signal-cli is a recent version."
    )]
    Malformed { method: String, detail: String },
}

/// A client for one signal-cli HTTP daemon and one account on it.
#[derive(Debug)]
pub struct SignalRpc {
    http: reqwest::Client,
    rpc_url: String,
    base_url: String,
    /// Set in multi-account mode: sent as `params.account` with every call.
    account: Option<String>,
    next_id: AtomicU64,
}

impl SignalRpc {
    /// A client for the daemon at `base_url` (`http://127.0.0.1:7583`). With `account`, every
    /// call names it (multi-account mode); without, the daemon's own `-a` account is used.
    pub fn new(base_url: &str, account: Option<String>) -> SignalRpc {
        let base_url = base_url.trim_end_matches('/').to_string();
        SignalRpc {
            http: reqwest::Client::builder()
                .no_proxy()
                .connect_timeout(Duration::from_secs(10))
                .build()
                .unwrap_or_else(|_| reqwest::Client::new()),
            rpc_url: format!("{base_url}/api/v1/rpc"),
            base_url,
            account,
            next_id: AtomicU64::new(1),
        }
    }

    /// The daemon's base address, as configured.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The account named in calls (multi-account mode), if any.
    pub fn account(&self) -> Option<&str> {
        self.account.as_deref()
    }

    /// Whether signal-cli's HTTP daemon answers (`GET /api/v1/check`, 200 when it is up).
    pub async fn check(&self) -> Result<(), SignalError> {
        let response = self
            .http
            .get(format!("{}/api/v1/check", self.base_url))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|error| SignalError::Unreachable {
                url: self.base_url.clone(),
                cause: bounded(&crate::cause::explain(&error)),
            })?;
        match response.status().as_u16() {
            200 => Ok(()),
            status => Err(SignalError::Status {
                url: self.base_url.clone(),
                method: "the health check".into(),
                status,
            }),
        }
    }

    /// Calls `method` with `params` and returns its `result`.
    pub async fn call(
        &self,
        method: &str,
        mut params: Map<String, Value>,
        timeout: Duration,
    ) -> Result<Value, SignalError> {
        if let Some(account) = &self.account {
            params.insert("account".into(), json!(account));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id});
        let response = self
            .http
            .post(&self.rpc_url)
            .json(&body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|error| SignalError::Unreachable {
                url: self.base_url.clone(),
                cause: bounded(&crate::cause::explain(&error)),
            })?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(SignalError::Status {
                url: self.base_url.clone(),
                method: method.to_string(),
                status,
            });
        }
        let answer: Value = response
            .json()
            .await
            .map_err(|error| SignalError::Malformed {
                method: method.to_string(),
                detail: bounded(&crate::cause::chain(&error)),
            })?;
        read_answer(method, answer)
    }

    /// Sends a message (text, attachments, quote) to a person or a group.
    pub async fn send(&self, message: &OutgoingMessage) -> Result<SendOutcome, SignalError> {
        let mut params = Map::new();
        message.to.add_to(&mut params);
        params.insert("message".into(), json!(message.text));
        if !message.attachments.is_empty() {
            let uris: Vec<String> = message
                .attachments
                .iter()
                .map(OutgoingAttachment::data_uri)
                .collect();
            params.insert("attachments".into(), json!(uris));
        }
        if message.voice_note {
            params.insert("voiceNote".into(), json!(true));
        }
        if let Some((timestamp, author)) = &message.quote {
            params.insert("quoteTimestamp".into(), json!(timestamp));
            params.insert("quoteAuthor".into(), json!(author));
        }
        self.sending("send", params).await
    }

    /// Shows (or with `stop`, ends) "typing…" in a chat.
    pub async fn send_typing(
        &self,
        to: &Recipient,
        stop: bool,
    ) -> Result<SendOutcome, SignalError> {
        let mut params = Map::new();
        to.add_to(&mut params);
        if stop {
            params.insert("stop".into(), json!(true));
        }
        self.sending("sendTyping", params).await
    }

    /// Marks messages of `sender` as read.
    pub async fn send_read_receipt(
        &self,
        sender: &str,
        timestamps: &[i64],
    ) -> Result<SendOutcome, SignalError> {
        let mut params = Map::new();
        params.insert("recipient".into(), json!(sender));
        params.insert("targetTimestamp".into(), json!(timestamps));
        params.insert("type".into(), json!("read"));
        self.sending("sendReceipt", params).await
    }

    /// Reacts with `emoji` to the message `(target_author, target_timestamp)` in a chat.
    pub async fn send_reaction(
        &self,
        to: &Recipient,
        emoji: &str,
        target_author: &str,
        target_timestamp: i64,
        remove: bool,
    ) -> Result<SendOutcome, SignalError> {
        let mut params = Map::new();
        to.add_to(&mut params);
        params.insert("emoji".into(), json!(emoji));
        params.insert("targetAuthor".into(), json!(target_author));
        params.insert("targetTimestamp".into(), json!(target_timestamp));
        if remove {
            params.insert("remove".into(), json!(true));
        }
        self.sending("sendReaction", params).await
    }

    /// The bytes of an attachment signal-cli downloaded, received from `from` (the sender, or
    /// the group it was sent in).
    pub async fn get_attachment(&self, id: &str, from: &Recipient) -> Result<Vec<u8>, SignalError> {
        let mut params = Map::new();
        params.insert("id".into(), json!(id));
        match from {
            Recipient::Person(person) => params.insert("recipient".into(), json!(person)),
            Recipient::Group(group) => params.insert("groupId".into(), json!(group)),
        };
        let result = self.call("getAttachment", params, CALL_TIMEOUT).await?;
        let malformed = |detail: &str| SignalError::Malformed {
            method: "getAttachment".into(),
            detail: detail.to_string(),
        };
        let data = result
            .get("data")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no data field"))?;
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|_| malformed("data is not base64"))
    }

    /// Pulls what Signal's servers hold for the account (`--receive-mode=manual`): waits up to
    /// `timeout` for messages, at most `max_messages`. Each element is read as the event stream's
    /// are; one that cannot be read is an `Err` in its place, not a failure of the call.
    pub async fn receive(
        &self,
        timeout: Duration,
        max_messages: u32,
        own: &OwnAccount,
    ) -> Result<Vec<Result<Received, InboundError>>, SignalError> {
        let mut params = Map::new();
        params.insert("timeout".into(), json!(timeout.as_secs_f64()));
        params.insert("maxMessages".into(), json!(max_messages));
        let result = self
            .call("receive", params, timeout + Duration::from_secs(30))
            .await?;
        let Value::Array(items) = result else {
            return Err(SignalError::Malformed {
                method: "receive".into(),
                detail: "the result is not a list".into(),
            });
        };
        Ok(items
            .into_iter()
            .map(|item| parse_receive_value(item, own))
            .collect())
    }

    async fn sending(
        &self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<SendOutcome, SignalError> {
        let result = self.call(method, params, CALL_TIMEOUT).await?;
        let outcome: SendOutcome =
            serde_json::from_value(result).map_err(|error| SignalError::Malformed {
                method: method.to_string(),
                detail: bounded(&error.to_string()),
            })?;
        match outcome.rate_limited() {
            Some(retry_after) => Err(SignalError::RateLimited {
                method: method.to_string(),
                retry_after,
            }),
            None => Ok(outcome),
        }
    }
}

/// A JSON-RPC answer's `result`, or its `error` as a [`SignalError`].
fn read_answer(method: &str, answer: Value) -> Result<Value, SignalError> {
    if let Some(error) = answer.get("error").filter(|error| !error.is_null()) {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = bounded(
            error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message"),
        );
        if code == RATE_LIMIT_ERROR {
            return Err(SignalError::RateLimited {
                method: method.to_string(),
                retry_after: Duration::from_secs(60),
            });
        }
        return Err(SignalError::Rpc {
            method: method.to_string(),
            code,
            message,
        });
    }
    match answer {
        Value::Object(mut object) => {
            object
                .remove("result")
                .ok_or_else(|| SignalError::Malformed {
                    method: method.to_string(),
                    detail: "neither result nor error".into(),
                })
        }
        _ => Err(SignalError::Malformed {
            method: method.to_string(),
            detail: "the answer is not a JSON object".into(),
        }),
    }
}

/// Redacted and cut to [`MAX_ERROR_TEXT`] characters.
fn bounded(text: &str) -> String {
    let redacted = crate::secrets::redact(text);
    match redacted.char_indices().nth(MAX_ERROR_TEXT) {
        Some((cut, _)) => format!("{}…", &redacted[..cut]),
        None => redacted.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_uri_keeps_the_name_readable_and_the_uri_unambiguous() {
        let attachment = OutgoingAttachment {
            file_name: "a;b,c.txt".into(),
            mime: "text/plain".into(),
            bytes: b"hi".to_vec(),
        };
        assert_eq!(
            attachment.data_uri(),
            "data:text/plain;filename=a_b_c.txt;base64,aGk="
        );
    }

    #[test]
    fn a_secret_in_an_error_answer_never_reaches_the_error() {
        let secret = "sk-signal-test-0123456789abcdef0123";
        crate::secrets::register(secret);
        let error = read_answer(
            "send",
            json!({"error": {"code": -1, "message": format!("Failed: token {secret} rejected")}}),
        )
        .expect_err("an error");
        assert!(!error.to_string().contains(secret), "{error}");
        assert!(
            error
                .to_string()
                .starts_with("signal-cli refused send: Failed: token ")
        );
    }

    #[test]
    fn errors_and_rate_limits_are_read_from_the_answer() {
        let error = read_answer(
            "send",
            json!({"jsonrpc":"2.0","error":{"code":-32602,"message":"Specified account does not exist"},"id":1}),
        )
        .expect_err("an error");
        assert!(
            error
                .to_string()
                .contains("Specified account does not exist"),
            "{error}"
        );
        assert!(matches!(
            read_answer("send", json!({"error":{"code":-5,"message":"slow down"}})),
            Err(SignalError::RateLimited { .. })
        ));
        let outcome: SendOutcome = serde_json::from_value(json!({"timestamp": 5, "results": [
            {"recipientAddress": {"number": "+1", "uuid": "u"}, "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 9}
        ]}))
        .expect("valid");
        assert_eq!(outcome.rate_limited(), Some(Duration::from_secs(9)));
    }
}
