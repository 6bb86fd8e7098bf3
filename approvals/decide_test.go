package approvals

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// The gate in a workflow, decided by signed receipts as a claim's run is:
// what each decision leaves on the wait (the decision, its amount, the
// votes, the trail) and how the wait ends.

// gateRun is what a run of receiptWait saw.
type gateRun struct {
	Approval *Approval `json:"approval"`
	Attempts []Attempt `json:"attempts"`
	Dropped  int       `json:"dropped"`
	Trail    []string  `json:"trail"`
}

// receiptWait waits once on w with every hook a claim's run sets, each
// noting itself in the trail; a recheck answers voided.
func receiptWait(ctx workflow.Context, w Wait, voided string) (gateRun, error) {
	g, err := Listen(ctx)
	if err != nil {
		return gateRun{}, err
	}
	var run gateRun
	note := func(what string) func(workflow.Context, *Approval) error {
		return func(workflow.Context, *Approval) error { run.Trail = append(run.Trail, what); return nil }
	}
	a, err := g.Await(ctx, w, Hooks{Remind: note("remind"), Escalate: note("escalate"), Overdue: note("overdue"),
		OnChange: func(_ workflow.Context, a *Approval) error {
			state := "open"
			if !a.Open() {
				state = "closed"
			}
			run.Trail = append(run.Trail, fmt.Sprintf("change %d: %s", a.Rev, state))
			return nil
		},
		Recheck: func(workflow.Context, *Approval) (string, error) {
			run.Trail = append(run.Trail, "recheck")
			return voided, nil
		}})
	run.Approval, run.Attempts, run.Dropped = a, g.Attempts(), g.Dropped()
	return run, err
}

// updateAnswer is what a decide update's sender received.
type updateAnswer struct {
	result any
	err    error
}

// send is a signal (or, named UpdateDecide, the decide update with the
// input's receipt) sent at a time after the wait opened.
type send struct {
	at      time.Duration
	signal  string
	payload any
}

// run runs receiptWait on w from now, sending each signal at its time.
func (b *ruleBook) run(w Wait, voided string, sends ...send) gateRun {
	b.t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.SetStartTime(now)
	env.RegisterWorkflow(receiptWait)
	for _, s := range sends {
		env.RegisterDelayedCallback(func() {
			if s.signal != UpdateDecide {
				env.SignalWorkflow(s.signal, s.payload)
				return
			}
			env.UpdateWorkflow(UpdateDecide, "", &testsuite.TestUpdateCallback{OnReject: func(err error) { b.t.Errorf("update refused: %v", err) },
				OnAccept: func() {}, OnComplete: func(v any, err error) { b.answers = append(b.answers, updateAnswer{v, err}) }}, DecideInput{Receipt: s.payload.(Input).Receipt})
		}, s.at)
	}
	env.ExecuteWorkflow(receiptWait, w, voided)
	require.NoError(b.t, env.GetWorkflowError())
	var r gateRun
	require.NoError(b.t, env.GetWorkflowResult(&r))
	return r
}

// signed is approver's receipt on w's request, issued at, approving amount
// when lower than the request, with reason.
func (b *ruleBook) signed(w Wait, at time.Duration, approver string, v Verdict, amount int64, reason string) Input {
	b.t.Helper()
	r, err := NewReceipt(Receipt{Audience: rulesAudience, Subject: approver, ClaimID: w.Request.ClaimID,
		RequestSHA256: w.Request.SHA256(), Verdict: v, AmountMinor: amount, Reason: reason}, now.Add(at), DefaultReceiptTTL)
	require.NoError(b.t, err)
	tok, err := Sign(b.keys[approver], r)
	require.NoError(b.t, err)
	return Input{Receipt: tok}
}

// A signed approval after the reminder decides the wait: the whole request
// is approved, by its one vote; the wait neither escalates nor expires
// after it, and the queue learns that it closed.
func TestASignedApprovalDecidesTheWait(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	in := b.signed(w, 40*time.Hour, "adjuster-17", Approve, 0, "")
	r := b.run(w, "", send{40 * time.Hour, SignalApprove, in})
	a := r.Approval
	require.NotNil(t, a.Decision)
	assert.Equal(t, Approve, a.Decision.Verdict)
	assert.Equal(t, "adjuster-17", a.Decision.Approver)
	assert.Equal(t, int64(120_000), a.Decision.AmountMinor)
	assert.Nil(t, a.Decision.Approved, "the request as it was asked: no lower amount")
	assert.Equal(t, ProofReceipt, a.Decision.Proof)
	assert.Len(t, a.Votes, 1)
	assert.False(t, a.Expired)
	assert.Equal(t, StageWaiting, a.Stage)
	assert.Equal(t, []string{"change 1: open", "remind", "change 2: closed"}, r.Trail)
	require.Len(t, r.Attempts, 1)
	assert.True(t, r.Attempts[0].Accepted)
	assert.Equal(t, "adjuster-17", r.Attempts[0].Approver)
	assert.Equal(t, b.keys["adjuster-17"].Key.KeyID, r.Attempts[0].KeyID)
	assert.Equal(t, a.Decision.ReceiptID, r.Attempts[0].ReceiptID)
}

