//! The hook endpoints: requests from other systems, served on Studio's port outside Studio's
//! session auth, each authenticated by its own secret. [`router`] merges one router per kind of
//! hook (add a kind with one more `.merge(...)` line and its own file, e.g. `/hooks/whatsapp`).
//!
//! `POST /hooks/trigger/{name}` (issue #32): a webhook trigger of `[[triggers]]`. In order:
//! unknown name → 404; a body over the trigger's `max_body` → 413 (by `Content-Length` before
//! reading, else while reading); no secret configured → 503; neither `X-Signature-256:
//! sha256=<hex HMAC-SHA256 of the body>` (or `X-Hub-Signature-256`) nor `Authorization: Bearer
//! <secret>` (or `?token=<secret>`, for senders that can only be given a URL, like a Pub/Sub push
//! subscription) matches → 401; over `per_minute` → 429 with `Retry-After`. None of these stores
//! anything. Then the delivery is stored (`triggers::Receiver`) and answered `202 accepted:
//! delivery <id>`; a delivery id this trigger has stored already is answered `200 already
//! received: delivery <id>` and runs no second time. Every answer is one plain line, and every
//! request is counted by outcome for `/metrics` (`triggers::HookCounts`).

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::StudioState;
use crate::triggers::{BookEntry, HookOutcome, Origin, Receiver};

/// Every hook route (merged into Studio's router beside the API, outside its guard).
pub fn router() -> Router<StudioState> {
    Router::new().route("/hooks/trigger/{name}", post(trigger))
}

/// One plain line with `status`.
fn plain(status: StatusCode, line: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{line}\n"),
    )
        .into_response()
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|value| value.to_str().ok())
}

/// The `token` of a query string (`?token=<secret>`), for senders that can only be given a URL.
fn query_token(query: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.into_owned())
}

/// `POST /hooks/trigger/{name}` (see the module header).
async fn trigger(
    State(state): State<StudioState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let token = query.as_deref().and_then(query_token);
    let known = state.triggers.get(&name).map(|_| name.as_str());
    let (entry, bytes) = match admit(&state, &name, &headers, token.as_deref(), body).await {
        Ok(admitted) => admitted,
        Err((outcome, refusal)) => {
            state.trigger_counts.count(known, outcome);
            return refusal;
        }
    };
    let delivery_id = crate::triggers::delivery_id(
        [
            header_text(&headers, "x-delivery-id"),
            header_text(&headers, "x-github-delivery"),
        ],
        &bytes,
    );
    let text = String::from_utf8_lossy(&bytes);
    let receiver = Receiver {
        store: state.store.clone(),
        events: state.events.clone(),
        registry: state.registry.clone(),
    };
    let received = receiver
        .receive(
            &entry.config,
            &delivery_id,
            &text,
            Origin::Webhook,
            "webhook",
        )
        .await;
    let outcome = match &received {
        Ok(received) if received.fresh => HookOutcome::Accepted,
        Ok(_) => HookOutcome::Duplicate,
        Err(_) => HookOutcome::StoreFailed,
    };
    state.trigger_counts.count(known, outcome);
    match received {
        Ok(received) if received.fresh => plain(
            StatusCode::ACCEPTED,
            format!("accepted: delivery {}", received.id),
        ),
        Ok(received) => plain(
            StatusCode::OK,
            format!("already received: delivery {}", received.id),
        ),
        Err(error) => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "The delivery could not be stored ({}); send it again later.",
                crate::cause::explain(&error)
            ),
        ),
    }
}

/// The trigger and the body of a request that passes every check, or the refusal to answer
/// (nothing stored) and its outcome for `/metrics`: unknown name, too large, no secret, bad
/// secret, too many.
async fn admit(
    state: &StudioState,
    name: &str,
    headers: &HeaderMap,
    token: Option<&str>,
    body: Body,
) -> Result<(Arc<BookEntry>, axum::body::Bytes), (HookOutcome, Response)> {
    let Some(entry) = state.triggers.get(name) else {
        let shown: String = name.chars().take(64).collect();
        return Err((
            HookOutcome::Unknown,
            plain(
                StatusCode::NOT_FOUND,
                format!(
                    "There is no webhook trigger called \"{shown}\" here; check the address against Studio's Triggers page."
                ),
            ),
        ));
    };
    let config = &entry.config;
    let too_large = || {
        plain(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "The body is larger than trigger \"{name}\" accepts ({}); send less, or raise its max_body.",
                config.max_body
            ),
        )
    };
    let declared = header_text(headers, header::CONTENT_LENGTH.as_str())
        .and_then(|length| length.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > config.max_body.0) {
        return Err((HookOutcome::TooLarge, too_large()));
    }
    let limit = usize::try_from(config.max_body.0).unwrap_or(usize::MAX);
    let Ok(bytes) = axum::body::to_bytes(body, limit).await else {
        return Err((HookOutcome::TooLarge, too_large()));
    };
    let Some(secret) = &entry.secret else {
        return Err((
            HookOutcome::NoSecret,
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "Trigger \"{name}\" has no secret set yet, so it accepts nothing; the operator sets it in Studio's Keys & tokens."
                ),
            ),
        ));
    };
    let signature = header_text(headers, "x-signature-256")
        .or_else(|| header_text(headers, "x-hub-signature-256"));
    let from_query = token.map(|token| format!("Bearer {token}"));
    let authorization =
        header_text(headers, header::AUTHORIZATION.as_str()).or(from_query.as_deref());
    if !crate::triggers::authenticate(signature, authorization, &bytes, secret.expose().as_bytes())
    {
        return Err((
            HookOutcome::BadSignature,
            plain(
                StatusCode::UNAUTHORIZED,
                format!(
                    "The signature or token does not match trigger \"{name}\"'s secret; send X-Signature-256: sha256=<HMAC-SHA256 of the body> or Authorization: Bearer <secret>."
                ),
            ),
        ));
    }
    if let Err(wait) = state
        .trigger_window
        .admit(name, config.per_minute, Instant::now())
    {
        let seconds = wait.as_secs().max(1);
        let mut response = plain(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "Trigger \"{name}\" accepts {} deliveries a minute; send this one again in {seconds} s.",
                config.per_minute
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return Err((HookOutcome::RateLimited, response));
    }
    Ok((entry.clone(), bytes))
}
