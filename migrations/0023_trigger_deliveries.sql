-- Webhook triggers (issue #32): every accepted delivery of a `[[triggers]]` entry, stored before the
-- caller is answered 202. A redelivery with the same delivery id (the caller's `X-Delivery-Id` or
-- `X-GitHub-Delivery`, else the body's SHA-256) hits the unique key and is not stored again, so it
-- runs once. `status`: received → running → succeeded | failed (src/actors/triggers.rs).
-- `origin`: `webhook` (POST /hooks/trigger/{name}) or `test` (Studio's or the CLI's test event).
CREATE TABLE trigger_deliveries (
    id           INTEGER PRIMARY KEY,
    trigger      TEXT    NOT NULL,
    delivery_id  TEXT    NOT NULL,
    agent        TEXT    NOT NULL,
    origin       TEXT    NOT NULL,
    body         TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    deliver_to   TEXT,
    answer       TEXT,
    detail       TEXT,
    run_id       INTEGER,
    received_ms  INTEGER NOT NULL,
    started_ms   INTEGER,
    finished_ms  INTEGER,
    UNIQUE (trigger, delivery_id)
);
CREATE INDEX trigger_deliveries_open ON trigger_deliveries (status) WHERE status IN ('received', 'running');
CREATE INDEX trigger_deliveries_newest ON trigger_deliveries (trigger, id DESC);
