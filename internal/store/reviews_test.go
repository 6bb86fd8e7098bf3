package store

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/decision"
)

// closeAs closes a registered claim as its run would: step 8's outcome,
// then step 9's audit record, decided by by, paying payout.
func closeAs(t *testing.T, s *Store, id, outcome, by string, payout int64, law *audit.Law) {
	t.Helper()
	ctx := context.Background()
	transfer := ""
	if payout > 0 {
		transfer = "tr_" + id
	}
	_, closedAt, err := s.CloseClaim(ctx, id, claim.StepKey(id, claim.StepClose), outcome, transfer, payout)
	require.NoError(t, err)
	rec := audit.Record{ClaimID: id, WorkflowID: id, Outcome: outcome, PayoutMinor: payout, Currency: "usd", TransferID: transfer,
		ClosedAt: closedAt, Decided: &audit.Decided{By: by, Verdict: decision.Approve}, Law: law}
	if by == audit.DecidedByApprover {
		rec.Approvals = []*decision.Approval{{Decision: &decision.Decision{Approver: "adjuster-17", Verdict: decision.Approve}}}
	}
	body, err := json.Marshal(rec)
	require.NoError(t, err)
	_, _, err = s.WriteAudit(ctx, claim.StepKey(id, claim.StepAudit), id, body)
	require.NoError(t, err)
}

// thirtyDays is a window of thirty days from the decision, whatever the
// jurisdiction; it records which jurisdiction it was asked about.
func thirtyDays(asked *string) func(string, time.Time) (time.Time, error) {
	return func(j string, decided time.Time) (time.Time, error) {
		*asked = j
		return decided.Add(30 * 24 * time.Hour), nil
	}
}

// A claim the rules paid in part may be reviewed once, within its window:
// the request is recorded and the review claim registered for the amount
// still in dispute, carrying what the original claimed and paid.
func TestRequestReviewRegistersTheReviewClaim(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		orig := testClaim("claim-42")
		orig.Documents = []claim.Document{{Name: "invoice.pdf", URI: "file:///docs/x", SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Size: 10}}
		_, _, err := s.PutClaim(ctx, orig)
		require.NoError(t, err)
		decided := now.Add(-time.Hour)
		closeAs(t, s, "claim-42", "paid", audit.DecidedByRules, 80000, &audit.Law{Jurisdiction: "US-CA", DecidedAt: &decided})

		now = now.Add(10 * 24 * time.Hour)
		var asked string
		rv, existed, err := s.RequestReview(ctx, ReviewRequest{ClaimID: "claim-42", By: "ada@example.com", Reason: "the invoice says 1840.00",
			WindowEnds: thirtyDays(&asked)})
		require.NoError(t, err)
		assert.False(t, existed)
		assert.Equal(t, "US-CA", asked, "the window is the jurisdiction's the claim was decided under")
		assert.Equal(t, Review{ClaimID: "claim-42", ReviewID: "claim-42-review", By: "ada@example.com", At: now, Reason: "the invoice says 1840.00",
			DecidedBy: audit.DecidedByRules, DecidedAt: decided, WindowEnds: decided.Add(30 * 24 * time.Hour), ClaimedMinor: 184000, PaidMinor: 80000}, rv)

		rec, err := s.GetClaim(ctx, "claim-42-review")
		require.NoError(t, err)
		assert.Equal(t, StatusOpen, rec.Status)
		assert.EqualValues(t, 104000, rec.Claim.AmountMinor, "the amount still in dispute")
		assert.Equal(t, orig.Claimant, rec.Claim.Claimant)
		assert.Equal(t, orig.PolicyID, rec.Claim.PolicyID)
		assert.Equal(t, orig.Documents, rec.Claim.Documents)
		assert.Equal(t, &claim.Review{Of: "claim-42", ClaimedMinor: 184000, PaidMinor: 80000, By: "ada@example.com", At: now,
			Reason: "the invoice says 1840.00"}, rec.Claim.ReviewOf)
		require.NoError(t, rec.Claim.Validate())

		// One review per claim: asking again returns the first, unchanged.
		now = now.Add(time.Hour)
		again, existed, err := s.RequestReview(ctx, ReviewRequest{ClaimID: "claim-42", By: "someone", Reason: "another reason",
			WindowEnds: thirtyDays(&asked)})
		require.NoError(t, err)
		assert.True(t, existed)
		assert.Equal(t, rv, again)
		got, err := s.ReviewOf(ctx, "claim-42")
		require.NoError(t, err)
		assert.Equal(t, rv, got)
		_, err = s.ReviewOf(ctx, "claim-1")
		assert.ErrorIs(t, err, ErrNotFound)

		// Where no jurisdiction's rules applied, the close's time starts
		// the window, asked for with no jurisdiction.
		_, _, err = s.PutClaim(ctx, testClaim("claim-7"))
		require.NoError(t, err)
		closeAs(t, s, "claim-7", "rejected", audit.DecidedByRules, 0, nil)
		rv, _, err = s.RequestReview(ctx, ReviewRequest{ClaimID: "claim-7", By: "ada", Reason: "it is covered", WindowEnds: thirtyDays(&asked)})
		require.NoError(t, err)
		assert.Equal(t, "", asked)
		assert.Equal(t, now, rv.DecidedAt)
		assert.EqualValues(t, 184000, rv.ClaimedMinor-rv.PaidMinor)
	})
}