// An approval of a lower amount records the request as approved: the
// amount, the approver's reason, and its own hash.
func TestALowerApprovalRecordsTheRequestAsApproved(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	r := b.run(w, "", send{time.Minute, SignalApprove, b.signed(w, time.Minute, "adjuster-17", Approve, 100_000, "the invoice says 1000.00")})
	d := r.Approval.Decision
	require.NotNil(t, d)
	assert.Equal(t, int64(100_000), d.AmountMinor)
	require.NotNil(t, d.Approved)
	assert.Equal(t, int64(100_000), d.Approved.AmountMinor)
	assert.Equal(t, "1000.00", d.Approved.Amount)
	assert.Equal(t, d.Approved.SHA256(), d.ApprovedSHA256)
	assert.NotEqual(t, r.Approval.RequestSHA256, d.ApprovedSHA256)
	assert.Contains(t, d.Approved.Reasons, "approved at a lower amount by adjuster-17: the invoice says 1000.00")
}

// Above four eyes, the run pays the least amount either approver approved,
// whoever approved last; the first vote leaves the wait open.
func TestFourEyesPayTheLeastEitherApproved(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(1_500_000, nil)
	r := b.run(w, "",
		send{time.Minute, SignalApprove, b.signed(w, time.Minute, "adjuster-9", Approve, 1_200_000, "one item is not covered")},
		send{2 * time.Minute, SignalApprove, b.signed(w, 2*time.Minute, "supervisor-3", Approve, 0, "")})
	d := r.Approval.Decision
	require.NotNil(t, d)
	assert.Equal(t, "supervisor-3", d.Approver)
	assert.Equal(t, int64(1_200_000), d.AmountMinor, "the adjuster's lower amount")
	assert.Len(t, r.Approval.Votes, 2)
	assert.Equal(t, []string{"change 1: open", "change 2: open", "change 3: closed"}, r.Trail)
}

// A signed rejection ends the wait at once, decided on the whole request,
// and is no vote.
func TestASignedRejectionEndsTheWait(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	r := b.run(w, "", send{time.Minute, SignalReject, b.signed(w, time.Minute, "adjuster-17", Reject, 0, "not covered")})
	d := r.Approval.Decision
	require.NotNil(t, d)
	assert.Equal(t, Reject, d.Verdict)
	assert.Equal(t, int64(120_000), d.AmountMinor)
	assert.Empty(t, r.Approval.Votes)
	assert.False(t, r.Approval.Expired)
	assert.Equal(t, []string{"change 1: open", "change 2: closed"}, r.Trail)
}

// A supervisor's rejection of an escalated claim stands, though the
// policy's final outcome would approve: the policy decides only what
// nobody did.
func TestAnEscalatedDecisionIsNotTheFinalOutcomes(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, func(w *Wait) { w.Policy = Policy{TTL: time.Hour, EscalationTTL: time.Hour, FinalOutcome: Approve} })
	r := b.run(w, "", send{90 * time.Minute, SignalReject, b.signed(w, 90*time.Minute, "supervisor-3", Reject, 0, "not covered")})
	a := r.Approval
	require.NotNil(t, a.Decision)
	assert.Equal(t, Reject, a.Decision.Verdict)
	assert.Equal(t, "supervisor-3", a.Decision.Approver)
	assert.False(t, a.Expired)
	assert.Equal(t, StageEscalated, a.Stage)
	assert.Equal(t, []string{"change 1: open", "remind", "change 2: open", "escalate", "change 3: closed"}, r.Trail)
}

