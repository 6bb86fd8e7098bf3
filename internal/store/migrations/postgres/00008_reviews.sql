-- +goose Up
-- A claimant's request for a person to review a claim's automated outcome:
-- one per claim, ever (the original's ID is the key), with the review claim
-- it registered (<id>-review) and the window it was asked within.
CREATE TABLE reviews (
	claim_id     TEXT PRIMARY KEY,
	review_id    TEXT NOT NULL UNIQUE,
	requested_by TEXT NOT NULL,
	requested_at TIMESTAMPTZ NOT NULL,
	reason       TEXT NOT NULL,
	decided_by   TEXT NOT NULL,
	decided_at   TIMESTAMPTZ NOT NULL,
	window_ends  TIMESTAMPTZ NOT NULL
);

-- +goose Down
DROP TABLE reviews;
