//! The one error shape of Studio's API: `{"error": {"message": "..."}}` with a status, where
//! the message says what happened and what to do. [`ErrorBody`] is that shape, and the schema
//! the OpenAPI document gives every error answer.

use axum::Json;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::Serialize;

/// An API error: a status and a message that says what to fix.
pub struct ApiError(pub StatusCode, pub String);

/// Every error answer of the API.
#[derive(Serialize, JsonSchema)]
pub struct ErrorBody {
    pub error: ErrorMessage,
    /// With a 409 of a route that writes a file it cannot write: that file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// With that 409: the valid text to put in the file by hand, then reload.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toml: Option<String>,
}

/// What went wrong.
#[derive(Serialize, JsonSchema)]
pub struct ErrorMessage {
    /// What happened and what to do next, naming the field or parameter that is wrong.
    pub message: String,
}

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

/// A 409 for a valid change whose file cannot be written: what happened, the file, and the text
/// to put there by hand.
pub fn unwritable(message: String, file: String, toml: Option<String>) -> Response {
    let body = ErrorBody {
        error: ErrorMessage { message },
        file: Some(file),
        toml,
    };
    (StatusCode::CONFLICT, Json(body)).into_response()
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorMessage { message: self.1 },
            file: None,
            toml: None,
        };
        (self.0, Json(body)).into_response()
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

/// Puts every error answer of the API into the one shape. Handlers answer with [`ApiError`];
/// what would otherwise reach a client are axum's own refusals — a path segment, query string
/// or body it cannot read (plain text) and a method a route does not take (an empty 405). They
/// keep their status (and `Allow` header) and say what was wrong in `error.message`.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let allow = parts.headers.get(header::ALLOW).cloned();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_string())
        .unwrap_or_default();
    let message = match (&allow, text.is_empty()) {
        (Some(allowed), _) if status == StatusCode::METHOD_NOT_ALLOWED => format!(
            "{method} is not allowed on `{path}` (it takes {}); see /api/v1/openapi.json",
            allowed.to_str().unwrap_or_default()
        ),
        (_, false) => text,
        (_, true) => format!(
            "{method} `{path}`: {}",
            status.canonical_reason().unwrap_or("refused")
        ),
    };
    let mut answer = ApiError(status, message).into_response();
    if let Some(allow) = allow {
        answer.headers_mut().insert(header::ALLOW, allow);
    }
    answer
}
