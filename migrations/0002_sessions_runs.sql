-- Conversations, their transcripts, runs with their steps, costs, and the reply outbox.

-- One row per conversation of an agent; a `/new` archives the active row and opens another.
CREATE TABLE sessions (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    agent       TEXT    NOT NULL,
    chat        TEXT    NOT NULL,
    status      TEXT    NOT NULL DEFAULT 'active',   -- active | archived
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    recap       TEXT,                                -- summary of the events up to recap_upto
    recap_upto  INTEGER NOT NULL DEFAULT 0           -- last session_events.id covered by the recap
);
CREATE UNIQUE INDEX sessions_active ON sessions (agent, chat) WHERE status = 'active';

-- The transcript. User messages wait with run_id NULL until a run takes them.
CREATE TABLE session_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  INTEGER NOT NULL REFERENCES sessions (id),
    kind        TEXT    NOT NULL,   -- user | assistant | tool_result | notice
    sender      TEXT,               -- display name of a user message's sender
    content     TEXT    NOT NULL,
    data        TEXT,               -- JSON: an assistant's tool calls; a tool result's call id and name
    run_id      INTEGER,            -- the run that produced it (or took it as input, for user messages)
    inbound_id  INTEGER,            -- the stored channel update it came from
    created_ms  INTEGER NOT NULL
);
CREATE INDEX session_events_session ON session_events (session_id, id);
CREATE UNIQUE INDEX session_events_inbound ON session_events (inbound_id) WHERE inbound_id IS NOT NULL;
CREATE INDEX session_events_pending ON session_events (session_id) WHERE kind = 'user' AND run_id IS NULL;

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id     INTEGER NOT NULL REFERENCES sessions (id),
    agent          TEXT    NOT NULL,
    chat           TEXT    NOT NULL,
    status         TEXT    NOT NULL,   -- running | waiting_approval | succeeded | failed | cancelled | interrupted | budget_stopped
    trigger        TEXT    NOT NULL,   -- message | schedule | handoff | resume
    started_ms     INTEGER NOT NULL,
    finished_ms    INTEGER,
    model          TEXT,
    input_tokens   INTEGER NOT NULL DEFAULT 0,
    output_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd       REAL    NOT NULL DEFAULT 0,
    turns          INTEGER NOT NULL DEFAULT 0,
    outcome        TEXT,               -- the final answer, or what stopped the run
    correlation    TEXT                -- a caller's request id (the gateway), echoed with the answer
);
CREATE INDEX runs_open ON runs (status) WHERE status IN ('running', 'waiting_approval');
CREATE INDEX runs_agent ON runs (agent, started_ms);
CREATE INDEX runs_started ON runs (started_ms);
CREATE INDEX runs_session ON runs (session_id);

-- Every step of a run: model calls, tool calls and results, policy decisions, notes.
CREATE TABLE run_steps (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id       INTEGER NOT NULL REFERENCES runs (id),
    seq          INTEGER NOT NULL,
    kind         TEXT    NOT NULL,   -- llm | tool_call | tool_result | decision | compaction | note | error
    name         TEXT,               -- the model, or the tool
    detail       TEXT    NOT NULL,   -- JSON
    tokens_in    INTEGER,
    tokens_out   INTEGER,
    cost_usd     REAL,
    duration_ms  INTEGER,
    created_ms   INTEGER NOT NULL
);
CREATE INDEX run_steps_run ON run_steps (run_id, seq);

-- One row per model call; the daily budget sums them.
CREATE TABLE cost_events (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms          INTEGER NOT NULL,
    day            TEXT    NOT NULL,   -- YYYY-MM-DD in UTC
    agent          TEXT    NOT NULL,
    provider       TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    run_id         INTEGER,
    input_tokens   INTEGER NOT NULL,
    output_tokens  INTEGER NOT NULL,
    cost_usd       REAL    NOT NULL
);
CREATE INDEX cost_events_agent_day ON cost_events (agent, day);
CREATE INDEX cost_events_day ON cost_events (day);

-- Replies waiting to be delivered to a channel (the transactional outbox). Written in the same
-- transaction as the run's end; marked delivered by the channel after the send succeeded.
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    agent         TEXT    NOT NULL,
    chat          TEXT    NOT NULL,
    run_id        INTEGER,
    text          TEXT    NOT NULL,
    inbound_ids   TEXT    NOT NULL DEFAULT '[]',   -- JSON array of the stored updates this answers
    created_ms    INTEGER NOT NULL,
    delivered_ms  INTEGER,
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT
);
CREATE INDEX outbox_pending ON outbox (agent) WHERE delivered_ms IS NULL;

-- Runtime settings changed by the operator (Studio), applied over the agent file.
CREATE TABLE agent_settings (
    agent       TEXT PRIMARY KEY,
    autonomy    TEXT,
    model       TEXT,
    paused      INTEGER NOT NULL DEFAULT 0,
    updated_ms  INTEGER NOT NULL
);
