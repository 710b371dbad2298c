-- The facts a compaction's flush step took from the turns it was about to summarise, recorded
-- before any of them is saved to memory: a compaction interrupted by a crash redoes the saves from
-- this row (each save finds the fact already there) instead of asking the model again, so a fact
-- is never saved twice (src/agent/compaction/flush.rs). One row per session and compacted range.
CREATE TABLE compaction_flushes (
    session_id  INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    upto        INTEGER NOT NULL,   -- the last session event the compaction covers
    facts       TEXT    NOT NULL,   -- JSON: [{"event_id": …, "text": "…"}]
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (session_id, upto)
);
