//! Webhook triggers in Studio (issue #32): `GET /api/v1/triggers` lists `[[triggers]]` with
//! their address, where answers go, whether the secret is set (never the secret) and the last
//! deliveries with their outcomes; `POST /api/v1/triggers/{name}/test` sends a test event through
//! the same path as a webhook (`triggers::Receiver`: stored, audited as `trigger.test_event`,
//! run once by the triggers service), authenticated as Studio instead of by the trigger's secret.
//! The Triggers page refreshes on `trigger_delivery` events.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::openapi::{answer_of, array, boolean, described, integer, object, string};
use super::{ApiError, StudioState};
use crate::config::{DeliverTo, TriggerConfig};
use crate::store::triggers::{self as queries, DeliveryRow};
use crate::triggers::{Origin, Receiver};

/// Deliveries shown per trigger.
const RECENT: u32 = 10;
/// The most characters of a test event's body.
const MAX_TEST_BODY: usize = 16 * 1024;

/// Where a trigger's answers go, in words.
fn destination_text(config: &TriggerConfig) -> String {
    match config.destination() {
        DeliverTo::Owner => format!("to {}'s owner (else its first approver)", config.agent),
        DeliverTo::Chat(chat) => match chat.split_once(':') {
            Some(("tg", id)) => format!("to Telegram chat {id}"),
            Some(("wa", id)) => format!("to WhatsApp chat {id}"),
            Some(("sg", id)) => format!("to Signal chat {id}"),
            _ => format!("to chat {chat}"),
        },
        DeliverTo::Nowhere => "nowhere: answers are only kept here".into(),
    }
}

/// `GET /api/v1/triggers`.
pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let names: Vec<String> = state
        .triggers
        .entries()
        .map(|entry| entry.config.name.clone())
        .collect();
    let recent = state
        .store
        .read(move |conn| {
            names
                .iter()
                .map(|name| queries::latest(conn, name, RECENT))
                .collect::<crate::store::Result<Vec<_>>>()
        })
        .await?;
    let triggers: Vec<Value> = state
        .triggers
        .entries()
        .zip(recent)
        .map(|(entry, deliveries)| {
            let config = &entry.config;
            json!({
                "name": config.name,
                "agent": config.agent,
                "address": format!("/hooks/trigger/{}", config.name),
                "deliver_to": config.deliver_to,
                "deliver_to_text": destination_text(config),
                "prompt": config.prompt,
                "max_body": config.max_body.to_string(),
                "per_minute": config.per_minute,
                "secret_var": config.secret_var(),
                "secret_set": entry.secret.is_some(),
                "deliveries": deliveries.iter().map(delivery_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(Json(json!({ "triggers": triggers })))
}

fn delivery_json(row: &DeliveryRow) -> Value {
    let mut value = serde_json::to_value(row).unwrap_or(Value::Null);
    value["bytes"] = json!(row.body.len());
    value
}

/// What `GET /api/v1/triggers` answers.
pub fn list_schema() -> Value {
    object([(
        "triggers",
        array(object([
            ("name", string()),
            ("agent", string()),
            ("address", described("the path a sender posts to", string())),
            ("deliver_to", string()),
            (
                "deliver_to_text",
                described("where answers go, in words", string()),
            ),
            ("prompt", string()),
            ("max_body", string()),
            ("per_minute", integer()),
            (
                "secret_var",
                described(
                    "the variable holding the secret (never its value)",
                    string(),
                ),
            ),
            ("secret_set", boolean()),
            (
                "deliveries",
                described(
                    "the newest deliveries, newest first",
                    array(answer_of::<DeliveryRow>()),
                ),
            ),
        ])),
    )])
}

/// A test event.
#[derive(Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct TestBody {
    /// The event's body (default: a small JSON object saying it is a test).
    #[serde(default)]
    body: Option<String>,
}

/// `POST /api/v1/triggers/{name}/test`: a test event through the webhook's path (202).
pub async fn test(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    body: Option<Json<TestBody>>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let body = body.map(|Json(body)| body).unwrap_or_default();
    let Some(entry) = state.triggers.get(&name) else {
        return Err(ApiError::not_found(format!(
            "there is no trigger `{name}` (the config's [[triggers]] names them)"
        )));
    };
    let text = body
        .body
        .filter(|text| !text.trim().is_empty())
        .unwrap_or_else(|| json!({"test": true, "sent_by": "Studio"}).to_string());
    if text.len() > MAX_TEST_BODY {
        return Err(ApiError::bad_request(format!(
            "`body`: a test event is at most {MAX_TEST_BODY} bytes"
        )));
    }
    let receiver = Receiver {
        store: state.store.clone(),
        events: state.events.clone(),
        registry: state.registry.clone(),
    };
    let delivery_id = format!(
        "test-{}-{:08x}",
        crate::clock::now_ms(),
        rand::random::<u32>()
    );
    let received = receiver
        .receive(
            &entry.config,
            &delivery_id,
            &text,
            Origin::Test,
            "operator (studio)",
        )
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({"delivery": received.id, "delivery_id": delivery_id})),
    ))
}

/// What `POST /api/v1/triggers/{name}/test` answers.
pub fn test_schema() -> Value {
    object([
        (
            "delivery",
            described("the stored delivery's number", integer()),
        ),
        ("delivery_id", string()),
    ])
}

/// `/metrics`' trigger families: what became of each request to a trigger's address (counted in
/// memory: refusals are stored nowhere), and the stored deliveries by trigger and outcome (a
/// database read that fails leaves that family out; the rest of `/metrics` still answers).
pub async fn metrics(state: &StudioState) -> String {
    use std::fmt::Write as _;
    let mut text = String::from(
        "# HELP clawvisor_trigger_requests_total Requests to a webhook trigger's address, by trigger and outcome (accepted, duplicate, bad_signature, too_large, unknown, rate_limited, no_secret, store_failed); a name no trigger has is counted as (unknown).\n\
         # TYPE clawvisor_trigger_requests_total counter\n",
    );
    let names: Vec<&str> = state
        .triggers
        .entries()
        .map(|entry| entry.config.name.as_str())
        .collect();
    for (trigger, outcome, count) in state.trigger_counts.snapshot(names) {
        let _ = writeln!(
            text,
            "clawvisor_trigger_requests_total{{trigger=\"{trigger}\",outcome=\"{}\"}} {count}",
            outcome.as_str()
        );
    }
    let Ok(counts) = state.store.read(queries::counts).await else {
        return text;
    };
    text.push_str(
        "# HELP clawvisor_trigger_deliveries_total Webhook trigger deliveries stored, by trigger and outcome (received, running, succeeded, failed).\n\
         # TYPE clawvisor_trigger_deliveries_total counter\n",
    );
    for (trigger, status, count) in counts {
        let _ = writeln!(
            text,
            "clawvisor_trigger_deliveries_total{{trigger=\"{trigger}\",outcome=\"{}\"}} {count}",
            status.as_str()
        );
    }
    text
}
