// Package store is the claims system of record: claims with their status and
// version, the notification outbox, the audit ledger and the model-usage
// ledger, in one SQLite file (pure Go driver, no cgo) that the worker, the
// starter and claimsctl share.
package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	// ErrConflict means a key or ID was reused for different content: a bug
	// in the caller, never something a retry fixes.
	ErrConflict = errors.New("conflict")
)

// Claim statuses in the system of record.
const (
	StatusOpen      = "open"
	StatusWithdrawn = "withdrawn"
)

// Store is safe for concurrent use, and for several processes on one file.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

const schema = `
CREATE TABLE IF NOT EXISTS claims (
	id           TEXT PRIMARY KEY,
	body         TEXT NOT NULL,
	status       TEXT NOT NULL,
	version      INTEGER NOT NULL,
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL,
	closed_key   TEXT,
	transfer_id  TEXT,
	payout_minor INTEGER
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
	reason         TEXT NOT NULL
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
`

// Open opens (creating if needed) the store at path.
func Open(path string) (*Store, error) {
	// Owner-only, whatever the process umask: the claims DB holds every
	// claimant's name, e-mail and payout account. SQLite creates its -wal
	// and -shm files with the database file's permissions.
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	if f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("store: %w", err)
	}
	// WAL lets readers in other processes proceed during a write; busy_timeout
	// makes writers from several processes queue instead of failing, and
	// immediate transactions take the write lock up front so two writers never
	// deadlock upgrading a read lock.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: schema in %s: %w", path, err)
	}
	for _, c := range []struct{ table, column, typ string }{
		{"claims", "amended_by", "TEXT"}, {"refusals", "code", "TEXT NOT NULL DEFAULT ''"}, {"refusals", "kid", "TEXT NOT NULL DEFAULT ''"},
	} {
		if err := addColumn(db, c.table, c.column, c.typ); err != nil {
			db.Close()
			return nil, fmt.Errorf("store: schema in %s: %w", path, err)
		}
	}
	return &Store{db: db, now: time.Now}, nil
}

// addColumn adds a column that stores created before it lack.
func addColumn(db *sql.DB, table, column, typ string) error {
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, table, column).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	_, err := db.Exec(fmt.Sprintf(`ALTER TABLE %s ADD COLUMN %s %s`, table, column, typ))
	if err != nil && strings.Contains(err.Error(), "duplicate column") {
		return nil // another process added it first
	}
	return err
}

// Close releases the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) stamp() string { return s.now().UTC().Format(time.RFC3339Nano) }

// Record is a claim as the system of record holds it.
type Record struct {
	Claim      claim.Claim `json:"claim"`
	Status     string      `json:"status"`
	Version    int64       `json:"version"`
	ClosedKey  string      `json:"closed_key,omitempty"`
	TransferID string      `json:"transfer_id,omitempty"`
	// AmendedBy lists who amended the claim, in order, once each.
	AmendedBy []string `json:"amended_by,omitempty"`
}

// PutClaim registers a claim. Registering the same claim again is a no-op
// that returns the stored record; different content under the same ID is
// ErrConflict (amending a claim is a deliberate, versioned change).
func (s *Store) PutClaim(ctx context.Context, c claim.Claim) (Record, bool, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return Record{}, false, err
	}
	now := s.stamp()
	res, err := s.db.ExecContext(ctx, `INSERT INTO claims (id, body, status, version, created_at, updated_at)
		VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(id) DO NOTHING`, c.ID, string(body), StatusOpen, now, now)
	if err != nil {
		return Record{}, false, fmt.Errorf("store: put claim %s: %w", c.ID, err)
	}
	created, _ := res.RowsAffected()
	rec, err := s.GetClaim(ctx, c.ID)
	if err != nil {
		return Record{}, false, err
	}
	if created == 0 {
		stored, _ := json.Marshal(rec.Claim)
		if string(stored) != string(body) {
			return rec, false, fmt.Errorf("store: claim %s is already registered with different content: %w", c.ID, ErrConflict)
		}
	}
	return rec, created == 1, nil
}

