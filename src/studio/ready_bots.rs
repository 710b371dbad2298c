//! What `/readyz` says about the configured bots and channel accounts (WhatsApp, Signal): one
//! counts as ready only once it is online (a bot reached Telegram and polls; an account's
//! credentials were accepted, or its signal-cli answers), never merely because its actor runs.
//! One that cannot get online (too many open files, no network, a rejected token) holds
//! readiness at 503 with its reason, the same words as its status in Studio and the log.

use crate::protocol::channel::ChannelAccount;
use crate::protocol::events::TreeSnapshot;
use crate::protocol::telegram::Bot;

use super::StudioState;

/// The configured bots and channel accounts that are not online, each as `bot:<agent> (why)` or
/// `channel:wa:<agent> (why)`, asked of the actors themselves (all at once, each within the
/// protocol's short timeout). Actors still starting are left to the caller, which lists them.
pub(super) async fn bots_not_online(state: &StudioState, snapshot: &TreeSnapshot) -> Vec<String> {
    let expected = state.expect_ready();
    let asks = expected.iter().filter_map(|id| {
        let actor = snapshot.actors.iter().find(|actor| &actor.id == id)?;
        if actor.status == "starting" {
            return None;
        }
        let registry = state.registry.clone();
        Some(async move {
            let (online, service) = match id.strip_prefix("channel:") {
                Some(account) => {
                    let (channel, agent) = account.split_once(':').unwrap_or((account, ""));
                    let online = actor.status == "running"
                        && ChannelAccount::new(&registry, channel, agent)
                            .is_online()
                            .await;
                    let service = match channel {
                        "wa" => "WhatsApp",
                        "sg" => "Signal",
                        _ => "its channel",
                    };
                    (online, service)
                }
                None => {
                    let agent = id.strip_prefix("bot:").unwrap_or(id);
                    let online =
                        actor.status == "running" && Bot::new(&registry, agent).is_online().await;
                    (online, "Telegram")
                }
            };
            (!online).then(|| format!("{id} ({})", why_not_online(actor, service)))
        })
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// Why a bot or account is not online, from its actor's state and last failure.
fn why_not_online(actor: &crate::protocol::events::ActorView, service: &str) -> String {
    // The supervisor's failure events say "failed: <error>".
    let last_error = actor
        .last_error
        .as_deref()
        .map(|error| error.strip_prefix("failed: ").unwrap_or(error));
    match (actor.status, last_error) {
        ("running", None) => format!("connecting to {service}"),
        ("running", Some(error)) => format!("starting again after: {error}"),
        ("stopped", _) => "stopped: see its status in Studio".to_string(),
        (status, Some(error)) => format!("{status}: {error}"),
        (status, None) => status.to_string(),
    }
}
