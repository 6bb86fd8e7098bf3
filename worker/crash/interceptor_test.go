package crash

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

func TestPointKeys(t *testing.T) {
	c := claim.Claim{ID: "claim-7"}
	for _, tc := range []struct {
		in   any
		want claim.IdempotencyKey
	}{
		// Reads have no key: their step's key, from the claim they read.
		{activities.LoadClaimInput{Claim: c}, "claim-7:step1"},
		{activities.OpenApprovalInput{ClaimID: "claim-7"}, "claim-7:step5"},
		// Every side effect has its own key.
		{activities.TurnInput{Key: "claim-7:step2:turn2", Claim: c}, "claim-7:step2:turn2"},
		{activities.ToolInput{Key: "claim-7:step2:turn1:lookup_policy"}, "claim-7:step2:turn1:lookup_policy"},
		{activities.TriageInput{Key: "claim-7:step2", Claim: c}, "claim-7:step2"},
		{activities.AssessInput{Key: "claim-7:step4", AssessRequest: activities.AssessRequest{Claim: c}}, "claim-7:step4"},
		{activities.PayInput{Key: "claim-7:step6", ClaimID: "claim-7"}, "claim-7:step6"},
		{activities.NotifyInput{Key: "claim-7:step7", ClaimID: "claim-7"}, "claim-7:step7"},
		{activities.NoticeInput{Key: "claim-7:step5:remind", ClaimID: "claim-7"}, "claim-7:step5:remind"},
		{activities.CloseInput{Key: "claim-7:step8", ClaimID: "claim-7"}, "claim-7:step8"},
		{activities.AuditInput{Key: "claim-7:step9", ClaimID: "claim-7"}, "claim-7:step9"},
		{&activities.PayInput{Key: "claim-7:step6"}, "claim-7:step6"},
	} {
		got, ok := PointKey([]any{tc.in})
		assert.True(t, ok, "%T", tc.in)
		assert.Equal(t, tc.want, got, "%T", tc.in)
	}
	for _, none := range [][]any{nil, {nil}, {"claim-7:step6"}, {struct{ Key string }{"claim-7:step6"}},
		{activities.PayInput{}}, {(*activities.PayInput)(nil)}} {
		_, ok := PointKey(none)
		assert.False(t, ok, "%#v", none)
	}
}

// trace records, in order, what the activity did and where the injector
// would have killed the process.
type trace struct{ events []string }

func (tr *trace) add(e string) { tr.events = append(tr.events, e) }

// activityFn makes an activity that writes to tr and sends mail through m.
type activityFn func(tr *trace, m activities.Mailer) any

// runActivity runs one activity in a workflow on a test worker with the
// crash interceptor, and the mailer wrapped as the worker wraps it.
func runActivity(t *testing.T, spec, name string, fn activityFn, in any) (*trace, error) {
	t.Helper()
	pts, err := Parse(spec)
	require.NoError(t, err)
	inj := New(pts, filepath.Join(t.TempDir(), "fired"), slog.Default())
	tr := &trace{}
	inj.kill = func() { tr.add("kill") }

	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{inj.Interceptor()}})
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		return workflow.ExecuteActivity(ctx, name, in).Get(ctx, nil)
	}
	env.RegisterWorkflow(wf)
	env.RegisterActivityWithOptions(fn(tr, inj.Mailer(traceMailer{tr})), activity.RegisterOptions{Name: name})
	env.ExecuteWorkflow(wf)
	return tr, env.GetWorkflowError()
}

type traceMailer struct{ tr *trace }

func (m traceMailer) Send(context.Context, activities.Email) error { m.tr.add("send"); return nil }

func payClaimant(tr *trace, _ activities.Mailer) any {
	return func(_ context.Context, in activities.PayInput) error {
		tr.add("pay " + string(in.Key))
		return nil
	}
}

func closeClaim(tr *trace, _ activities.Mailer) any {
	return func(context.Context, activities.CloseInput) error {
		tr.add("close")
		return errors.New("the store is down")
	}
}

func notifyClaimant(tr *trace, m activities.Mailer) any {
	return func(ctx context.Context, in activities.NotifyInput) error {
		if err := m.Send(ctx, activities.Email{To: in.To}); err != nil {
			return err
		}
		tr.add("mark sent")
		return nil
	}
}

func openApproval(tr *trace, _ activities.Mailer) any {
	return func(context.Context, activities.OpenApprovalInput) error {
		tr.add("open")
		return nil
	}
}

func TestInterceptorFiresAroundTheActivity(t *testing.T) {
	pay := activities.PayInput{Key: "claim-7:step6", ClaimID: "claim-7"}
	tr, err := runActivity(t, "claim-7:6", "PayClaimant", payClaimant, pay)
	require.NoError(t, err)
	assert.Equal(t, []string{"kill", "pay claim-7:step6"}, tr.events, "before-effect: before the activity touches anything")

	tr, err = runActivity(t, "claim-7:6:after-effect", "PayClaimant", payClaimant, pay)
	require.NoError(t, err)
	assert.Equal(t, []string{"pay claim-7:step6", "kill"}, tr.events, "after-effect: after the activity returned")

	tr, err = runActivity(t, "claim-8:6:after-effect,claim-7:5", "PayClaimant", payClaimant, pay)
	require.NoError(t, err)
	assert.Equal(t, []string{"pay claim-7:step6"}, tr.events, "another claim's point, another step's")

	tr, err = runActivity(t, "claim-7:8:after-effect", "CloseClaim", closeClaim, activities.CloseInput{Key: "claim-7:step8", ClaimID: "claim-7"})
	require.Error(t, err)
	assert.Equal(t, []string{"close"}, tr.events, "a failed activity changed nothing to crash after")

	tr, err = runActivity(t, "claim-7:5", "OpenApproval", openApproval, activities.OpenApprovalInput{ClaimID: "claim-7"})
	require.NoError(t, err)
	assert.Equal(t, []string{"kill", "open"}, tr.events, "a read fires at its step's key")
}

// Notify's after-effect is between sending and recording the message
// sent, as it was inside the activity: the retry sends it again.
func TestMailerFiresBetweenSendingAndRecording(t *testing.T) {
	in := activities.NotifyInput{Key: "claim-7:step7", ClaimID: "claim-7", To: "ada@example.com"}
	tr, err := runActivity(t, "claim-7:7:after-effect", "NotifyClaimant", notifyClaimant, in)
	require.NoError(t, err)
	assert.Equal(t, []string{"send", "kill", "mark sent"}, tr.events, "once: the interceptor finds the point fired")

	tr, err = runActivity(t, "claim-7:7", "NotifyClaimant", notifyClaimant, in)
	require.NoError(t, err)
	assert.Equal(t, []string{"kill", "send", "mark sent"}, tr.events)
}

// Without the interceptor's key in the context the wrapped mailer only
// sends.
func TestMailerWithoutAKeyOnlySends(t *testing.T) {
	pts, err := Parse("claim-7:7:after-effect")
	require.NoError(t, err)
	inj := New(pts, filepath.Join(t.TempDir(), "fired"), slog.Default())
	kills := 0
	inj.kill = func() { kills++ }
	tr := &trace{}
	require.NoError(t, inj.Mailer(traceMailer{tr}).Send(context.Background(), activities.Email{}))
	assert.Equal(t, []string{"send"}, tr.events)
	assert.Zero(t, kills)
}
