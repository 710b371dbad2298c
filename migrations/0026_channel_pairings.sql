-- Pairing requests on a seam channel (WhatsApp, Signal), as `pairing_codes` is for Telegram: a
-- stranger who writes to an account that has an owner (or whose file names people) gets one code,
-- stored here; an approver lets them in (`pair <code>` on the channel, or Studio People) or turns
-- them down (`deny <code>`). One live request per agent, channel and person: until it expires
-- (approved, denied or not) the person gets no second reply.

CREATE TABLE channel_pairings (
    code         TEXT    PRIMARY KEY,   -- 8 characters of the code alphabet, no dash
    agent        TEXT    NOT NULL,
    channel      TEXT    NOT NULL,      -- wa | sg
    user         TEXT    NOT NULL,      -- the channel's id of the person (a phone number)
    name         TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    approved_ms  INTEGER,
    approved_by  TEXT,
    denied_ms    INTEGER,
    denied_by    TEXT
);
CREATE INDEX channel_pairings_by_person ON channel_pairings (agent, channel, user, expires_ms);
