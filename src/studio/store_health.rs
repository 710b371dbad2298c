//! The store's health as Studio shows it: the Overview's `health.store` object (what the red
//! banner is drawn from), its schema, and the `clawvisor_store_*` families of `/metrics`.
//!
//! The words come from `store::health` (one sentence naming the cause, the path and what to do);
//! this module only shapes them. Nothing here is HTML: the page puts each string in a text node.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::openapi::{described, integer, nullable, object, one_of, string};
use crate::store::health::{Report, State};

/// `health.store` in `GET /api/v1/overview`.
pub fn health_json(report: &Report) -> Value {
    json!({
        "state": report.state.as_str(),
        "cause": report.trouble.as_ref().map(|trouble| trouble.cause.as_str()),
        "sentence": report.sentence(),
        "detail": report.trouble.as_ref().map(|trouble| trouble.detail.clone()),
        "warning": report.warning(),
        "since_ms": report.since_ms,
        "directory": report.directory.display().to_string(),
        "free_bytes": report.space.free,
        "min_free_bytes": report.space.min_free,
        "hold_free_bytes": report.space.hold_free,
        "failed_writes": report.failed_writes,
    })
}

/// The schema of [`health_json`].
pub fn health_schema() -> Value {
    described(
        "whether writes commit; when not, why, where and what to do",
        object([
            ("state", one_of(&["healthy", "degraded", "holding"])),
            (
                "cause",
                nullable(one_of(&[
                    "disk_full",
                    "read_only",
                    "io_error",
                    "permission_denied",
                    "corrupt",
                    "too_many_open_files",
                    "other",
                ])),
            ),
            (
                "sentence",
                described(
                    "what happened, where, and what to do; null when healthy",
                    nullable(string()),
                ),
            ),
            (
                "detail",
                described("SQLite's own words", nullable(string())),
            ),
            (
                "warning",
                described(
                    "low free space or a WAL checkpoint that cannot run",
                    nullable(string()),
                ),
            ),
            ("since_ms", integer()),
            ("directory", string()),
            ("free_bytes", nullable(integer())),
            ("min_free_bytes", integer()),
            ("hold_free_bytes", integer()),
            ("failed_writes", integer()),
        ]),
    )
}

/// The store's families for `/metrics`.
pub fn metrics(report: &Report) -> String {
    let mut text = String::new();
    let degraded = u8::from(report.state != State::Healthy);
    let _ = writeln!(
        text,
        "# HELP clawvisor_store_degraded 1 while database writes do not commit (degraded or holding), else 0.\n\
         # TYPE clawvisor_store_degraded gauge\nclawvisor_store_degraded {degraded}"
    );
    let _ = writeln!(
        text,
        "# HELP clawvisor_store_failed_writes_total Write batches that failed to commit or were held back for lack of space.\n\
         # TYPE clawvisor_store_failed_writes_total counter\nclawvisor_store_failed_writes_total {}",
        report.failed_writes
    );
    if let Some(free) = report.space.free {
        let _ = writeln!(
            text,
            "# HELP clawvisor_store_free_bytes Free space in the data directory.\n\
             # TYPE clawvisor_store_free_bytes gauge\nclawvisor_store_free_bytes {free}"
        );
    }
    text
}
