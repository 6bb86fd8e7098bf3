-- +goose Up
-- The schema as it stood before migrations were versioned. IF NOT EXISTS
-- everywhere: a store created before then already has these tables (Open
-- adds the columns such a store may lack before this runs).
CREATE TABLE IF NOT EXISTS claims (
	id           TEXT PRIMARY KEY,
	body         TEXT NOT NULL,
	status       TEXT NOT NULL,
	version      INTEGER NOT NULL,
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL,
	closed_key   TEXT,
	transfer_id  TEXT,
	payout_minor INTEGER,
	amended_by   TEXT
);
CREATE TABLE IF NOT EXISTS outbox (
	key        TEXT PRIMARY KEY,
	claim_id   TEXT NOT NULL,
	recipient  TEXT NOT NULL,
	subject    TEXT NOT NULL,
	message_id TEXT NOT NULL,
	status     TEXT NOT NULL,
	attempts   INTEGER NOT NULL,
	created_at TEXT NOT NULL,
	sent_at    TEXT
);
CREATE TABLE IF NOT EXISTS audit (
	key        TEXT PRIMARY KEY,
	claim_id   TEXT NOT NULL,
	record     TEXT NOT NULL,
	sha256     TEXT NOT NULL,
	written_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS model_calls (
	id            INTEGER PRIMARY KEY AUTOINCREMENT,
	claim_id      TEXT NOT NULL,
	key           TEXT NOT NULL,
	provider      TEXT NOT NULL,
	attempt       INTEGER NOT NULL,
	tokens_in     INTEGER NOT NULL,
	tokens_out    INTEGER NOT NULL,
	output_sha256 TEXT NOT NULL,
	at            TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS model_calls_claim ON model_calls(claim_id);
CREATE TABLE IF NOT EXISTS refusals (
	id             INTEGER PRIMARY KEY AUTOINCREMENT,
	claim_id       TEXT NOT NULL,
	at             TEXT NOT NULL,
	channel        TEXT NOT NULL,
	approver       TEXT NOT NULL,
	decision       TEXT NOT NULL,
	payload_sha256 TEXT NOT NULL,
	reason         TEXT NOT NULL,
	code           TEXT NOT NULL DEFAULT '',
	kid            TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS refusals_claim ON refusals(claim_id);
CREATE INDEX IF NOT EXISTS claims_by_email ON claims(json_extract(body, '$.claimant.email'), created_at);
CREATE INDEX IF NOT EXISTS claims_by_account ON claims(json_extract(body, '$.claimant.stripe_account'), created_at);
CREATE TABLE IF NOT EXISTS fraud_flags (
	key      TEXT PRIMARY KEY,
	claim_id TEXT NOT NULL,
	signal   TEXT NOT NULL,
	note     TEXT NOT NULL,
	at       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reconciliations (
	id        TEXT PRIMARY KEY,
	started   TEXT NOT NULL,
	since     TEXT NOT NULL,
	until     TEXT NOT NULL,
	counts    TEXT NOT NULL,
	report    TEXT NOT NULL,
	stored_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS claims_status_updated ON claims(status, updated_at);

-- +goose Down
-- The system of record is never migrated down.
SELECT 1;
