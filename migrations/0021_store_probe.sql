-- The store's probe: while writes fail (disk full, read-only, I/O errors) the writer commits one
-- row here on a short timer; the first commit that lands ends the degraded state, without waiting
-- for traffic (src/store/health.rs). One row, overwritten.
CREATE TABLE store_probe (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    at_ms  INTEGER NOT NULL
);
