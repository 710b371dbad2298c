//! `POST /api/v1/reload`: the Overview's "Reload configuration" button and `clawvisor reload`.
//!
//! The reloader re-reads the config and agent files and applies them (see `protocol::reload`);
//! the answer is its report. A refused reload is still a 200: the request was carried out, and
//! the report's `ok: false` and `error` say why nothing changed.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::{ApiError, StudioState};
use crate::protocol::reload::Reloader;

pub async fn reload(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let report = Reloader::new(&state.registry)
        .reload("studio")
        .await
        .map_err(|_| ApiError::unavailable("the reloader"))?;
    let summary = report.summary();
    let mut body = serde_json::to_value(&report).unwrap_or_else(|_| json!({}));
    if let Some(object) = body.as_object_mut() {
        object.insert("summary".into(), Value::String(summary));
    }
    Ok(Json(body))
}
