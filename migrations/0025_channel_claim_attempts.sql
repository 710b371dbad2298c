-- Wrong claim codes sent on a seam channel (WhatsApp, Signal), for the same rate limit as the
-- Telegram bots' (`claim_attempts`): five wrong codes from one person within ten minutes and
-- no code of theirs is checked until the window has passed.

CREATE TABLE channel_claim_attempts (
    agent    TEXT    NOT NULL,
    channel  TEXT    NOT NULL,   -- wa | sg
    user     TEXT    NOT NULL,   -- the channel's id of the person
    at_ms    INTEGER NOT NULL
);
CREATE INDEX channel_claim_attempts_by_user ON channel_claim_attempts (agent, channel, user, at_ms);
