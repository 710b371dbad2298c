//! The daemon's most recent log lines, kept in memory for Studio's Logs page.
//!
//! [`RecentLayer`] is a tracing layer beside the stderr writer: it sees every event the log
//! filter lets through and keeps it in one bounded ring ([`recent`]) as a structured line — the
//! level, the target, the plain message and the fields, each redacted with
//! [`crate::secrets::redact`] before it is stored. Studio pages through the ring newest first
//! ([`RecentLines::page`]) and follows it live ([`RecentLines::after`] with the
//! [`RecentLines::subscribe`] notifier, which carries the newest line's number).
//!
//! Invariants:
//! - Bounded: at most [`MAX_LINES`] lines and [`MAX_BYTES`] of them (each line counted as its
//!   struct plus its text), whichever is reached first; the oldest lines go first. One line's
//!   message is cut at [`MAX_MESSAGE_BYTES`] and each field at [`MAX_FIELD_BYTES`], so a single
//!   huge line cannot push every other line out. Nothing is allocated before the first line.
//! - No secret is stored: every text is redacted on the way in (and Studio redacts again on the
//!   way out, for a secret registered after the line was written).
//! - Line numbers (`seq`) start at 1 and only grow, so a reader's cursor stays meaningful after
//!   older lines were dropped; a reader that fell behind the ring learns how many it missed.
//! - The layer never logs, so writing a line cannot produce another one.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, MutexGuard, OnceLock};

use tokio::sync::watch;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The most lines the ring keeps.
pub const MAX_LINES: usize = 2_000;
/// The most bytes the kept lines may take (structs and text together).
pub const MAX_BYTES: usize = 1024 * 1024;
/// A line's message is cut at this many bytes (an ellipsis marks the cut).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024;
/// Each field's value is cut at this many bytes.
pub const MAX_FIELD_BYTES: usize = 1024;
/// Fields kept per line beyond which the rest are dropped.
const MAX_FIELDS: usize = 16;

/// A line's level, from the most to the least severe (the order filters compare).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl Severity {
    /// Every level, most severe first.
    pub const ALL: [Severity; 5] = [
        Severity::Error,
        Severity::Warn,
        Severity::Info,
        Severity::Debug,
        Severity::Trace,
    ];

    /// The level's name as filters and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warn => "warn",
            Severity::Info => "info",
            Severity::Debug => "debug",
            Severity::Trace => "trace",
        }
    }

    /// The level named `name` (`error`, `warn`, `info`, `debug`, `trace`; any case).
    pub fn parse(name: &str) -> Option<Severity> {
        Severity::ALL
            .into_iter()
            .find(|severity| severity.as_str().eq_ignore_ascii_case(name.trim()))
    }

    fn from_level(level: &Level) -> Severity {
        match *level {
            Level::ERROR => Severity::Error,
            Level::WARN => Severity::Warn,
            Level::INFO => Severity::Info,
            Level::DEBUG => Severity::Debug,
            Level::TRACE => Severity::Trace,
        }
    }
}

/// One kept log line, already redacted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// The line's number: 1 for the process's first line, one more for each after it.
    pub seq: u64,
    pub at_ms: i64,
    pub severity: Severity,
    /// Where in the code it comes from (`clawvisor::actors::studio`).
    pub target: Box<str>,
    /// The plain message.
    pub message: Box<str>,
    /// The structured fields, by name, in the order they were written.
    pub fields: Box<[(&'static str, Box<str>)]>,
}

impl LogLine {
    /// What the line costs in the ring: its struct and its text.
    fn cost(&self) -> usize {
        std::mem::size_of::<LogLine>()
            + self.target.len()
            + self.message.len()
            + self
                .fields
                .iter()
                .map(|(_, value)| std::mem::size_of::<(&str, Box<str>)>() + value.len())
                .sum::<usize>()
    }
}

/// Which lines a reader wants: at least as severe as `severity`, and (when set) containing
/// `text` in the message, the target or a field, ignoring case.
#[derive(Debug, Clone)]
pub struct LineFilter {
    severity: Severity,
    /// Lowercased; `None` matches every line.
    text: Option<String>,
}

impl LineFilter {
    /// Lines at `severity` or more severe, containing `text` (empty: any).
    pub fn new(severity: Severity, text: &str) -> LineFilter {
        let text = text.trim();
        LineFilter {
            severity,
            text: (!text.is_empty()).then(|| text.to_lowercase()),
        }
    }

    /// Whether `line` passes. The text is searched in the redacted line, so a search cannot
    /// tell whether a secret registered after the line was written is in it.
    pub fn matches(&self, line: &LogLine) -> bool {
        if line.severity > self.severity {
            return false;
        }
        let Some(text) = &self.text else {
            return true;
        };
        let contains = |haystack: &str| {
            crate::secrets::redact(haystack)
                .to_lowercase()
                .contains(text.as_str())
        };
        contains(&line.message)
            || contains(&line.target)
            || line
                .fields
                .iter()
                .any(|(name, value)| name.contains(text.as_str()) || contains(value))
    }
}

/// What a live reader gets from [`RecentLines::after`].
#[derive(Debug, Default)]
pub struct Batch {
    /// The matching lines after the cursor, oldest first.
    pub lines: Vec<LogLine>,
    /// The new cursor: the last line looked at (matching or not).
    pub cursor: u64,
    /// Lines after the old cursor that were dropped from the ring before this read.
    pub missed: u64,
}

/// What the ring holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingStats {
    pub lines: usize,
    pub bytes: usize,
    /// The newest line's number (0 before the first line).
    pub newest_seq: u64,
    /// Lines dropped to stay within the bounds since the process started.
    pub dropped: u64,
}

