package approvals

import (
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

// holdResult is what holdOnce saw: the wait, the trail and how often the
// overdue hook ran.
type holdResult struct {
	Approval *Approval `json:"approval"`
	Attempts []Attempt `json:"attempts"`
	Overdue  int       `json:"overdue"`
}

// holdOnce waits once under a policy that holds an unanswered wait open:
// an hour with the adjusters, an hour with the supervisors, then overdue;
// notAfter, when positive, is the run's age cap from the start.
func holdOnce(ctx workflow.Context, notAfter time.Duration, approvers authority.Directory) (holdResult, error) {
	g, err := Listen(ctx)
	if err != nil {
		return holdResult{}, err
	}
	var res holdResult
	w := Wait{Request: Request{ClaimID: "claim-1", Payee: "acct_1", AmountMinor: 10_000, Amount: "100.00", Currency: "usd"},
		Policy: Policy{TTL: time.Hour, EscalationTTL: time.Hour, FinalOutcome: Hold}, Approvers: approvers}
	if notAfter > 0 {
		w.NotAfter = workflow.Now(ctx).Add(notAfter)
	}
	a, err := g.Await(ctx, w, Hooks{Overdue: func(workflow.Context, *Approval) error { res.Overdue++; return nil }})
	res.Approval, res.Attempts = a, g.Attempts()
	return res, err
}

// runHold runs holdOnce, sending each decision at its time after the start.
func runHold(t *testing.T, notAfter time.Duration, decisions map[time.Duration]Input) holdResult {
	t.Helper()
	book, err := authority.Load("")
	require.NoError(t, err)
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(holdOnce)
	for at, in := range decisions {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, in) }, at)
	}
	env.ExecuteWorkflow(holdOnce, notAfter, book.Approvers)
	require.NoError(t, env.GetWorkflowError())
	var r holdResult
	require.NoError(t, env.GetWorkflowResult(&r))
	return r
}

// Nobody decided by the second deadline: under hold the wait neither
// rejects nor approves; it stays with the supervisors, flagged overdue
// once, and a supervisor's decision days later is the outcome.
func TestHoldWaitsForAPerson(t *testing.T) {
	r := runHold(t, 0, map[time.Duration]Input{
		30 * time.Hour:  {Approver: "adjuster-17"},  // an adjuster may not decide an escalated claim
		120 * time.Hour: {Approver: "supervisor-3"}, // five days on
	})
	a := r.Approval
	require.NotNil(t, a.Decision, "a person decided")
	assert.Equal(t, "supervisor-3", a.Decision.Approver)
	assert.Equal(t, Approve, a.Decision.Verdict)
	assert.False(t, a.Expired, "silence decided nothing")
	assert.False(t, a.Capped)
	assert.Equal(t, StageEscalated, a.Stage)
	assert.Equal(t, a.RequestedAt.Add(2*time.Hour), a.OverdueAt, "overdue at the second deadline")
	assert.Equal(t, 1, r.Overdue, "the overdue notice is sent once")
	require.Len(t, r.Attempts, 2)
	assert.False(t, r.Attempts[0].Accepted)
	assert.Equal(t, CodeNeedSupervisor, r.Attempts[0].Code)
}

// A held wait ends at the run's age cap, never by silence deciding.
func TestHoldEndsAtTheAgeCap(t *testing.T) {
	r := runHold(t, 10*time.Hour, nil)
	a := r.Approval
	assert.Nil(t, a.Decision)
	assert.False(t, a.Expired)
	assert.True(t, a.Capped, "the age cap ended the hold")
	assert.Equal(t, a.RequestedAt.Add(10*time.Hour), a.Deadline)
	assert.Equal(t, 1, r.Overdue)
}

// Decided in time, a held policy changes nothing: no overdue flag, no notice.
func TestHoldDecidedInTime(t *testing.T) {
	r := runHold(t, 0, map[time.Duration]Input{30 * time.Minute: {Approver: "adjuster-17"}})
	require.NotNil(t, r.Approval.Decision)
	assert.True(t, r.Approval.OverdueAt.IsZero())
	assert.Zero(t, r.Overdue)
}

// With no age cap, a held wait still ends: MaxHold after it became overdue.
func TestHoldWithoutACapEnds(t *testing.T) {
	r := runHold(t, 0, nil)
	assert.True(t, r.Approval.Capped)
	assert.Equal(t, r.Approval.OverdueAt.Add(MaxHold), r.Approval.Deadline)
}

func TestWithDefaultsKeepsHold(t *testing.T) {
	assert.Equal(t, Hold, Policy{FinalOutcome: Hold}.WithDefaults().FinalOutcome)
	assert.Equal(t, Reject, Policy{FinalOutcome: "maybe"}.WithDefaults().FinalOutcome)
}
