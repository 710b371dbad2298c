-- The audit chain becomes keyed: rows from `first_keyed_id` on are chained with HMAC-SHA256 under
-- the key in <data_dir>/audit.key (outside the database); older rows keep their SHA-256 chain and
-- keep verifying. One row, written when the key is created; `mac` binds it to that key, so that
-- moving the boundary (to pass rewritten rows off as old unkeyed ones) is detected.
CREATE TABLE audit_keying (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    first_keyed_id  INTEGER NOT NULL,
    created_ms      INTEGER NOT NULL,
    mac             TEXT    NOT NULL
);
CREATE TRIGGER audit_keying_no_update BEFORE UPDATE ON audit_keying
BEGIN SELECT RAISE(ABORT, 'audit_keying is append-only'); END;
CREATE TRIGGER audit_keying_no_delete BEFORE DELETE ON audit_keying
BEGIN SELECT RAISE(ABORT, 'audit_keying is append-only'); END;
