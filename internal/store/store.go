// Package store is the claims system of record: claims with their status and
// version, the notification outbox, the audit ledger, the model-usage ledger,
// refused decisions, fraud flags and reconciliation reports.
//
// Two backends behind one Store: PostgreSQL (CLAIMS_DB=postgres://…, through
// pgx), which workers on many hosts share, and SQLite (a file path; pure Go,
// no cgo), the embedded default for one machine. The SQL is shared; the
// dialect (placeholders, JSON paths, row locks, time stamps) and the
// migrations are each backend's own. Every keyed write is one row per key
// however many workers write it at once: INSERT … ON CONFLICT for the first
// write, a row lock (SELECT … FOR UPDATE on PostgreSQL, SQLite's immediate
// write transactions) for read-modify-write.
package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/telemetry"
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

// Store is safe for concurrent use, by any number of processes sharing
// the database.
type Store struct {
	db    *sql.DB
	d     dialect
	now   func() time.Time
	stmts *stmtCache // SQLite's prepared statements; nil on PostgreSQL
}

// Open opens the store named by dsn, creating and migrating it as needed: a
// postgres:// (or postgresql://) URL selects PostgreSQL, anything else is a
// SQLite file path.
func Open(dsn string) (*Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if isPostgres(dsn) {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, dsn)
}

// Backend names the store's database: "postgres" or "sqlite".
func (s *Store) Backend() string { return s.d.name }

// Close releases the database.
func (s *Store) Close() error {
	s.stmts.close()
	return s.db.Close()
}

// stamp is now, to the microsecond (PostgreSQL's precision, so a time
// returned at once and the same time read back later are equal).
func (s *Store) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// ts is a time as the backend stores it.
func (s *Store) ts(t time.Time) any { return s.d.time(t) }

// exec, queryRow and query run a statement, each a span while tracing is
// on (telemetry.StartQuery: the statement, never its arguments).
func (s *Store) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, span := telemetry.StartQuery(ctx, s.d.system(), q)
	var r sql.Result
	var err error
	if st := s.stmts.get(ctx, q, false); st != nil {
		r, err = st.ExecContext(ctx, args...)
	} else {
		r, err = s.db.ExecContext(ctx, s.d.rebind(q), args...)
	}
	telemetry.End(span, err, "statement failed")
	return r, err
}

func (s *Store) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx, span := telemetry.StartQuery(ctx, s.d.system(), q)
	defer span.End()
	if st := s.stmts.get(ctx, q, false); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.db.QueryRowContext(ctx, s.d.rebind(q), args...)
}

func (s *Store) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx, span := telemetry.StartQuery(ctx, s.d.system(), q)
	var rows *sql.Rows
	var err error
	if st := s.stmts.get(ctx, q, false); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.db.QueryContext(ctx, s.d.rebind(q), args...)
	}
	telemetry.End(span, err, "query failed")
	return rows, err
}

// tx is a write transaction: on SQLite it holds the database's write lock
// from its start; on PostgreSQL, rows read with lock() are locked until it ends.
type tx struct {
	*sql.Tx
	d     dialect
	stmts *stmtCache
}

func (s *Store) begin(ctx context.Context) (*tx, error) {
	t, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &tx{Tx: t, d: s.d, stmts: s.stmts}, nil
}

// stmt is q prepared for the transaction (the connection's statement,
// prepared once), or nil to run it unprepared.
func (t *tx) stmt(ctx context.Context, q string) *sql.Stmt {
	if st := t.stmts.get(ctx, q, true); st != nil {
		return t.StmtContext(ctx, st)
	}
	return nil
}

func (t *tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx, span := telemetry.StartQuery(ctx, t.d.system(), q)
	var r sql.Result
	var err error
	if st := t.stmt(ctx, q); st != nil {
		r, err = st.ExecContext(ctx, args...)
	} else {
		r, err = t.ExecContext(ctx, t.d.rebind(q), args...)
	}
	telemetry.End(span, err, "statement failed")
	return r, err
}

