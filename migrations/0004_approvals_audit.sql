-- Approvals, scoped grants, stored policy rules, and the hash-chained audit log.

CREATE TABLE approvals (
    id            TEXT    PRIMARY KEY,         -- short opaque nonce shown to people
    agent         TEXT    NOT NULL,
    chat          TEXT    NOT NULL,
    run_id        INTEGER NOT NULL,
    call_id       TEXT    NOT NULL,
    tool          TEXT    NOT NULL,
    action        TEXT    NOT NULL,            -- the exact action, as shown
    action_hash   TEXT    NOT NULL,            -- SHA-256 of tool + canonical arguments
    target        TEXT    NOT NULL,            -- what a scoped grant would cover
    risk          TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    requested_ms  INTEGER NOT NULL,
    expires_ms    INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    -- pending | approved | denied | denied_timeout | denied_unreachable | consumed | cancelled
    decided_ms    INTEGER,
    decided_by    TEXT,
    consumed_ms   INTEGER,                     -- set before the approved action runs (at most once)
    tg_chat_id    INTEGER,                     -- where the buttons were posted
    tg_message_id INTEGER,
    UNIQUE (run_id, call_id)
);
CREATE INDEX approvals_pending ON approvals (expires_ms) WHERE status = 'pending';

CREATE TABLE grants (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    agent        TEXT    NOT NULL,
    chat         TEXT    NOT NULL,
    tool         TEXT    NOT NULL,
    target       TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,
    approval_id  TEXT,
    revoked_ms   INTEGER
);
CREATE INDEX grants_live ON grants (agent, tool, target) WHERE revoked_ms IS NULL;

-- Operator rules that tighten the policy: deny or require confirmation.
CREATE TABLE policy_rules (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    effect       TEXT    NOT NULL,   -- deny | require_confirmation
    tool         TEXT,               -- NULL: any tool (glob `*` allowed in the text)
    agent        TEXT,               -- NULL: any agent
    channel      TEXT,               -- NULL: any; else tg | local | sched | handoff
    pattern      TEXT,               -- NULL: any arguments; else a substring of the action
    description  TEXT    NOT NULL,
    created_ms   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,
    disabled_ms  INTEGER
);

-- Append-only; each row's hash = SHA-256(previous hash + canonical row).
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,     -- who: agent:<name>, telegram:<user>, operator, system
    action     TEXT    NOT NULL,     -- approval.requested, approval.decided, tool.executed, ...
    subject    TEXT    NOT NULL,     -- what: approval id, run id, rule id
    details    TEXT    NOT NULL,     -- JSON
    prev_hash  TEXT    NOT NULL,
    hash       TEXT    NOT NULL
);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'audit_log is append-only'); END;