#[derive(Default)]
struct Ring {
    lines: VecDeque<LogLine>,
    bytes: usize,
    last_seq: u64,
    dropped: u64,
}

/// The ring and its notifier. The daemon's is [`recent`]; another (`default()`) is for
/// measuring and testing a ring on its own.
pub struct RecentLines {
    ring: Mutex<Ring>,
    newest: watch::Sender<u64>,
    /// The filter the daemon logs with (`info`, `clawvisor=debug,info`), once logging started.
    recording: OnceLock<String>,
}

/// The process's one ring.
pub fn recent() -> &'static RecentLines {
    static RECENT: OnceLock<RecentLines> = OnceLock::new();
    RECENT.get_or_init(RecentLines::default)
}

impl Default for RecentLines {
    fn default() -> Self {
        RecentLines {
            ring: Mutex::new(Ring::default()),
            newest: watch::Sender::new(0),
            recording: OnceLock::new(),
        }
    }
}

impl RecentLines {
    fn ring(&self) -> MutexGuard<'_, Ring> {
        // A poisoned lock means a thread panicked between two statements that each leave the
        // ring whole (a push or a pop), so its content is still valid.
        self.ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Keeps a line (its texts are redacted here), dropping the oldest past the bounds, and
    /// wakes the live readers. Returns its number.
    pub fn push(
        &self,
        severity: Severity,
        target: &str,
        message: &str,
        fields: Vec<(&'static str, String)>,
    ) -> u64 {
        let fields: Vec<(&'static str, Box<str>)> = fields
            .into_iter()
            .take(MAX_FIELDS)
            .map(|(name, value)| (name, kept_text(&value, MAX_FIELD_BYTES)))
            .collect();
        let mut line = LogLine {
            seq: 0,
            at_ms: crate::clock::now_ms(),
            severity,
            target: kept_text(target, MAX_FIELD_BYTES),
            message: kept_text(message, MAX_MESSAGE_BYTES),
            fields: fields.into_boxed_slice(),
        };
        let seq = {
            let mut ring = self.ring();
            ring.last_seq += 1;
            line.seq = ring.last_seq;
            ring.bytes += line.cost();
            ring.lines.push_back(line);
            while ring.lines.len() > MAX_LINES || (ring.bytes > MAX_BYTES && ring.lines.len() > 1) {
                if let Some(oldest) = ring.lines.pop_front() {
                    ring.bytes -= oldest.cost();
                    ring.dropped += 1;
                }
            }
            ring.last_seq
        };
        self.newest.send_replace(seq);
        seq
    }

    /// Up to `limit` matching lines older than `before` (all when `None`), newest first.
    pub fn page(&self, filter: &LineFilter, before: Option<u64>, limit: usize) -> Vec<LogLine> {
        let ring = self.ring();
        ring.lines
            .iter()
            .rev()
            .filter(|line| before.is_none_or(|before| line.seq < before))
            .filter(|line| filter.matches(line))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Up to `limit` matching lines after line `cursor`, oldest first, with the new cursor and
    /// how many lines after `cursor` were dropped before they could be read.
    /// A cursor past the newest line came from an earlier process (a browser reconnecting
    /// after a restart) and reads from the start.
    pub fn after(&self, filter: &LineFilter, cursor: u64, limit: usize) -> Batch {
        let ring = self.ring();
        let cursor = if cursor > ring.last_seq { 0 } else { cursor };
        let oldest = ring
            .lines
            .front()
            .map_or(ring.last_seq + 1, |line| line.seq);
        let missed = oldest.saturating_sub(cursor.saturating_add(1));
        let mut batch = Batch {
            lines: Vec::new(),
            cursor: cursor.max(oldest.saturating_sub(1)),
            missed,
        };
        // Lines are in `seq` order without gaps, so the first unread one is found by offset.
        let start = usize::try_from(batch.cursor + 1 - oldest).unwrap_or(usize::MAX);
        for line in ring.lines.iter().skip(start) {
            batch.cursor = line.seq;
            if filter.matches(line) {
                batch.lines.push(line.clone());
                if batch.lines.len() >= limit {
                    break;
                }
            }
        }
        batch
    }

    /// A receiver whose value is the newest line's number; it changes with every new line.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.newest.subscribe()
    }

    /// What the ring holds now.
    pub fn stats(&self) -> RingStats {
        let ring = self.ring();
        RingStats {
            lines: ring.lines.len(),
            bytes: ring.bytes,
            newest_seq: ring.last_seq,
            dropped: ring.dropped,
        }
    }

    /// The filter the daemon logs with, once [`super::init`] installed it.
    pub fn recording(&self) -> Option<&str> {
        self.recording.get().map(String::as_str)
    }

    pub(super) fn set_recording(&self, filter: &str) {
        let _ = self.recording.set(filter.to_string());
    }
}

/// `text` redacted and cut at `max` bytes (at a character boundary, an ellipsis marking the cut).
fn kept_text(text: &str, max: usize) -> Box<str> {
    let redacted = crate::secrets::redact(text);
    if redacted.len() <= max {
        return Box::from(redacted.as_ref());
    }
    let mut end = max;
    while !redacted.is_char_boundary(end) {
        end -= 1;
    }
    let mut cut = String::with_capacity(end + 3);
    cut.push_str(&redacted[..end]);
    cut.push('…');
    cut.into_boxed_str()
}

/// The tracing layer that fills [`recent`]; installed by [`super::init`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RecentLayer;

impl<S: Subscriber> Layer<S> for RecentLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let metadata = event.metadata();
        let mut visitor = LineVisitor::default();
        event.record(&mut visitor);
        let target = visitor
            .log_target
            .take()
            .unwrap_or_else(|| metadata.target().to_string());
        recent().push(
            Severity::from_level(metadata.level()),
            &target,
            &visitor.message,
            visitor.fields,
        );
    }
}

