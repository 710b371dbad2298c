-- Runtime events of the supervision tree and the message path, kept with bounded retention.
CREATE TABLE runtime_events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    seq      INTEGER NOT NULL,
    at_ms    INTEGER NOT NULL,
    kind     TEXT    NOT NULL,
    subject  TEXT    NOT NULL,
    detail   TEXT    NOT NULL,
    data     TEXT    -- JSON object or NULL
);
CREATE INDEX runtime_events_at ON runtime_events (at_ms);
CREATE INDEX runtime_events_kind ON runtime_events (kind, at_ms);

-- One row per daemon start: lets `doctor` and Studio show uptime and unclean stops.
CREATE TABLE daemon_boots (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    started_ms  INTEGER NOT NULL,
    stopped_ms  INTEGER,            -- NULL while running, or after a crash
    version     TEXT    NOT NULL,
    pid         INTEGER NOT NULL
);
