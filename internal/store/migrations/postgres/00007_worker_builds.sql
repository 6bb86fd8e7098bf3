-- +goose Up
-- The builds that ran as workers on this claims store: a worker records its
-- own when it starts. A Worker Deployment routed to a build that never did
-- was routed by someone who reaches the Temporal frontend, not by a deploy
-- (worker/deployment.go reports it).
CREATE TABLE worker_builds (
	deployment TEXT NOT NULL,
	build_id   TEXT NOT NULL,
	first_seen TIMESTAMPTZ NOT NULL,
	last_seen  TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (deployment, build_id)
);

-- +goose Down
DROP TABLE worker_builds;
