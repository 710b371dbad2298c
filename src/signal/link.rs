//! The inbound side of one Signal account: signal-cli's event stream (`GET /api/v1/events`, the
//! default) or its `receive` method in a loop (pull mode), read into [`LinkEvent`]s for the owner
//! (the account's actor) to store, with reconnection and a record of every gap.
//!
//! Why the stream with `--receive-mode=manual`: in signal-cli's HTTP daemon an open event stream
//! is what makes it receive (`HttpServerHandler` adds a receive handler per connection); with
//! `manual`, nothing is taken from Signal's servers while no stream is open, so what arrives
//! while clawvisor is down waits on Signal's servers instead of being printed to signal-cli's
//! standard output and lost. signal-cli acknowledges each message to Signal once it has written
//! it to the stream; the window in which a message is acknowledged but not yet stored by us is
//! that write, the socket, and the owner's commit (README "Signal").
//!
//! Reconnection: any failure (refused connection, an HTTP status other than 200, the stream
//! ending, no byte for `idle_timeout` — signal-cli writes a keep-alive every 15 s) is a drop;
//! the link waits `backoff_min`, doubling to `backoff_max` (±20 % jitter), and tries again. A
//! [`StreamGap`] records when the stream dropped, why, how many attempts failed and when it came
//! back; [`GapLog`] keeps the last ones for Studio.
//!
//! Invariants: the loop never panics and never ends by itself except when `stop` turns true or
//! the owner drops its receiver; events reach the owner in the order signal-cli wrote them, and
//! the link waits for the owner (a bounded channel) rather than buffering without limit.

use std::collections::VecDeque;
use std::time::Duration;

use rand::Rng as _;
use tokio::sync::{mpsc, watch};

use super::inbound::{OwnAccount, Received, parse_receive};
use super::rpc::SignalRpc;
use super::sse::{SseDecoder, SseEvent};

/// A connection attempt gives up after this long (an address that swallows packets).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Gaps kept by a [`GapLog`].
pub const GAPS_KEPT: usize = 50;

/// How a link connects and retries.
#[derive(Debug, Clone)]
pub struct LinkSettings {
    /// signal-cli's address, `http://127.0.0.1:7583`.
    pub base_url: String,
    pub own: OwnAccount,
    /// Name the account in requests (a daemon started without `-a` serves several).
    pub multi_account: bool,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// No byte (not even a keep-alive) for this long counts as a dropped stream.
    pub idle_timeout: Duration,
}

impl LinkSettings {
    /// The defaults for `account` at `base_url`: 500 ms doubling to 30 s, 45 s idle.
    pub fn new(base_url: &str, own: OwnAccount) -> LinkSettings {
        LinkSettings {
            base_url: base_url.trim_end_matches('/').to_string(),
            own,
            multi_account: false,
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(45),
        }
    }

    fn events_url(&self) -> String {
        let mut url = format!("{}/api/v1/events", self.base_url);
        if self.multi_account {
            url.push_str("?account=");
            url.extend(form_urlencoded::byte_serialize(self.own.number.as_bytes()));
        }
        url
    }
}

/// A time the stream was not there: from its drop until it came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamGap {
    pub dropped_at_ms: i64,
    /// `None` while the stream is still away.
    pub restored_at_ms: Option<i64>,
    /// Why it dropped, in words (the first failure of the gap).
    pub cause: String,
    /// Connection attempts that failed during the gap.
    pub failed_attempts: u32,
}

/// What the link tells its owner, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEvent {
    /// The stream is open (again); after a drop, with the gap it closed.
    Connected { at_ms: i64, gap: Option<StreamGap> },
    /// One object from signal-cli, read: store it now.
    Received(Received),
    /// An event that could not be read; the text says what is wrong with it.
    Unreadable(String),
    /// The stream dropped (or a reconnection failed); the link tries again in `retry_in`.
    Dropped {
        at_ms: i64,
        cause: String,
        retry_in: Duration,
    },
}

/// The last [`GAPS_KEPT`] gaps of a link, newest last; what Studio shows.
#[derive(Debug, Clone, Default)]
pub struct GapLog {
    gaps: VecDeque<StreamGap>,
}

impl GapLog {
    /// Records a link event: a first drop opens a gap, further drops count attempts, a
    /// connection closes it.
    pub fn observe(&mut self, event: &LinkEvent) {
        match event {
            LinkEvent::Dropped { at_ms, cause, .. } => match self.gaps.back_mut() {
                Some(open) if open.restored_at_ms.is_none() => open.failed_attempts += 1,
                _ => {
                    if self.gaps.len() == GAPS_KEPT {
                        self.gaps.pop_front();
                    }
                    self.gaps.push_back(StreamGap {
                        dropped_at_ms: *at_ms,
                        restored_at_ms: None,
                        cause: cause.clone(),
                        failed_attempts: 0,
                    });
                }
            },
            LinkEvent::Connected { at_ms, .. } => {
                if let Some(open) = self.gaps.back_mut()
                    && open.restored_at_ms.is_none()
                {
                    open.restored_at_ms = Some(*at_ms);
                }
            }
            _ => {}
        }
    }

