//! The API's OpenAPI 3.1 description (`GET /api/v1/openapi.json`), generated from the `api!`
//! table ([`super::route_docs`]): for every route its path and query parameters, its request
//! body's schema, its answer's status, media type and schema, and the one error shape.
//!
//! Where each schema comes from:
//! - Request bodies and query strings are the handlers' own `Deserialize` types, described by
//!   `schemars` ([`of`]): the schema is the type serde reads, doc comments are the descriptions.
//! - Answers built with `json!` are described by a schema function beside their handler, written
//!   with the small helpers here ([`object`], [`array`], [`nullable`], ...). `tests/openapi.rs`
//!   checks every such schema against the answers of a running daemon, so they cannot drift.
//! - Errors are [`super::error::ErrorBody`], referenced from every route's `4XX` and `5XX`.
//!
//! Invariant: a route of the table without an answer schema, or whose handler reads a body or a
//! query string the table does not name, is a failing test, not a silent gap in the document.

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::{Map, Value, json};

/// What a route answers with on success.
#[derive(Clone, Copy)]
pub enum Answer {
    /// A JSON value, described by the schema the function returns.
    Json(fn() -> Value),
    /// Server-Sent Events; the text says which events come and what their data holds.
    Events(&'static str),
    /// JSON, or Server-Sent Events when the request asks to stream (the gateway).
    JsonOrEvents(fn() -> Value, &'static str),
    /// An SVG image.
    Svg,
    /// A PNG image.
    Png,
}

/// A request body: its schema, and whether a request must have one.
#[derive(Clone, Copy)]
pub struct Body {
    pub schema: fn() -> Value,
    pub required: bool,
}

/// One route of the `api!` table as the document describes it.
#[derive(Clone, Copy)]
pub struct RouteDoc {
    /// `get`, `post`, `put`, `patch` or `delete`.
    pub method: &'static str,
    pub path: &'static str,
    /// The handler as the table names it (`schedules::create`).
    pub handler: &'static str,
    pub summary: &'static str,
    /// The schema of the handler's query-string type (an object: each property a parameter).
    pub query: Option<fn() -> Value>,
    pub body: Option<Body>,
    /// The success status and what comes with it; `None` is a route the table does not describe
    /// yet (the document says so, and `tests/openapi.rs` fails).
    pub answer: Option<(u16, Answer)>,
}

/// The JSON Schema (2020-12, OpenAPI 3.1's dialect) of a type serde reads or writes, every
/// subschema inline so that it stands alone inside the document.
pub fn of<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// The JSON Schema of a type serde writes into an answer (every field there, `null` or not).
pub fn answer_of<T: JsonSchema>() -> Value {
    SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
            settings.contract = Contract::Serialize;
        })
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value()
}

/// A text.
pub fn string() -> Value {
    json!({"type": "string"})
}

/// A whole number.
pub fn integer() -> Value {
    json!({"type": "integer"})
}

/// Any number.
pub fn number() -> Value {
    json!({"type": "number"})
}

pub fn boolean() -> Value {
    json!({"type": "boolean"})
}

/// Any JSON value (what a stored detail or a tool's arguments happen to be).
pub fn any() -> Value {
    json!({})
}

