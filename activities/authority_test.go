package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/store"
)

// as runs one activity as caller would have it run (a regular activity of
// some run unless caller says local).
func as[T any](t *testing.T, a *Activities, caller func(context.Context) (Caller, bool), fn any, in any) (T, error) {
	t.Helper()
	a.callerFn = caller
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	var out T
	v, err := env.ExecuteActivity(fn, in)
	if err != nil {
		return out, err
	}
	require.NoError(t, v.Get(&out))
	return out, nil
}

// A run the claim does not belong to, whatever it is named, gets nothing
// from any claim activity: each refuses, names why, and the refusal is on
// the claim's record; the store and the payment provider are unchanged.
func TestAForeignRunGetsNothing(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	rogue := runOf(c.ID, "rogue-run", false) // the server knows it as no run of ours
	key := func(step claim.Step, sub ...string) claim.IdempotencyKey {
		k := claim.StepKey(c.ID, step)
		for _, s := range sub {
			k = k.Sub(s)
		}
		return k
	}
	calls := []struct {
		name string
		fn   any
		in   any
	}{
		{"LoadClaim", a.LoadClaim, LoadClaimInput{Claim: c}},
		{"OpenApproval", a.OpenApproval, OpenApprovalInput{ClaimID: c.ID}},
		{"CallTool", a.CallTool, ToolInput{Key: key(claim.StepTriage, "turn1", "prior_claims"), Scope: ScopeOf(c), Call: ToolCall{ID: "1", Name: ToolPriorClaims}}},
		{"TriageTurn", a.TriageTurn, TurnInput{Key: key(claim.StepTriage, "turn1"), Claim: c, Turn: 1}},
		{"AssessClaim", a.AssessClaim, AssessInput{Key: key(claim.StepAssess), AssessRequest: AssessRequest{Claim: c}}},
		{"PayClaimant", a.PayClaimant, payInput(c.ID, 64000)},
		{"NotifyClaimant", a.NotifyClaimant, NotifyInput{Key: key(claim.StepNotify), ClaimID: c.ID, To: "mallory@evil.example", Outcome: "rejected"}},
		{"RemindApprovers", a.RemindApprovers, NoticeInput{Key: key(claim.StepApproval, "remind"), ClaimID: c.ID}},
		{"CloseClaim", a.CloseClaim, CloseInput{Key: key(claim.StepClose), ClaimID: c.ID, Outcome: "rejected"}},
		{"WriteAudit", a.WriteAudit, AuditInput{Key: key(claim.StepAudit), ClaimID: c.ID, Record: json.RawMessage(`{}`)}},
		{"PublishApproval", a.PublishApproval, QueueInput{ClaimID: c.ID, Open: true, Approval: approvals.Approval{Rev: 1, Stage: approvals.StageWaiting,
			Request: approvals.Request{ClaimID: c.ID, AmountMinor: 64000, Currency: "usd"}}}},
	}
	for _, call := range calls {
		_, err := as[json.RawMessage](t, a, rogue, call.fn, call.in)
		require.Error(t, err, call.name)
		assert.Equal(t, ErrForeignRun, appErrType(err), call.name)
		assert.True(t, nonRetryableErr(err), call.name)
		assert.NotContains(t, err.Error(), "ada@example.com", call.name)
	}
	// Named after another claim, even as a local activity of ours.
	_, err := as[json.RawMessage](t, a, runOf("claim-0043", testRun, true), a.CloseClaim, CloseInput{Key: key(claim.StepClose), ClaimID: c.ID, Outcome: "rejected"})
	assert.Equal(t, ErrForeignRun, appErrType(err))

	rec, err := a.Store.GetClaim(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusOpen, rec.Status)
	assert.Equal(t, testRun, rec.RunID, "still the owner's")
	assert.Empty(t, transfers(t, a, c.ID))
	queued, err := a.Store.OpenQueue(context.Background())
	require.NoError(t, err)
	assert.Empty(t, queued, "nothing put in the approval queue")
	calls2, err := a.Store.ModelCalls(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Empty(t, calls2, "the insurer's model was not spent")
	refused, err := a.Store.Refusals(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Len(t, refused, len(calls)+1, "every refusal on the claim's record")
	for _, r := range refused {
		assert.Equal(t, "activity", r.Channel)
	}
}

// A run the server says is a running claim workflow on this worker's queue
// takes the claim over (a reset run goes on under a new run ID); the run it
// was bound to is refused from then on. A closed claim is never taken.
func TestARunOfOursTakesTheClaimOver(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	reset := runs(a).start(c.ID, "reset-run", "ClaimWorkflow")
	_, err := as[OpenApprovalResult](t, a, reset, a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	require.NoError(t, err)
	rec, err := a.Store.GetClaim(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Equal(t, "reset-run", rec.RunID)
	_, err = as[OpenApprovalResult](t, a, runOf(c.ID, testRun, false), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	assert.Equal(t, ErrForeignRun, appErrType(err), "the run it was bound to has ended")

	// A claim workflow of someone else's queue is not ours.
	elsewhere := runs(a).start(c.ID, "elsewhere", "ClaimWorkflow")
	runs(a).runs[c.ID+"/elsewhere"] = RunFacts{WorkflowType: "ClaimWorkflow", TaskQueue: "rogue-queue", Running: true}
	_, err = as[OpenApprovalResult](t, a, elsewhere, a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	assert.Equal(t, ErrForeignRun, appErrType(err))

	_, _, err = a.Store.CloseClaim(context.Background(), c.ID, claim.StepKey(c.ID, claim.StepClose), "rejected", "", 0)
	require.NoError(t, err)
	_, err = as[LoadClaimResult](t, a, runOf(c.ID, "restarted", true), a.LoadClaim, LoadClaimInput{Claim: c})
	assert.Equal(t, ErrClaimClosed, appErrType(err), "a closed claim is never taken again")
	// Read again by the run that closed it (its workflow task was lost after
	// the close, and runs again): it is the record, not a refusal, so the
	// run goes on to the same keyed steps instead of dead-lettering.
	again, err := as[LoadClaimResult](t, a, runOf(c.ID, "reset-run", true), a.LoadClaim, LoadClaimInput{Claim: c})
	require.NoError(t, err)
	assert.Equal(t, "rejected", again.Status)
	_, err = as[OpenApprovalResult](t, a, runs(a).start(c.ID, "late", "ClaimWorkflow"), a.OpenApproval, OpenApprovalInput{ClaimID: c.ID})
	assert.Equal(t, ErrClaimClosed, appErrType(err))
}

// keys gives the sample approvers signing keys in a directory file of
// their own, with adjuster-9's own address and payout account listed.
func keys(t *testing.T, a *Activities) map[string]authority.KeyFile {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "approvers.json")
	out := map[string]authority.KeyFile{}
	for _, id := range []string{"adjuster-17", "adjuster-9", "supervisor-3"} {
		kf, err := authority.GenerateKey(id, false)
		require.NoError(t, err)
		require.NoError(t, authority.AddKey(dir, kf))
		out[id] = kf
	}
	b, err := os.ReadFile(dir)
	require.NoError(t, err)
	b = []byte(strings.Replace(string(b), `"email": "adjuster9@insurer.example",`,
		`"email": "adjuster9@insurer.example", "emails": ["nine@home.example"], "payout_accounts": ["acct_1Nine"],`, 1))
	require.NoError(t, os.WriteFile(dir, b, 0o644))
	_, err = authority.Load(dir)
	require.NoError(t, err)
	a.ApproversFile = dir
	return out
}

func receiptFor(t *testing.T, kf authority.KeyFile, req approvals.Request, amount int64, audience string) string {
	t.Helper()
	r, err := approvals.NewReceipt(approvals.Receipt{Subject: kf.Approver, ClaimID: req.ClaimID, RequestSHA256: req.SHA256(),
		Verdict: approvals.Approve, AmountMinor: amount, Reason: "checked", Audience: audience}, time.Now(), approvals.DefaultReceiptTTL)
	require.NoError(t, err)
	tok, err := approvals.Sign(kf, r)
	require.NoError(t, err)
	return tok
}

// The payment authorises itself: payee and currency from the store, at
// most the ceiling, and above the auto-approve limit only with receipts it
// verifies again: the right claim and request, signed by a key the
// directory lists now, within the approver's limit, never the claimant's
// own (in any spelling), two of them above four eyes. Once per claim, ever.
func TestThePaymentAuthorisesItself(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	k := keys(t, a)
	aud := approvals.Audience("default", a.Rules.Deployment)
	owner := runOf("claim-0042", testRun, false)
	c := registerFor(t, a, "claim-0042", 184000, testRun)
	req := approvals.Request{ClaimID: c.ID, Payee: "acct_1Ada", PayeeName: "Ada Lovelace", AmountMinor: 184000, Amount: "1840.00", Currency: "usd"}
	payWith := func(in PayInput, receipts ...string) error {
		if receipts != nil {
			in.Approval = &PayApproval{Request: req, Receipts: receipts}
		}
		_, err := as[PayResult](t, a, owner, a.PayClaimant, in)
		return err
	}
	refused := func(err error, code string) {
		t.Helper()
		require.Error(t, err)
		assert.Equal(t, ErrPaymentUnauthorised, appErrType(err), "%v", err)
		assert.True(t, nonRetryableErr(err))
		if code != "" {
			assert.Contains(t, err.Error(), code)
		}
	}

	other := payInput(c.ID, 184000)
	other.Destination = "acct_1Mallory"
	refused(payWith(other, receiptFor(t, k["adjuster-17"], req, 0, aud)), "the system of record pays acct_1Ada")
	other = payInput(c.ID, 184000)
	other.Key = "claim-0042:step6-again"
	refused(payWith(other, receiptFor(t, k["adjuster-17"], req, 0, aud)), "its own key")
	refused(payWith(payInput(c.ID, 184001), receiptFor(t, k["adjuster-17"], req, 0, aud)), "above what the claim and its policy allow")
	refused(payWith(payInput(c.ID, 184000)), "carries no decision")
	refused(payWith(payInput(c.ID, 184000), "not.a.receipt"), "not a receipt")
	refused(payWith(payInput(c.ID, 184000), receiptFor(t, k["adjuster-9"], req, 0, aud)), "may approve up to 1500.00")
	refused(payWith(payInput(c.ID, 184000), receiptFor(t, k["adjuster-17"], req, 0, "durableclaims/staging/local")), "not this namespace")
	forged := req
	forged.AmountMinor = 9_999_999
	refused(payWith(payInput(c.ID, 184000), receiptFor(t, k["adjuster-17"], forged, 0, aud)), "not this request")
	refused(payWith(payInput(c.ID, 184000), receiptFor(t, k["adjuster-17"], req, 150000, aud)), "approved 1500.00 USD")
	intruder, err := authority.GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	refused(payWith(payInput(c.ID, 184000), receiptFor(t, intruder, req, 0, aud)), "does not list")
	assert.Empty(t, transfers(t, a, c.ID), "nothing paid")

	require.NoError(t, payWith(payInput(c.ID, 150000), receiptFor(t, k["adjuster-17"], req, 150000, aud)), "paid what was approved")
	require.NoError(t, payWith(payInput(c.ID, 150000), receiptFor(t, k["adjuster-17"], req, 150000, aud)), "a retry finds it paid")
	assert.Len(t, transfers(t, a, c.ID), 1)
	p, err := a.Store.Payout(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Equal(t, store.PayoutPaid, p.Status)

	// The claimant's own approver, by another spelling or their own account.
	for id, claimant := range map[string]claim.Claimant{
		"claim-0050": {Name: "Nine", Email: "Adjuster9+claims@Insurer.example", StripeAccount: "acct_1Other"},
		"claim-0051": {Name: "Nine", Email: "nine@home.example", StripeAccount: "acct_1Other"},
		"claim-0052": {Name: "Nine", Email: "friend@example.com", StripeAccount: "acct_1Nine"},
	} {
		cl := claim.Claim{ID: id, PolicyID: "pol-1001", AmountMinor: 120000, Currency: "usd", Description: "A burst pipe", Claimant: claimant}
		registered(t, a, cl)
		_, err := a.Store.TakeClaim(context.Background(), id, testRun)
		require.NoError(t, err)
		r := approvals.Request{ClaimID: id, Payee: claimant.StripeAccount, AmountMinor: 120000, Amount: "1200.00", Currency: "usd"}
		in := PayInput{Key: claim.StepKey(id, claim.StepPay), WorkflowID: id, ClaimID: id, AmountMinor: 120000, Currency: "usd",
			Destination: claimant.StripeAccount, Approval: &PayApproval{Request: r, Receipts: []string{receiptFor(t, k["adjuster-9"], r, 0, aud)}}}
		_, err = as[PayResult](t, a, runOf(id, testRun, false), a.PayClaimant, in)
		refused(err, "self-approval")
	}

	// Four eyes above 10,000.00: two approvers, one a supervisor.
	big := claim.Claim{ID: "claim-0060", PolicyID: "pol-1001", AmountMinor: 1_200_000, Currency: "usd", Description: "A burst pipe",
		Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}}
	registered(t, a, big)
	_, err = a.Store.TakeClaim(context.Background(), big.ID, testRun)
	require.NoError(t, err)
	a.Rules.MaxPayout = ""
	breq := approvals.Request{ClaimID: big.ID, Payee: "acct_1Ada", AmountMinor: 1_000_000, Amount: "10000.00", Currency: "usd"}
	bin := PayInput{Key: claim.StepKey(big.ID, claim.StepPay), WorkflowID: big.ID, ClaimID: big.ID, AmountMinor: 1_000_000, Currency: "usd", Destination: "acct_1Ada"}
	bin.Approval = &PayApproval{Request: breq, Receipts: []string{receiptFor(t, k["supervisor-3"], breq, 0, aud)}}
	_, err = as[PayResult](t, a, runOf(big.ID, testRun, false), a.PayClaimant, bin)
	require.NoError(t, err, "10,000.00 is not above the threshold")
}

// The payment pays only a claim the system of record still holds open,
// whatever the workflow that asks read: workflow code that is not ours (a
// rogue worker taking the run's tasks) skips the workflow's re-read after
// the wait, and the claim's own run passes forClaim even once the claim is
// closed. It guards authorisePayout's `case rec.Status != store.StatusOpen`
// (activities/payout.go): without it each of these claims is paid.
func TestThePaymentRefusesAClaimNoLongerOpen(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		status string
		end    func(id string)
	}{
		{store.StatusWithdrawn, func(id string) {
			_, err := a.Store.Withdraw(ctx, id)
			require.NoError(t, err)
		}},
		{"rejected", func(id string) {
			_, _, err := a.Store.CloseClaim(ctx, id, claim.StepKey(id, claim.StepClose), "rejected", "", 0)
			require.NoError(t, err)
		}},
	} {
		status := tc.status
		c := registerFor(t, a, "claim-"+status, 64000, testRun) // under the auto-approve limit: no receipt needed
		tc.end(c.ID)
		_, err := as[PayResult](t, a, runOf(c.ID, testRun, false), a.PayClaimant, payInput(c.ID, 64000))
		assert.Error(t, err, "%s: paid", status)
		assert.Equal(t, ErrPaymentUnauthorised, appErrType(err), "%s: %v", status, err)
		assert.True(t, nonRetryableErr(err), status)

		refused, err := a.Store.Refusals(ctx, c.ID)
		require.NoError(t, err)
		if assert.Len(t, refused, 1, status) {
			assert.Equal(t, "not-open", refused[0].Code, status)
			assert.Equal(t, "PayClaimant", refused[0].Decision, status)
		}
		assert.Len(t, transfers(t, a, c.ID), 0, "%s: nothing paid", status)
		_, err = a.Store.Payout(ctx, c.ID)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s: no payout reserved", status)
		rec, err := a.Store.GetClaim(ctx, c.ID)
		require.NoError(t, err)
		assert.Equal(t, status, rec.Status, "the claim stays as it was")
	}
}

// The close and the notice need their facts: paid needs the claim's payout
// paid by the named transfer; the claimant's e-mail goes to the address
// the system of record holds.
func TestOutcomesNeedTheirFacts(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	owner := runOf(c.ID, testRun, true)
	_, err := as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: "tr_x", PayoutMinor: 64000})
	assert.Equal(t, ErrForeignRun, appErrType(err), "no payout, no paid")
	_, err = as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "withdrawn"})
	assert.Error(t, err, "the claim was not withdrawn")
	_, err = as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "open"})
	assert.Error(t, err, "not an outcome")
	paidOut(t, a, c.ID, 64000, "tr_1")
	_, err = as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: "tr_2", PayoutMinor: 64000})
	assert.Error(t, err, "another transfer")

	r, err := as[NotifyResult](t, a, owner, a.NotifyClaimant, NotifyInput{Key: "claim-0042:step7", ClaimID: c.ID, To: "mallory@evil.example",
		Name: "Mallory", Outcome: "paid", PayoutMinor: 64000, Currency: "usd", TransferID: "tr_1"})
	require.NoError(t, err)
	body, err := os.ReadFile(filepath.Join(a.Mailer.(SpoolMailer).Dir, fileSafe(r.MessageID)+".eml"))
	require.NoError(t, err)
	assert.Contains(t, string(body), "To: ada@example.com")
	assert.Contains(t, string(body), "Dear Ada Lovelace")
	assert.NotContains(t, string(body), "mallory")
	_, err = as[CloseResult](t, a, owner, a.CloseClaim, CloseInput{Key: "claim-0042:step8", ClaimID: c.ID, Outcome: "paid", TransferID: "tr_1", PayoutMinor: 64000})
	require.NoError(t, err)
}

