//! The boot backlog's leftovers that nothing else finishes: updates that stayed `dispatched`
//! because their run crashed before its notice was queued in the outbox (the state a crash
//! loop under memory pressure left behind, issue #30). The first sweep after start queues the
//! crash notice for them, so the outbox delivers it once and marks them processed.
//!
//! Invariant: a failed run's updates are answered by exactly one outbox row; this adds one only
//! where none exists (`store::telegram::answer_crashed_runs`, one transaction).

use super::*;

/// Queues the crash notice for this bot's agent's crashed runs that have none (logged when
/// there were any); a failed write is logged and tried again at the next start.
pub(super) async fn answer_crashed_runs(state: &TelegramBotState) {
    let (agent, now) = (state.args.spec.name.clone(), crate::clock::now_ms());
    let queued = state
        .args
        .store
        .write(move |conn| crate::store::telegram::answer_crashed_runs(conn, &agent, now))
        .await;
    match queued {
        Ok(0) => {}
        Ok(runs) => {
            tracing::warn!(agent = %state.args.spec.name, runs, "messages of runs that crashed before they could answer get the crash notice now")
        }
        Err(error) => {
            tracing::warn!(agent = %state.args.spec.name, %error, "could not queue the notice for crashed runs; the next start tries again")
        }
    }
}
