//! A provider's cheap health check: list its models (`GET /models`), the one request every
//! OpenAI-compatible server, Anthropic and Gemini answer without spending tokens. `doctor` and
//! Studio's overview show the outcome, and the daemon runs it once at boot in the background (a
//! log line per provider, and a warning event when one fails), so that a wrong key or address
//! shows before the first message fails.
//!
//! The outcome names the provider, the key's variable and what to do; never the key, and of the
//! address only scheme, host and port (a path or query may hold a key).

use std::time::Duration;

use reqwest::StatusCode;

use super::{ApiKey, Provider};
use crate::config::ProviderKind;

/// How long a probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a provider said to the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOutcome {
    pub provider: String,
    pub ok: bool,
    /// One sentence for the operator.
    pub detail: String,
    /// The model ids the provider listed (empty when it lists none or did not answer).
    pub models: Vec<String>,
}

/// The model ids of a model-list answer: `data[].id` (OpenAI-compatible servers, Anthropic) or
/// `models[].name` without its `models/` prefix (Gemini); sorted, at most 500.
fn model_ids(body: &serde_json::Value) -> Vec<String> {
    let listed = body
        .get("data")
        .and_then(serde_json::Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|model| model.get("id"))
                .collect::<Vec<_>>()
        })
        .or_else(|| {
            body.get("models")
                .and_then(serde_json::Value::as_array)
                .map(|models| {
                    models
                        .iter()
                        .filter_map(|model| model.get("name"))
                        .collect()
                })
        })
        .unwrap_or_default();
    let mut ids: Vec<String> = listed
        .iter()
        .filter_map(|id| id.as_str())
        .map(|id| id.strip_prefix("models/").unwrap_or(id).to_string())
        .filter(|id| !id.is_empty() && id.len() <= 200)
        .take(500)
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

impl Provider {
    /// The URL of the provider's model list.
    fn models_url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.kind {
            ProviderKind::Openai => format!("{base}/models"),
            ProviderKind::Anthropic if base.ends_with("/v1") => format!("{base}/models"),
            ProviderKind::Anthropic => format!("{base}/v1/models"),
            ProviderKind::Gemini if base.ends_with("/v1beta") || base.ends_with("/v1") => {
                format!("{base}/models")
            }
            ProviderKind::Gemini => format!("{base}/v1beta/models"),
        }
    }

    /// Asks the provider for its model list once (no retries) and says what that showed.
    pub async fn probe(&self) -> ProbeOutcome {
        let outcome = |ok: bool, detail: String| self.outcome(ok, detail);
        let key_env = match &self.key {
            ApiKey::Missing { env } => {
                return outcome(
                    false,
                    format!(
                        "{env} is not set: put the provider's API key in it (or use a local provider)"
                    ),
                );
            }
            ApiKey::Present(_) if self.key_env.is_empty() => Some("the API key".to_string()),
            ApiKey::Present(_) => Some(self.key_env.clone()),
            ApiKey::NotNeeded => None,
        };
        let client = match &self.client {
            Ok(client) => client,
            Err(reason) => return outcome(false, format!("no HTTP client: {reason}")),
        };
        let headers = match self.headers() {
            Ok(headers) => headers,
            Err(error) => return outcome(false, error.to_string()),
        };
        let sent = client
            .get(self.models_url())
            .headers(headers)
            .timeout(PROBE_TIMEOUT)
            .send()
            .await;
        let host = self.host_for_errors();
        let response = match sent {
            Ok(response) => response,
            Err(error) if error.is_timeout() => {
                return outcome(
                    false,
                    format!("{host} did not answer within {} s", PROBE_TIMEOUT.as_secs()),
                );
            }
            Err(error) => {
                return outcome(
                    false,
                    format!(
                        "cannot reach {host}: {} (is base_url right, and the server running?)",
                        crate::llm::error::reqwest_error_text(error)
                    ),
                );
            }
        };
        self.judge(response, key_env, &host).await
    }

    fn outcome(&self, ok: bool, detail: String) -> ProbeOutcome {
        ProbeOutcome {
            provider: self.name.clone(),
            ok,
            detail,
            models: Vec::new(),
        }
    }

    /// What the model list's answer says: the models, or what is wrong in words for people.
    async fn judge(
        &self,
        response: reqwest::Response,
        key_env: Option<String>,
        host: &str,
    ) -> ProbeOutcome {
        let outcome = |ok: bool, detail: String| self.outcome(ok, detail);
        let key_words = |key_env: &Option<String>| match key_env {
            Some(env) => format!("{env} is set but"),
            None => "no key is configured (api_key_env is empty) and".to_string(),
        };
        match response.status() {
            status if status.is_success() => {
                let models = match response.json::<serde_json::Value>().await {
                    Ok(body) => model_ids(&body),
                    Err(_) => Vec::new(),
                };
                let detail = match models.len() {
                    0 => format!("{host} answered"),
                    count => format!("{host} answered with {count} models"),
                };
                ProbeOutcome {
                    models,
                    ..outcome(true, detail)
                }
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => outcome(
                false,
                format!(
                    "{} the provider answered {}: check the key (a revoked, mistyped or other provider's key)",
                    key_words(&key_env),
                    response.status().as_u16()
                ),
            ),
            // Some local servers have no model list; they answered, which is what matters here.
            StatusCode::NOT_FOUND if self.kind == ProviderKind::Openai => outcome(
                true,
                format!("{host} answered (it has no model list, as some local servers)"),
            ),
            StatusCode::NOT_FOUND => outcome(
                false,
                format!(
                    "{host} answered 404 for the model list: is base_url the provider's API address?"
                ),
            ),
            StatusCode::TOO_MANY_REQUESTS => outcome(
                true,
                format!(
                    "{host} answered 429 (rate limited or out of credit): the key works, check the account's limits"
                ),
            ),
            status => outcome(
                false,
                format!(
                    "{host} answered {}; try again later, or check base_url",
                    status.as_u16()
                ),
            ),
        }
    }
}
