-- Outbox rows that carry a file (`send_file`) or ask for a spoken reply.
--
-- A file row's `text` is its caption. `file_path` is the daemon's own copy of the file, taken
-- when the agent sent it (`<data_dir>/outbox-files/`), so that a later change or deletion in the
-- workspace neither changes nor loses what was sent; the copy is deleted once the row is done.
ALTER TABLE outbox ADD COLUMN file_path TEXT;
ALTER TABLE outbox ADD COLUMN file_kind TEXT;       -- photo | document | voice
ALTER TABLE outbox ADD COLUMN file_name TEXT;       -- the name Telegram shows for a document
-- 1: the answer is spoken (synthesized when it is delivered, sent with sendVoice); text on failure.
ALTER TABLE outbox ADD COLUMN speak INTEGER NOT NULL DEFAULT 0;
