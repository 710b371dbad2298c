-- Issue #34, tool nodes: on a machine running `clawvisor node serve`, every approval token it
-- accepted, keyed by the token's nonce, recorded before the action runs. A token whose nonce is
-- here is a replay and is refused, also after a restart of the node.

CREATE TABLE node_actions (
    nonce        TEXT    PRIMARY KEY,
    tool         TEXT    NOT NULL,
    action_hash  TEXT    NOT NULL,
    level        TEXT    NOT NULL,
    accepted_ms  INTEGER NOT NULL,
    finished_ms  INTEGER,
    outcome      TEXT    -- ok | error; NULL while running (or when the node died during it)
);