/// One of these texts.
pub fn one_of(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// A list of `items`.
pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// An object whose keys are names and whose values are `values`.
pub fn map(values: Value) -> Value {
    json!({"type": "object", "additionalProperties": values})
}

/// `schema`, or `null`.
pub fn nullable(mut schema: Value) -> Value {
    match schema.get("type").cloned() {
        Some(Value::String(kind)) => {
            schema["type"] = json!([kind, "null"]);
            if let Some(values) = schema.get_mut("enum").and_then(Value::as_array_mut) {
                values.push(Value::Null);
            }
            schema
        }
        Some(Value::Array(mut kinds)) => {
            if !kinds.contains(&json!("null")) {
                kinds.push(json!("null"));
            }
            schema["type"] = Value::Array(kinds);
            schema
        }
        _ => json!({"anyOf": [schema, {"type": "null"}]}),
    }
}

/// `schema` with a description.
pub fn described(text: &str, mut schema: Value) -> Value {
    schema["description"] = Value::String(text.to_string());
    schema
}

/// An object with these keys. A key written with a trailing `?` may be absent; every other key
/// is always there (its value may still be `null` where its schema says so).
pub fn object(keys: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    extend(
        json!({"type": "object", "properties": {}, "required": []}),
        keys,
    )
}

/// The object schema `base` with more keys (as [`object`] reads them).
pub fn extend(mut base: Value, keys: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    for (key, schema) in keys {
        let name = key.strip_suffix('?').unwrap_or(key);
        if name.len() == key.len()
            && let Some(required) = base["required"].as_array_mut()
            && !required.contains(&json!(name))
        {
            required.push(json!(name));
        }
        if let Some(properties) = base["properties"].as_object_mut() {
            properties.insert(name.to_string(), schema);
        }
    }
    base
}

/// The object schema `base` with only `keys` always there (the others may be absent).
pub fn requiring(mut base: Value, keys: &[&str]) -> Value {
    base["required"] = json!(keys);
    base
}

/// The path parameters of `path` (`{name}` segments), typed: ids of numbered things are whole
/// numbers, an approval's, a contract's and a pairing's are texts, `operation` names its choices.
fn path_parameters(path: &str) -> Vec<Value> {
    let under = |prefix: &str| path.starts_with(prefix);
    path.split('/')
        .filter_map(|segment| segment.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = match name {
                "id" if under("/api/v1/approvals/") => described("the approval's id", string()),
                "id" if under("/api/v1/handoffs/") => described("the contract's id", string()),
                "id" if under("/api/v1/pairings/") => {
                    described("the pairing code, like ABCD-EFGH", string())
                }
                "id" if under("/api/v1/people/") => described("a Telegram user id", integer()),
                "id" if under("/api/v1/users/") => described("a Telegram user id", integer()),
                "id" => integer(),
                "operation" if under("/api/v1/pairings/") => one_of(&["approve", "deny"]),
                "operation" if under("/api/v1/people/") => one_of(&["revoke", "block", "unblock"]),
                "operation" if under("/api/v1/memory/") => {
                    one_of(&["archive", "restore", "redact", "purge", "reclassify"])
                }
                _ => string(),
            };
            json!({"name": name, "in": "path", "required": true, "schema": schema})
        })
        .collect()
}

/// The query parameters a query-string type reads: one per property, `null` left out of its
/// type (an absent parameter is how a query says nothing).
fn query_parameters(schema: &Value) -> Vec<Value> {
    let required = schema["required"].as_array().cloned().unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let mut property = property.clone();
            let description = property
                .as_object_mut()
                .and_then(|object| object.remove("description"));
            if let Some(kinds) = property.get("type").and_then(Value::as_array) {
                let kinds: Vec<Value> = kinds
                    .iter()
                    .filter(|kind| *kind != "null")
                    .cloned()
                    .collect();
                property["type"] = match kinds.as_slice() {
                    [one] => one.clone(),
                    _ => Value::Array(kinds),
                };
            }
            let mut parameter = json!({
                "name": name, "in": "query", "required": required.contains(&json!(name)),
                "schema": property,
            });
            if let Some(description) = description {
                parameter["description"] = description;
            }
            parameter
        })
        .collect()
}

/// The success answer of a route, as an OpenAPI response object.
fn success(answer: &Answer) -> Value {
    let json_content = |schema: fn() -> Value| json!({"application/json": {"schema": schema()}});
    match answer {
        Answer::Json(schema) => json!({"description": "OK", "content": json_content(*schema)}),
        Answer::Events(events) => json!({
            "description": format!("Server-Sent Events: {events}"),
            "content": {"text/event-stream": {"schema": string()}},
        }),
        Answer::JsonOrEvents(schema, events) => {
            let mut content = json_content(*schema);
            content["text/event-stream"] = json!({"schema": string()});
            json!({"description": format!("JSON, or with `\"stream\": true` Server-Sent Events: {events}"), "content": content})
        }
        Answer::Svg => json!({
            "description": "An SVG image",
            "content": {"image/svg+xml": {"schema": string()}},
        }),
        Answer::Png => json!({
            "description": "A PNG image",
            "content": {"image/png": {"schema": string()}},
        }),
    }
}

