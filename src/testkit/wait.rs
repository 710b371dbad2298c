//! Waiting for a state instead of sleeping for it: tests poll the row, event or file that proves
//! what they expect, a few milliseconds apart, and fail with a message naming what they waited for
//! and for how long. One helper so that every test polls the same way (small interval, one
//! deadline, one message shape) instead of each file hand-rolling its own loop.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long to wait between two probes: small, so a test waits little past the moment the state
/// is reached, and large enough not to starve the daemon's own tasks on a two-core machine.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// What a probe answers: "not yet", or "yes" with the value the caller waited for.
pub trait Awaited {
    /// What the wait hands back once the state is reached.
    type Value;
    /// `Ok(value)` when the state is reached; `Err(description)` with what was seen instead
    /// (empty when the probe has nothing to say), for the timeout's message.
    fn settle(self) -> Result<Self::Value, String>;
}

impl Awaited for bool {
    type Value = ();
    fn settle(self) -> Result<(), String> {
        if self { Ok(()) } else { Err(String::new()) }
    }
}

impl<T> Awaited for Option<T> {
    type Value = T;
    fn settle(self) -> Result<T, String> {
        self.ok_or_else(String::new)
    }
}

/// A probe may also answer `Err(what it saw)`, which the timeout's message then quotes.
impl<T, E: std::fmt::Display> Awaited for Result<T, E> {
    type Value = T;
    fn settle(self) -> Result<T, String> {
        self.map_err(|seen| seen.to_string())
    }
}

fn timed_out(what: &str, timeout: Duration, seen: &str) -> ! {
    if seen.is_empty() {
        panic!("waited {timeout:?} for {what}, in vain");
    }
    panic!("waited {timeout:?} for {what}, in vain; last seen: {seen}");
}

/// Probes until `probe` says the state is reached (`true`, `Some(value)` or `Ok(value)`) and
/// returns its value; panics naming `what` and `timeout` when the state is not reached in time.
/// The probe runs at least once, also with a zero timeout.
pub async fn wait_until<F, Fut>(
    timeout: Duration,
    what: &str,
    probe: F,
) -> <Fut::Output as Awaited>::Value
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Awaited,
{
    match poll_until(timeout, probe).await {
        Ok(value) => value,
        Err(seen) => timed_out(what, timeout, &seen),
    }
}

/// Like [`wait_until`], but hands the timeout back as `Err(last seen)` instead of panicking, for
/// callers that assert on what they saw.
pub async fn poll_until<F, Fut>(
    timeout: Duration,
    mut probe: F,
) -> Result<<Fut::Output as Awaited>::Value, String>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Awaited,
{
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match probe().await.settle() {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(seen);
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// [`wait_until`] for code without a runtime (a plain `#[test]`, a blocking helper): the probe is
/// a plain function and the pause a thread sleep.
pub fn wait_until_blocking<R: Awaited>(
    timeout: Duration,
    what: &str,
    mut probe: impl FnMut() -> R,
) -> R::Value {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = match probe().settle() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            timed_out(what, timeout, &seen);
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn returns_the_value_once_the_probe_reaches_it() {
        let calls = AtomicU32::new(0);
        let value = wait_until(Duration::from_secs(5), "the third call", || async {
            let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
            (call >= 3).then_some(call)
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waited 50ms for a state that never comes, in vain; last seen: 7")]
    async fn panics_naming_what_was_awaited_and_what_was_seen() {
        wait_until(
            Duration::from_millis(50),
            "a state that never comes",
            || async { Err::<(), _>(7) },
        )
        .await;
    }

    #[test]
    fn the_blocking_form_probes_at_least_once_with_a_zero_timeout() {
        wait_until_blocking(Duration::ZERO, "a true probe", || true);
        assert!(
            std::panic::catch_unwind(|| wait_until_blocking(Duration::ZERO, "false", || false))
                .is_err()
        );
    }
}
