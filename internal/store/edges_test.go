package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// The store's checks behind reconciliation, amendment, prior claims and
// fraud flags, each on its own.

// Paid is a claim closed as paid: a claim closed otherwise, or open, is not.
func TestPaidIsClosedAsPaid(t *testing.T) {
	assert.True(t, ClaimState{Status: StatusPaid, ClosedKey: "claim-1:step8"}.Paid())
	assert.False(t, ClaimState{Status: "rejected", ClosedKey: "claim-1:step8"}.Paid())
	assert.False(t, ClaimState{Status: StatusPaid}.Paid())
}

// Reconciliation's windows are exact, though the queries read a second
// either side: a claim paid, or a record written, just after the window
// opened is in it; one just before it is not.
func TestReconciliationWindowsAreExact(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		opened := time.Now()
		for _, id := range []string{"claim-1", "claim-2"} {
			_, _, err := s.PutClaim(ctx, testClaim(id))
			require.NoError(t, err)
		}
		_, _, err := s.CloseClaim(ctx, "claim-1", "claim-1:step8", StatusPaid, "tr_1", 184000)
		require.NoError(t, err)
		_, _, err = s.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{"claim_id":"claim-1","transfer_id":"tr_1"}`))
		require.NoError(t, err)
		_, _, err = s.WriteAudit(ctx, "claim-2:step9:dead-letter:run-1", "claim-2", []byte(`{"claim_id":"claim-2","transfer_id":"tr_2"}`))
		require.NoError(t, err)
		_, _, err = s.WriteAudit(ctx, "claim-2:step9", "claim-2", []byte(`{"claim_id":"claim-2","transfer_id":"tr_3"}`))
		require.NoError(t, err)
		written := time.Now()

		paid, err := s.PaidClaims(ctx, opened, written.Add(time.Hour))
		require.NoError(t, err)
		assert.Len(t, paid, 1, "paid just after the window opened")
		recorded, err := s.RecordedTransfers(ctx, opened, written.Add(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"claim-1": "tr_1", "claim-2": "tr_3"}, recorded, "the latest record's transfer")

		later := written.Add(200 * time.Millisecond)
		paid, err = s.PaidClaims(ctx, later, later.Add(time.Hour))
		require.NoError(t, err)
		assert.Empty(t, paid, "paid just before the window")
		recorded, err = s.RecordedTransfers(ctx, later, later.Add(time.Hour))
		require.NoError(t, err)
		assert.Empty(t, recorded)
	})
}

// A record that names no transfer names none to reconcile.
func TestARecordWithoutATransferIsNotReconciled(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		_, _, err := s.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{"claim_id":"claim-1","outcome":"rejected"}`))
		require.NoError(t, err)
		recorded, err := s.RecordedTransfers(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		require.NoError(t, err)
		assert.Empty(t, recorded)
	})
}

// A stored reconciliation has an ID and JSON counts and report, each
// checked on its own; a listing asks for the latest 20 when it names no
// number.
func TestStoredReconciliations(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		good := Reconciliation{ID: "rec-1", Started: time.Now().UTC(), Counts: json.RawMessage(`{}`), Report: json.RawMessage(`{}`)}
		for name, edit := range map[string]func(*Reconciliation){
			"no ID":  func(r *Reconciliation) { r.ID = "" },
			"counts": func(r *Reconciliation) { r.Counts = json.RawMessage(`{`) },
			"report": func(r *Reconciliation) { r.Report = json.RawMessage(`not json`) },
		} {
			r := good
			edit(&r)
			_, _, err := s.SaveReconciliation(ctx, r)
			assert.Error(t, err, name)
		}
		for i := range 21 {
			r := good
			r.ID, r.Started = fmt.Sprintf("rec-%02d", i), good.Started.Add(time.Duration(i)*time.Second)
			_, _, err := s.SaveReconciliation(ctx, r)
			require.NoError(t, err)
		}
		list, err := s.Reconciliations(ctx, 0)
		require.NoError(t, err)
		require.Len(t, list, 20)
		assert.Equal(t, "rec-20", list[0].ID, "newest first")
	})
}

