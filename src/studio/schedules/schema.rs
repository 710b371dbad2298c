//! What the schedule routes answer, for the OpenAPI document (`super` builds these answers:
//! [`super::job_json`], `history_json`, the list, the detail, the choices, run now). Kept beside
//! `schedules.rs`, which is near the file-length limit; `tests/openapi.rs` checks each against a
//! running daemon's answers.

use serde_json::Value;

use crate::studio::openapi::{
    array, boolean, described, extend, integer, nullable, object, one_of, string,
};

/// A job as [`super::job_json`] shows it (the answer of create, edit, pause, resume, cancel).
pub fn job_schema() -> Value {
    object([
        (
            "next_run_local",
            described(
                "the next fire in the job's zone, in words",
                nullable(string()),
            ),
        ),
        ("upcoming_local", array(string())),
        ("id", integer()),
        ("agent", string()),
        ("name", string()),
        ("prompt", string()),
        (
            "target",
            described(
                "where answers go: a chat key (null: nowhere)",
                nullable(string()),
            ),
        ),
        ("kind", described("`cron`, `every` or `at`", string())),
        ("expression", string()),
        ("timezone", string()),
        ("schedule", described("the schedule in words", string())),
        ("missed_policy", string()),
        ("status", one_of(&["active", "paused", "done", "cancelled"])),
        ("next_run_ms", nullable(integer())),
        ("upcoming", array(integer())),
        ("last_run_ms", nullable(integer())),
        ("last_outcome", nullable(string())),
        ("consecutive_failures", integer()),
        ("failing", boolean()),
        ("running", boolean()),
        ("queued", integer()),
        ("created_by", string()),
    ])
}

/// A history row as `history_json` shows it (`run_id` links to the agent's run).
fn history_schema() -> Value {
    object([
        ("id", integer()),
        ("fire_ms", integer()),
        ("attempt", integer()),
        (
            "trigger",
            described("why it fired: `scheduled`, `manual`, ...", string()),
        ),
        ("status", string()),
        ("due_ms", integer()),
        ("started_ms", nullable(integer())),
        ("finished_ms", nullable(integer())),
        ("run_id", nullable(integer())),
        ("missed_count", nullable(integer())),
        ("detail", nullable(string())),
    ])
}

/// What `GET /api/v1/schedules` answers: each job with where its answers go in words and its
/// newest runs.
pub fn list_schema() -> Value {
    let job = extend(
        job_schema(),
        [
            ("target_label", nullable(string())),
            ("last_runs", array(history_schema())),
        ],
    );
    object([("jobs", array(job))])
}

/// What `GET /api/v1/schedules/{id}` answers: the job and its newest 50 history entries.
pub fn detail_schema() -> Value {
    extend(
        job_schema(),
        [
            ("target_label", nullable(string())),
            ("history", array(history_schema())),
        ],
    )
}

/// What `POST /api/v1/schedules/preview` answers.
pub fn preview_schema() -> Value {
    object([
        ("schedule", described("the schedule in words", string())),
        ("next", array(integer())),
        ("next_local", array(string())),
    ])
}

/// What `GET /api/v1/schedules/choices` answers.
pub fn choices_schema() -> Value {
    let target = object([
        ("chat", string()),
        ("label", described("the place in words", string())),
        (
            "reason",
            one_of(&["owner", "approver", "allowed", "paired", "conversation"]),
        ),
    ]);
    object([
        ("agent", string()),
        ("bot", described("the agent has a Telegram bot", boolean())),
        (
            "timezone",
            described("the agent's zone: the default", string()),
        ),
        ("daemon_timezone", string()),
        ("missed_policy", string()),
        (
            "default_target",
            described(
                "the owner's private chat, when there is one",
                nullable(string()),
            ),
        ),
        ("targets", array(target)),
    ])
}

/// What `POST /api/v1/schedules/{id}/run` answers (202): the job and the fire's history row.
pub fn run_now_schema() -> Value {
    extend(job_schema(), [("fire", history_schema())])
}
