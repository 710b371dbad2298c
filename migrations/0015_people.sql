-- People: claiming a bot nobody may use yet, and the operator's decisions about who talks to an
-- agent. `telegram_users.status` now holds `owner` (claimed the bot with its one-time code; an
-- approver), `allowed` (paired) or `blocked` (never answered).

-- The claim code of an agent whose bot has no allow_users, no approvers and no owner: one live
-- code per agent, replaced when it expired; `claimed_*` once someone used it.
CREATE TABLE bot_claims (
    agent         TEXT    PRIMARY KEY,
    code          TEXT    NOT NULL,
    created_ms    INTEGER NOT NULL,
    expires_ms    INTEGER NOT NULL,
    claimed_ms    INTEGER,
    claimed_by    INTEGER,
    claimed_name  TEXT
);

-- Wrong claim codes, for the per-user rate limit (old rows are removed as new ones arrive).
CREATE TABLE claim_attempts (
    agent    TEXT    NOT NULL,
    user_id  INTEGER NOT NULL,
    at_ms    INTEGER NOT NULL
);
CREATE INDEX claim_attempts_by_user ON claim_attempts (agent, user_id, at_ms);

-- A pairing request the operator turned down (it stays until it expires, so the person is not
-- answered again meanwhile).
ALTER TABLE pairing_codes ADD COLUMN denied_ms INTEGER;
ALTER TABLE pairing_codes ADD COLUMN denied_by TEXT;
