//! The daemon's recent log lines for Studio's Logs page: `GET /api/v1/logs` (paged, newest
//! first) and `GET /api/v1/logs/events` (a live tail as Server-Sent Events), both filtered by
//! level and text. The lines come from the in-memory ring of `crate::logging::recent`.
//!
//! The tail is a stream of its own rather than part of `/api/v1/events`: the event bus is
//! persisted (`runtime_events`) and shared by every open page, whereas log lines are many,
//! already kept by the ring, and filtered per viewer. A tail resumes from the browser's
//! `Last-Event-ID` (each line's `id:` is its number), so a reconnect loses nothing the ring
//! still holds; when lines were dropped before it could read them it gets a `gap` event with
//! their count.
//!
//! Invariant: every text is redacted again on the way out ([`crate::secrets::redact`]), so a
//! secret registered after a line was kept never reaches a browser.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::ApiError;
use super::audit::number_param;
use super::openapi::{array, described, integer, map, nullable, object, one_of, string};
use crate::logging::recent::{self, LineFilter, LogLine, Severity};

/// Lines one live read sends at most before it looks again.
const TAIL_BATCH: usize = 200;

/// The filter parameters both routes take.
#[derive(Deserialize, JsonSchema)]
pub struct LinesQuery {
    /// The least severe level shown: `error`, `warn`, `info` (the default), `debug`, `trace`.
    level: Option<String>,
    /// Text the message, the target or a field contains (any case).
    q: Option<String>,
    /// `GET /api/v1/logs`: lines older than this number.
    #[schemars(with = "Option<u64>")]
    before: Option<String>,
    /// `GET /api/v1/logs`: how many lines (default 200, at most 2,000).
    #[schemars(with = "Option<u32>")]
    limit: Option<String>,
    /// `GET /api/v1/logs/events`: send the lines after this number (default: only new ones).
    #[schemars(with = "Option<u64>")]
    after: Option<String>,
}

impl LinesQuery {
    fn filter(&self) -> Result<LineFilter, ApiError> {
        let severity = match self.level.as_deref().map(str::trim) {
            None | Some("") => Severity::Info,
            Some(name) => Severity::parse(name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`level` must be one of error, warn, info, debug, trace (got `{name}`)"
                ))
            })?,
        };
        Ok(LineFilter::new(severity, self.q.as_deref().unwrap_or("")))
    }
}

/// A kept line as JSON, redacted again.
fn line_json(line: &LogLine) -> Value {
    let redact = |text: &str| crate::secrets::redact(text).into_owned();
    let fields: Map<String, Value> = line
        .fields
        .iter()
        .map(|(name, value)| (name.to_string(), Value::String(redact(value))))
        .collect();
    json!({
        "seq": line.seq, "at_ms": line.at_ms, "level": line.severity.as_str(),
        "target": redact(&line.target), "message": redact(&line.message), "fields": fields,
    })
}

/// A kept line as [`line_json`] shows it.
fn line_schema() -> Value {
    object([
        (
            "seq",
            described("the line's number (1 for the process's first)", integer()),
        ),
        ("at_ms", integer()),
        (
            "level",
            one_of(&["error", "warn", "info", "debug", "trace"]),
        ),
        (
            "target",
            described("where in the code it comes from", string()),
        ),
        ("message", string()),
        ("fields", map(string())),
    ])
}

/// `GET /api/v1/logs?level=&q=&before=SEQ&limit=200`: the matching lines, newest first, with
/// `next_before` to page on, `newest` (where a live tail starts) and what the ring holds.
pub async fn lines(Query(query): Query<LinesQuery>) -> Result<Json<Value>, ApiError> {
    let filter = query.filter()?;
    let limit = number_param::<usize>("limit", query.limit.as_deref())?
        .unwrap_or(200)
        .clamp(1, recent::MAX_LINES);
    let before = number_param::<u64>("before", query.before.as_deref())?;
    let ring = recent::recent();
    let stats = ring.stats();
    let page = ring.page(&filter, before, limit);
    let next_before = (page.len() == limit)
        .then(|| page.last().map(|line| line.seq))
        .flatten();
    Ok(Json(json!({
        "lines": page.iter().map(line_json).collect::<Vec<_>>(),
        "next_before": next_before,
        "newest": stats.newest_seq,
        "held": {"lines": stats.lines, "bytes": stats.bytes, "dropped": stats.dropped},
        "limits": {"lines": recent::MAX_LINES, "bytes": recent::MAX_BYTES},
        "recording": ring.recording(),
    })))
}

