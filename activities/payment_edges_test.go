package activities

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// The payment's own checks, each on its own with every other passing
// (authorisePayout, approved, receiptApprover in payout.go; PayClaimant's
// input; matches): what pays and what is refused, and nothing paid when
// refused.

// payCase is a fresh claim of 1,840.00 to acct_1Ada, bound to the test's
// run, and the request its approval was asked.
type payCase struct {
	t   *testing.T
	a   *Activities
	c   claim.Claim
	req approvals.Request
	aud string
}

var payCases int

func newPayCase(t *testing.T, a *Activities) *payCase {
	t.Helper()
	payCases++
	c := registerFor(t, a, fmt.Sprintf("claim-%04d", 900+payCases), 184000, testRun)
	return &payCase{t: t, a: a, c: c, aud: approvals.Audience("default", a.Rules.Deployment),
		req: approvals.Request{ClaimID: c.ID, Payee: "acct_1Ada", PayeeName: "Ada Lovelace", AmountMinor: 184000, Amount: "1840.00", Currency: "usd"}}
}

// pay asks to pay amount with approval (nil: none) and returns the
// refusal, or "" when it paid; a refused payment made no transfer.
func (p *payCase) pay(amount int64, approval *PayApproval) string {
	p.t.Helper()
	in := payInput(p.c.ID, amount)
	in.Approval = approval
	_, err := as[PayResult](p.t, p.a, runOf(p.c.ID, testRun, false), p.a.PayClaimant, in)
	if err == nil {
		require.Len(p.t, transfers(p.t, p.a, p.c.ID), 1)
		return ""
	}
	assert.Empty(p.t, transfers(p.t, p.a, p.c.ID), "refused, yet paid: %v", err)
	return appErrType(err) + ": " + err.Error()
}

func (p *payCase) receipts(tokens ...string) *PayApproval {
	return &PayApproval{Request: p.req, Receipts: tokens}
}

// A payment needs a positive amount, a destination and a claim, each on
// its own; refused as invalid input, never retried, nothing sent.
func TestAPaymentNeedsAnAmountADestinationAndAClaim(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	registerFor(t, a, "claim-0042", 64000, testRun)
	for name, edit := range map[string]func(*PayInput){
		"nothing":        func(in *PayInput) { in.AmountMinor = 0 },
		"negative":       func(in *PayInput) { in.AmountMinor = -64000 },
		"no destination": func(in *PayInput) { in.Destination = "" },
		"no claim":       func(in *PayInput) { in.ClaimID = "" },
	} {
		in := payInput("claim-0042", 64000)
		edit(&in)
		_, err := as[PayResult](t, a, runOf("claim-0042", testRun, false), a.PayClaimant, in)
		require.Error(t, err, name)
		assert.True(t, nonRetryableErr(err), "%s: %v", name, err)
	}
	assert.Empty(t, f.posts())
	assert.Empty(t, transfers(t, a, "claim-0042"))
}

// The worker's payout cap bounds the payment as the coverage does: up to
// it paid, a cent above refused.
func TestThePayoutCapBoundsThePayment(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	a.Rules.AutoApproveLimit, a.Rules.MaxPayout = "5000", "1500"
	assert.Contains(t, newPayCase(t, a).pay(150001, nil), "above what the claim and its policy allow (1500.00 USD)")
	assert.Equal(t, "", newPayCase(t, a).pay(150000, nil))
}

// The request an approval carries is this claim's, to its payee, in its
// currency: each compared on its own.
func TestTheApprovedRequestIsTheClaims(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	k := keys(t, a)
	for name, edit := range map[string]func(*approvals.Request){
		"another claim":    func(r *approvals.Request) { r.ClaimID = "claim-0001" },
		"another payee":    func(r *approvals.Request) { r.Payee = "acct_1Mallory" },
		"another currency": func(r *approvals.Request) { r.Currency = "eur" },
	} {
		p := newPayCase(t, a)
		edit(&p.req)
		assert.Contains(t, p.pay(184000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 0, p.aud))), "the request approved was for", name)
	}
}

