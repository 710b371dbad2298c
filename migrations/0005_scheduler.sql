-- Scheduled jobs and the history of their fire times.

-- One row per job. `next_run_ms` is the next regular fire time, always recomputed from the
-- expression (never by adding to the previous one); NULL when the schedule is over or paused.
CREATE TABLE jobs (
    id                    INTEGER PRIMARY KEY AUTOINCREMENT,
    agent                 TEXT    NOT NULL,
    name                  TEXT    NOT NULL,
    prompt                TEXT    NOT NULL,
    target_chat           TEXT,                -- where the answer goes (`tg:42`, `cli:me`); NULL: silent
    kind                  TEXT    NOT NULL,    -- cron | every | at
    expression            TEXT    NOT NULL,    -- as written: `0 9 * * 1-5`, `every 15m`, `2026-12-01 09:00`
    timezone              TEXT    NOT NULL,    -- IANA name
    anchor_ms             INTEGER NOT NULL,    -- `every` fires at anchor + k·interval
    missed_policy         TEXT    NOT NULL,    -- skip | run_once | catch_up max_runs=N window=D
    status                TEXT    NOT NULL,    -- active | paused | done | cancelled
    next_run_ms           INTEGER,
    last_run_ms           INTEGER,             -- when the last run was dispatched
    last_outcome          TEXT,                -- succeeded | failed | missed | skipped | ...
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    failing               INTEGER NOT NULL DEFAULT 0,
    created_by            TEXT    NOT NULL,    -- agent | user | operator
    created_in            TEXT,                -- the chat it was created from
    created_ms            INTEGER NOT NULL,
    updated_ms            INTEGER NOT NULL
);
CREATE INDEX jobs_agent ON jobs (agent, status);
CREATE INDEX jobs_live ON jobs (status) WHERE status IN ('active', 'paused');

-- The history: one row per fire time that ran (or will run), and one per batch of fire times
-- that did not run (`attempt` 0: missed, skipped). A retry is a new row with the next attempt.
-- (job_id, fire_ms, attempt) is the fire's unique key: recording a fire twice is impossible.
CREATE TABLE job_runs (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id        INTEGER NOT NULL REFERENCES jobs (id),
    fire_ms       INTEGER NOT NULL,    -- the scheduled fire time (of a record: the first one)
    attempt       INTEGER NOT NULL,    -- 1, 2, ... for runs; 0 for records of fire times not run
    trigger       TEXT    NOT NULL,    -- scheduled | caught_up | retry | record
    status        TEXT    NOT NULL,    -- queued | running | succeeded | failed | missed | skipped
    due_ms        INTEGER NOT NULL,    -- not dispatched before this
    started_ms    INTEGER,
    finished_ms   INTEGER,
    run_id        INTEGER,             -- the agent's run (runs.id)
    missed_count  INTEGER,             -- records: how many fire times
    detail        TEXT,                -- the answer's beginning, the error, or which times were missed
    created_ms    INTEGER NOT NULL
);
CREATE UNIQUE INDEX job_runs_fire ON job_runs (job_id, fire_ms, attempt);
CREATE UNIQUE INDEX job_runs_one_running ON job_runs (job_id) WHERE status = 'running';
CREATE INDEX job_runs_open ON job_runs (status) WHERE status IN ('queued', 'running');
CREATE INDEX job_runs_job ON job_runs (job_id, id);
