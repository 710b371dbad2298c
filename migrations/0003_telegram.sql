-- Telegram: every update is stored (with the next offset, in one transaction) before it is
-- confirmed to Telegram by the next getUpdates; access control and pairing.

-- The next getUpdates offset per bot (keyed by the bot's Telegram id, so a changed token for
-- another bot never inherits a wrong offset).
CREATE TABLE bot_offsets (
    bot_id       INTEGER PRIMARY KEY,
    next_offset  INTEGER NOT NULL,
    updated_ms   INTEGER NOT NULL
);

CREATE TABLE inbound_updates (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    bot_id        INTEGER NOT NULL,
    agent         TEXT    NOT NULL,
    update_id     INTEGER NOT NULL,
    kind          TEXT    NOT NULL,   -- message | edited_message | callback_query | other
    chat_id       INTEGER,
    user_id       INTEGER,
    payload       TEXT    NOT NULL,   -- the update as JSON
    sent_ms       INTEGER,            -- Telegram's date of the message
    received_ms   INTEGER NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending',
    -- pending: stored, not yet handed to the agent | dispatched: handed to the agent
    -- context: a group message not addressed to the bot, kept as context for its next answer
    -- processed: answered (or decided not to answer) | ignored: stale, unauthorized, unsupported
    note          TEXT,
    processed_ms  INTEGER,
    UNIQUE (bot_id, update_id)
);
CREATE INDEX inbound_open ON inbound_updates (agent, status) WHERE status IN ('pending', 'dispatched');
CREATE INDEX inbound_context ON inbound_updates (agent, chat_id, status) WHERE status = 'context';

-- Telegram users an agent talks to: allowed by pairing (allow_users in the agent file also allow).
CREATE TABLE telegram_users (
    agent       TEXT    NOT NULL,
    user_id     INTEGER NOT NULL,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,   -- allowed | blocked
    changed_ms  INTEGER NOT NULL,
    changed_by  TEXT    NOT NULL,
    PRIMARY KEY (agent, user_id)
);

-- Pairing requests of unknown users: an 8-character code, valid for an hour.
CREATE TABLE pairing_codes (
    code         TEXT    PRIMARY KEY,
    agent        TEXT    NOT NULL,
    user_id      INTEGER NOT NULL,
    chat_id      INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    approved_ms  INTEGER,
    approved_by  TEXT
);
CREATE INDEX pairing_by_user ON pairing_codes (agent, user_id);

-- The message a run streamed its partial answer into, so that the final answer edits it even when
-- it is delivered by the next process after a crash (instead of appearing twice).
CREATE TABLE telegram_streams (
    run_id      INTEGER PRIMARY KEY,
    chat_id     INTEGER NOT NULL,
    message_id  INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL
);