// Above four eyes the payment wants two different approvers, one a
// supervisor; at the threshold one is enough.
func TestFourEyesAtThePayment(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	k := keys(t, a)
	a.Rules.FourEyesAbove = "1000"
	p := newPayCase(t, a)
	assert.Contains(t, p.pay(184000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 0, p.aud))), "two approvers must agree")
	p = newPayCase(t, a)
	assert.Contains(t, p.pay(150000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 150000, p.aud), receiptFor(t, k["adjuster-9"], p.req, 150000, p.aud))),
		"two approvers must agree", "two adjusters")
	p = newPayCase(t, a)
	assert.Contains(t, p.pay(184000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 0, p.aud), receiptFor(t, k["adjuster-17"], p.req, 0, p.aud))),
		"adjuster-17 approved twice")
	p = newPayCase(t, a)
	assert.Equal(t, "", p.pay(184000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 0, p.aud), receiptFor(t, k["supervisor-3"], p.req, 0, p.aud))))

	a.Rules.FourEyesAbove = "1840"
	p = newPayCase(t, a)
	assert.Equal(t, "", p.pay(184000, p.receipts(receiptFor(t, k["adjuster-17"], p.req, 0, p.aud))), "at the threshold")
}

// An approver approves up to exactly their limit.
func TestAnApproverPaysUpToExactlyTheirLimit(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	k := keys(t, a)
	p := newPayCase(t, a)
	assert.Equal(t, "", p.pay(150000, p.receipts(receiptFor(t, k["adjuster-9"], p.req, 150000, p.aud))), "adjuster-9's 1,500.00")
}

// A receipt issued before the claim was registered, or in the future, is
// outside the claim's life.
func TestAReceiptFromOutsideTheClaimsLife(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	a.Rules.ReceiptMaxTTL = insurer.Duration(24 * time.Hour)
	k := keys(t, a)
	for name, at := range map[string]time.Time{"before": time.Now().Add(-2 * time.Minute), "after": time.Now().Add(2 * time.Minute)} {
		p := newPayCase(t, a)
		r, err := approvals.NewReceipt(approvals.Receipt{Audience: p.aud, Subject: "adjuster-17", ClaimID: p.c.ID, RequestSHA256: p.req.SHA256(),
			Verdict: approvals.Approve}, at, time.Hour)
		require.NoError(t, err)
		tok, err := approvals.Sign(k["adjuster-17"], r)
		require.NoError(t, err)
		assert.Contains(t, p.pay(184000, p.receipts(tok)), "outside the claim's life", name)
	}
}

// The development switch pays on plain decisions only when it is on and
// the approval names who decided.
func TestUnsignedApprovalsNeedTheSwitchAndAnApprover(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	p := newPayCase(t, a)
	assert.Contains(t, p.pay(184000, &PayApproval{Request: p.req, Unsigned: []string{"adjuster-17"}}), "no signed receipt", "switch off")
	a.Rules.AllowUnsignedDecisions = true
	p = newPayCase(t, a)
	assert.Contains(t, p.pay(184000, &PayApproval{Request: p.req}), "no signed receipt", "nobody named")
	p = newPayCase(t, a)
	assert.Equal(t, "", p.pay(184000, &PayApproval{Request: p.req, Unsigned: []string{"adjuster-17"}}))
}

// The policy's outcome pays only after the whole wait, the adjusters' and
// the supervisors' together.
func TestThePolicyWaitsBothStages(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	a.Rules.FinalOutcome = "approve"
	a.Rules.ApprovalTTL, a.Rules.EscalationTTL = insurer.Duration(time.Hour), insurer.Duration(time.Hour)
	p := newPayCase(t, a)
	assert.Contains(t, p.pay(184000, &PayApproval{Request: p.req, ByPolicy: true}), "only after its whole wait (2h0m0s)")
}