// The policy's final outcome pays without a receipt only where the
// worker's policy says approve, and only after its whole wait since the
// claim was registered; plain decisions only under the development switch.
func TestPolicyAndUnsignedApprovalsAtThePayment(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	c := registerFor(t, a, "claim-0070", 184000, testRun)
	req := approvals.Request{ClaimID: c.ID, Payee: "acct_1Ada", AmountMinor: 184000, Amount: "1840.00", Currency: "usd"}
	pay := func(pa *PayApproval) error {
		in := payInput(c.ID, 184000)
		in.Approval = pa
		_, err := as[PayResult](t, a, runOf(c.ID, testRun, false), a.PayClaimant, in)
		return err
	}
	byPolicy := &PayApproval{Request: req, ByPolicy: true}
	assert.ErrorContains(t, pay(byPolicy), "does not approve by its final outcome")
	a.Rules.FinalOutcome = "approve"
	assert.ErrorContains(t, pay(byPolicy), "only after its whole wait")
	unsigned := &PayApproval{Request: req, Unsigned: []string{"adjuster-17"}}
	assert.ErrorContains(t, pay(unsigned), "no signed receipt")
	assert.Empty(t, transfers(t, a, c.ID))

	a.Rules.AllowUnsignedDecisions = true
	require.NoError(t, pay(unsigned), "the development switch")
	a.Rules.AllowUnsignedDecisions = false
	a.Rules.ApprovalTTL, a.Rules.EscalationTTL = insurer.Duration(time.Millisecond), insurer.Duration(time.Millisecond)
	require.NoError(t, pay(byPolicy), "after the whole wait: the same payout, found paid")
	assert.Len(t, transfers(t, a, c.ID), 1)
}