// A withdrawn claim is not amended, as a closed one is not.
func TestAWithdrawnClaimIsNotAmended(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		_, _, err := s.PutClaim(ctx, testClaim("claim-1"))
		require.NoError(t, err)
		_, err = s.Withdraw(ctx, "claim-1")
		require.NoError(t, err)
		_, err = s.Amend(ctx, "claim-1", "adjuster-9", func(c *claim.Claim) error { c.AmountMinor = 1; return nil })
		assert.ErrorIs(t, err, ErrClosed)
	})
}

// Prior claims are counted up to PriorClaimsCountCap: exactly that many
// are a count, one more is "more than".
func TestPriorClaimsCountUpToTheCap(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		for i := range PriorClaimsCountCap + 1 {
			_, _, err := s.PutClaim(ctx, testClaim(fmt.Sprintf("claim-%03d", i)))
			require.NoError(t, err)
		}
		_, total, capped, err := s.PriorClaims(ctx, "claim-000", "ada@example.com", "acct_1Ada", 5)
		require.NoError(t, err)
		assert.Equal(t, PriorClaimsCountCap, total)
		assert.False(t, capped, "exactly the cap")
		_, _, err = s.PutClaim(ctx, testClaim("claim-new"))
		require.NoError(t, err)
		_, total, capped, err = s.PriorClaims(ctx, "claim-000", "ada@example.com", "acct_1Ada", 5)
		require.NoError(t, err)
		assert.Equal(t, PriorClaimsCountCap, total)
		assert.True(t, capped)
	})
}

// A fraud flag's key holds one flag: another claim, signal or note under
// it, each on its own, is a conflict.
func TestAFraudFlagsKeyHoldsOneFlag(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		f := FraudFlag{Key: "claim-1:step2:turn1:flag_fraud_signal", ClaimID: "claim-1", Signal: "invoice-altered", Note: "dates differ"}
		_, err := s.FlagFraud(ctx, f)
		require.NoError(t, err)
		replayed, err := s.FlagFraud(ctx, f)
		require.NoError(t, err)
		assert.True(t, replayed)
		for name, edit := range map[string]func(*FraudFlag){
			"claim":  func(x *FraudFlag) { x.ClaimID = "claim-2" },
			"signal": func(x *FraudFlag) { x.Signal = "other" },
			"note":   func(x *FraudFlag) { x.Note = strings.ToUpper(x.Note) },
		} {
			g := f
			edit(&g)
			_, err := s.FlagFraud(ctx, g)
			assert.ErrorIs(t, err, ErrConflict, name)
		}
	})
}

// Each of the two ways a claim is the claimant's counts up to the cap on
// its own: the same e-mail with another account, the same account with
// another e-mail.
func TestPriorClaimsCountEachWayUpToTheCap(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		for i := range PriorClaimsCountCap {
			c := testClaim(fmt.Sprintf("claim-e%03d", i))
			c.Claimant.StripeAccount = fmt.Sprintf("acct_1E%03d", i)
			_, _, err := s.PutClaim(ctx, c)
			require.NoError(t, err)
			c = testClaim(fmt.Sprintf("claim-a%03d", i))
			c.Claimant.Email, c.Claimant.StripeAccount = fmt.Sprintf("a%03d@example.com", i), "acct_1Same"
			_, _, err = s.PutClaim(ctx, c)
			require.NoError(t, err)
		}
		_, total, capped, err := s.PriorClaims(ctx, "claim-new", "ada@example.com", "acct_1Nobody", 5)
		require.NoError(t, err)
		assert.Equal(t, [2]any{PriorClaimsCountCap, false}, [2]any{total, capped}, "by e-mail")
		_, total, capped, err = s.PriorClaims(ctx, "claim-new", "nobody@example.com", "acct_1Same", 5)
		require.NoError(t, err)
		assert.Equal(t, [2]any{PriorClaimsCountCap, false}, [2]any{total, capped}, "by account")
	})
}
