//! The server side of the fake: the state shared with the test controls, the HTTP handler that
//! routes `/bot<TOKEN>/<method>` and `/file/bot<TOKEN>/<path>`, and long-poll bookkeeping.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::Request;
use axum::response::Response;
use serde_json::Value;
use tokio::sync::Notify;

use super::MAX_LONG_POLL;
use super::state::World;
use super::wire::{Params, Reply, canonical_method};

/// What the server task and the test controls share.
pub(super) struct Shared {
    pub(super) world: Mutex<World>,
    /// Woken after every state change, for the `wait_for_*` controls.
    pub(super) activity: Notify,
    pub(super) started: Instant,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, World> {
        // A poisoned lock only means a test thread panicked while holding it; the state is
        // still consistent enough for a fake, and refusing to serve would hide the real failure.
        self.world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs one Bot API call of `bot`: counts it, applies the injected faults, then the method.
    /// `None` means "close the connection without answering".
    async fn call(
        &self,
        bot: usize,
        method_key: &str,
        method_name: &str,
        params: Params,
    ) -> Option<Reply> {
        {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            *state.calls.entry(method_name.to_string()).or_default() += 1;
            if state.faults.revoked {
                return Some(Reply::unauthorized());
            }
            if state.faults.resets > 0 {
                state.faults.resets -= 1;
                return None;
            }
            if let Some(fault) = state.faults.rate_limits.get_mut(method_key)
                && fault.remaining > 0
            {
                fault.remaining -= 1;
                return Some(Reply::too_many_requests(fault.retry_after_secs));
            }
            if let Some(remaining) = state.faults.server_errors.get_mut(method_key)
                && *remaining > 0
            {
                *remaining -= 1;
                return Some(Reply::bad_gateway());
            }
            if method_key == "getupdates" && state.faults.conflicts > 0 {
                state.faults.conflicts -= 1;
                return Some(Reply::conflict());
            }
        }
        // The call is counted: tests waiting for it must see it now, not when it is answered.
        self.activity.notify_waiters();
        let held = {
            let mut world = self.lock();
            match world.bots[bot].faults.holds.get_mut(method_key) {
                Some((remaining, carried_out)) if *remaining > 0 => {
                    *remaining -= 1;
                    Some(*carried_out)
                }
                _ => None,
            }
        };
        if let Some(carried_out) = held {
            if carried_out {
                let _done = self.lock().call(bot, method_key, &params, self.started);
                self.activity.notify_waiters();
            }
            // No answer, ever: the connection stays open until the client goes or the fake stops.
            std::future::pending::<()>().await;
        }
        if method_key == "getupdates" {
            return Some(self.get_updates(bot, &params).await);
        }
        let mut world = self.lock();
        Some(world.call(bot, method_key, &params, self.started))
    }

    async fn get_updates(&self, bot: usize, params: &Params) -> Reply {
        let offset = match params.integer("offset") {
            Ok(offset) => offset.unwrap_or(0),
            Err(description) => return Reply::bad_request(description),
        };
        let limit = match params.integer("limit") {
            Ok(limit) => limit.unwrap_or(100).clamp(1, 100) as usize,
            Err(description) => return Reply::bad_request(description),
        };
        let timeout = match params.integer("timeout") {
            Ok(seconds) => {
                Duration::from_secs(seconds.unwrap_or(0).max(0) as u64).min(MAX_LONG_POLL)
            }
            Err(description) => return Reply::bad_request(description),
        };
        let allowed_updates = match params.json("allowed_updates") {
            Ok(None) => None,
            Ok(Some(Value::Array(kinds))) => Some(
                kinds
                    .iter()
                    .filter_map(|kind| kind.as_str().map(str::to_string))
                    .collect::<Vec<_>>(),
            ),
            Ok(Some(_)) => {
                return Reply::bad_request("Bad Request: can't parse allowed_updates JSON array");
            }
            Err(description) => return Reply::bad_request(description),
        };
        // This request displaces any getUpdates of the same bot still waiting, as on Telegram.
        let (generation, updates_notify, hang_until) = {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            state.poll_generation += 1;
            state.updates_notify.notify_waiters();
            (
                state.poll_generation,
                Arc::clone(&state.updates_notify),
                state.faults.hang_until,
            )
        };
        if let Some(until) = hang_until
            && until > Instant::now()
        {
            tokio::time::sleep_until(tokio::time::Instant::from_std(until)).await;
        }
        {
            let mut world = self.lock();
            let state = &mut world.bots[bot];
            if state.poll_generation != generation {
                return Reply::conflict();
            }
            state.confirm(offset);
            if let Some(kinds) = allowed_updates {
                state.allowed_updates = kinds;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let _waiting = PollGuard::enter(self, bot);
        loop {
            let notified = updates_notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let world = self.lock();
                let state = &world.bots[bot];
                if state.faults.revoked {
                    return Reply::unauthorized();
                }
                if state.poll_generation != generation {
                    return Reply::conflict();
                }
                let batch = state.deliverable(limit);
                if !batch.is_empty() || tokio::time::Instant::now() >= deadline {
                    return Reply::Done(Value::Array(batch));
                }
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// Counts a long poll as waiting for as long as it lives (it may be dropped mid-wait when its
/// connection closes).
struct PollGuard<'a> {
    shared: &'a Shared,
    bot: usize,
}

impl<'a> PollGuard<'a> {
    fn enter(shared: &'a Shared, bot: usize) -> PollGuard<'a> {
        shared.lock().bots[bot].polls_waiting += 1;
        shared.activity.notify_waiters();
        PollGuard { shared, bot }
    }
}

impl Drop for PollGuard<'_> {
    fn drop(&mut self) {
        {
            let mut world = self.shared.lock();
            let state = &mut world.bots[self.bot];
            state.polls_waiting = state.polls_waiting.saturating_sub(1);
        }
        self.shared.activity.notify_waiters();
    }
}

/// Answers one HTTP request; `None` closes the connection without an answer.
pub(super) async fn handle(shared: Arc<Shared>, request: Request<Body>) -> Option<Response> {
    let path = request.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/file/bot") {
        let reply = download(&shared, rest);
        shared.activity.notify_waiters();
        return Some(reply.into_response());
    }
    let Some((token, method)) = path
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
    else {
        return Some(Reply::not_found().into_response());
    };
    let method_key = method.to_ascii_lowercase();
    let method_name =
        canonical_method(&method_key).map_or_else(|| method.to_string(), str::to_string);
    let bot = shared.lock().by_token.get(token).copied();
    let Some(bot) = bot else {
        return Some(Reply::unauthorized().into_response());
    };
    // The whole request is read before any fault applies, so a dropped connection is seen by
    // the client as "no answer", never as "could not send".
    let reply = match Params::from_request(request).await {
        Ok(params) => shared.call(bot, &method_key, &method_name, params).await,
        Err(description) => Some(Reply::bad_request(description)),
    };
    shared.activity.notify_waiters();
    reply.map(Reply::into_response)
}

/// Serves `/file/bot<TOKEN>/<path>`. teloxide sends the path as one percent-encoded segment
/// (`photos%2Ffile_1.jpg`), so it is decoded first.
fn download(shared: &Shared, token_and_path: &str) -> Reply {
    let Some((token, path)) = token_and_path.split_once('/') else {
        return Reply::not_found();
    };
    let path = percent_decode(path);
    let path = path.as_str();
    let mut world = shared.lock();
    let Some(&bot) = world.by_token.get(token) else {
        return Reply::unauthorized();
    };
    let state = &mut world.bots[bot];
    *state.calls.entry("downloadFile".to_string()).or_default() += 1;
    if state.faults.revoked {
        return Reply::unauthorized();
    }
    state
        .file_paths
        .get(path)
        .and_then(|file_id| state.files.get(file_id))
        .map_or_else(Reply::not_found, |file| Reply::File(file.bytes.clone()))
}

/// Decodes `%XX` escapes of a URL path; anything malformed is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%'
            && let Some(hex) = text.get(index + 1..index + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            decoded.push(byte);
            index += 3;
            continue;
        }
        decoded.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&decoded).into_owned()
}
