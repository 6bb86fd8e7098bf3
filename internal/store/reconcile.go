package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// StatusPaid is the outcome step 8 records for a claim it paid (the
// workflow's ClaimStatus "paid"): with it, in the same upsert, the transfer
// ID and the payout. It is what reconciliation reads as "step 6 completed".
const StatusPaid = "paid"

// The reconciliation table lives here rather than in store.go's schema: it
// is created when a reconciliation method first runs on a database. The
// index serves PaidClaims (closed claims are never updated again, so
// updated_at is the close time).
const reconcileSchema = `
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
`

// ensureReconcileSchema runs before each reconciliation method: cheap (a
// schema check once the table and index exist), and reconciliations are
// hourly, not per claim.
func (s *Store) ensureReconcileSchema(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, reconcileSchema); err != nil {
		return fmt.Errorf("store: reconciliation schema: %w", err)
	}
	return nil
}

// ClaimState is what the step log holds about a claim's payment.
type ClaimState struct {
	ID          string    `json:"claim_id"`
	Status      string    `json:"status"`
	ClosedKey   string    `json:"closed_key,omitempty"`
	TransferID  string    `json:"transfer_id,omitempty"`
	PayoutMinor int64     `json:"payout_minor"`
	Currency    string    `json:"currency"`
	UpdatedAt   time.Time `json:"updated_at"` // the close time, for a closed claim
}

// Paid reports whether step 8 recorded the claim as paid.
func (c ClaimState) Paid() bool { return c.Status == StatusPaid && c.ClosedKey != "" }

// Closed reports whether the claim has its final outcome recorded.
func (c ClaimState) Closed() bool { return c.ClosedKey != "" }

const claimStateColumns = `id, body, status, closed_key, transfer_id, payout_minor, updated_at`

func scanClaimState(rows *sql.Rows) (ClaimState, error) {
	var c ClaimState
	var body, updated string
	var closedKey, transferID sql.NullString
	var payout sql.NullInt64
	if err := rows.Scan(&c.ID, &body, &c.Status, &closedKey, &transferID, &payout, &updated); err != nil {
		return ClaimState{}, err
	}
	var cl claim.Claim
	if err := json.Unmarshal([]byte(body), &cl); err != nil {
		return ClaimState{}, fmt.Errorf("store: claim %s body: %w", c.ID, err)
	}
	c.ClosedKey, c.TransferID, c.PayoutMinor, c.Currency = closedKey.String, transferID.String, payout.Int64, cl.Currency
	c.UpdatedAt, _ = time.Parse(time.RFC3339Nano, updated)
	return c, nil
}

