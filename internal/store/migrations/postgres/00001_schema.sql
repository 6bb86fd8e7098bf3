-- +goose Up
-- The claims system of record on PostgreSQL: the same tables as the SQLite
-- store, with jsonb bodies, timestamptz stamps and identity columns.
CREATE TABLE claims (
	id           TEXT PRIMARY KEY,
	body         JSONB NOT NULL,
	status       TEXT NOT NULL,
	version      BIGINT NOT NULL,
	created_at   TIMESTAMPTZ NOT NULL,
	updated_at   TIMESTAMPTZ NOT NULL,
	closed_key   TEXT,
	transfer_id  TEXT,
	payout_minor BIGINT,
	amended_by   TEXT
);
CREATE INDEX claims_by_email ON claims ((body->'claimant'->>'email'), created_at);
CREATE INDEX claims_by_account ON claims ((body->'claimant'->>'stripe_account'), created_at);
CREATE INDEX claims_status_updated ON claims (status, updated_at);

CREATE TABLE outbox (
	key        TEXT PRIMARY KEY,
	claim_id   TEXT NOT NULL,
	recipient  TEXT NOT NULL,
	subject    TEXT NOT NULL,
	message_id TEXT NOT NULL,
	status     TEXT NOT NULL,
	attempts   INTEGER NOT NULL,
	created_at TIMESTAMPTZ NOT NULL,
	sent_at    TIMESTAMPTZ
);
CREATE INDEX outbox_claim ON outbox (claim_id);

CREATE TABLE audit (
	key        TEXT PRIMARY KEY,
	claim_id   TEXT NOT NULL,
	record     TEXT NOT NULL,
	sha256     TEXT NOT NULL,
	written_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX audit_claim ON audit (claim_id, written_at);

CREATE TABLE model_calls (
	id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	call_id       TEXT NOT NULL DEFAULT '',
	claim_id      TEXT NOT NULL,
	key           TEXT NOT NULL,
	provider      TEXT NOT NULL,
	attempt       INTEGER NOT NULL,
	tokens_in     BIGINT NOT NULL,
	tokens_out    BIGINT NOT NULL,
	output_sha256 TEXT NOT NULL,
	at            TIMESTAMPTZ NOT NULL
);
CREATE INDEX model_calls_claim ON model_calls (claim_id);
CREATE UNIQUE INDEX model_calls_call ON model_calls (call_id) WHERE call_id <> '';

CREATE TABLE refusals (
	id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	key            TEXT NOT NULL DEFAULT '',
	claim_id       TEXT NOT NULL,
	at             TIMESTAMPTZ NOT NULL,
	channel        TEXT NOT NULL,
	approver       TEXT NOT NULL,
	decision       TEXT NOT NULL,
	payload_sha256 TEXT NOT NULL,
	code           TEXT NOT NULL DEFAULT '',
	kid            TEXT NOT NULL DEFAULT '',
	reason         TEXT NOT NULL
);
CREATE INDEX refusals_claim ON refusals (claim_id);
CREATE UNIQUE INDEX refusals_key ON refusals (key) WHERE key <> '';

CREATE TABLE fraud_flags (
	key      TEXT PRIMARY KEY,
	claim_id TEXT NOT NULL,
	signal   TEXT NOT NULL,
	note     TEXT NOT NULL,
	at       TIMESTAMPTZ NOT NULL
);
CREATE INDEX fraud_flags_claim ON fraud_flags (claim_id);

CREATE TABLE reconciliations (
	id        TEXT PRIMARY KEY,
	started   TIMESTAMPTZ NOT NULL,
	since     TIMESTAMPTZ NOT NULL,
	until     TIMESTAMPTZ NOT NULL,
	counts    JSON NOT NULL, -- json, not jsonb: kept byte for byte
	report    JSON NOT NULL,
	stored_at TIMESTAMPTZ NOT NULL
);

-- +goose Down
-- The system of record is never migrated down.
SELECT 1;
