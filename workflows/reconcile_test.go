package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
)

func reconcileEnv(t *testing.T, got *[]activities.ReconcilePaymentsInput) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(ReconcileWorkflow, workflow.RegisterOptions{Name: ReconcileWorkflowType})
	env.OnActivity(a.ReconcilePayments, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ReconcilePaymentsInput) (activities.ReconcileReport, error) {
			*got = append(*got, in)
			return activities.ReconcileReport{ID: string(in.Key), Since: in.Since, Until: in.Until,
				Counts: map[string]int{activities.ReconcileMatched: 1, activities.ReconcileOrphaned: 1}, Unmatched: 1,
				Entries: []activities.ReconcileEntry{{ClaimID: "claim-9", Category: activities.ReconcileOrphaned, TransferIDs: []string{"tr_9"}}}}, nil
		})
	return env
}

func TestReconcileWorkflowDefaultsToTwiceTheIntervalBackFromNow(t *testing.T) {
	var got []activities.ReconcilePaymentsInput
	env := reconcileEnv(t, &got)
	start := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	env.SetStartTime(start)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "claims-reconcile-2026-11-29T10:00:00Z"})
	env.ExecuteWorkflow(ReconcileWorkflowType, ReconcileInput{Interval: 30 * time.Minute})
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var rep ReconcileReport
	require.NoError(t, env.GetWorkflowResult(&rep))

	require.Len(t, got, 1, "one activity does the work")
	in := got[0]
	assert.True(t, in.Until.Equal(start), "until defaults to the workflow's start: %s", in.Until)
	assert.True(t, in.Since.Equal(start.Add(-time.Hour)), "since defaults to until - 2 × interval: %s", in.Since)
	assert.Equal(t, "claims-reconcile-2026-11-29T10:00:00Z:reconcile", string(in.Key), "keyed by the workflow ID")
	assert.Equal(t, "claims-reconcile-2026-11-29T10:00:00Z", in.WorkflowID)
	assert.True(t, in.Started.Equal(start))
	assert.Equal(t, 1, rep.Unmatched)
	assert.Equal(t, "claim-9", rep.Entries[0].ClaimID)
}

func TestReconcileWorkflowTakesAnExplicitWindowAndKey(t *testing.T) {
	var got []activities.ReconcilePaymentsInput
	env := reconcileEnv(t, &got)
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	env.ExecuteWorkflow(ReconcileWorkflow, ReconcileInput{Since: since, Until: until, Key: "nightly-2026-11-01", MaxEntries: 5, InFlightGrace: -1})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, got, 1)
	assert.True(t, got[0].Since.Equal(since) && got[0].Until.Equal(until))
	assert.Equal(t, "nightly-2026-11-01", string(got[0].Key))
	assert.Equal(t, 5, got[0].MaxEntries)
	assert.Equal(t, time.Duration(-1), got[0].InFlightGrace)

	// With no interval and no since: the default hourly schedule's window.
	got = nil
	env = reconcileEnv(t, &got)
	env.ExecuteWorkflow(ReconcileWorkflow, ReconcileInput{})
	require.NoError(t, env.GetWorkflowError())
	require.Len(t, got, 1)
	assert.Equal(t, 2*DefaultReconcileEvery, got[0].Until.Sub(got[0].Since))
}

func TestReconcileWorkflowRefusesAnEmptyWindow(t *testing.T) {
	var got []activities.ReconcilePaymentsInput
	env := reconcileEnv(t, &got)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	env.ExecuteWorkflow(ReconcileWorkflow, ReconcileInput{Since: at, Until: at})
	err := env.GetWorkflowError()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Equal(t, activities.ErrInvalidInput, appErr.Type())
	assert.Empty(t, got, "nothing is read for an empty window")
}

func TestReconcileScheduleComparison(t *testing.T) {
	every := 2 * time.Hour
	s := client.Schedule{Spec: &client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}, Action: reconcileAction(every)}
	assert.True(t, reconcileScheduleIs(s, every))
	assert.False(t, reconcileScheduleIs(s, time.Hour), "another interval is updated")
	s.Action.(*client.ScheduleWorkflowAction).TaskQueue = "elsewhere"
	assert.False(t, reconcileScheduleIs(s, every), "another task queue is updated")
	assert.Equal(t, 4*time.Hour, reconcileAction(every).WorkflowExecutionTimeout)
	assert.Equal(t, time.Hour, reconcileAction(10*time.Minute).WorkflowExecutionTimeout)
}
