-- The channel seam (WhatsApp, Signal, and any later channel besides Telegram): every inbound
-- message is stored before it is acknowledged to the channel, keyed by (channel, account,
-- message id) so that a redelivery is answered once; people, claims and the customer-service
-- window per channel; outbox rows a channel could not send yet are held and reported.

CREATE TABLE channel_inbound (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    channel       TEXT    NOT NULL,   -- wa | sg
    account       TEXT    NOT NULL,   -- WhatsApp: the phone number id; Signal: the account number
    message_id    TEXT    NOT NULL,   -- the channel's id of the message (a redelivery has the same)
    agent         TEXT    NOT NULL,
    chat          TEXT    NOT NULL,   -- the session's chat key (`wa:<number>`, `sg:<number>`)
    sender        TEXT    NOT NULL,   -- the channel's id of the person (a phone number)
    sender_name   TEXT    NOT NULL,
    kind          TEXT    NOT NULL,   -- text | button | voice | audio | image | document | other
    payload       TEXT    NOT NULL,   -- the message as the channel sent it (JSON)
    sent_ms       INTEGER,
    received_ms   INTEGER NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending',
    -- pending: stored, not yet handed to the agent | dispatched: handed to the agent
    -- processed: answered (or decided not to answer) | ignored: stranger, blocked, unsupported
    note          TEXT,
    processed_ms  INTEGER,
    UNIQUE (channel, account, message_id)
);
CREATE INDEX channel_inbound_open ON channel_inbound (channel, account, status)
    WHERE status IN ('pending', 'dispatched');

-- People an agent talks to on a channel besides its file's `allow_users`: the owner who claimed
-- it (an approver), or someone the operator blocked.
CREATE TABLE channel_people (
    agent       TEXT    NOT NULL,
    channel     TEXT    NOT NULL,
    user        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL,   -- owner | allowed | blocked
    changed_ms  INTEGER NOT NULL,
    changed_by  TEXT    NOT NULL,
    PRIMARY KEY (agent, channel, user)
);

-- The one-time claim code of an agent's channel account that names nobody.
CREATE TABLE channel_claims (
    agent       TEXT    NOT NULL,
    channel     TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    claimed_ms  INTEGER,
    claimed_by  TEXT,
    PRIMARY KEY (agent, channel)
);

-- When each person last wrote to an account (WhatsApp's 24-hour customer-service window).
CREATE TABLE channel_windows (
    channel          TEXT    NOT NULL,
    account          TEXT    NOT NULL,
    peer             TEXT    NOT NULL,
    last_inbound_ms  INTEGER NOT NULL,
    PRIMARY KEY (channel, account, peer)
);

-- An outbox row the channel cannot send now (outside WhatsApp's window without a template): held,
-- with the reason, until the person writes again; never dropped silently.
ALTER TABLE outbox ADD COLUMN held_ms INTEGER;
ALTER TABLE outbox ADD COLUMN held_reason TEXT;