// A refused receipt's attempt names what the receipt claims: who, with
// which key, which receipt, what verdict, and why it was refused.
func TestTheTrailNamesWhatARefusedReceiptClaims(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(600_000, nil) // above adjuster-17's 5,000.00
	over := b.signed(w, time.Minute, "adjuster-17", Approve, 0, "")
	r := b.run(w, "", send{time.Minute, SignalApprove, over},
		send{2 * time.Minute, SignalApprove, b.signed(w, 2*time.Minute, "supervisor-3", Approve, 0, "")})
	require.Len(t, r.Attempts, 2)
	at := r.Attempts[0]
	assert.False(t, at.Accepted)
	assert.Equal(t, CodeOverLimit, at.Code)
	assert.Equal(t, "adjuster-17", at.Approver)
	assert.Equal(t, b.keys["adjuster-17"].Key.KeyID, at.KeyID)
	_, claimed, ok := PeekReceipt(over.Receipt)
	require.True(t, ok)
	assert.Equal(t, claimed.ID, at.ReceiptID)
	assert.Equal(t, "supervisor-3", r.Approval.Decision.Approver)
}

// A claim changed in the system of record while it waits is read again at
// once, and a request it no longer matches ends the wait undecided; a wait
// nobody signals reads nothing again.
func TestAChangedClaimIsReadAgainAndOnlyThen(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	r := b.run(w, "withdrawn by the claimant", send{time.Minute, SignalChanged, nil})
	assert.True(t, r.Approval.Interrupted)
	assert.Equal(t, "withdrawn by the claimant", r.Approval.Voided)
	assert.Nil(t, r.Approval.Decision)
	assert.Equal(t, []string{"change 1: open", "recheck", "change 2: closed"}, r.Trail)

	r = b.run(w, "")
	assert.True(t, r.Approval.Expired)
	assert.NotContains(t, r.Trail, "recheck")
}

// A policy that reminds at 1 (or later) of the TTL sends no reminder.
func TestNoReminderAtTheWholeTTL(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, func(w *Wait) { w.Policy = Policy{TTL: time.Hour, EscalationTTL: time.Hour, ReminderAt: 1} })
	r := b.run(w, "")
	assert.Equal(t, []string{"change 1: open", "change 2: open", "escalate", "change 3: closed"}, r.Trail)
}

// Runs from before receipts record their plain decisions as they did: no
// amount on the decision, no votes, and the trail names the approver typed.
func TestPlainDecisionsAreRecordedAsBefore(t *testing.T) {
	r := runWait(t, "", Reject, Input{Approver: "adjuster-17"})
	require.NotNil(t, r.Approval.Decision)
	assert.Equal(t, "adjuster-17", r.Approval.Decision.Approver)
	assert.Zero(t, r.Approval.Decision.AmountMinor)
	assert.Empty(t, r.Approval.Votes)
	require.Len(t, r.Attempts, 1)
	assert.Equal(t, "adjuster-17", r.Attempts[0].Approver)
}

// The trail keeps the first maxRefused refused attempts in full and counts
// the rest; an accepted decision is always kept.
func TestTheTrailIsBounded(t *testing.T) {
	signals := make([]any, 0, maxRefused+9)
	for range maxRefused + 8 {
		signals = append(signals, "not an object")
	}
	signals = append(signals, Input{Approver: "adjuster-17"})
	r := runWait(t, "", Reject, signals...)
	require.NotNil(t, r.Approval.Decision)
	assert.Len(t, r.Attempts, maxRefused+1)
	assert.True(t, r.Attempts[maxRefused].Accepted)
	for _, at := range r.Attempts[:maxRefused] {
		assert.Equal(t, CodeMalformed, at.Code)
	}
}

// Anyone may send the changed signal, and each read of the claim is a step
// in history: a wait reads it again at most MaxRechecks times.
func TestAWaitReadsTheClaimAgainAtMostMaxRechecksTimes(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	var sends []send
	for i := range MaxRechecks + 3 {
		sends = append(sends, send{time.Duration(i+1) * time.Minute, SignalChanged, nil})
	}
	r := b.run(w, "", sends...)
	reads := 0
	for _, s := range r.Trail {
		if s == "recheck" {
			reads++
		}
	}
	assert.Equal(t, MaxRechecks, reads)
	assert.False(t, r.Approval.Interrupted)
}

// waitAfter listens, then opens a plain wait (as waitOnce does, with no
// hooks: a run from before the changed signal) after delay.
func waitAfter(ctx workflow.Context, delay time.Duration, approvers authority.Directory) (waitResult, error) {
	g, err := Listen(ctx)
	if err != nil {
		return waitResult{}, err
	}
	if err := workflow.Sleep(ctx, delay); err != nil {
		return waitResult{}, err
	}
	a, err := g.Await(ctx, Wait{Request: Request{ClaimID: "claim-1", Payee: "acct_1", AmountMinor: 10_000, Amount: "100.00", Currency: "usd"},
		Policy: Policy{TTL: time.Hour, EscalationTTL: time.Hour}, Approvers: approvers}, Hooks{})
	return waitResult{a, g.Attempts()}, err
}

