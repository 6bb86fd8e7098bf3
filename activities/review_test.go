package activities

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
)

// reviewOf closes claim c as the rules decided it, paying paid of the
// claimed amount, and registers its claimant's review, bound to run.
func reviewOf(t *testing.T, a *Activities, c claim.Claim, paid int64, run string) claim.Claim {
	t.Helper()
	ctx := context.Background()
	id := c.ID
	registered(t, a, c)
	_, closedAt, err := a.Store.CloseClaim(ctx, id, claim.StepKey(id, claim.StepClose), "paid", "tr_"+id, paid)
	require.NoError(t, err)
	rec, err := json.Marshal(audit.Record{ClaimID: id, WorkflowID: id, Outcome: "paid", PayoutMinor: paid, Currency: "usd", ClosedAt: closedAt,
		Decided: &audit.Decided{By: audit.DecidedByRules, Verdict: approvals.Approve}})
	require.NoError(t, err)
	_, _, err = a.Store.WriteAudit(ctx, claim.StepKey(id, claim.StepAudit), id, rec)
	require.NoError(t, err)
	rv, _, err := a.Store.RequestReview(ctx, store.ReviewRequest{ClaimID: id, By: "ada@example.com", Reason: "the invoice says more",
		WindowEnds: func(string, time.Time) (time.Time, error) { return time.Now().Add(time.Hour), nil }})
	require.NoError(t, err)
	r, err := a.Store.TakeClaim(ctx, rv.ReviewID, run)
	require.NoError(t, err)
	return r.Claim
}

func adaClaim(id, policy string, minor int64) claim.Claim {
	return claim.Claim{ID: id, PolicyID: policy, AmountMinor: minor, Currency: "usd", Description: "A burst pipe",
		Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}}
}

// A review claim is a person's to decide at any amount: the payment's own
// check refuses one paid without a person's signed receipt (a rogue
// workflow, or one that skipped the wait), pays at most what is still
// covered, and pays once, under the review claim's own key.
func TestThePaymentRefusesAReviewWithoutAPersonsReceipt(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	k := keys(t, a)
	aud := approvals.Audience("default", a.Rules.Deployment)
	// 1,500.00 claimed, 800.00 paid by the rules: 700.00 in dispute, under
	// the auto-approve limit (1,000.00), all of it covered (pol-1001: no
	// deductible, a 10,000.00 limit).
	c := reviewOf(t, a, adaClaim("claim-0700", "pol-1001", 150000), 80000, testRun)
	require.Equal(t, "claim-0700-review", c.ID)
	require.EqualValues(t, 70000, c.AmountMinor)
	owner := runOf(c.ID, testRun, false)
	req := approvals.Request{ClaimID: c.ID, Payee: "acct_1Ada", PayeeName: "Ada Lovelace", AmountMinor: 70000, Amount: "700.00", Currency: "usd"}
	pay := func(amount int64, ap *PayApproval) error {
		in := payInput(c.ID, amount)
		in.Approval = ap
		_, err := as[PayResult](t, a, owner, a.PayClaimant, in)
		return err
	}
	refused := func(err error, want string) {
		t.Helper()
		require.Error(t, err)
		assert.Equal(t, ErrPaymentUnauthorised, appErrType(err), "%v", err)
		assert.ErrorContains(t, err, want)
		assert.Empty(t, transfers(t, a, c.ID), "refused, yet paid")
	}

	err := pay(70000, nil)
	refused(err, "carries no decision")
	assert.ErrorContains(t, err, "a person reviews, as the claimant asked, the automated outcome of claim claim-0700")
	refused(pay(70000, &PayApproval{Request: req}), "no signed receipt")
	refused(pay(70000, &PayApproval{Request: req, ByPolicy: true}), "does not approve by its final outcome")
	refused(pay(70001, &PayApproval{Request: req, Receipts: []string{receiptFor(t, k["adjuster-17"], req, 0, aud)}}), "above what the claim and its policy allow (700.00 USD)")

	require.NoError(t, pay(70000, &PayApproval{Request: req, Receipts: []string{receiptFor(t, k["adjuster-17"], req, 0, aud)}}))
	got := transfers(t, a, c.ID)
	require.Len(t, got, 1)
	assert.Equal(t, "claim-0700-review:step6", got[0].Metadata["idempotency_key"])
	assert.Empty(t, transfers(t, a, "claim-0700"), "the original's transfer group is untouched")
}

// What the review may pay is what the policy covers of the original's
// whole claim, less what the original paid: the deductible once.
func TestAReviewPaysAtMostTheCoverLeft(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	k := keys(t, a)
	aud := approvals.Audience("default", a.Rules.Deployment)
	// pol-2002: a 250.00 deductible. 900.00 claimed, 500.00 paid: 400.00 in
	// dispute, of which 150.00 is covered (650.00 covered in all).
	rv := reviewOf(t, a, adaClaim("claim-0710", "pol-2002", 90000), 50000, testRun)
	req := approvals.Request{ClaimID: rv.ID, Payee: "acct_1Ada", AmountMinor: 40000, Amount: "400.00", Currency: "usd"}
	in := PayInput{Key: claim.StepKey(rv.ID, claim.StepPay), WorkflowID: rv.ID, ClaimID: rv.ID, AmountMinor: 15001, Currency: "usd",
		Destination: "acct_1Ada", Approval: &PayApproval{Request: req, Receipts: []string{receiptFor(t, k["adjuster-17"], req, 0, aud)}}}
	_, err := as[PayResult](t, a, runOf(rv.ID, testRun, false), a.PayClaimant, in)
	require.Error(t, err)
	assert.ErrorContains(t, err, "(150.00 USD)")
	in.AmountMinor = 15000
	_, err = as[PayResult](t, a, runOf(rv.ID, testRun, false), a.PayClaimant, in)
	require.NoError(t, err)
	assert.Len(t, transfers(t, a, rv.ID), 1)
}
