-- Model calls on a model with no known price (not in [pricing] nor the built-in table, on a
-- provider that is not free = true). Their cost is recorded as 0 and marked, so that Studio's
-- Costs page and the run can say the bill is incomplete; their tokens still count against
-- daily_token_budget. A run is marked when any of its calls was.
ALTER TABLE cost_events ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