/// One route as an OpenAPI operation.
fn operation(route: &RouteDoc) -> Value {
    let mut parameters = path_parameters(route.path);
    if let Some(query) = route.query {
        parameters.extend(query_parameters(&query()));
    }
    let mut responses = Map::new();
    match &route.answer {
        Some((status, answer)) => {
            responses.insert(status.to_string(), success(answer));
        }
        None => {
            responses.insert(
                "default".into(),
                json!({"description": "Not described yet: this route's answer has no schema in the api! table"}),
            );
        }
    }
    for range in ["4XX", "5XX"] {
        responses.insert(
            range.into(),
            json!({"$ref": "#/components/responses/Error"}),
        );
    }
    let mut operation = json!({
        "summary": route.summary,
        "operationId": format!("{}_{}", route.method, route.path.trim_start_matches('/').replace(['/', '{', '}', '.'], "_")),
        "responses": responses,
    });
    if !parameters.is_empty() {
        operation["parameters"] = Value::Array(parameters);
    }
    if let Some(body) = &route.body {
        operation["requestBody"] = json!({
            "required": body.required,
            "content": {"application/json": {"schema": (body.schema)()}},
        });
    }
    operation
}

/// The routes `router` serves outside the table: probes, metrics and the login link.
fn other_paths() -> Value {
    let text = |summary: &str| {
        json!({"get": {"summary": summary, "security": [], "responses": {
            "200": {"description": "OK", "content": {"text/plain": {"schema": string()}}},
            "503": {"description": "Not yet, with what it waits for", "content": {"text/plain": {"schema": string()}}},
        }}})
    };
    json!({
        "/healthz": text("200 once the tree is up and the database writer is alive"),
        "/readyz": text("200 once every bot is online, every MCP server has started (or failed visibly) and database writes commit; otherwise what it waits for and why, or why writes fail and where"),
        "/metrics": {"get": {
            "summary": "Prometheus metrics (open on a loopback bind without a proxy or metrics token; otherwise `Authorization: Bearer <metrics token>`)",
            "security": [{}, {"metrics_token": []}],
            "responses": {"200": {"description": "The Prometheus text format", "content": {"text/plain": {"schema": string()}}}},
        }},
        "/login": {"get": {
            "summary": "Opens a browser session from a login link (`?token=`), then redirects to the console",
            "security": [],
            "parameters": [{"name": "token", "in": "query", "required": true, "schema": string(),
                            "description": "the one-time token of a login link (`clawvisor studio-link`)"}],
            "responses": {"303": {"description": "To the console, with the session cookie set"}},
        }},
    })
}

/// What `GET /api/v1/openapi.json` answers: this document.
pub fn document_schema() -> Value {
    object([
        ("openapi", string()),
        ("info", object([("title", string()), ("version", string())])),
        ("paths", map(any())),
        ("components", object([("schemas", map(any()))])),
        ("security", array(any())),
    ])
}

/// The OpenAPI 3.1 description of every route.
pub fn document() -> Value {
    let mut paths = match other_paths() {
        Value::Object(paths) => paths,
        _ => Map::new(),
    };
    for route in super::route_docs() {
        let entry = paths
            .entry(route.path.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        entry[route.method] = operation(&route);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "clawvisor Studio API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every route Studio's console uses. Mutations from a browser session send the CSRF token of GET /api/v1/session in `X-CSRF-Token`; scripts send the access token as a bearer token.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": of::<super::error::ErrorBody>()},
            "responses": {"Error": {
                "description": "Refused or failed: `error.message` says what happened and what to fix, naming the field or parameter that is wrong",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
            }},
            "securitySchemes": {
                "session": {"type": "apiKey", "in": "cookie", "name": super::access::SESSION_COOKIE},
                "token": {"type": "http", "scheme": "bearer"},
                "metrics_token": {"type": "http", "scheme": "bearer"},
            },
        },
        "security": [{"session": []}, {"token": []}],
    })
}
