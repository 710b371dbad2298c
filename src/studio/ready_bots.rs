//! What `/readyz` says about the configured bots: a bot counts as ready only once it is online
//! (it reached Telegram and polls), never merely because its actor runs. A bot that cannot get
//! online (too many open files, no network, a rejected token) holds readiness at 503 with its
//! reason, the same words as its status in Studio and the log.

use crate::protocol::events::TreeSnapshot;
use crate::protocol::telegram::Bot;

use super::StudioState;

/// The configured bots that are not online, each as `bot:<agent> (why)`, asked of the bots
/// themselves (all at once, each within the protocol's short timeout). Bots whose actor is still
/// starting are left to the caller, which lists them already.
pub(super) async fn bots_not_online(state: &StudioState, snapshot: &TreeSnapshot) -> Vec<String> {
    let expected = state.expect_ready();
    let asks = expected.iter().filter_map(|id| {
        let actor = snapshot.actors.iter().find(|actor| &actor.id == id)?;
        if actor.status == "starting" {
            return None;
        }
        let agent = id.strip_prefix("bot:").unwrap_or(id);
        let bot = Bot::new(&state.registry, agent);
        Some(async move {
            if actor.status == "running" && bot.is_online().await {
                return None;
            }
            Some(format!("{id} ({})", why_not_online(actor)))
        })
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Why a bot is not online, from its actor's state and last failure.
fn why_not_online(actor: &crate::protocol::events::ActorView) -> String {
    // The supervisor's failure events say "failed: <error>".
    let last_error = actor
        .last_error
        .as_deref()
        .map(|error| error.strip_prefix("failed: ").unwrap_or(error));
    match (actor.status, last_error) {
        ("running", None) => "connecting to Telegram".to_string(),
        ("running", Some(error)) => format!("starting again after: {error}"),
        ("stopped", _) => "stopped: see its status in Studio".to_string(),
        (status, Some(error)) => format!("{status}: {error}"),
        (status, None) => status.to_string(),
    }
}
