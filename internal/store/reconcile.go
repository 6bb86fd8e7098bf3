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
	var body string
	var updated stamp
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
	c.UpdatedAt = updated.Time
	return c, nil
}

// PaidClaims lists the claims closed as paid between since and until
// (inclusive), oldest first.
func (s *Store) PaidClaims(ctx context.Context, since, until time.Time) ([]ClaimState, error) {
	// SQLite's stamps are RFC3339Nano text, whose trimmed fractions do not
	// sort exactly within one second: select a second wider on each side,
	// then filter on the parsed time.
	lo, hi := s.ts(since.Add(-time.Second)), s.ts(until.Add(time.Second))
	rows, err := s.query(ctx, `SELECT `+claimStateColumns+` FROM claims
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
	const batch = 500 // well under either backend's limit on bound parameters
	for len(ids) > 0 {
		n := min(batch, len(ids))
		chunk := ids[:n]
		ids = ids[n:]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.query(ctx, `SELECT `+claimStateColumns+` FROM claims WHERE id IN (?`+
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
	if r.ID == "" || !json.Valid(r.Counts) || !json.Valid(r.Report) {
		return Reconciliation{}, false, fmt.Errorf("store: reconciliation %q needs an ID and JSON counts and report", r.ID)
	}
	res, err := s.exec(ctx, `INSERT INTO reconciliations (id, started, since, until, counts, report, stored_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO NOTHING`,
		r.ID, s.ts(r.Started), s.ts(r.Since), s.ts(r.Until), string(r.Counts), string(r.Report), s.ts(s.stamp()))
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
	var r Reconciliation
	var started, since, until, storedAt stamp
	var counts, report string
	err := s.queryRow(ctx, `SELECT id, started, since, until, counts, report, stored_at
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
	if limit <= 0 {
		limit = 20
	}
	rows, err := s.query(ctx, `SELECT id, started, since, until, counts, report, stored_at
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
	var started, since, until, storedAt stamp
	var counts, report string
	if err := rows.Scan(&r.ID, &started, &since, &until, &counts, &report, &storedAt); err != nil {
		return Reconciliation{}, err
	}
	return r.with(started, since, until, counts, report, storedAt), nil
}

func (r Reconciliation) with(started, since, until stamp, counts, report string, storedAt stamp) Reconciliation {
	r.Started, r.Since, r.Until, r.StoredAt = started.Time, since.Time, until.Time, storedAt.Time
	r.Counts, r.Report = json.RawMessage(counts), json.RawMessage(report)
	return r
}

// RecordedTransfers are the transfers the claims' records written in
// [since, until] name (step 9's audit record, or a dead letter's), by
// claim, the latest record's for each: what each run believed paid it,
// for reconciliation to find against the provider.
func (s *Store) RecordedTransfers(ctx context.Context, since, until time.Time) (map[string]string, error) {
	lo, hi := s.ts(since.Add(-time.Second)), s.ts(until.Add(time.Second))
	rows, err := s.query(ctx, `SELECT claim_id, record, written_at FROM audit WHERE written_at >= ? AND written_at <= ? ORDER BY written_at`, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("store: recorded transfers: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, record string
		var at stamp
		if err := rows.Scan(&id, &record, &at); err != nil {
			return nil, fmt.Errorf("store: recorded transfers: %w", err)
		}
		if at.Time.Before(since) || at.Time.After(until) {
			continue
		}
		var r struct {
			TransferID string `json:"transfer_id"`
		}
		if json.Unmarshal([]byte(record), &r) == nil {
			out[id] = r.TransferID // later records replace earlier ones
		}
	}
	for id, t := range out {
		if t == "" {
			delete(out, id)
		}
	}
	return out, rows.Err()
}
