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
-- +goose StatementBegin
CREATE FUNCTION approval_amount_band(a BIGINT) RETURNS BIGINT LANGUAGE SQL IMMUTABLE AS $$
	SELECT CASE WHEN a < 100 THEN a
		WHEN a < 1000 THEN a / 10 * 10
		WHEN a < 10000 THEN a / 100 * 100
		WHEN a < 100000 THEN a / 1000 * 1000
		WHEN a < 1000000 THEN a / 10000 * 10000
		WHEN a < 10000000 THEN a / 100000 * 100000
		WHEN a < 100000000 THEN a / 1000000 * 1000000
		WHEN a < 1000000000 THEN a / 10000000 * 10000000
		WHEN a < 10000000000 THEN a / 100000000 * 100000000
		WHEN a < 100000000000 THEN a / 1000000000 * 1000000000
		WHEN a < 1000000000000 THEN a / 10000000000 * 10000000000
		WHEN a < 10000000000000 THEN a / 100000000000 * 100000000000
		WHEN a < 100000000000000 THEN a / 1000000000000 * 1000000000000
		WHEN a < 1000000000000000 THEN a / 10000000000000 * 10000000000000
		WHEN a < 10000000000000000 THEN a / 100000000000000 * 100000000000000
		WHEN a < 100000000000000000 THEN a / 1000000000000000 * 1000000000000000
		WHEN a < 1000000000000000000 THEN a / 10000000000000000 * 10000000000000000
		ELSE a / 100000000000000000 * 100000000000000000 END
$$;
-- +goose StatementEnd
ALTER TABLE approval_queue ADD COLUMN amount_band BIGINT GENERATED ALWAYS AS (approval_amount_band(amount_minor)) STORED;
CREATE TABLE approval_queue_tally (
	stage    TEXT NOT NULL,
	currency TEXT NOT NULL,
	band     BIGINT NOT NULL,
	n        BIGINT NOT NULL,
	PRIMARY KEY (stage, currency, band)
);
INSERT INTO approval_queue_tally (stage, currency, band, n)
	SELECT stage, currency, amount_band, COUNT(*) FROM approval_queue WHERE open = 1 GROUP BY stage, currency, amount_band;
-- +goose StatementBegin
CREATE FUNCTION approval_queue_tally_keep() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	was_open BOOLEAN := TG_OP IN ('UPDATE', 'DELETE') AND OLD.open = 1;
	is_open BOOLEAN := TG_OP IN ('INSERT', 'UPDATE') AND NEW.open = 1;
	-- The two rows of the tally a row's change moves a wait between are
	-- locked in the order of their keys, so two such writes never deadlock.
	-- (A statement that changes many rows at once locks tally rows in the
	-- order of its rows: PostgreSQL aborts one side of a deadlock, and it
	-- is retried.) A tally row is held until its transaction commits:
	-- writes into one band follow each other at commit latency.
	new_first BOOLEAN := was_open AND is_open AND (NEW.stage, NEW.currency, NEW.amount_band) < (OLD.stage, OLD.currency, OLD.amount_band);
BEGIN
	IF is_open AND new_first THEN
		INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES (NEW.stage, NEW.currency, NEW.amount_band, 1)
			ON CONFLICT (stage, currency, band) DO UPDATE SET n = approval_queue_tally.n + 1;
	END IF;
	IF was_open THEN
		UPDATE approval_queue_tally SET n = n - 1 WHERE stage = OLD.stage AND currency = OLD.currency AND band = OLD.amount_band;
	END IF;
	IF is_open AND NOT new_first THEN
		INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES (NEW.stage, NEW.currency, NEW.amount_band, 1)
			ON CONFLICT (stage, currency, band) DO UPDATE SET n = approval_queue_tally.n + 1;
	END IF;
	RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER approval_queue_tally AFTER INSERT OR DELETE OR UPDATE OF open, stage, currency, amount_minor ON approval_queue
	FOR EACH ROW EXECUTE FUNCTION approval_queue_tally_keep();
-- A TRUNCATE fires no row trigger: the tally goes with the rows.
-- +goose StatementBegin
CREATE FUNCTION approval_queue_tally_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM approval_queue_tally;
	RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER approval_queue_tally_truncate AFTER TRUNCATE ON approval_queue
	FOR EACH STATEMENT EXECUTE FUNCTION approval_queue_tally_truncate();
-- Whose votes an approver cast: taken off their counts.
CREATE INDEX approval_votes_approver ON approval_votes (approver, claim_id);

-- +goose Down
DROP INDEX approval_votes_approver;
DROP TRIGGER approval_queue_tally_truncate ON approval_queue;
DROP FUNCTION approval_queue_tally_truncate();
DROP TRIGGER approval_queue_tally ON approval_queue;
DROP FUNCTION approval_queue_tally_keep();
DROP TABLE approval_queue_tally;
ALTER TABLE approval_queue DROP COLUMN amount_band;
DROP FUNCTION approval_amount_band(BIGINT);
