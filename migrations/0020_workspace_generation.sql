-- Workspace generations: a counter per agent, bumped whenever a tool call or command that could
-- have written into the agent's workspace runs (and when an inbound file is saved there), in the
-- same transaction that records it. A grant records the generation it was given in and lapses as
-- soon as the generation moves on without it: nothing written without a decision changes what a
-- grant lets run again (issue #29, class 3).
CREATE TABLE workspace_generations (
    agent       TEXT    PRIMARY KEY,
    generation  INTEGER NOT NULL,
    changed_ms  INTEGER NOT NULL,
    changed_by  TEXT    NOT NULL      -- what wrote last, in words: "write_file in run 12"
);

ALTER TABLE grants ADD COLUMN workspace_generation INTEGER;  -- NULL: given before generations
ALTER TABLE grants ADD COLUMN lapsed_ms INTEGER;             -- when a write made it lapse
ALTER TABLE grants ADD COLUMN lapsed_reason TEXT;            -- why, in words an operator reads

-- Grants given before this migration never knew the workspace: they lapse now.
UPDATE grants
   SET lapsed_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000,
       lapsed_reason = 'Given before grants lapsed when something writes in the workspace.'
 WHERE revoked_ms IS NULL AND lapsed_ms IS NULL;