/// Collects an event's message and fields as text.
#[derive(Default)]
struct LineVisitor {
    message: String,
    fields: Vec<(&'static str, String)>,
    /// The target of a record from the `log` crate (its metadata names the bridge instead).
    log_target: Option<String>,
}

impl LineVisitor {
    fn keep(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "log.target" => self.log_target = Some(value),
            // The bridge's location fields say where in a dependency the line was written.
            name if name.starts_with("log.") => {}
            name => self.fields.push((name, value)),
        }
    }
}

impl Visit for LineVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.keep(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = write!(text, "{value:?}");
        self.keep(field, text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(ring: &RecentLines, severity: Severity, message: &str) -> u64 {
        ring.push(
            severity,
            "clawvisor::test",
            message,
            vec![("agent", "ada".into())],
        )
    }

    #[test]
    fn the_ring_keeps_the_newest_lines_within_both_bounds() {
        let ring = RecentLines::default();
        for index in 0..MAX_LINES + 10 {
            push(&ring, Severity::Info, &format!("line {index}"));
        }
        let stats = ring.stats();
        assert_eq!(stats.lines, MAX_LINES);
        assert_eq!(stats.dropped, 10);
        assert_eq!(stats.newest_seq, (MAX_LINES + 10) as u64);
        let newest = ring.page(&LineFilter::new(Severity::Trace, ""), None, 1);
        assert_eq!(&*newest[0].message, format!("line {}", MAX_LINES + 9));

        // Long lines: the byte bound is reached first, and each message is cut.
        let ring = RecentLines::default();
        let long = "x".repeat(10 * MAX_MESSAGE_BYTES);
        for _ in 0..MAX_LINES {
            push(&ring, Severity::Warn, &long);
        }
        let stats = ring.stats();
        assert!(stats.bytes <= MAX_BYTES, "{stats:?}");
        assert!(stats.lines < MAX_LINES / 2, "{stats:?}");
        let kept = ring.page(&LineFilter::new(Severity::Trace, ""), None, 1);
        assert!(kept[0].message.len() <= MAX_MESSAGE_BYTES + '…'.len_utf8());
        assert!(kept[0].message.ends_with('…'));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let text = "é".repeat(MAX_MESSAGE_BYTES);
        let kept = kept_text(&text, MAX_MESSAGE_BYTES - 1);
        assert!(kept.ends_with('…'));
        assert!(kept.len() <= MAX_MESSAGE_BYTES + 2);
    }

    #[test]
    fn filters_take_a_level_and_the_text_in_any_part_of_a_line() {
        let ring = RecentLines::default();
        push(&ring, Severity::Error, "disk full");
        push(&ring, Severity::Warn, "slow answer");
        push(&ring, Severity::Info, "Started bot");
        push(&ring, Severity::Debug, "poll done");
        let messages = |filter: LineFilter| -> Vec<String> {
            ring.page(&filter, None, 100)
                .iter()
                .map(|line| line.message.to_string())
                .collect()
        };
        assert_eq!(
            messages(LineFilter::new(Severity::Error, "")),
            ["disk full"]
        );
        assert_eq!(
            messages(LineFilter::new(Severity::Warn, "")),
            ["slow answer", "disk full"]
        );
        assert_eq!(messages(LineFilter::new(Severity::Debug, "")).len(), 4);
        assert_eq!(
            messages(LineFilter::new(Severity::Trace, "started")),
            ["Started bot"]
        );
        // The target and the fields are searched too.
        assert_eq!(messages(LineFilter::new(Severity::Trace, "ADA")).len(), 4);
        assert_eq!(messages(LineFilter::new(Severity::Trace, "test")).len(), 4);
        assert!(messages(LineFilter::new(Severity::Trace, "nothing like it")).is_empty());
    }

    #[test]
    fn a_reader_follows_from_its_cursor_and_learns_what_it_missed() {
        let ring = RecentLines::default();
        let all = LineFilter::new(Severity::Trace, "");
        let first = push(&ring, Severity::Info, "one");
        push(&ring, Severity::Debug, "two");
        push(&ring, Severity::Info, "three");
        let batch = ring.after(&LineFilter::new(Severity::Info, ""), first, 10);
        assert_eq!(batch.lines.len(), 1, "the debug line is filtered out");
        assert_eq!(&*batch.lines[0].message, "three");
        assert_eq!(batch.cursor, first + 2);
        assert_eq!(batch.missed, 0);
        // Caught up: nothing more, the cursor stays.
        let caught_up = ring.after(&all, batch.cursor, 10);
        assert!(caught_up.lines.is_empty());
        assert_eq!(caught_up.cursor, batch.cursor);
        // Fallen behind the ring: the lines dropped after the cursor (two and three) are counted.
        for index in 0..MAX_LINES {
            push(&ring, Severity::Info, &format!("more {index}"));
        }
        let behind = ring.after(&all, first, 5);
        assert_eq!(behind.missed, 2, "{behind:?}");
        assert_eq!(behind.lines.len(), 5);
        assert_eq!(behind.lines[0].seq, first + 3);
        // A cursor from an earlier process (past the newest line) reads from the start.
        let stale = ring.after(&all, u64::MAX - 1, 1);
        assert_eq!(
            stale.lines[0].seq,
            ring.page(&all, None, MAX_LINES).last().unwrap().seq
        );
    }

    #[test]
    fn a_registered_secret_is_redacted_before_the_line_is_kept() {
        let secret = "recent-lines-secret-9f2c41d7";
        crate::secrets::register(secret);
        let ring = RecentLines::default();
        ring.push(
            Severity::Warn,
            "clawvisor::test",
            &format!("GET /bot{secret}/getMe failed"),
            vec![("url", format!("https://example.org/?key={secret}"))],
        );
        let kept = &ring.page(&LineFilter::new(Severity::Trace, ""), None, 1)[0];
        assert_eq!(&*kept.message, "GET /bot***/getMe failed");
        assert_eq!(&*kept.fields[0].1, "https://example.org/?key=***");
        assert!(
            ring.page(&LineFilter::new(Severity::Trace, secret), None, 10)
                .is_empty(),
            "searching for the secret finds nothing"
        );
    }
}
