-- A person's time zone (an IANA name such as Europe/Berlin), chosen with /timezone in Telegram or
-- in Studio. Daemon-wide: a person has one zone for every agent they talk to. Without a row the
-- agent file's `timezone`, then the daemon's, applies.
CREATE TABLE user_timezones (
    user_id     INTEGER PRIMARY KEY,   -- the Telegram user id
    timezone    TEXT    NOT NULL,
    changed_ms  INTEGER NOT NULL,
    changed_by  TEXT    NOT NULL       -- telegram:<user id> or operator
);