// Each request that may not be granted is refused with an error of its
// own, and registers nothing.
func TestRequestReviewRefuses(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		var asked string
		ask := func(id, reason string) error {
			_, _, err := s.RequestReview(ctx, ReviewRequest{ClaimID: id, By: "ada@example.com", Reason: reason, WindowEnds: thirtyDays(&asked)})
			return err
		}
		for _, id := range []string{"open", "person", "full", "withdrawn", "late", "closing", "fine"} {
			_, _, err := s.PutClaim(ctx, testClaim(id))
			require.NoError(t, err)
		}
		closeAs(t, s, "person", "paid", audit.DecidedByApprover, 100000, nil)
		closeAs(t, s, "full", "paid", audit.DecidedByRules, 184000, nil)
		_, err := s.Withdraw(ctx, "withdrawn")
		require.NoError(t, err)
		closeAs(t, s, "withdrawn", "withdrawn", audit.DecidedByRules, 0, nil)
		closeAs(t, s, "late", "rejected", audit.DecidedByRules, 0, nil)
		_, _, err = s.CloseClaim(ctx, "closing", claim.StepKey("closing", claim.StepClose), "rejected", "", 0)
		require.NoError(t, err)
		closeAs(t, s, "fine", "expired", audit.DecidedByPolicy, 0, nil)

		assert.ErrorIs(t, ask("nobody", "why"), ErrNotFound)
		assert.ErrorIs(t, ask("open", "why"), ErrReviewNotClosed, "a claim in its run is amended or withdrawn")
		assert.ErrorIs(t, ask("closing", "why"), ErrReviewNotClosed, "closed, its record not yet written")
		assert.ErrorIs(t, ask("person", "why"), ErrReviewByPerson)
		assert.ErrorIs(t, ask("full", "why"), ErrReviewNotAdverse)
		assert.ErrorIs(t, ask("withdrawn", "why"), ErrReviewNotAdverse)
		assert.ErrorIs(t, ask("fine", "  "), ErrReviewInvalid, "a reason is required")
		assert.ErrorIs(t, ask("fine", "a\x1b[2Jb"), ErrReviewInvalid)
		_, _, err = s.RequestReview(ctx, ReviewRequest{ClaimID: "fine", Reason: "why", WindowEnds: thirtyDays(&asked)})
		assert.ErrorIs(t, err, ErrReviewInvalid, "who asks is required")
		now = now.Add(30 * 24 * time.Hour)
		assert.ErrorIs(t, ask("late", "why"), ErrReviewWindow, "the window ends at its end")
		now = now.Add(-time.Microsecond)
		require.NoError(t, ask("late", "why"), "and not before")
		assert.ErrorIs(t, ask("late-review", "why"), ErrReviewByPerson, "a review is a person's decision")

		for _, id := range []string{"open", "person", "full", "withdrawn", "closing", "fine"} {
			_, err := s.GetClaim(ctx, id+"-review")
			assert.ErrorIs(t, err, ErrNotFound, "%s: nothing registered", id)
			_, err = s.ReviewOf(ctx, id)
			assert.ErrorIs(t, err, ErrNotFound, "%s: nothing recorded", id)
		}
	})
}

// Who decided an outcome is read from the record as an auditor would: a
// person decided it only through an approval whose decision still holds.
// A voided or expired approval, or one nobody answered, leaves the outcome
// the rules' or the policy's, and so reviewable. It guards reviewable's
// two conditions (reviews.go: rec.Decided, and the approval that counts),
// which make mutate found no test of.
func TestReviewableCountsOnlyADecisionThatHolds(t *testing.T) {
	orig := Record{Claim: testClaim("claim-9")}
	closed := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	signed := func() *decision.Decision {
		return &decision.Decision{Approver: "adjuster-17", Verdict: decision.Approve}
	}
	for _, tc := range []struct {
		name      string
		decided   *audit.Decided
		approvals []*decision.Approval
		by        string
		refused   error
	}{
		{name: "no decided record: the rules", by: audit.DecidedByRules},
		{name: "the policy's final outcome", decided: &audit.Decided{By: audit.DecidedByPolicy}, by: audit.DecidedByPolicy},
		{name: "an approval nobody answered", decided: &audit.Decided{By: audit.DecidedByPolicy},
			approvals: []*decision.Approval{{Expired: true}}, by: audit.DecidedByPolicy},
		{name: "a decision voided when the claim changed", decided: &audit.Decided{By: audit.DecidedByRules},
			approvals: []*decision.Approval{{Decision: signed(), Voided: "amended"}}, by: audit.DecidedByRules},
		{name: "a decision accepted after its deadline passed", decided: &audit.Decided{By: audit.DecidedByPolicy},
			approvals: []*decision.Approval{{Decision: signed(), Expired: true}}, by: audit.DecidedByPolicy},
		{name: "a decision that holds, after one voided", decided: &audit.Decided{By: audit.DecidedByRules},
			approvals: []*decision.Approval{{Decision: signed(), Voided: "amended"}, {Decision: signed()}},
			by:        audit.DecidedByApprover, refused: ErrReviewByPerson},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := audit.Record{ClaimID: "claim-9", Outcome: "paid", PayoutMinor: 1000, Currency: "usd", ClosedAt: closed,
				Decided: tc.decided, Approvals: tc.approvals}
			var rv Review
			err := reviewable(orig, rec, &rv)
			assert.Equal(t, tc.by, rv.DecidedBy)
			if tc.refused != nil {
				assert.ErrorIs(t, err, tc.refused)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, closed, rv.DecidedAt)
		})
	}
}