// queryRow reads one row within the transaction.
func (t *tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx, span := telemetry.StartQuery(ctx, t.d.system(), q)
	defer span.End()
	if st := t.stmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.QueryRowContext(ctx, t.d.rebind(q), args...)
}

// lock reads one row and locks it until the transaction ends.
func (t *tx) lock(ctx context.Context, q string, args ...any) *sql.Row {
	return t.queryRow(ctx, q+t.d.forUpdate, args...)
}

// Record is a claim as the system of record holds it.
type Record struct {
	Claim      claim.Claim `json:"claim"`
	Status     string      `json:"status"`
	Version    int64       `json:"version"`
	ClosedKey  string      `json:"closed_key,omitempty"`
	TransferID string      `json:"transfer_id,omitempty"`
	// AmendedBy lists who amended the claim, in order, once each.
	AmendedBy []string `json:"amended_by,omitempty"`
	// RunID is the workflow run the claim belongs to: the run whose intake
	// took it last (TakeClaim). Empty until a run takes it.
	RunID string `json:"run_id,omitempty"`
	// CreatedAt is when the claim was registered.
	CreatedAt time.Time `json:"created_at"`
}

// Closed says whether the claim's outcome is recorded (step 8 ran): it is
// never processed again.
func (r Record) Closed() bool { return r.ClosedKey != "" }

