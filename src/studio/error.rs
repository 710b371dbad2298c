//! The one error shape of Studio's API: `{"error": {"message": "..."}}` with a status, where
//! the message says what happened and what to do.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// An API error: a status and a message that says what to fix.
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::NOT_FOUND, message.into())
    }

    pub fn conflict(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::CONFLICT, message.into())
    }

    pub fn unavailable(what: &str) -> ApiError {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{what} is not running right now; try again in a moment"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": {"message": self.1}}))).into_response()
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(error: crate::store::StoreError) -> ApiError {
        tracing::warn!(%error, "studio: store error");
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the database could not answer; see the daemon's log".into(),
        )
    }
}
