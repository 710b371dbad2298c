//! `GET|POST /hooks/whatsapp`: Meta's webhook, on Studio's port but outside its session auth —
//! authenticated by the verify token (GET) and the body's signature (POST).
//!
//! GET is the subscription check: `hub.challenge` is echoed only when `hub.mode` is `subscribe`
//! and `hub.verify_token` is one configured account's verify token; anything else is 403.
//! POST: the body (at most `webhook::MAX_BODY`) is checked against `X-Hub-Signature-256` before
//! it is parsed; a missing or wrong signature is 401 and nothing is stored. A signed body is read
//! whole (400 naming the field when it is malformed: nothing stored), each message is routed by
//! `metadata.phone_number_id` to the account whose app secret signed it, all are stored in one
//! transaction (a redelivered message id changes nothing), and only then is it answered 200 and
//! each account told. A store that cannot commit answers 503, so Meta delivers it again.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::StudioState;
use crate::protocol::channel::ChannelAccount;
use crate::store::channels::{self as queries, NewChannelInbound};
use crate::whatsapp::webhook::{self, MAX_BODY};

/// The webhook's routes (merged into Studio's router outside the API guard).
pub fn routes() -> Router<StudioState> {
    Router::new()
        .route("/hooks/whatsapp", get(subscribe).post(receive))
        .layer(DefaultBodyLimit::max(MAX_BODY))
}

/// Meta's subscription check's query.
#[derive(Debug, Deserialize)]
pub struct Subscription {
    #[serde(rename = "hub.mode")]
    mode: Option<String>,
    #[serde(rename = "hub.verify_token")]
    verify_token: Option<String>,
    #[serde(rename = "hub.challenge")]
    challenge: Option<String>,
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |differ, (x, y)| differ | (x ^ y))
            == 0
}

async fn subscribe(
    State(state): State<StudioState>,
    Query(query): Query<Subscription>,
) -> Response {
    let directory = state.whatsapp.get();
    let given = query.verify_token.unwrap_or_default();
    let known = directory
        .accounts
        .values()
        .any(|account| same(account.verify_token.expose(), &given));
    match (query.mode.as_deref(), known, query.challenge) {
        (Some("subscribe"), true, Some(challenge)) => (StatusCode::OK, challenge).into_response(),
        _ => (
            StatusCode::FORBIDDEN,
            "The verify token does not match any WhatsApp account's: set the same value in Meta's webhook settings and in the variable the agent's [whatsapp] verify_token_env names.",
        )
            .into_response(),
    }
}

async fn receive(State(state): State<StudioState>, headers: HeaderMap, body: Bytes) -> Response {
    let directory = state.whatsapp.get();
    let signature = headers
        .get("x-hub-signature-256")
        .and_then(|value| value.to_str().ok());
    let signed_by: Vec<&String> = directory
        .accounts
        .iter()
        .filter(|(_, account)| {
            webhook::signature_ok(account.app_secret.expose().as_bytes(), &body, signature)
        })
        .map(|(id, _)| id)
        .collect();
    if signed_by.is_empty() {
        tracing::warn!(
            "a WhatsApp webhook delivery was refused: its signature is missing or wrong"
        );
        return (
            StatusCode::UNAUTHORIZED,
            "The X-Hub-Signature-256 header is missing or does not sign this body with a configured app secret; nothing was stored.",
        )
            .into_response();
    }
    let messages = match webhook::parse(&body) {
        Ok(messages) => messages,
        Err(problem) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("The delivery could not be read ({problem}); nothing was stored."),
            )
                .into_response();
        }
    };
    // Every message must belong to an account whose app secret signed the body.
    let mut rows = Vec::new();
    for message in messages {
        let Some(account) = directory.accounts.get(&message.phone_number_id) else {
            tracing::warn!(phone_number_id = %message.phone_number_id, "a WhatsApp message for a number no agent has; not stored");
            continue;
        };
        if !signed_by.contains(&&message.phone_number_id) {
            return (
                StatusCode::UNAUTHORIZED,
                "The body names a number whose app secret did not sign it; nothing was stored.",
            )
                .into_response();
        }
        rows.push((account.agent.clone(), message));
    }
    let to_store = rows.clone();
    let stored = state
        .store
        .write(move |conn| {
            let now = crate::clock::now_ms();
            let mut fresh = 0;
            for (agent, message) in &to_store {
                let chat = format!("wa:{}", message.from);
                let new = NewChannelInbound {
                    channel: "wa",
                    account: &message.phone_number_id,
                    message_id: &message.message_id,
                    agent,
                    chat: &chat,
                    sender: &message.from,
                    sender_name: &message.name,
                    kind: message.kind,
                    payload: &message.payload,
                    sent_ms: message.sent_ms,
                };
                if queries::store_inbound(conn, &new, now)?.is_some() {
                    fresh += 1;
                }
            }
            Ok(fresh)
        })
        .await;
    match stored {
        Ok(fresh) => {
            if fresh > 0 {
                let mut told: Vec<&str> = Vec::new();
                for (agent, _) in &rows {
                    if !told.contains(&agent.as_str()) {
                        told.push(agent);
                        ChannelAccount::new(&state.registry, "wa", agent).stored();
                    }
                }
            }
            (StatusCode::OK, "ok").into_response()
        }
        Err(error) => {
            tracing::warn!(%error, "a WhatsApp delivery could not be stored; Meta delivers it again");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "The delivery could not be stored now; it is delivered again.",
            )
                .into_response()
        }
    }
}
