//! The console's files (`studio/` in the repository, embedded in the binary) and the API's
//! OpenAPI description, generated from [`super::API_ROUTES`].
//!
//! Every page is the same shell (`index.html`); the console routes with `#/page` itself. Files
//! are sent with a strict Content-Security-Policy (scripts and styles only from Studio itself),
//! `X-Frame-Options: DENY` (no clickjacking of the approve button) and `Referrer-Policy:
//! no-referrer` (a login link never leaks in a Referer).

use axum::Json;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::{API_ROUTES, ApiError};

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

/// The OpenAPI 3.1 description of every API route.
pub fn openapi_document() -> Value {
    let mut paths = Map::new();
    for (method, path, summary) in API_ROUTES {
        let parameters: Vec<Value> = path
            .split('/')
            .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                let integer =
                    name == "id" && !path.contains("approvals") && !path.contains("handoffs");
                json!({"name": name, "in": "path", "required": true,
                       "schema": {"type": if integer { "integer" } else { "string" }}})
            })
            .collect();
        let streams = path.ends_with("/events") || path.ends_with("/chat");
        let ok = if streams {
            json!({"description": "Server-Sent Events", "content": {"text/event-stream": {}}})
        } else {
            json!({"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}})
        };
        let mut operation = json!({
            "summary": summary,
            "operationId": format!("{method}_{}", path.trim_start_matches('/').replace(['/', '{', '}', '.'], "_")),
            "responses": {
                "200": ok,
                "default": {"description": "An error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
            },
        });
        if !parameters.is_empty() {
            operation["parameters"] = Value::Array(parameters);
        }
        if matches!(*method, "post" | "patch" | "put") {
            operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": {"type": "object"}}}});
        }
        let entry = paths
            .entry(path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[*method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {"title": "clawvisor Studio API", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {
            "schemas": {"Error": {"type": "object", "required": ["error"], "properties": {
                "error": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}},
            }}},
            "securitySchemes": {
                "session": {"type": "apiKey", "in": "cookie", "name": super::access::SESSION_COOKIE},
                "token": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"session": []}, {"token": []}],
    })
}

/// `GET /api/v1/openapi.json`
pub async fn openapi() -> Json<Value> {
    Json(openapi_document())
}
