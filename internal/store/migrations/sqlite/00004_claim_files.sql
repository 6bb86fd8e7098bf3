-- +goose Up
-- The claim file: one dossier per run that ends a claim (a dead-lettered
-- run writes one, and so does the redrive that ends it), each a leaf of
-- the claim-file log (an RFC 6962 Merkle tree, leaf i at log_index i).
-- The head row numbers the leaves: an append locks it, so two workers
-- never take the same index.
CREATE TABLE claim_files (
	claim_id     TEXT NOT NULL,
	run_id       TEXT NOT NULL,
	key          TEXT NOT NULL,
	uri          TEXT NOT NULL,
	sha256       TEXT NOT NULL,
	size         INTEGER NOT NULL,
	log_index    INTEGER NOT NULL UNIQUE,
	leaf_hash    TEXT NOT NULL,
	outcome      TEXT NOT NULL,
	retain_until TEXT NOT NULL,
	written_at   TEXT NOT NULL,
	PRIMARY KEY (claim_id, run_id)
);
CREATE TABLE claim_file_log (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	size INTEGER NOT NULL
);
INSERT INTO claim_file_log (id, size) VALUES (1, 0);

-- +goose Down
SELECT 1;
