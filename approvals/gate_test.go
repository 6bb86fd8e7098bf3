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

// waitResult is what waitOnce saw: the wait and the trail.
type waitResult struct {
	Approval *Approval `json:"approval"`
	Attempts []Attempt `json:"attempts"`
}

// waitOnce is a workflow that waits once for a decision on a small request
// (plain decisions: a run from before receipts), with the gate stamped
// when stamp names a build.
func waitOnce(ctx workflow.Context, stamp string, final Verdict, approvers authority.Directory) (waitResult, error) {
	g, err := Listen(ctx)
	if err != nil {
		return waitResult{}, err
	}
	if stamp != "" {
		g.Stamp("sha256:policy", func(workflow.Context) string { return stamp })
	}
	a, err := g.Await(ctx, Wait{Request: Request{ClaimID: "claim-1", Payee: "acct_1", AmountMinor: 10_000, Amount: "100.00", Currency: "usd"},
		Policy: Policy{TTL: time.Hour, EscalationTTL: time.Hour, FinalOutcome: final}, Approvers: approvers}, Hooks{})
	return waitResult{a, g.Attempts()}, err
}

func runWait(t *testing.T, stamp string, final Verdict, signals ...any) waitResult {
	t.Helper()
	book, err := authority.Load("")
	require.NoError(t, err)
	var r waitResult
	runGate(t, waitOnce, &r, signals, stamp, final, book.Approvers)
	return r
}

// runGate runs the workflow wf with args, sending the signals (approve) a
// minute apart, and reads its result into out.
func runGate(t *testing.T, wf, out any, signals []any, args ...any) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(wf)
	for i, s := range signals {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalApprove, s) }, time.Duration(i+1)*time.Minute)
	}
	env.ExecuteWorkflow(wf, args...)
	require.NoError(t, env.GetWorkflowError())
	require.NoError(t, env.GetWorkflowResult(out))
}

// A stamped gate has every attempt, refused or accepted, and the decision
// name the build that handled it and the run's policy version.
func TestStampedDecisionsNameTheirBuildAndPolicy(t *testing.T) {
	r := runWait(t, "build-A", Reject, "not an object", Input{Approver: "adjuster-17"})
	require.NotNil(t, r.Approval.Decision)
	d := r.Approval.Decision
	assert.Equal(t, "adjuster-17", d.Approver)
	assert.Equal(t, "build-A", d.BuildID)
	assert.Equal(t, "sha256:policy", d.PolicyVersion)
	require.Len(t, r.Attempts, 2)
	for i, at := range r.Attempts {
		assert.Equal(t, [2]string{"build-A", "sha256:policy"}, [2]string{at.BuildID, at.PolicyVersion}, "attempt %d (accepted %v)", i, at.Accepted)
	}
	assert.False(t, r.Attempts[0].Accepted)
}

// The policy's own decision on expiry names them too.
func TestStampedPolicyOutcomeNamesItsBuild(t *testing.T) {
	r := runWait(t, "build-B", Approve)
	require.True(t, r.Approval.Expired)
	require.NotNil(t, r.Approval.Decision)
	assert.Equal(t, "policy", r.Approval.Decision.Approver)
	assert.Equal(t, "build-B", r.Approval.Decision.BuildID)
	assert.Equal(t, "sha256:policy", r.Approval.Decision.PolicyVersion)
}

// A gate never stamped (a run from before) records neither.
func TestUnstampedDecisionsNameNoBuild(t *testing.T) {
	r := runWait(t, "", Reject, Input{Approver: "adjuster-17"})
	require.NotNil(t, r.Approval.Decision)
	assert.Empty(t, r.Approval.Decision.BuildID)
	assert.Empty(t, r.Approval.Decision.PolicyVersion)
	require.Len(t, r.Attempts, 1)
	assert.Empty(t, r.Attempts[0].BuildID)
}

// hookTrail is a workflow that waits once with hooks that note, in order,
// each fired timer and each notice; a reminder that takes remindFor (a
// timer of its own) can use up the time to the escalation.
func hookTrail(ctx workflow.Context, remindFor time.Duration, approvers authority.Directory) ([]string, error) {
	g, err := Listen(ctx)
	if err != nil {
		return nil, err
	}
	var trail []string
	note := func(what string) func(workflow.Context, *Approval) error {
		return func(ctx workflow.Context, _ *Approval) error {
			trail = append(trail, what)
			if what == "remind" && remindFor > 0 {
				return workflow.Sleep(ctx, remindFor)
			}
			return nil
		}
	}
	_, err = g.Await(ctx, Wait{Request: Request{ClaimID: "claim-1", Payee: "acct_1", AmountMinor: 10_000, Amount: "100.00", Currency: "usd"},
		Policy: Policy{TTL: 2 * time.Hour, EscalationTTL: time.Hour, FinalOutcome: Reject}, Approvers: approvers},
		Hooks{Remind: note("remind"), Escalate: note("escalate"), TimerFired: func() { trail = append(trail, "timer fired") }})
	return trail, err
}

func runHookTrail(t *testing.T, remindFor time.Duration, signals ...any) []string {
	t.Helper()
	book, err := authority.Load("")
	require.NoError(t, err)
	var trail []string
	runGate(t, hookTrail, &trail, signals, remindFor, book.Approvers)
	return trail
}

// TimerFired tells the run that a deadline was reached by its timer (so the
// task before the wait completed) and only then: not when the deadline had
// already passed as the wait came to it, not when a signal woke the wait.
func TestTimerFiredOnlyWhenATimerReachedTheDeadline(t *testing.T) {
	assert.Equal(t, []string{"timer fired", "remind", "timer fired", "escalate", "timer fired"}, runHookTrail(t, 0),
		"every deadline of an unanswered wait is a fired timer")
	assert.Equal(t, []string{"timer fired", "remind", "escalate", "timer fired"}, runHookTrail(t, 90*time.Minute),
		"a reminder that outlasts the escalation deadline: the escalation follows it with no timer between")
	assert.Equal(t, []string{"timer fired", "remind", "escalate", "timer fired"}, runHookTrail(t, 60*time.Minute),
		"a reminder that ends at the escalation deadline: no timer runs for it")
	assert.Empty(t, runHookTrail(t, 0, Input{Approver: "adjuster-17"}), "a decision woke the wait before any deadline")
}
