package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// What the system of record says about who may act for a claim and what
// it was paid: the claim belongs to the run that took it at intake, and its
// payout is reserved once, ever. Activities check both before they act, so
// that no caller, forged or real, makes them do more than these rows allow.

// TakeClaim binds a claim the store holds to the run whose intake reads
// it, and returns the record as bound. A claim already closed (its outcome
// recorded by step 8) is never taken again: ErrClosed, with the record;
// the run that closed it reads it as it is (its lost workflow task run
// again). An
// open claim bound to another run passes to this one: only one run of a
// workflow ID is open at a time, so the run it was bound to has ended
// (reset, terminated, failed, or dead-lettered and started again).
func (s *Store) TakeClaim(ctx context.Context, id, runID string) (Record, error) {
	if runID == "" {
		return Record{}, errors.New("store: take claim: a run ID is required")
	}
	t, err := s.begin(ctx)
	if err != nil {
		return Record{}, fmt.Errorf("store: take %s: %w", id, err)
	}
	defer t.Rollback()
	var status string
	var closedKey, owner sql.NullString
	err = t.lock(ctx, `SELECT status, closed_key, run_id FROM claims WHERE id = ?`, id).Scan(&status, &closedKey, &owner)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, fmt.Errorf("store: claim %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Record{}, fmt.Errorf("store: take %s: %w", id, err)
	}
	if closedKey.String != "" {
		rec, gerr := s.getClaimTx(ctx, t, id)
		if gerr != nil {
			return Record{}, gerr
		}
		if owner.String == runID {
			// The run that closed it reads it again: a workflow task lost
			// after its close ran is run again, local activities and all.
			// It finds the claim as it left it and goes on to the same
			// keyed steps, which answer as before.
			return rec, nil
		}
		return rec, fmt.Errorf("store: claim %s is closed (%s) under %s: %w", id, status, closedKey.String, ErrClosed)
	}
	if owner.String != runID {
		if _, err := t.exec(ctx, `UPDATE claims SET run_id = ? WHERE id = ?`, runID, id); err != nil {
			return Record{}, fmt.Errorf("store: take %s: %w", id, err)
		}
	}
	rec, err := s.getClaimTx(ctx, t, id)
	if err != nil {
		return Record{}, err
	}
	return rec, t.Commit()
}

// HandOver moves an open claim from run from to run to, if it is still
// bound to from: a run reset by an operator (claimsctl dlq redrive) goes on
// under a new run ID without taking the claim at intake again. It reports
// whether the claim is now bound to to.
func (s *Store) HandOver(ctx context.Context, id, from, to string) (bool, error) {
	res, err := s.exec(ctx, `UPDATE claims SET run_id = ? WHERE id = ? AND closed_key IS NULL AND (run_id = ? OR (run_id IS NULL AND ? = ''))`,
		to, id, from, from)
	if err != nil {
		return false, fmt.Errorf("store: hand %s over: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

func (s *Store) getClaimTx(ctx context.Context, t *tx, id string) (Record, error) {
	return scanRecord(t.queryRow(ctx, `SELECT `+recordColumns+` FROM claims WHERE id = ?`, id), id)
}

// Payout statuses.
const (
	// PayoutReserved: written before the payment provider is called; the
	// provider may or may not have made the transfer.
	PayoutReserved = "reserved"
	// PayoutPaid: the provider's transfer is recorded.
	PayoutPaid = "paid"
)

// Payout is a claim's one payout: reserved before the provider is called,
// marked paid with the provider's transfer.
type Payout struct {
	ClaimID     string               `json:"claim_id"`
	Key         claim.IdempotencyKey `json:"key"`
	RunID       string               `json:"run_id"`
	AmountMinor int64                `json:"amount_minor"`
	Currency    string               `json:"currency"`
	Destination string               `json:"destination"`
	Status      string               `json:"status"`
	TransferID  string               `json:"transfer_id,omitempty"`
	ReservedAt  time.Time            `json:"reserved_at"`
	PaidAt      time.Time            `json:"paid_at,omitzero"`
}

// Same says whether two payouts pay the same thing under the same key.
func (p Payout) Same(q Payout) bool {
	return p.ClaimID == q.ClaimID && p.Key == q.Key && p.AmountMinor == q.AmountMinor && p.Currency == q.Currency && p.Destination == q.Destination
}

// ReservePayout reserves a claim's payout, once per claim ever, and returns
// the reservation: p itself the first time, the one already held when it
// pays the same thing under the same key (a retried attempt, or a run that
// took over). Any other payout for the claim is ErrConflict, with the one
// already held.
func (s *Store) ReservePayout(ctx context.Context, p Payout) (Payout, error) {
	res, err := s.exec(ctx, `INSERT INTO payouts (claim_id, key, run_id, amount_minor, currency, destination, status, reserved_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(claim_id) DO NOTHING`,
		p.ClaimID, string(p.Key), p.RunID, p.AmountMinor, p.Currency, p.Destination, PayoutReserved, s.ts(s.stamp()))
	if err != nil {
		return Payout{}, fmt.Errorf("store: reserve payout of %s: %w", p.ClaimID, err)
	}
	held, err := s.Payout(ctx, p.ClaimID)
	if err != nil {
		return Payout{}, err
	}
	if n, _ := res.RowsAffected(); n == 1 || held.Same(p) {
		return held, nil
	}
	return held, fmt.Errorf("store: claim %s already has a payout of %d %s to %s under %s: %w",
		p.ClaimID, held.AmountMinor, held.Currency, held.Destination, held.Key, ErrConflict)
}

// MarkPaid records the provider's transfer for a reserved payout. The same
// transfer again is a no-op; another transfer for a paid payout is
// ErrConflict.
func (s *Store) MarkPaid(ctx context.Context, claimID string, key claim.IdempotencyKey, transferID string) error {
	if _, err := s.exec(ctx, `UPDATE payouts SET status = ?, transfer_id = ?, paid_at = ? WHERE claim_id = ? AND key = ? AND status = ?`,
		PayoutPaid, transferID, s.ts(s.stamp()), claimID, string(key), PayoutReserved); err != nil {
		return fmt.Errorf("store: payout of %s paid: %w", claimID, err)
	}
	p, err := s.Payout(ctx, claimID)
	if err != nil {
		return err
	}
	if p.Key != key || p.TransferID != transferID {
		return fmt.Errorf("store: payout of %s is %s by %s under %s, not %s under %s: %w", claimID, p.Status, p.TransferID, p.Key, transferID, key, ErrConflict)
	}
	return nil
}

// Payout returns a claim's payout; ErrNotFound if none was reserved.
func (s *Store) Payout(ctx context.Context, claimID string) (Payout, error) {
	var p Payout
	var key string
	var transferID sql.NullString
	var reserved, paid stamp
	err := s.queryRow(ctx, `SELECT claim_id, key, run_id, amount_minor, currency, destination, status, transfer_id, reserved_at, paid_at
		FROM payouts WHERE claim_id = ?`, claimID).
		Scan(&p.ClaimID, &key, &p.RunID, &p.AmountMinor, &p.Currency, &p.Destination, &p.Status, &transferID, &reserved, &paid)
	if errors.Is(err, sql.ErrNoRows) {
		return Payout{}, fmt.Errorf("store: payout of %s: %w", claimID, ErrNotFound)
	}
	if err != nil {
		return Payout{}, fmt.Errorf("store: payout of %s: %w", claimID, err)
	}
	p.Key, p.TransferID, p.ReservedAt, p.PaidAt = claim.IdempotencyKey(key), transferID.String, reserved.Time, paid.Time
	return p, nil
}
