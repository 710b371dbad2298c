//! The console's files (`studio/` in the repository, embedded in the binary) and the route of the
//! API's OpenAPI description (built by [`super::openapi`]).
//!
//! Every page is the same shell (`index.html`); the console routes with `#/page` itself. Files
//! are sent with a strict Content-Security-Policy (scripts and styles only from Studio itself),
//! `X-Frame-Options: DENY` (no clickjacking of the approve button) and `Referrer-Policy:
//! no-referrer` (a login link never leaks in a Referer).

use axum::Json;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::ApiError;

#[derive(rust_embed::Embed)]
#[folder = "studio/"]
struct Console;

const CSP: &str = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Serves a console file; unknown `/api/...` paths answer in the API's error shape.
pub async fn asset(uri: Uri) -> Response {
    let path = uri.path();
    if path.starts_with("/api/") || path.starts_with("/v1/") {
        return ApiError::not_found(format!(
            "no such API route `{path}`; see /api/v1/openapi.json"
        ))
        .into_response();
    }
    let name = match path.trim_start_matches('/') {
        "" => "index.html",
        name => name,
    };
    let Some(file) = Console::get(name) else {
        return ApiError::not_found(format!("no such page `{path}`; Studio starts at /"))
            .into_response();
    };
    let mut response = file.data.into_owned().into_response();
    let headers = response.headers_mut();
    if let Ok(mime) = HeaderValue::from_str(file.metadata.mimetype()) {
        headers.insert(header::CONTENT_TYPE, mime);
    }
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// `GET /api/v1/openapi.json`
pub async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}