// Under the auto-approve limit the payment still wants a decision where a
// deterministic review rule sends the claim to a human, read from the
// system of record and not from the model: a fraud flag on the claim, the
// claimant's prior claims, the words of an excluded category. A claim none
// of them touches is paid without one.
func TestThePaymentAppliesTheReviewRules(t *testing.T) {
	ctx := context.Background()
	for name, tc := range map[string]struct {
		setup func(t *testing.T, a *Activities) claim.Claim
		pay   int64
		want  string // "": paid
	}{
		"flagged": {pay: 30000, want: "fraud signal", setup: func(t *testing.T, a *Activities) claim.Claim {
			c := registerFor(t, a, "claim-0301", 30000, testRun)
			_, err := a.Store.FlagFraud(ctx, store.FraudFlag{Key: claim.StepKey(c.ID, claim.StepTriage).Sub("flag"), ClaimID: c.ID, Signal: "invoice-altered"})
			require.NoError(t, err)
			return c
		}},
		"frequent": {pay: 30000, want: "3 prior claims", setup: func(t *testing.T, a *Activities) claim.Claim {
			for _, id := range []string{"claim-0302", "claim-0303", "claim-0304"} {
				registerFor(t, a, id, 5000, "run-other")
			}
			return registerFor(t, a, "claim-0305", 30000, testRun)
		}},
		"excluded": {pay: 15000, want: "wear-and-tear", setup: func(t *testing.T, a *Activities) claim.Claim {
			c := registered(t, a, claim.Claim{ID: "claim-0306", PolicyID: "pol-2002", AmountMinor: 40000, Currency: "usd",
				Description: "Rust and old age wore through the boiler",
				Claimant:    claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}})
			_, err := a.Store.TakeClaim(ctx, c.ID, testRun)
			require.NoError(t, err)
			return c
		}},
		"nothing": {pay: 30000, setup: func(t *testing.T, a *Activities) claim.Claim {
			return registerFor(t, a, "claim-0307", 30000, testRun)
		}},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFakeStripe(t)
			a := newActivities(t, f)
			c := tc.setup(t, a)
			_, err := as[PayResult](t, a, runOf(c.ID, testRun, false), a.PayClaimant, payInput(c.ID, tc.pay))
			if tc.want == "" {
				require.NoError(t, err)
				assert.Len(t, transfers(t, a, c.ID), 1)
				return
			}
			require.Error(t, err)
			assert.Equal(t, ErrPaymentUnauthorised, appErrType(err), "%v", err)
			assert.ErrorContains(t, err, tc.want)
			assert.ErrorContains(t, err, "carries no decision")
			assert.Empty(t, transfers(t, a, c.ID))
		})
	}
}