// A changed signal before any wait, or to a wait that reads nothing again
// (a run from before the signal), changes nothing: the wait is decided as
// if it had never come, in its first stage.
func TestAChangedSignalNobodyReadsChangesNothing(t *testing.T) {
	book, err := authority.Load("")
	require.NoError(t, err)
	for name, delay := range map[string]time.Duration{"during the wait": 0, "before it": 10 * time.Minute} {
		var ts testsuite.WorkflowTestSuite
		ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
		env := ts.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(waitAfter)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalChanged, nil) }, time.Minute)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, Input{Approver: "adjuster-17"}) }, 20*time.Minute)
		env.ExecuteWorkflow(waitAfter, delay, book.Approvers)
		require.NoError(t, env.GetWorkflowError(), name)
		var r waitResult
		require.NoError(t, env.GetWorkflowResult(&r))
		require.NotNil(t, r.Approval.Decision, name)
		assert.Equal(t, "adjuster-17", r.Approval.Decision.Approver, name)
		assert.Equal(t, StageWaiting, r.Approval.Stage, name)
		assert.False(t, r.Approval.Expired, name)
	}
}

// A refused attempt beyond the trail's bound is counted, not kept.
func TestRefusedAttemptsBeyondTheBoundAreCounted(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	var sends []send
	for i := range maxRefused + 8 {
		sends = append(sends, send{time.Duration(i+1) * time.Minute, SignalApprove, "not an object"})
	}
	sends = append(sends, send{time.Hour, SignalApprove, b.signed(w, time.Hour, "adjuster-17", Approve, 0, "")})
	r := b.run(w, "", sends...)
	assert.Equal(t, 8, r.Dropped)
	assert.Len(t, r.Attempts, maxRefused+1)
	require.NotNil(t, r.Approval.Decision)
}

// A signal's attempt records the verdict the signal asked for, whatever
// its receipt says, and is refused when they differ; the decide update,
// which names none, records the receipt's.
func TestAnAttemptRecordsTheVerdictAskedFor(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	r := b.run(w, "", send{time.Minute, SignalApprove, b.signed(w, time.Minute, "adjuster-17", Reject, 0, "not covered")},
		send{2 * time.Minute, SignalApprove, b.signed(w, 2*time.Minute, "adjuster-17", Approve, 0, "")})
	require.Len(t, r.Attempts, 2)
	assert.Equal(t, Approve, r.Attempts[0].Decision)
	assert.Equal(t, CodeWrongVerdict, r.Attempts[0].Code)
	assert.Equal(t, Approve, r.Approval.Decision.Verdict)

	u := b.run(w, "", send{time.Minute, UpdateDecide, b.signed(w, time.Minute, "adjuster-17", Reject, 0, "not covered")})
	require.Len(t, u.Attempts, 1)
	require.Len(t, b.answers, 1, "the update's sender is answered")
	require.NoError(t, b.answers[0].err)
	got, ok := b.answers[0].result.(Decision)
	require.True(t, ok, "%T", b.answers[0].result)
	assert.Equal(t, [3]string{string(Reject), "adjuster-17", "not covered"}, [3]string{string(got.Verdict), got.Approver, got.Reason},
		"the sender reads back the decision it made")
	assert.Equal(t, "update", u.Attempts[0].Channel)
	assert.Equal(t, Reject, u.Attempts[0].Decision)
	assert.Equal(t, Reject, u.Approval.Decision.Verdict)
}

// A hand-off in a run: recorded on the wait, which stays open with the
// colleague named, until the colleague decides.
func TestAHandOffLeavesTheWaitWithTheColleague(t *testing.T) {
	b := newRuleBook(t)
	w := b.wait(120_000, nil)
	r := b.run(w, "",
		send{time.Minute, UpdateDecide, b.handoff(w, time.Minute, "adjuster-17", "adjuster-21")},
		send{2 * time.Minute, SignalApprove, b.signed(w, 2*time.Minute, "adjuster-21", Approve, 0, "")})
	a := r.Approval
	require.Len(t, a.Handoffs, 1)
	assert.Equal(t, HandedOn{From: "adjuster-17", To: "adjuster-21", Note: "back on Monday", At: now.Add(time.Minute), ReceiptID: a.Handoffs[0].ReceiptID}, a.Handoffs[0])
	assert.Equal(t, "adjuster-21", a.AssignedTo())
	require.NotNil(t, a.Decision)
	assert.Equal(t, "adjuster-21", a.Decision.Approver)
	assert.Equal(t, []string{"change 1: open", "change 2: open", "change 3: closed"}, r.Trail)
}
