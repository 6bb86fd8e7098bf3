-- +goose Up
-- The approval queue: a projection of every open approval wait, kept by
-- the claim workflow (a local activity at each change of the wait: opened,
-- a vote, a hand-off, escalated, ended) and healed against Temporal (the
-- worker's queue healer), for the question "what may this approver decide
-- now, oldest deadline first" without a query per claim. The workflow is
-- the truth: a row carries the whole state of the wait at revision rev,
-- and an older revision never overwrites a newer one of the same run.
-- Times are Unix milliseconds: they sort as numbers in both backends.
CREATE TABLE approval_queue (
	claim_id     TEXT NOT NULL PRIMARY KEY,
	run_id       TEXT NOT NULL,
	rev          BIGINT NOT NULL,
	open         INTEGER NOT NULL,
	stage        TEXT NOT NULL,
	deadline_ms  BIGINT NOT NULL,
	currency     TEXT NOT NULL,
	amount_minor BIGINT NOT NULL,
	quorum       INTEGER NOT NULL,
	assigned_to  TEXT NOT NULL,
	summary      TEXT NOT NULL,
	updated_ms   BIGINT NOT NULL
);
CREATE INDEX approval_queue_open ON approval_queue (deadline_ms, claim_id) WHERE open = 1;
CREATE INDEX approval_queue_assigned ON approval_queue (assigned_to, deadline_ms) WHERE open = 1;
-- Counting an approver's queue reads this index alone, not the rows.
CREATE INDEX approval_queue_counts ON approval_queue (currency, amount_minor, stage, quorum, assigned_to, claim_id) WHERE open = 1;
-- The approvers who voted on an open four-eyes wait: they may not decide
-- it again.
CREATE TABLE approval_votes (
	claim_id TEXT NOT NULL,
	approver TEXT NOT NULL,
	PRIMARY KEY (claim_id, approver)
);

-- +goose Down
SELECT 1;