    /// The gaps, oldest first.
    pub fn gaps(&self) -> impl Iterator<Item = &StreamGap> {
        self.gaps.iter()
    }

    /// The gap still open, if the stream is away now.
    pub fn open_gap(&self) -> Option<&StreamGap> {
        self.gaps.back().filter(|gap| gap.restored_at_ms.is_none())
    }
}

/// The owner went away: the link stops.
struct OwnerGone;

/// Reads the event stream until `stop` turns true or `sink`'s receiver is dropped.
pub async fn run_event_stream(
    settings: LinkSettings,
    sink: mpsc::Sender<LinkEvent>,
    mut stop: watch::Receiver<bool>,
) {
    let http = match reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
    {
        Ok(http) => http,
        Err(_) => reqwest::Client::new(),
    };
    let mut gaps = GapLog::default();
    let mut failures: u32 = 0;
    while !*stop.borrow() {
        let outcome = tokio::select! {
            outcome = stream_once(&http, &settings, &sink, &mut gaps) => outcome,
            _ = stop.changed() => return,
        };
        let cause = match outcome {
            Ok(Ok(cause)) => {
                failures = 0;
                cause
            }
            Ok(Err(cause)) => cause,
            Err(OwnerGone) => return,
        };
        if wait_before_retry(&settings, &sink, &mut gaps, &mut stop, &mut failures, cause)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Pulls with `receive` until `stop` turns true or `sink`'s receiver is dropped: each call waits
/// up to `wait` and takes at most `batch` messages.
pub async fn run_pull(
    settings: LinkSettings,
    wait: Duration,
    batch: u32,
    sink: mpsc::Sender<LinkEvent>,
    mut stop: watch::Receiver<bool>,
) {
    let account = settings.multi_account.then(|| settings.own.number.clone());
    let rpc = SignalRpc::new(&settings.base_url, account);
    let mut gaps = GapLog::default();
    let mut failures: u32 = 0;
    let mut connected = false;
    while !*stop.borrow() {
        let answer = tokio::select! {
            answer = rpc.receive(wait, batch, &settings.own) => answer,
            _ = stop.changed() => return,
        };
        let cause = match answer {
            Ok(items) => {
                if !connected {
                    connected = true;
                    failures = 0;
                    let event = connected_event(&gaps);
                    if tell(&sink, &mut gaps, event).await.is_err() {
                        return;
                    }
                }
                for item in items {
                    let event = match item {
                        Ok(received) => LinkEvent::Received(received),
                        Err(error) => LinkEvent::Unreadable(error.to_string()),
                    };
                    if tell(&sink, &mut gaps, event).await.is_err() {
                        return;
                    }
                }
                continue;
            }
            Err(error) => error.to_string(),
        };
        connected = false;
        if wait_before_retry(&settings, &sink, &mut gaps, &mut stop, &mut failures, cause)
            .await
            .is_err()
        {
            return;
        }
    }
}

/// One connection: `Ok(Ok(cause))` after it was open and then dropped, `Ok(Err(cause))` when it
/// could not be opened.
async fn stream_once(
    http: &reqwest::Client,
    settings: &LinkSettings,
    sink: &mpsc::Sender<LinkEvent>,
    gaps: &mut GapLog,
) -> Result<Result<String, String>, OwnerGone> {
    let response = match http
        .get(settings.events_url())
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send()
        .await
    {
        Ok(response) => response,
        Err(error) => {
            return Ok(Err(format!(
                "could not reach signal-cli at {}: {}",
                settings.base_url,
                crate::secrets::redact(&crate::cause::explain(&error))
            )));
        }
    };
    let status = response.status().as_u16();
    if status != 200 {
        return Ok(Err(format!(
            "signal-cli at {} answered HTTP {status} to the event stream{}",
            settings.base_url,
            if status == 400 {
                " (the account is not known to it: check [signal] account)"
            } else {
                ""
            }
        )));
    }
    let connected = connected_event(gaps);
    tell(sink, gaps, connected).await?;
    let mut response = response;
    let mut decoder = SseDecoder::default();
    loop {
        let chunk = match tokio::time::timeout(settings.idle_timeout, response.chunk()).await {
            Err(_) => {
                return Ok(Ok(format!(
                    "signal-cli's event stream was silent for {} s (no keep-alive)",
                    settings.idle_timeout.as_secs()
                )));
            }
            Ok(Ok(Some(chunk))) => chunk,
            Ok(Ok(None)) => return Ok(Ok("signal-cli closed the event stream".to_string())),
            Ok(Err(error)) => {
                return Ok(Ok(format!(
                    "the event stream broke: {}",
                    crate::secrets::redact(&crate::cause::explain(&error))
                )));
            }
        };
        for decoded in decoder.push(&chunk) {
            let event = match decoded {
                Ok(event) => read_event(event, &settings.own),
                Err(error) => Some(LinkEvent::Unreadable(error.to_string())),
            };
            if let Some(event) = event {
                tell(sink, gaps, event).await?;
            }
        }
    }
}

/// A `receive` event read; other event names are not signal-cli's and are skipped.
pub fn read_event(event: SseEvent, own: &OwnAccount) -> Option<LinkEvent> {
    if event.event != "receive" {
        return None;
    }
    Some(match parse_receive(&event.data, own) {
        Ok(received) => LinkEvent::Received(received),
        Err(error) => LinkEvent::Unreadable(error.to_string()),
    })
}

fn connected_event(gaps: &GapLog) -> LinkEvent {
    let at_ms = crate::clock::now_ms();
    LinkEvent::Connected {
        at_ms,
        gap: gaps.open_gap().map(|gap| StreamGap {
            restored_at_ms: Some(at_ms),
            ..gap.clone()
        }),
    }
}

async fn tell(
    sink: &mpsc::Sender<LinkEvent>,
    gaps: &mut GapLog,
    event: LinkEvent,
) -> Result<(), OwnerGone> {
    gaps.observe(&event);
    sink.send(event).await.map_err(|_| OwnerGone)
}

/// Reports the drop and waits out the backoff (or a stop).
async fn wait_before_retry(
    settings: &LinkSettings,
    sink: &mpsc::Sender<LinkEvent>,
    gaps: &mut GapLog,
    stop: &mut watch::Receiver<bool>,
    failures: &mut u32,
    cause: String,
) -> Result<(), OwnerGone> {
    let retry_in = backoff(settings, *failures);
    *failures = failures.saturating_add(1);
    let dropped = LinkEvent::Dropped {
        at_ms: crate::clock::now_ms(),
        cause,
        retry_in,
    };
    tell(sink, gaps, dropped).await?;
    tokio::select! {
        () = tokio::time::sleep(retry_in) => Ok(()),
        _ = stop.changed() => Ok(()),
    }
}

/// The wait before attempt `failures` (0-based): doubling from the minimum, capped, ±20 %.
pub fn backoff(settings: &LinkSettings, failures: u32) -> Duration {
    let base = settings
        .backoff_min
        .saturating_mul(1u32 << failures.min(20))
        .min(settings.backoff_max);
    let factor = rand::rng().random_range(0.8..=1.2);
    base.mul_f64(factor)
        .min(settings.backoff_max.max(settings.backoff_min))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gap_opens_on_the_first_drop_counts_retries_and_closes_on_connect() {
        let mut log = GapLog::default();
        let drop = |at_ms| LinkEvent::Dropped {
            at_ms,
            cause: format!("cause {at_ms}"),
            retry_in: Duration::ZERO,
        };
        log.observe(&LinkEvent::Connected {
            at_ms: 1,
            gap: None,
        });
        log.observe(&drop(10));
        log.observe(&drop(20));
        assert_eq!(log.open_gap().map(|gap| gap.failed_attempts), Some(1));
        log.observe(&LinkEvent::Connected {
            at_ms: 30,
            gap: None,
        });
        let gaps: Vec<_> = log.gaps().cloned().collect();
        assert_eq!(
            gaps,
            vec![StreamGap {
                dropped_at_ms: 10,
                restored_at_ms: Some(30),
                cause: "cause 10".into(),
                failed_attempts: 1
            }]
        );
        for at in 0..(GAPS_KEPT as i64 + 5) {
            log.observe(&drop(100 + at * 2));
            log.observe(&LinkEvent::Connected {
                at_ms: 101 + at * 2,
                gap: None,
            });
        }
        assert_eq!(log.gaps().count(), GAPS_KEPT);
    }

    #[test]
    fn backoff_doubles_within_its_bounds() {
        let settings = LinkSettings::new("http://127.0.0.1:1", OwnAccount::default());
        for failures in 0..40 {
            let wait = backoff(&settings, failures);
            assert!(
                wait >= settings.backoff_min.mul_f64(0.8),
                "{failures}: {wait:?}"
            );
            assert!(wait <= settings.backoff_max, "{failures}: {wait:?}");
        }
        assert!(backoff(&settings, 3) > backoff(&settings, 0));
    }
}
