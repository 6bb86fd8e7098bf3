-- +goose Up
-- One ledger row per model call attempt, and one refusal row per refused
-- update (its update ID), however many workers write them at once.
CREATE UNIQUE INDEX model_calls_key_attempt ON model_calls(key, attempt);
ALTER TABLE refusals ADD COLUMN key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX refusals_key ON refusals(key) WHERE key <> '';

-- +goose Down
SELECT 1;
