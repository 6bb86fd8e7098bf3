-- +goose Up
-- A claim belongs to one run: intake binds it to the run ID the Temporal
-- server reported, and every later effect acts only for that run. Refused
-- decisions are bounded per claim: the first ones are kept, the rest
-- counted. A claim is paid once, ever: the payout is reserved here, unique
-- per claim, before the payment provider is called.
ALTER TABLE claims ADD COLUMN run_id TEXT;
ALTER TABLE claims ADD COLUMN refusals_dropped INTEGER NOT NULL DEFAULT 0;
CREATE TABLE payouts (
	claim_id     TEXT PRIMARY KEY,
	key          TEXT NOT NULL,
	run_id       TEXT NOT NULL,
	amount_minor BIGINT NOT NULL,
	currency     TEXT NOT NULL,
	destination  TEXT NOT NULL,
	status       TEXT NOT NULL,
	transfer_id  TEXT,
	reserved_at  TIMESTAMPTZ NOT NULL,
	paid_at      TIMESTAMPTZ
);

-- +goose Down
SELECT 1;
