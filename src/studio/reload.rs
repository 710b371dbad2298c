//! `POST /api/v1/reload`: the Overview's "Reload configuration" button and `clawvisor reload`.
//!
//! The reloader re-reads the config and agent files and applies them (see `protocol::reload`);
//! the answer is its report. A refused reload is still a 200: the request was carried out, and
//! the report's `ok: false` and `error` say why nothing changed. [`run`] is the same for other
//! routes that reload after a change (Keys & tokens).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::openapi::{answer_of, described, extend, string};
use super::{ApiError, StudioState};
use crate::protocol::CallError;
use crate::protocol::reload::{Reloader, TIMEOUT};

/// `POST /api/v1/reload`: the reload's report.
pub async fn reload(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    run(&state, "studio").await.map(Json)
}

/// Asks the reloader to reload (`trigger` says who asked) and answers with its report as JSON,
/// with its one-line `summary`.
pub async fn run(state: &StudioState, trigger: &str) -> Result<Value, ApiError> {
    let report = match Reloader::new(&state.registry).reload(trigger).await {
        Ok(report) => report,
        Err(CallError::NotRunning { .. }) => return Err(ApiError::unavailable("the reloader")),
        // The reload may still be applying: the caller must not read this as "nothing changed".
        Err(CallError::NoAnswer { .. }) => {
            return Err(ApiError(
                axum::http::StatusCode::GATEWAY_TIMEOUT,
                format!(
                    "no reload report within {} s, so the outcome is unknown: the reload may still be applying; its report will be in the daemon's log and Studio's events (config_reloaded)",
                    TIMEOUT.as_secs()
                ),
            ));
        }
    };
    let summary = report.summary();
    let mut body = serde_json::to_value(&report).unwrap_or_else(|_| json!({}));
    if let Some(object) = body.as_object_mut() {
        object.insert("summary".into(), Value::String(summary));
    }
    Ok(body)
}

/// A reload's report as [`run`] answers it (the answer of `POST /api/v1/reload`, and of every
/// change that reloads).
pub fn report_schema() -> Value {
    extend(
        answer_of::<crate::protocol::reload::ReloadReport>(),
        [(
            "summary",
            described("the report in one paragraph", string()),
        )],
    )
}
