//! Pairing requests on WhatsApp and Signal in Studio: the pending ones in `GET /api/v1/people`'s
//! WhatsApp and Signal blocks (`pending`), and `POST /api/v1/channel-pairings/{code}/{approve|deny}`.
//!
//! A decision goes through `crate::channel::pairing::decide` (stored with its audit row in one
//! transaction, then announced as `audit_appended` and `people_changed`); an approved person is
//! told on their channel by the account, as when an approver answers `pair <code>` there.

use axum::Json;
use axum::extract::{Path, State};
use serde_json::{Value, json};

use super::openapi::{integer, object, one_of, string};
use super::{ApiError, StudioState};
use crate::domain::ChatKey;
use crate::people::PeopleError;
use crate::protocol::channel::ChannelAccount;
use crate::store::channels::ChannelPairing;
use crate::telegram::pairing::display;

/// Who the operator is in the audit log.
const OPERATOR: &str = "operator (studio)";

/// A pending request as the People page's WhatsApp and Signal blocks list it.
pub fn pending_json(pairing: &ChannelPairing) -> Value {
    json!({
        "code": pairing.code, "display": display(&pairing.code), "number": pairing.user,
        "name": pairing.name, "created_ms": pairing.created_ms, "expires_ms": pairing.expires_ms,
    })
}

/// The schema of [`pending_json`]'s objects.
pub fn pending_schema() -> Value {
    object([
        ("code", string()),
        ("display", string()),
        ("number", string()),
        ("name", string()),
        ("created_ms", integer()),
        ("expires_ms", integer()),
    ])
}

/// `POST /api/v1/channel-pairings/{code}/{operation}` with operation `approve` or `deny`.
pub async fn decide(
    State(state): State<StudioState>,
    Path((code, operation)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let approve = match operation.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(ApiError::bad_request(format!(
                "unknown operation `{other}` (one of: approve, deny)"
            )));
        }
    };
    let pairing = crate::channel::pairing::decide(
        &state.store,
        &state.events,
        &code,
        None,
        None,
        approve,
        OPERATOR,
    )
    .await
    .map_err(|error| match error {
        PeopleError::Store(error) => error.into(),
        PeopleError::NotFound(message) => ApiError::not_found(message),
        PeopleError::Conflict(message) => ApiError::conflict(message),
    })?;
    if approve && let Some(chat) = ChatKey::seam(&pairing.channel, &pairing.user) {
        // Told by their account; the account being down only loses this notice.
        ChannelAccount::new(&state.registry, &pairing.channel, &pairing.agent)
            .notify(chat, crate::people::paired_reply(&pairing.name));
    }
    Ok(Json(json!({
        "agent": pairing.agent, "channel": pairing.channel, "number": pairing.user,
        "name": pairing.name, "status": if approve { "paired" } else { "denied" },
    })))
}

/// What `POST /api/v1/channel-pairings/{code}/{operation}` answers.
pub fn decide_schema() -> Value {
    object([
        ("agent", string()),
        ("channel", one_of(&["wa", "sg"])),
        ("number", string()),
        ("name", string()),
        ("status", one_of(&["paired", "denied"])),
    ])
}
