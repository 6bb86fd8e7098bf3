-- +goose Up
-- One ledger row per real model call (its call ID; a local step run again
-- after a lost workflow task makes a second call under the same key and
-- attempt, and both are billed), and one refusal row per refused update
-- (its update ID), however many workers write them at once.
ALTER TABLE model_calls ADD COLUMN call_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX model_calls_call ON model_calls(call_id) WHERE call_id <> '';
ALTER TABLE refusals ADD COLUMN key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX refusals_key ON refusals(key) WHERE key <> '';

-- +goose Down
SELECT 1;
