-- Scoped grants cover exactly the action a human approved: the SHA-256 of the tool and its
-- canonical arguments (`agent::approval::action_hash`). Grants made before this migration were
-- keyed on a tool's "target" (for `shell`, only the command's first word) and are far broader than
-- what anyone saw; they have no hash and so never match again.
ALTER TABLE grants ADD COLUMN action_hash TEXT;
CREATE INDEX grants_by_action ON grants (agent, chat, action_hash);
