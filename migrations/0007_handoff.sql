-- Handoff contracts: a delegation from an owner agent's conversation to a delegate agent, with
-- its lifecycle, and the timeline of every transition (persisted at each one).
CREATE TABLE handoff_contracts (
    id            TEXT    PRIMARY KEY,          -- short opaque id (h-xxxxxxxx)
    owner         TEXT    NOT NULL,             -- the agent that received the user's request
    owner_chat    TEXT    NOT NULL,             -- the owner's conversation, where the result returns
    owner_run_id  INTEGER,
    delegate      TEXT    NOT NULL,
    subtask       TEXT    NOT NULL,
    expected      TEXT    NOT NULL DEFAULT '',  -- expected output shape
    validator     TEXT,                         -- optional validator agent
    tools         TEXT,                         -- JSON array: the delegate's allowed tools (NULL: its own)
    deadline_ms   INTEGER NOT NULL,
    status        TEXT    NOT NULL,             -- created | accepted | in_progress | returned | cancelled | expired | failed
    attempts      INTEGER NOT NULL DEFAULT 0,   -- delegate runs (1 + validator rejections)
    result        TEXT,
    reason        TEXT,                         -- why it failed, expired or was cancelled
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    delivered_ms  INTEGER                       -- when the result reached the owner's conversation
);
CREATE INDEX handoff_open ON handoff_contracts (status) WHERE status IN ('created', 'accepted', 'in_progress');

CREATE TABLE handoff_timeline (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    contract_id TEXT    NOT NULL REFERENCES handoff_contracts (id),
    at_ms       INTEGER NOT NULL,
    kind        TEXT    NOT NULL,               -- a status, `progress`, `review`, `delivered`
    detail      TEXT    NOT NULL
);
CREATE INDEX handoff_timeline_contract ON handoff_timeline (contract_id, id);