/// A live tail's state between two sends.
struct Tail {
    newest: watch::Receiver<u64>,
    cursor: u64,
    filter: LineFilter,
    queued: VecDeque<Event>,
}

impl Tail {
    /// Queues what arrived after the cursor; false when there was nothing new to look at.
    fn read(&mut self) -> bool {
        let batch = recent::recent().after(&self.filter, self.cursor, TAIL_BATCH);
        let moved = batch.cursor != self.cursor;
        if batch.missed > 0 {
            self.queued.push_back(
                Event::default()
                    .event("gap")
                    .data(json!({"missed": batch.missed}).to_string()),
            );
        }
        for line in &batch.lines {
            self.queued.push_back(
                Event::default()
                    .event("line")
                    .id(line.seq.to_string())
                    .data(line_json(line).to_string()),
            );
        }
        self.cursor = batch.cursor;
        moved
    }
}

fn tail_stream(tail: Tail) -> impl Stream<Item = Result<Event, Infallible>> {
    let hello = Event::default()
        .event("hello")
        .retry(Duration::from_secs(2))
        .data(json!({"newest": recent::recent().stats().newest_seq}).to_string());
    futures::stream::once(async move { Ok(hello) }).chain(futures::stream::unfold(
        tail,
        |mut tail| async move {
            loop {
                if let Some(event) = tail.queued.pop_front() {
                    return Some((Ok(event), tail));
                }
                // Marked seen before reading, so a line kept during the read wakes us again.
                tail.newest.borrow_and_update();
                if tail.read() {
                    continue;
                }
                // The sender lives as long as the process; an error would mean it is gone.
                if tail.newest.changed().await.is_err() {
                    return None;
                }
            }
        },
    ))
}

/// What `GET /api/v1/logs` answers.
pub fn lines_schema() -> Value {
    object([
        ("lines", array(line_schema())),
        ("next_before", nullable(integer())),
        (
            "newest",
            described(
                "the newest line's number: where a live tail starts",
                integer(),
            ),
        ),
        (
            "held",
            object([
                ("lines", integer()),
                ("bytes", integer()),
                ("dropped", integer()),
            ]),
        ),
        (
            "limits",
            object([("lines", integer()), ("bytes", integer())]),
        ),
        (
            "recording",
            described(
                "the filter the daemon logs with (null: the log is not set up, nothing is kept)",
                nullable(string()),
            ),
        ),
    ])
}

/// The events of the live tail, for the API's description.
pub const EVENTS: &str = "`hello` ({newest}), then `line` (a line as in GET /api/v1/logs; `id:` its number) for each new matching line, and `gap` ({missed}) when lines were dropped before they were sent";

/// `GET /api/v1/logs/events?level=&q=&after=SEQ`: every new matching line as an SSE `line`
/// event (`id:` its number), `gap` when lines were dropped before they were sent, and `hello`
/// first with the newest line's number.
pub async fn events(
    Query(query): Query<LinesQuery>,
    headers: HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    let filter = query.filter()?;
    let resumed = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    let after = number_param::<u64>("after", query.after.as_deref())?;
    let cursor = resumed
        .or(after)
        .unwrap_or_else(|| recent::recent().stats().newest_seq);
    let tail = Tail {
        newest: recent::recent().subscribe(),
        cursor,
        filter,
        queued: VecDeque::new(),
    };
    Ok(Sse::new(tail_stream(tail)).keep_alive(KeepAlive::default()))
}