// GetClaim reads one claim; ErrNotFound if it was never registered.
func (s *Store) GetClaim(ctx context.Context, id string) (Record, error) {
	var rec Record
	var body string
	var closedKey, transferID, amendedBy sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT body, status, version, closed_key, transfer_id, amended_by FROM claims WHERE id = ?`, id).
		Scan(&body, &rec.Status, &rec.Version, &closedKey, &transferID, &amendedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("store: claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("store: get claim %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(body), &rec.Claim); err != nil {
		return Record{}, fmt.Errorf("store: claim %s body: %w", id, err)
	}
	rec.ClosedKey, rec.TransferID = closedKey.String, transferID.String
	if amendedBy.String != "" {
		if err := json.Unmarshal([]byte(amendedBy.String), &rec.AmendedBy); err != nil {
			return Record{}, fmt.Errorf("store: claim %s amended_by: %w", id, err)
		}
	}
	return rec, nil
}

// CloseClaim records the claim's final outcome under key, once, and says
// when. A repeat with the same key reports replayed and the original time; a
// different key for an already closed claim is ErrConflict.
func (s *Store) CloseClaim(ctx context.Context, id string, key claim.IdempotencyKey, outcome, transferID string, payoutMinor int64) (replayed bool, closedAt time.Time, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: close %s: %w", id, err)
	}
	defer tx.Rollback()
	var closedKey sql.NullString
	var updated string
	err = tx.QueryRowContext(ctx, `SELECT closed_key, updated_at FROM claims WHERE id = ?`, id).Scan(&closedKey, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, err)
	}
	switch closedKey.String {
	case string(key):
		at, _ := time.Parse(time.RFC3339Nano, updated) // a closed claim is never updated again
		return true, at, nil
	case "":
	default:
		return false, time.Time{}, fmt.Errorf("store: claim %s was closed under %s, not %s: %w", id, closedKey.String, key, ErrConflict)
	}
	now := s.stamp()
	if _, err := tx.ExecContext(ctx, `UPDATE claims SET status = ?, closed_key = ?, transfer_id = ?, payout_minor = ?,
		version = version + 1, updated_at = ? WHERE id = ?`, outcome, string(key), nullIfEmpty(transferID), payoutMinor, now, id); err != nil {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, err)
	}
	at, _ := time.Parse(time.RFC3339Nano, now)
	return false, at, tx.Commit()
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Message is one claimant notification in the outbox.
type Message struct {
	Key       claim.IdempotencyKey
	ClaimID   string
	Recipient string
	Subject   string
	MessageID string
	Status    string // "sending" until the mailer accepted it, then "sent"
	Attempts  int
}

// Outbox statuses.
const (
	OutboxSending = "sending"
	OutboxSent    = "sent"
)

// ReserveMessage is the "check" of check-then-act: it returns the message
// already recorded under m.Key, or records m as sending. Either way the caller
// learns whether the message was already sent.
func (s *Store) ReserveMessage(ctx context.Context, m Message) (Message, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Message{}, fmt.Errorf("store: outbox: %w", err)
	}
	defer tx.Rollback()
	var got Message
	err = tx.QueryRowContext(ctx, `SELECT key, claim_id, recipient, subject, message_id, status, attempts FROM outbox WHERE key = ?`, string(m.Key)).
		Scan(&got.Key, &got.ClaimID, &got.Recipient, &got.Subject, &got.MessageID, &got.Status, &got.Attempts)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		got = m
		got.Status, got.Attempts = OutboxSending, 1
		_, err = tx.ExecContext(ctx, `INSERT INTO outbox (key, claim_id, recipient, subject, message_id, status, attempts, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?)`, string(m.Key), m.ClaimID, m.Recipient, m.Subject, m.MessageID, OutboxSending, s.stamp())
	case err == nil:
		if got.Recipient != m.Recipient || got.Subject != m.Subject {
			return got, fmt.Errorf("store: outbox key %s was used for another message: %w", m.Key, ErrConflict)
		}
		if got.Status != OutboxSent {
			got.Attempts++
			_, err = tx.ExecContext(ctx, `UPDATE outbox SET attempts = ? WHERE key = ?`, got.Attempts, string(m.Key))
		}
	}
	if err != nil {
		return Message{}, fmt.Errorf("store: outbox %s: %w", m.Key, err)
	}
	return got, tx.Commit()
}

// MarkSent is the "record" of check-then-act, after the mailer accepted it.
func (s *Store) MarkSent(ctx context.Context, key claim.IdempotencyKey) error {
	_, err := s.db.ExecContext(ctx, `UPDATE outbox SET status = ?, sent_at = ? WHERE key = ?`, OutboxSent, s.stamp(), string(key))
	if err != nil {
		return fmt.Errorf("store: outbox %s: %w", key, err)
	}
	return nil
}

// Messages lists a claim's outbox, oldest first.
func (s *Store) Messages(ctx context.Context, claimID string) ([]Message, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, claim_id, recipient, subject, message_id, status, attempts FROM outbox
		WHERE claim_id = ? ORDER BY created_at, key`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: messages of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.Key, &m.ClaimID, &m.Recipient, &m.Subject, &m.MessageID, &m.Status, &m.Attempts); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// WriteAudit stores a claim's audit record under key, once. The same record
