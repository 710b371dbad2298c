-- Studio login: one-time login links and browser sessions. Only SHA-256 hashes of the secrets are
-- stored, so a copy of the database does not let anyone in.
CREATE TABLE studio_login_links (
    token_hash  TEXT    PRIMARY KEY,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    used_ms     INTEGER,
    created_by  TEXT    NOT NULL     -- boot | cli
);

CREATE TABLE studio_sessions (
    token_hash   TEXT    PRIMARY KEY,
    csrf         TEXT    NOT NULL,   -- sent back in X-CSRF-Token with every mutation
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL,
    revoked_ms   INTEGER
);

-- Skills an operator turned off (or on) for an agent in Studio, over the agent file's list.
CREATE TABLE agent_skill_toggles (
    agent       TEXT    NOT NULL,
    skill       TEXT    NOT NULL,
    enabled     INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (agent, skill)
);
