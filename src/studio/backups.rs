//! Backups: `/api/v1/backups` — the `[backup]` settings, the next scheduled run, the recorded
//! runs (`backups`, written by the Backup actor) and the archives now in the backup directory.
//!
//! Read-only: a backup is taken with `clawvisor backup <file>` or by the schedule.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::openapi::{answer_of, array, boolean, described, integer, nullable, object, string};
use super::{ApiError, StudioState};
use crate::backup::record;
use crate::backup::schedule::list_archives;

/// Recorded runs shown.
const RECENT: u32 = 20;

pub async fn list(State(state): State<StudioState>) -> Result<Json<Value>, ApiError> {
    let recent = state
        .store
        .read(|conn| record::recent(conn, RECENT))
        .await?;
    let plan = state.backups.clone();
    let directory = plan.dir.clone();
    let archives = tokio::task::spawn_blocking(move || list_archives(&directory))
        .await
        .unwrap_or_default();
    let next = plan.next_run(chrono::Utc::now());
    Ok(Json(json!({
        "scheduled": plan.schedule.is_some(),
        "schedule": plan.schedule_text,
        "timezone": plan.zone.name(),
        "dir": plan.dir.display().to_string(),
        "keep": plan.keep,
        "next_run_ms": next.map(|at| at.timestamp_millis()),
        "next_run_local": next.map(|at| at.with_timezone(&plan.zone).format("%Y-%m-%d %H:%M:%S %Z").to_string()),
        "recent": recent,
        "archives": archives
            .iter()
            .rev()
            .map(|(name, size)| json!({"name": name, "size_bytes": size}))
            .collect::<Vec<_>>(),
    })))
}

/// What `GET /api/v1/backups` answers.
pub fn list_schema() -> Value {
    object([
        (
            "scheduled",
            described("`[backup] schedule` is set", boolean()),
        ),
        ("schedule", nullable(string())),
        ("timezone", string()),
        ("dir", string()),
        ("keep", integer()),
        ("next_run_ms", nullable(integer())),
        ("next_run_local", nullable(string())),
        (
            "recent",
            described(
                "recorded runs, newest first",
                array(answer_of::<record::BackupRow>()),
            ),
        ),
        (
            "archives",
            array(object([("name", string()), ("size_bytes", integer())])),
        ),
    ])
}