// PutClaim registers a claim. Registering the same claim again is a no-op
// that returns the stored record; different content under the same ID is
// ErrConflict (amending a claim is a deliberate, versioned change).
func (s *Store) PutClaim(ctx context.Context, c claim.Claim) (Record, bool, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return Record{}, false, err
	}
	now := s.ts(s.stamp())
	res, err := s.exec(ctx, `INSERT INTO claims (id, body, status, version, created_at, updated_at)
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
	return scanRecord(s.queryRow(ctx, `SELECT `+recordColumns+` FROM claims WHERE id = ?`, id), id)
}

// recordColumns are what a Record is read from, in scanRecord's order.
const recordColumns = `body, status, version, closed_key, transfer_id, amended_by, run_id, created_at`

func scanRecord(row *sql.Row, id string) (Record, error) {
	var rec Record
	var body string
	var closedKey, transferID, amendedBy, runID sql.NullString
	var created stamp
	err := row.Scan(&body, &rec.Status, &rec.Version, &closedKey, &transferID, &amendedBy, &runID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("store: claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("store: get claim %s: %w", id, err)
	}
	if err := json.Unmarshal([]byte(body), &rec.Claim); err != nil {
		return Record{}, fmt.Errorf("store: claim %s body: %w", id, err)
	}
	rec.ClosedKey, rec.TransferID, rec.RunID, rec.CreatedAt = closedKey.String, transferID.String, runID.String, created.Time
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
	t, err := s.begin(ctx)
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: close %s: %w", id, err)
	}
	defer t.Rollback()
	var closedKey sql.NullString
	var updated stamp
	err = t.lock(ctx, `SELECT closed_key, updated_at FROM claims WHERE id = ?`, id).Scan(&closedKey, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, err)
	}
	switch closedKey.String {
	case string(key):
		return true, updated.Time, nil // a closed claim is never updated again
	case "":
	default:
		return false, time.Time{}, fmt.Errorf("store: claim %s was closed under %s, not %s: %w", id, closedKey.String, key, ErrConflict)
	}
	now := s.stamp()
	if _, err := t.exec(ctx, `UPDATE claims SET status = ?, closed_key = ?, transfer_id = ?, payout_minor = ?,
		version = version + 1, updated_at = ? WHERE id = ?`, outcome, string(key), nullIfEmpty(transferID), payoutMinor, s.ts(now), id); err != nil {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, err)
	}
	if err := t.Commit(); err != nil {
		return false, time.Time{}, fmt.Errorf("store: close claim %s: %w", id, err)
	}
	return false, now, nil
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
	// CreatedAt is when the key was first reserved: the same on every
	// repeat, so a letter dated by it reads the same however often it is
	// rendered again.
	CreatedAt time.Time
}

// Outbox statuses.
const (
	OutboxSending = "sending"
	OutboxSent    = "sent"
)

// ReserveMessage is the "check" of check-then-act: it returns the message
// already recorded under m.Key, or records m as sending. Either way the caller
// learns whether the message was already sent. Two workers reserving the same
// key at once get one row: the second waits for the first's insert, then
// counts an attempt on it.
func (s *Store) ReserveMessage(ctx context.Context, m Message) (Message, error) {
	t, err := s.begin(ctx)
	if err != nil {
		return Message{}, fmt.Errorf("store: outbox: %w", err)
	}
	defer t.Rollback()
	now := s.stamp()
	res, err := t.exec(ctx, `INSERT INTO outbox (key, claim_id, recipient, subject, message_id, status, attempts, created_at)
		VALUES (?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT(key) DO NOTHING`,
		string(m.Key), m.ClaimID, m.Recipient, m.Subject, m.MessageID, OutboxSending, s.ts(now))
	if err != nil {
		return Message{}, fmt.Errorf("store: outbox %s: %w", m.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		got := m
		got.Status, got.Attempts, got.CreatedAt = OutboxSending, 1, now
		return got, t.Commit()
	}
	var got Message
	var created stamp
	err = t.lock(ctx, `SELECT key, claim_id, recipient, subject, message_id, status, attempts, created_at FROM outbox WHERE key = ?`, string(m.Key)).
		Scan(&got.Key, &got.ClaimID, &got.Recipient, &got.Subject, &got.MessageID, &got.Status, &got.Attempts, &created)
	if err != nil {
		return Message{}, fmt.Errorf("store: outbox %s: %w", m.Key, err)
	}
	got.CreatedAt = created.Time
	if got.Recipient != m.Recipient || got.Subject != m.Subject {
		return got, fmt.Errorf("store: outbox key %s was used for another message: %w", m.Key, ErrConflict)
	}
	if got.Status != OutboxSent {
		got.Attempts++
		if _, err := t.exec(ctx, `UPDATE outbox SET attempts = ? WHERE key = ?`, got.Attempts, string(m.Key)); err != nil {
			return Message{}, fmt.Errorf("store: outbox %s: %w", m.Key, err)
		}
	}
	return got, t.Commit()
}

// MarkSent is the "record" of check-then-act, after the mailer accepted it.
func (s *Store) MarkSent(ctx context.Context, key claim.IdempotencyKey) error {
	_, err := s.exec(ctx, `UPDATE outbox SET status = ?, sent_at = ? WHERE key = ?`, OutboxSent, s.ts(s.stamp()), string(key))
	if err != nil {
		return fmt.Errorf("store: outbox %s: %w", key, err)
	}
	return nil
}

// Messages lists a claim's outbox, oldest first.
func (s *Store) Messages(ctx context.Context, claimID string) ([]Message, error) {
	rows, err := s.query(ctx, `SELECT key, claim_id, recipient, subject, message_id, status, attempts FROM outbox
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
	res, err := s.exec(ctx, `INSERT INTO audit (key, claim_id, record, sha256, written_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(key) DO NOTHING`, string(key), claimID, string(record), sum, s.ts(s.stamp()))
	if err != nil {
		return false, "", fmt.Errorf("store: audit %s: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, sum, nil
	}
	var stored string
	if err := s.queryRow(ctx, `SELECT sha256 FROM audit WHERE key = ?`, string(key)).Scan(&stored); err != nil {
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
	err := s.queryRow(ctx, `SELECT record FROM audit WHERE claim_id = ? ORDER BY written_at DESC LIMIT 1`, claimID).Scan(&rec)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: audit of %s: %w", claimID, ErrNotFound)
	}
	return []byte(rec), err
}

// ModelCall is one real call to a model provider: the usage ledger that
// proves (and bills) what a resumed run did or did not ask again.
type ModelCall struct {
	// CallID identifies the call: a write of the same call again (a retried
	// write) is one row. Two calls under one step key and attempt are two
	// rows: a local step run again after its workflow task was lost calls
	// the model again, and both calls are billed. Empty: every write appends.
	CallID       string
	ClaimID      string
	Key          claim.IdempotencyKey
	Provider     string
	Attempt      int
	TokensIn     int64
	TokensOut    int64
	OutputSHA256 string
	At           time.Time
}

// RecordModelCall appends a call to the usage ledger, once per call ID:
// the same call again is a no-op; another call under its ID is ErrConflict.
func (s *Store) RecordModelCall(ctx context.Context, c ModelCall) error {
	q := `INSERT INTO model_calls (call_id, claim_id, key, provider, attempt, tokens_in, tokens_out, output_sha256, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if c.CallID != "" {
		q += ` ON CONFLICT(call_id) WHERE call_id <> '' DO NOTHING`
	}
	res, err := s.exec(ctx, q, c.CallID, c.ClaimID, string(c.Key), c.Provider, c.Attempt, c.TokensIn, c.TokensOut, c.OutputSHA256, s.ts(s.stamp()))
	if err != nil {
		return fmt.Errorf("store: model call %s: %w", c.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var key, output string
	if err := s.queryRow(ctx, `SELECT key, output_sha256 FROM model_calls WHERE call_id = ?`, c.CallID).Scan(&key, &output); err != nil {
		return fmt.Errorf("store: model call %s: %w", c.Key, err)
	}
	if key != string(c.Key) || output != c.OutputSHA256 {
		return fmt.Errorf("store: model call %s is already recorded for %s with another output: %w", c.CallID, key, ErrConflict)
	}
	return nil
}

// ModelCalls lists a claim's model calls in order.
func (s *Store) ModelCalls(ctx context.Context, claimID string) ([]ModelCall, error) {
	rows, err := s.query(ctx, `SELECT call_id, claim_id, key, provider, attempt, tokens_in, tokens_out, output_sha256, at
		FROM model_calls WHERE claim_id = ? ORDER BY id`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: model calls of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []ModelCall
	for rows.Next() {
		var c ModelCall
		var at stamp
		if err := rows.Scan(&c.CallID, &c.ClaimID, &c.Key, &c.Provider, &c.Attempt, &c.TokensIn, &c.TokensOut, &c.OutputSHA256, &at); err != nil {
			return nil, err
		}
		c.At = at.Time
		out = append(out, c)
	}
	return out, rows.Err()
}

// Refusal is a decision refused before it reached the workflow's history:
// an update turned away by its validator. The worker records these here so
// the audit trail holds every attempt, not only those history kept.
type Refusal struct {
	// Key identifies the attempt (the claim and the update's ID): a refusal
	// recorded twice (an update retried with its ID, two workers) is one row.
	// Empty: no key, every call appends.
	Key           string    `json:"key,omitempty"`
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

// MaxRefusalsPerClaim bounds the refusals kept per claim: later ones are
// counted (RefusalsDropped), so a flood of refused decisions or foreign
// calls cannot grow the store without bound.
const MaxRefusalsPerClaim = 32

// RecordRefusal records a refused decision, once per key, for a claim the
// store holds: the first MaxRefusalsPerClaim in full, the rest as a count.
// It reports whether the refusal is kept in full. A claim the store does
// not hold is ErrNotFound: what anyone may name, nobody's storage pays for.
func (s *Store) RecordRefusal(ctx context.Context, r Refusal) (kept bool, err error) {
	t, err := s.begin(ctx)
	if err != nil {
		return false, fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
	}
	defer t.Rollback()
	var dropped int
	err = t.lock(ctx, `SELECT refusals_dropped FROM claims WHERE id = ?`, r.ClaimID).Scan(&dropped)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("store: refusal for claim %s: %w", r.ClaimID, ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
	}
	var n, same int
	if err := t.queryRow(ctx, `SELECT count(*), count(CASE WHEN key = ? AND key <> '' THEN 1 END) FROM refusals WHERE claim_id = ?`,
		r.Key, r.ClaimID).Scan(&n, &same); err != nil {
		return false, fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
	}
	switch {
	case same > 0:
		return true, t.Commit() // recorded before
	case n >= MaxRefusalsPerClaim:
		if _, err := t.exec(ctx, `UPDATE claims SET refusals_dropped = refusals_dropped + 1 WHERE id = ?`, r.ClaimID); err != nil {
			return false, fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
		}
		return false, t.Commit()
	}
	if _, err := t.exec(ctx, `INSERT INTO refusals (key, claim_id, at, channel, approver, decision, payload_sha256, code, kid, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.Key, r.ClaimID, s.ts(r.At), r.Channel, r.Approver, r.Decision, r.PayloadSHA256, r.Code, r.KeyID, r.Reason); err != nil {
		return false, fmt.Errorf("store: refusal for %s: %w", r.ClaimID, err)
	}
	return true, t.Commit()
}

// RefusalsDropped counts the refusals of a claim past MaxRefusalsPerClaim.
func (s *Store) RefusalsDropped(ctx context.Context, claimID string) (int, error) {
	var n int
	err := s.queryRow(ctx, `SELECT refusals_dropped FROM claims WHERE id = ?`, claimID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: claim %s: %w", claimID, ErrNotFound)
	}
	return n, err
}

// Refusals lists a claim's refused decisions, oldest first.
func (s *Store) Refusals(ctx context.Context, claimID string) ([]Refusal, error) {
	rows, err := s.query(ctx, `SELECT key, claim_id, at, channel, approver, decision, payload_sha256, code, kid, reason
		FROM refusals WHERE claim_id = ? ORDER BY id`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: refusals of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []Refusal
	for rows.Next() {
		var r Refusal
		var at stamp
		if err := rows.Scan(&r.Key, &r.ClaimID, &at, &r.Channel, &r.Approver, &r.Decision, &r.PayloadSHA256, &r.Code, &r.KeyID, &r.Reason); err != nil {
			return nil, err
		}
		r.At = at.Time
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
	t, err := s.begin(ctx)
	if err != nil {
		return Record{}, fmt.Errorf("store: amend %s: %w", id, err)
	}
	defer t.Rollback()
	var body, status string
	var closedKey, amendedBy sql.NullString
	err = t.lock(ctx, `SELECT body, status, closed_key, amended_by FROM claims WHERE id = ?`, id).Scan(&body, &status, &closedKey, &amendedBy)
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
	if _, err := t.exec(ctx, `UPDATE claims SET body = ?, amended_by = ?, version = version + 1, updated_at = ? WHERE id = ?`,
		string(nb), string(ab), s.ts(s.stamp()), id); err != nil {
		return Record{}, fmt.Errorf("store: amend %s: %w", id, err)
	}
	if err := t.Commit(); err != nil {
		return Record{}, err
	}
	return s.GetClaim(ctx, id)
}

// Withdraw marks an open claim withdrawn. The workflow ends it without
// payment when it next re-reads the claim.
func (s *Store) Withdraw(ctx context.Context, id string) (Record, error) {
	res, err := s.exec(ctx, `UPDATE claims SET status = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND status = ? AND closed_key IS NULL`, StatusWithdrawn, s.ts(s.stamp()), id, StatusOpen)
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
	byEmail := `SELECT id, created_at FROM claims WHERE ` + s.d.claimant("email") + ` = ? AND id <> ? ORDER BY created_at DESC LIMIT ?`
	byAccount := `SELECT id, created_at FROM claims WHERE ` + s.d.claimant("stripe_account") + ` = ? AND id <> ? ORDER BY created_at DESC LIMIT ?`
	either := `SELECT id, created_at FROM (` + byEmail + `) AS e UNION SELECT id, created_at FROM (` + byAccount + `) AS a`
	if err := s.queryRow(ctx, `SELECT count(*) FROM (`+either+`) AS p`,
		email, excludeID, PriorClaimsCountCap+1, account, excludeID, PriorClaimsCountCap+1).Scan(&total); err != nil {
		return nil, 0, false, fmt.Errorf("store: prior claims of %s: %w", excludeID, err)
	}
	if total > PriorClaimsCountCap {
		total, capped = PriorClaimsCountCap, true
	}
	rows, err := s.query(ctx, `SELECT c.id, `+s.d.bodyInt("c.body", "amount_minor")+`, `+s.d.bodyText("c.body", "currency")+`, c.status, c.created_at
		FROM (`+either+`) AS p JOIN claims c ON c.id = p.id ORDER BY c.created_at DESC, c.id LIMIT ?`,
		email, excludeID, limit, account, excludeID, limit, limit)
	if err != nil {
		return nil, 0, false, fmt.Errorf("store: prior claims of %s: %w", excludeID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p PriorClaim
		var created stamp
		if err := rows.Scan(&p.ClaimID, &p.AmountMinor, &p.Currency, &p.Status, &created); err != nil {
			return nil, 0, false, err
		}
		p.CreatedAt = created.Time.Format(time.RFC3339Nano)
		prior = append(prior, p)
	}
	return prior, total, capped, rows.Err()
}

// CountPriorClaims counts the other claims by the claimant with this e-mail
// or payout account registered since since (and before until, unless it is
// zero), up to PriorClaimsCountCap.
func (s *Store) CountPriorClaims(ctx context.Context, excludeID, email, account string, since, until time.Time) (int, error) {
	byEmail := `SELECT id FROM claims WHERE ` + s.d.claimant("email") + ` = ? AND id <> ? AND created_at >= ? AND created_at < ? LIMIT ?`
	byAccount := `SELECT id FROM claims WHERE ` + s.d.claimant("stripe_account") + ` = ? AND id <> ? AND created_at >= ? AND created_at < ? LIMIT ?`
	if until.IsZero() {
		until = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	from, to := s.ts(since.UTC()), s.ts(until.UTC())
	var n int
	err := s.queryRow(ctx, `SELECT count(*) FROM (SELECT id FROM (`+byEmail+`) AS e UNION SELECT id FROM (`+byAccount+`) AS a) AS p`,
		email, excludeID, from, to, PriorClaimsCountCap, account, excludeID, from, to, PriorClaimsCountCap).Scan(&n)
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
	res, err := s.exec(ctx, `INSERT INTO fraud_flags (key, claim_id, signal, note, at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT(key) DO NOTHING`, string(f.Key), f.ClaimID, f.Signal, f.Note, s.ts(s.stamp()))
	if err != nil {
		return false, fmt.Errorf("store: flag %s: %w", f.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return false, nil
	}
	var claimID, signal, note string
	if err := s.queryRow(ctx, `SELECT claim_id, signal, note FROM fraud_flags WHERE key = ?`, string(f.Key)).Scan(&claimID, &signal, &note); err != nil {
		return false, fmt.Errorf("store: flag %s: %w", f.Key, err)
	}
	if claimID != f.ClaimID || signal != f.Signal || note != f.Note {
		return true, fmt.Errorf("store: fraud flag %s already recorded with different content: %w", f.Key, ErrConflict)
	}
	return true, nil
}

// FraudFlags lists a claim's fraud flags in order.
func (s *Store) FraudFlags(ctx context.Context, claimID string) ([]FraudFlag, error) {
	rows, err := s.query(ctx, `SELECT key, claim_id, signal, note, at FROM fraud_flags WHERE claim_id = ? ORDER BY at, key`, claimID)
	if err != nil {
		return nil, fmt.Errorf("store: fraud flags of %s: %w", claimID, err)
	}
	defer rows.Close()
	var out []FraudFlag
	for rows.Next() {
		var f FraudFlag
		var at stamp
		if err := rows.Scan(&f.Key, &f.ClaimID, &f.Signal, &f.Note, &at); err != nil {
			return nil, err
		}
		f.At = at.Time
		out = append(out, f)
	}
	return out, rows.Err()
}