// again is a replay; a different record under the same key is ErrConflict.
func (s *Store) WriteAudit(ctx context.Context, key claim.IdempotencyKey, claimID string, record []byte) (replayed bool, sum string, err error) {
	h := sha256.Sum256(record)
	sum = hex.EncodeToString(h[:])
	res, err := s.db.ExecContext(ctx, `INSERT INTO audit (key, claim_id, record, sha256, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(key) DO NOTHING`, string(key), claimID, string(record), sum, s.stamp())
	if err != nil {
		return false, "", fmt.Errorf("store: audit %s: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, sum, nil
	}
	var stored string
	if err := s.db.QueryRowContext(ctx, `SELECT sha256 FROM audit WHERE key = ?`, string(key)).Scan(&stored); err != nil {
		return false, "", fmt.Errorf("store: audit %s: %w", key, err)
	}
	if stored != sum {
		return true, stored, fmt.Errorf("store: audit key %s holds a different record: %w", key, ErrConflict)
	}
	return true, sum, nil
}

// Audit returns the audit record stored for a claim, if any.
func (s *Store) Audit(ctx context.Context, claimID string) ([]byte, error) {
	var rec string
	err := s.db.QueryRowContext(ctx, `SELECT record FROM audit WHERE claim_id = ? ORDER BY written_at DESC LIMIT 1`, claimID).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: audit of %s: %w", claimID, ErrNotFound)
	}
	return []byte(rec), err
}

// ModelCall is one real call to a model provider: the usage ledger that
// proves (and bills) what a resumed run did or did not ask again.
type ModelCall struct {
	ClaimID      string
	Key          claim.IdempotencyKey
	Provider     string
	Attempt      int
	TokensIn     int64
	TokensOut    int64
	OutputSHA256 string
	At           time.Time
}

// RecordModelCall appends to the usage ledger.
func (s *Store) RecordModelCall(ctx context.Context, c ModelCall) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO model_calls (claim_id, key, provider, attempt, tokens_in, tokens_out, output_sha256, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.ClaimID, string(c.Key), c.Provider, c.Attempt, c.TokensIn, c.TokensOut, c.OutputSHA256, s.stamp())
	if err != nil {
		return fmt.Errorf("store: model call %s: %w", c.Key, err)
	}
	return nil
}

