-- Scheduled backups (`[backup]`): one row per attempt, kept for Studio's Backups card. An archive
-- deleted by retention keeps its row, marked pruned.
CREATE TABLE backups (
    id INTEGER PRIMARY KEY,
    started_ms INTEGER NOT NULL,
    finished_ms INTEGER NOT NULL,
    file TEXT NOT NULL,
    size_bytes INTEGER NOT NULL DEFAULT 0,
    entries INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    error TEXT,
    pruned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX backups_by_time ON backups (started_ms);
