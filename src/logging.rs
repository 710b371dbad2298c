//! Tracing setup: a `RUST_LOG`-style filter, text or JSON lines on stderr, secrets redacted, and
//! the most recent lines kept in memory for Studio ([`recent`]).
//!
//! Every formatted line passes through [`crate::secrets::redact`] before it is written, so a token
//! that slips into an error message (Telegram puts it in URLs) never reaches the journal; the
//! in-memory copy is redacted the same way before it is kept. A panic is logged as one line
//! (through the same redactor), with its location and thread.

pub mod recent;

use std::io::{IsTerminal, Write};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::config::LogFormat;

/// Buffers one formatted event and writes it, redacted, when dropped.
pub struct RedactedLine(Vec<u8>);

impl Write for RedactedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let redacted = crate::secrets::redact(&text);
        // Nothing sensible can be done when stderr is gone.
        let _ = std::io::stderr().lock().write_all(redacted.as_bytes());
    }
}

#[derive(Clone, Copy, Default)]
pub struct RedactedStderr;

impl<'a> MakeWriter<'a> for RedactedStderr {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> Self::Writer {
        RedactedLine(Vec::with_capacity(256))
    }
}

/// Installs the global subscriber: the filter, the redacted stderr writer and the ring of recent
/// lines. `RUST_LOG` wins over `level` when set. Returns an error text when the filter does not
/// parse.
pub fn init(level: &str, format: LogFormat) -> Result<(), String> {
    let recording = match std::env::var("RUST_LOG") {
        Ok(from_env) if !from_env.trim().is_empty() => from_env,
        _ => level.to_string(),
    };
    let filter = EnvFilter::try_new(&recording)
        .map_err(|error| format!("[log].level: invalid filter `{level}`: {error}"))?;
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(RedactedStderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true);
    let subscriber = tracing_subscriber::registry()
        .with(filter)
        .with(recent::RecentLayer);
    let result = match format {
        LogFormat::Text => subscriber.with(stderr).try_init(),
        LogFormat::Json => subscriber
            .with(stderr.json().flatten_event(true))
            .try_init(),
    };
    // A second init (tests, `chat` after `serve`) keeps the first subscriber.
    if result.is_ok() {
        recent::recent().set_recording(&recording);
        install_panic_hook();
    }
    Ok(())
}

/// Panics caught by ractor (an actor's handler) are supervision events, not crashes; they are
/// logged as one structured, redacted line instead of raw text on stderr.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|text| text.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(non-text panic payload)".to_string());
        let location = info
            .location()
            .map(|location| format!("{}:{}", location.file(), location.line()))
            .unwrap_or_default();
        let thread = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        tracing::error!(target: "clawvisor::panic", %location, %thread, "panic: {payload}");
    }));
}
