-- Memory search with stemming, and memories edited by the operator.
--
-- The full-text index is rebuilt with the Porter stemmer (`porter unicode61`), so that a search
-- for "plants" finds "plant" and "planting" (FTS5 stems the query the same way). The index is
-- external content (`memory_facts`): it is dropped, created again and rebuilt from the rows
-- already there, so every existing memory is found after this migration. The triggers that keep
-- it in step are created again unchanged.
DROP TRIGGER memory_facts_ai;
DROP TRIGGER memory_facts_ad;
DROP TRIGGER memory_facts_au;
DROP TABLE memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5(
    text, content = 'memory_facts', content_rowid = 'id', tokenize = 'porter unicode61'
);
INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');

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

-- An edit keeps the memory's origin (owner, source, chat, run and message, created_ms) and
-- records who last changed its text and when (the audit log has every edit).
ALTER TABLE memory_facts ADD COLUMN edited_ms INTEGER;
ALTER TABLE memory_facts ADD COLUMN edited_by TEXT;