// ModelCalls lists a claim's model calls in order.
func (s *Store) ModelCalls(ctx context.Context, claimID string) ([]ModelCall, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT claim_id, key, provider, attempt, tokens_in, tokens_out, output_sha256, at
		FROM model_calls WHERE claim_id = ? ORDER BY id`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: model calls of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []ModelCall
	for rows.Next() {
		var c ModelCall
		var at string
		if err := rows.Scan(&c.ClaimID, &c.Key, &c.Provider, &c.Attempt, &c.TokensIn, &c.TokensOut, &c.OutputSHA256, &at); err != nil {
			return nil, err
		}
		c.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, c)
	}
	return out, rows.Err()
}

// Refusal is a decision refused before it reached the workflow's history:
// an update turned away by its validator. The worker records these here so
// the audit trail holds every attempt, not only those history kept.
type Refusal struct {
	ClaimID       string    `json:"claim_id"`
	At            time.Time `json:"at"`
	Channel       string    `json:"channel"`
	Approver      string    `json:"approver"`
	Decision      string    `json:"decision"`
	PayloadSHA256 string    `json:"payload_sha256,omitempty"`
	// Code is the refusal's stable name (unsigned, unknown-key…); KeyID the
	// key a receipt claimed to be signed with.
	Code   string `json:"code,omitempty"`
	KeyID  string `json:"kid,omitempty"`
	Reason string `json:"refusal"`
}

// RecordRefusal appends a refused decision.
func (s *Store) RecordRefusal(ctx context.Context, r Refusal) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO refusals (claim_id, at, channel, approver, decision, payload_sha256, code, kid, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.ClaimID, r.At.UTC().Format(time.RFC3339Nano), r.Channel, r.Approver, r.Decision, r.PayloadSHA256,
		r.Code, r.KeyID, r.Reason)
	if err != nil {
		return fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
	}
	return nil
}

// Refusals lists a claim's refused decisions, oldest first.
func (s *Store) Refusals(ctx context.Context, claimID string) ([]Refusal, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT claim_id, at, channel, approver, decision, payload_sha256, code, kid, reason
		FROM refusals WHERE claim_id = ? ORDER BY id`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: refusals of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []Refusal
	for rows.Next() {
		var r Refusal
		var at string
		if err := rows.Scan(&r.ClaimID, &at, &r.Channel, &r.Approver, &r.Decision, &r.PayloadSHA256, &r.Code, &r.KeyID, &r.Reason); err != nil {
			return nil, err
		}
		r.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// ErrClosed means the claim can no longer change: it was closed or withdrawn.
var ErrClosed = errors.New("claim is closed")

// Amend changes an open claim (its amount or payee, say), bumping its
// version, and records who amended it: that person may not approve it. A
// running workflow notices when it next re-reads the claim: after an
// approval wait, before it pays.
func (s *Store) Amend(ctx context.Context, id, by string, change func(*claim.Claim) error) (Record, error) {
	if strings.TrimSpace(by) == "" {
		return Record{}, errors.New("store: amend: who amends the claim is required")
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Record{}, fmt.Errorf("store: amend %s: %w", id, err)
	}
	defer tx.Rollback()
	var body, status string
	var closedKey, amendedBy sql.NullString
	err = tx.QueryRowContext(ctx, `SELECT body, status, closed_key, amended_by FROM claims WHERE id = ?`, id).Scan(&body, &status, &closedKey, &amendedBy)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("store: claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("store: amend %s: %w", id, err)
	}
	if closedKey.String != "" || status != StatusOpen {
		return Record{}, fmt.Errorf("store: claim %s is %s: %w", id, status, ErrClosed)
	}
	var c claim.Claim
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		return Record{}, err
	}
	if err := change(&c); err != nil {
		return Record{}, err
	}
	if err := c.Validate(); err != nil {
		return Record{}, err
	}
	nb, err := json.Marshal(c)
	if err != nil {
		return Record{}, err
	}
	var amenders []string
	if amendedBy.String != "" {
		if err := json.Unmarshal([]byte(amendedBy.String), &amenders); err != nil {
			return Record{}, err
		}
	}
	if !slices.Contains(amenders, by) {
		amenders = append(amenders, by)
	}
	ab, err := json.Marshal(amenders)
	if err != nil {
		return Record{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE claims SET body = ?, amended_by = ?, version = version + 1, updated_at = ? WHERE id = ?`,
		string(nb), string(ab), s.stamp(), id); err != nil {
		return Record{}, fmt.Errorf("store: amend %s: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return Record{}, err
	}
	return s.GetClaim(ctx, id)
}

// Withdraw marks an open claim withdrawn. The workflow ends it without
// payment when it next re-reads the claim.
func (s *Store) Withdraw(ctx context.Context, id string) (Record, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE claims SET status = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status = ? AND closed_key IS NULL`, StatusWithdrawn, s.stamp(), id, StatusOpen)
	if err != nil {
		return Record{}, fmt.Errorf("store: withdraw %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		rec, err := s.GetClaim(ctx, id)
		if err != nil {
			return Record{}, err
		}
		return rec, fmt.Errorf("store: claim %s is %s: %w", id, rec.Status, ErrClosed)
	}
	return s.GetClaim(ctx, id)
}

// PriorClaim is another claim by the same claimant, as the triage agent's
// prior_claims tool reports it.
type PriorClaim struct {
	ClaimID     string `json:"claim_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Status      string `json:"status"`
	CreatedAt   string `json:"created_at"`
}

// PriorClaimsCountCap bounds the count PriorClaims makes: a claimant with
// more prior claims is reported as having more than this many.
const PriorClaimsCountCap = 100

// PriorClaims lists up to limit other claims by the claimant with this
// e-mail or payout account, newest first, and counts them up to
// PriorClaimsCountCap (capped reports that there are more). Both lookups use
// an index on the claimant's e-mail and account, so the cost does not grow
// with the size of the store.
func (s *Store) PriorClaims(ctx context.Context, excludeID, email, account string, limit int) (prior []PriorClaim, total int, capped bool, err error) {
	const byEmail = `SELECT id, created_at FROM claims WHERE json_extract(body, '$.claimant.email') = ? AND id <> ? ORDER BY created_at DESC LIMIT ?`
	const byAccount = `SELECT id, created_at FROM claims WHERE json_extract(body, '$.claimant.stripe_account') = ? AND id <> ? ORDER BY created_at DESC LIMIT ?`
	either := `SELECT id, created_at FROM (` + byEmail + `) UNION SELECT id, created_at FROM (` + byAccount + `)`
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (`+either+`)`,
		email, excludeID, PriorClaimsCountCap+1, account, excludeID, PriorClaimsCountCap+1).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("store: prior claims of %s: %w", excludeID, err)
	}
	if total > PriorClaimsCountCap {
		total, capped = PriorClaimsCountCap, true
	}
	rows, err := s.db.QueryContext(ctx, `SELECT c.id, json_extract(c.body, '$.amount_minor'), json_extract(c.body, '$.currency'), c.status, c.created_at
		FROM (`+either+`) AS p JOIN claims c ON c.id = p.id ORDER BY c.created_at DESC, c.id LIMIT ?`,
		email, excludeID, limit, account, excludeID, limit, limit)
	if err != nil {
		return nil, 0, false, fmt.Errorf("store: prior claims of %s: %w", excludeID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p PriorClaim
		if err := rows.Scan(&p.ClaimID, &p.AmountMinor, &p.Currency, &p.Status, &p.CreatedAt); err != nil {
			return nil, 0, false, err
		}
		prior = append(prior, p)
	}
	return prior, total, capped, rows.Err()
}

// CountPriorClaims counts the other claims by the claimant with this e-mail
// or payout account registered since since, up to PriorClaimsCountCap.
func (s *Store) CountPriorClaims(ctx context.Context, excludeID, email, account string, since time.Time) (int, error) {
	const byEmail = `SELECT id FROM claims WHERE json_extract(body, '$.claimant.email') = ? AND id <> ? AND created_at >= ? LIMIT ?`
	const byAccount = `SELECT id FROM claims WHERE json_extract(body, '$.claimant.stripe_account') = ? AND id <> ? AND created_at >= ? LIMIT ?`
	from := since.UTC().Format(time.RFC3339Nano)
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT id FROM (`+byEmail+`) UNION SELECT id FROM (`+byAccount+`))`,
		email, excludeID, from, PriorClaimsCountCap, account, excludeID, from, PriorClaimsCountCap).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: prior claims of %s: %w", excludeID, err)
	}
	return min(n, PriorClaimsCountCap), nil
}

// FraudFlag is a fraud signal the triage agent raised for investigators.
type FraudFlag struct {
	Key     claim.IdempotencyKey `json:"key"`
	ClaimID string               `json:"claim_id"`
	Signal  string               `json:"signal"`
	Note    string               `json:"note,omitempty"`
	At      time.Time            `json:"at"`
}

// FlagFraud records a fraud flag under key, once: a repeat with the same
// content reports replayed; different content under the same key is
// ErrConflict.
func (s *Store) FlagFraud(ctx context.Context, f FraudFlag) (replayed bool, err error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO fraud_flags (key, claim_id, signal, note, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(key) DO NOTHING`, string(f.Key), f.ClaimID, f.Signal, f.Note, s.stamp())
	if err != nil {
		return false, fmt.Errorf("store: flag %s: %w", f.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, nil
	}
	var claimID, signal, note string
	if err := s.db.QueryRowContext(ctx, `SELECT claim_id, signal, note FROM fraud_flags WHERE key = ?`, string(f.Key)).Scan(&claimID, &signal, &note); err != nil {
		return false, fmt.Errorf("store: flag %s: %w", f.Key, err)
	}
	if claimID != f.ClaimID || signal != f.Signal || note != f.Note {
		return true, fmt.Errorf("store: fraud flag %s already recorded with different content: %w", f.Key, ErrConflict)
	}
	return true, nil
}

// FraudFlags lists a claim's fraud flags in order.
func (s *Store) FraudFlags(ctx context.Context, claimID string) ([]FraudFlag, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key, claim_id, signal, note, at FROM fraud_flags WHERE claim_id = ? ORDER BY at, key`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: fraud flags of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []FraudFlag
	for rows.Next() {
		var f FraudFlag
		var at string
		if err := rows.Scan(&f.Key, &f.ClaimID, &f.Signal, &f.Note, &at); err != nil {
			return nil, err
		}
		f.At, _ = time.Parse(time.RFC3339Nano, at)
		out = append(out, f)
	}
	return out, rows.Err()
}
