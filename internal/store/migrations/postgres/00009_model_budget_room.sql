-- +goose Up
-- The model budget's waiting room: a call the budget cannot serve within
-- the wait it may hold its worker is handed back to its workflow with a
-- place in line (turn_us, when its turn comes if everyone ahead returns at
-- the budget's pace), kept under the call's key (call_key). Back under that
-- key, it books ahead of anyone new; room_us is the end of the line, which
-- a new caller queues behind.
ALTER TABLE model_budget ADD COLUMN room_us BIGINT NOT NULL DEFAULT 0;
CREATE TABLE model_budget_room (
	name     TEXT NOT NULL,
	call_key TEXT NOT NULL,
	turn_us  BIGINT NOT NULL,
	PRIMARY KEY (name, call_key)
);

-- +goose Down
DROP TABLE model_budget_room;
ALTER TABLE model_budget DROP COLUMN room_us;