// PaidClaims lists the claims closed as paid between since and until
// (inclusive), oldest first.
func (s *Store) PaidClaims(ctx context.Context, since, until time.Time) ([]ClaimState, error) {
	if err := s.ensureReconcileSchema(ctx); err != nil {
		return nil, err
	}
	// Stamps are RFC3339Nano text, whose trimmed fractions do not sort
	// exactly within one second: select a second wider on each side, then
	// filter on the parsed time.
	lo := since.Add(-time.Second).UTC().Format(time.RFC3339Nano)
	hi := until.Add(time.Second).UTC().Format(time.RFC3339Nano)
	rows, err := s.db.QueryContext(ctx, `SELECT `+claimStateColumns+` FROM claims
		WHERE status = ? AND closed_key IS NOT NULL AND updated_at >= ? AND updated_at <= ? ORDER BY updated_at, id`,
		StatusPaid, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("store: paid claims: %w", err)
	}
	defer rows.Close()
	var out []ClaimState
	for rows.Next() {
		c, err := scanClaimState(rows)
		if err != nil {
			return nil, err
		}
		if c.UpdatedAt.Before(since) || c.UpdatedAt.After(until) {
			continue
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// ClaimStates reads the claims with the given IDs, whatever their status;
// IDs never registered are absent from the map.
func (s *Store) ClaimStates(ctx context.Context, ids []string) (map[string]ClaimState, error) {
	out := make(map[string]ClaimState, len(ids))
	const batch = 500 // well under SQLite's limit on bound parameters
	for len(ids) > 0 {
		n := min(batch, len(ids))
		chunk := ids[:n]
		ids = ids[n:]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, `SELECT `+claimStateColumns+` FROM claims WHERE id IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("store: claim states: %w", err)
		}
		for rows.Next() {
			c, err := scanClaimState(rows)
			if err != nil {
				rows.Close()
				return nil, err
			}
			out[c.ID] = c
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("store: claim states: %w", err)
		}
	}
	return out, nil
}

// Reconciliation is one stored reconciliation run: its window, its counts
// per category and the whole report, both as JSON.
type Reconciliation struct {
	ID       string          `json:"id"`
	Started  time.Time       `json:"started"`
	Since    time.Time       `json:"since"`
	Until    time.Time       `json:"until"`
	Counts   json.RawMessage `json:"counts"`
	Report   json.RawMessage `json:"report"`
	StoredAt time.Time       `json:"stored_at"`
}

// SaveReconciliation stores r under r.ID, once. If a reconciliation is
// already stored under that ID (a retried activity), nothing is written and
// the stored one is returned with replayed set: the first report wins.
func (s *Store) SaveReconciliation(ctx context.Context, r Reconciliation) (stored Reconciliation, replayed bool, err error) {
	if err := s.ensureReconcileSchema(ctx); err != nil {
		return Reconciliation{}, false, err
	}
	if r.ID == "" || !json.Valid(r.Counts) || !json.Valid(r.Report) {
		return Reconciliation{}, false, fmt.Errorf("store: reconciliation %q needs an ID and JSON counts and report", r.ID)
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	res, err := s.db.ExecContext(ctx, `INSERT INTO reconciliations (id, started, since, until, counts, report, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		r.ID, stamp(r.Started), stamp(r.Since), stamp(r.Until), string(r.Counts), string(r.Report), s.stamp())
	if err != nil {
		return Reconciliation{}, false, fmt.Errorf("store: reconciliation %s: %w", r.ID, err)
	}
	n, _ := res.RowsAffected()
	stored, err = s.GetReconciliation(ctx, r.ID)
	return stored, n == 0, err
}

// GetReconciliation reads one stored reconciliation; ErrNotFound if none is
// stored under id.
func (s *Store) GetReconciliation(ctx context.Context, id string) (Reconciliation, error) {
	if err := s.ensureReconcileSchema(ctx); err != nil {
		return Reconciliation{}, err
	}
	var r Reconciliation
	var started, since, until, counts, report, storedAt string
	err := s.db.QueryRowContext(ctx, `SELECT id, started, since, until, counts, report, stored_at
		FROM reconciliations WHERE id = ?`, id).Scan(&r.ID, &started, &since, &until, &counts, &report, &storedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return Reconciliation{}, fmt.Errorf("store: reconciliation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Reconciliation{}, fmt.Errorf("store: reconciliation %s: %w", id, err)
	}
	return r.with(started, since, until, counts, report, storedAt), nil
}

// Reconciliations lists the latest stored reconciliations, newest first.
func (s *Store) Reconciliations(ctx context.Context, limit int) ([]Reconciliation, error) {
	if err := s.ensureReconcileSchema(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, started, since, until, counts, report, stored_at
		FROM reconciliations ORDER BY started DESC, id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: reconciliations: %w", err)
	}
	defer rows.Close()
	var out []Reconciliation
	for rows.Next() {
		r, err := scanReconciliation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func scanReconciliation(rows *sql.Rows) (Reconciliation, error) {
	var r Reconciliation
	var started, since, until, counts, report, storedAt string
	if err := rows.Scan(&r.ID, &started, &since, &until, &counts, &report, &storedAt); err != nil {
		return Reconciliation{}, err
	}
	return r.with(started, since, until, counts, report, storedAt), nil
}

func (r Reconciliation) with(started, since, until, counts, report, storedAt string) Reconciliation {
	parse := func(s string) time.Time { t, _ := time.Parse(time.RFC3339Nano, s); return t }
	r.Started, r.Since, r.Until, r.StoredAt = parse(started), parse(since), parse(until), parse(storedAt)
	r.Counts, r.Report = json.RawMessage(counts), json.RawMessage(report)
	return r
}
