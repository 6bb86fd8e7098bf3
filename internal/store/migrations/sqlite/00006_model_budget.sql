-- +goose Up
-- The model provider's rate limit as every worker shares it: one row per
-- budget, a token bucket kept as its theoretical arrival time (GCRA): the
-- Unix microsecond at which every token booked so far has been refilled.
-- A booking moves it on by the tokens' share of a minute; the bucket is
-- full when it lies in the past.
CREATE TABLE model_budget (
	name   TEXT NOT NULL PRIMARY KEY,
	tat_us INTEGER NOT NULL
);

-- +goose Down
DROP TABLE model_budget;
