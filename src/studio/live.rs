//! The live stream: `GET /api/v1/events` sends every runtime event as a Server-Sent Event
//! (`event:` the kind, `data:` the event as JSON). A client that falls behind the bus gets a
//! `resync` event (refetch what you show) instead of a silent gap; browsers reconnect by
//! themselves (`retry: 2000`).

use std::convert::Infallible;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;

use super::StudioState;
use super::event_json::event_json;

fn stream(state: StudioState) -> impl Stream<Item = Result<Event, Infallible>> {
    let receiver = state.events.subscribe();
    let hello = Event::default()
        .event("hello")
        .retry(std::time::Duration::from_secs(2))
        .data("{}");
    futures::stream::once(async move { Ok(hello) }).chain(futures::stream::unfold(
        receiver,
        |mut receiver| async move {
            let event = match receiver.recv().await {
                Ok(event) => Event::default()
                    .event(event.kind.as_str())
                    .data(event_json(&event).to_string()),
                Err(RecvError::Lagged(missed)) => Event::default()
                    .event("resync")
                    .data(json!({"missed": missed}).to_string()),
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(event), receiver))
        },
    ))
}

/// The events of the live stream, for the API's description.
pub const EVENTS: &str = "`hello` first, then one event per runtime event (`event:` its kind, `data:` the event as JSON), and `resync` ({missed}) when this client fell behind: refetch what you show";

/// `GET /api/v1/events`
pub async fn events(State(state): State<StudioState>) -> impl IntoResponse {
    Sse::new(stream(state)).keep_alive(KeepAlive::default())
}