// A transfer under the claim's key that pays another currency or another
// account is a key reused for another payment, never retried.
func TestATransferUnderTheKeyMustPayTheSame(t *testing.T) {
	in := payInput("claim-0042", 184000)
	same := &stripe.Transfer{ID: "tr_1", Amount: 184000, Currency: "usd", Destination: &stripe.Account{ID: "acct_1Ada"}}
	require.NoError(t, matches(same, in))
	for name, tr := range map[string]*stripe.Transfer{
		"amount":      {ID: "tr_1", Amount: 184001, Currency: "usd", Destination: &stripe.Account{ID: "acct_1Ada"}},
		"currency":    {ID: "tr_1", Amount: 184000, Currency: "eur", Destination: &stripe.Account{ID: "acct_1Ada"}},
		"destination": {ID: "tr_1", Amount: 184000, Currency: "usd", Destination: &stripe.Account{ID: "acct_1Mallory"}},
		"none":        {ID: "tr_1", Amount: 184000, Currency: "usd"},
	} {
		err := matches(tr, in)
		assert.Equal(t, ErrIdempotencyConflict, appErrType(err), name)
		assert.True(t, nonRetryableErr(err), name)
	}
}

// A lookup the payment provider fails is retried, and nothing is paid
// meanwhile: the check of check-then-act is never skipped.
func TestAFailedLookupPaysNothing(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	f.failList = true
	_, err := pay(t, a, payInput("claim-0042", 64000))
	require.Error(t, err)
	assert.False(t, nonRetryableErr(err), "retried: %v", err)
	assert.Empty(t, f.posts())
	f.failList = false
	r, err := pay(t, a, payInput("claim-0042", 64000))
	require.NoError(t, err)
	assert.Equal(t, "acct_1Ada", r.Destination)
	assert.WithinDuration(t, time.Now(), r.CreatedAt, time.Minute, "paid_at is the provider's")
}

// Stripe's defaults: the local server and its key when none is given, a
// 20 s timeout and 25 calls a second.
func TestStripeConfigDefaults(t *testing.T) {
	c := StripeConfig{}.Resolve()
	assert.Equal(t, StripeConfig{SecretKey: LocalStripeKey, APIBase: LocalStripeBase, Timeout: 20 * time.Second, RequestsPerSecond: 25}, c)
	own := StripeConfig{SecretKey: "sk_test_x", APIBase: "http://stripe.test", Timeout: time.Second, RequestsPerSecond: 100}
	assert.Equal(t, own, own.Resolve())
}

// A paid outcome names its transfer and payout; any other names none, each
// on its own.
func TestOnlyAPaidOutcomeNamesAPayment(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	owner := runOf(c.ID, testRun, true)
	for name, in := range map[string]CloseInput{
		"a transfer": {Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "rejected", TransferID: "tr_1"},
		"a payout":   {Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "rejected", PayoutMinor: 64000},
	} {
		_, err := as[CloseResult](t, a, owner, a.CloseClaim, in)
		assert.Equal(t, ErrForeignRun, appErrType(err), name)
	}
	_, err := as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "rejected"})
	require.NoError(t, err)
}

// A claim paid before payout reservations is paid by a transfer the
// provider holds under the claim's key, of the payout: found, the outcome
// holds; another amount or an unknown transfer does not.
func TestAClaimPaidBeforeReservationsIsCheckedAtTheProvider(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	params := &stripe.TransferParams{Amount: stripe.Int64(64000), Currency: stripe.String("usd"), Destination: stripe.String("acct_1Ada"),
		TransferGroup: stripe.String(c.ID)}
	params.AddMetadata("idempotency_key", string(claim.StepKey(c.ID, claim.StepPay)))
	tr, err := a.Stripe.Transfers.New(params)
	require.NoError(t, err)
	owner := runOf(c.ID, testRun, true)
	close := func(transfer string, payout int64) error {
		_, err := as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: transfer, PayoutMinor: payout})
		return err
	}
	assert.Equal(t, ErrForeignRun, appErrType(close(tr.ID, 64001)), "another amount")
	assert.Equal(t, ErrForeignRun, appErrType(close("tr_unknown", 64000)), "no such transfer")
	assert.Equal(t, ErrForeignRun, appErrType(close("", 64000)), "no transfer named")
	require.NoError(t, close(tr.ID, 64000))
}
