-- Memory: facts and notes (with their embeddings, the source of truth for the vector index),
-- kept in sync with a full-text index by triggers.
CREATE TABLE memory_facts (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    owner           TEXT    NOT NULL,            -- an agent's name, or 'platform'
    class           TEXT    NOT NULL,            -- working | durable | shared | session_recap | restricted
    sensitivity     TEXT    NOT NULL DEFAULT 'normal', -- normal | personal | secret
    source          TEXT    NOT NULL,            -- user_said | agent_saved | imported | recap
    chat            TEXT,                        -- where it was learned (restricted and recaps stay there)
    text            TEXT    NOT NULL,
    run_id          INTEGER,                     -- lineage: the run that saved it
    message_id      INTEGER,                     -- lineage: the session event it came from
    created_ms      INTEGER NOT NULL,
    updated_ms      INTEGER NOT NULL,
    archived_ms     INTEGER,
    redacted_ms     INTEGER,
    surprise        REAL,                        -- 1 - max similarity to the owner's memories at insert
    embedding       BLOB,                        -- little-endian f32s, unit length; NULL in full-text mode
    embedding_model TEXT,
    dimension       INTEGER
);
CREATE INDEX memory_facts_owner ON memory_facts (owner) WHERE archived_ms IS NULL;

CREATE VIRTUAL TABLE memory_fts USING fts5(text, content = 'memory_facts', content_rowid = 'id');

CREATE TRIGGER memory_facts_ai AFTER INSERT ON memory_facts BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER memory_facts_ad AFTER DELETE ON memory_facts BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER memory_facts_au AFTER UPDATE OF text ON memory_facts BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
END;
