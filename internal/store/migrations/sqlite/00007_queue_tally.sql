-- +goose Up
-- The approval queue's counts, kept by the database as rows change: open
-- waits by stage, currency and amount band. An approver's count is the
-- bands wholly within their limit, summed, plus the rows of the band their
-- limit falls in, read from the counts index: the counts grow with the
-- bands in use, not with the claims waiting (what is handed to the
-- approver and their own four-eyes votes are still counted by row, a few
-- each). A band is the amount cut to two significant digits (1,840.00 is
-- in the band of 1,800.00 to 1,899.99; under 100 minor units, each amount
-- its own): limits are round amounts, which start a band, so the band a
-- limit falls in is mostly empty. The triggers keep the tally whoever
-- writes the queue (the workflow, the healer, an operator with SQL), in
-- the same transaction as the row; what fires no row trigger (a restore
-- with triggers disabled, a tally written by hand) the healer's full pass
-- finds and sets right from the rows (Store.RecountQueue).
ALTER TABLE approval_queue ADD COLUMN amount_band INTEGER GENERATED ALWAYS AS (
	CASE WHEN amount_minor < 100 THEN amount_minor
		WHEN amount_minor < 1000 THEN amount_minor / 10 * 10
		WHEN amount_minor < 10000 THEN amount_minor / 100 * 100
		WHEN amount_minor < 100000 THEN amount_minor / 1000 * 1000
		WHEN amount_minor < 1000000 THEN amount_minor / 10000 * 10000
		WHEN amount_minor < 10000000 THEN amount_minor / 100000 * 100000
		WHEN amount_minor < 100000000 THEN amount_minor / 1000000 * 1000000
		WHEN amount_minor < 1000000000 THEN amount_minor / 10000000 * 10000000
		WHEN amount_minor < 10000000000 THEN amount_minor / 100000000 * 100000000
		WHEN amount_minor < 100000000000 THEN amount_minor / 1000000000 * 1000000000
		WHEN amount_minor < 1000000000000 THEN amount_minor / 10000000000 * 10000000000
		WHEN amount_minor < 10000000000000 THEN amount_minor / 100000000000 * 100000000000
		WHEN amount_minor < 100000000000000 THEN amount_minor / 1000000000000 * 1000000000000
		WHEN amount_minor < 1000000000000000 THEN amount_minor / 10000000000000 * 10000000000000
		WHEN amount_minor < 10000000000000000 THEN amount_minor / 100000000000000 * 100000000000000
		WHEN amount_minor < 100000000000000000 THEN amount_minor / 1000000000000000 * 1000000000000000
		WHEN amount_minor < 1000000000000000000 THEN amount_minor / 10000000000000000 * 10000000000000000
		ELSE amount_minor / 100000000000000000 * 100000000000000000 END
) VIRTUAL;
CREATE TABLE approval_queue_tally (
	stage    TEXT NOT NULL,
	currency TEXT NOT NULL,
	band     INTEGER NOT NULL,
	n        INTEGER NOT NULL,
	PRIMARY KEY (stage, currency, band)
);
INSERT INTO approval_queue_tally (stage, currency, band, n)
	SELECT stage, currency, amount_band, COUNT(*) FROM approval_queue WHERE open = 1 GROUP BY stage, currency, amount_band;
-- +goose StatementBegin
CREATE TRIGGER approval_queue_tally_insert AFTER INSERT ON approval_queue WHEN NEW.open = 1 BEGIN
	INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES (NEW.stage, NEW.currency, NEW.amount_band, 1)
		ON CONFLICT (stage, currency, band) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER approval_queue_tally_delete AFTER DELETE ON approval_queue WHEN OLD.open = 1 BEGIN
	UPDATE approval_queue_tally SET n = n - 1 WHERE stage = OLD.stage AND currency = OLD.currency AND band = OLD.amount_band;
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER approval_queue_tally_update AFTER UPDATE OF open, stage, currency, amount_minor ON approval_queue BEGIN
	UPDATE approval_queue_tally SET n = n - 1 WHERE OLD.open = 1 AND stage = OLD.stage AND currency = OLD.currency AND band = OLD.amount_band;
	INSERT INTO approval_queue_tally (stage, currency, band, n) SELECT NEW.stage, NEW.currency, NEW.amount_band, 1 WHERE NEW.open = 1
		ON CONFLICT (stage, currency, band) DO UPDATE SET n = n + 1;
END;
-- +goose StatementEnd
-- Whose votes an approver cast: taken off their counts.
CREATE INDEX approval_votes_approver ON approval_votes (approver, claim_id);

-- +goose Down
DROP INDEX approval_votes_approver;
DROP TRIGGER approval_queue_tally_update;
DROP TRIGGER approval_queue_tally_delete;
DROP TRIGGER approval_queue_tally_insert;
DROP TABLE approval_queue_tally;
ALTER TABLE approval_queue DROP COLUMN amount_band;
