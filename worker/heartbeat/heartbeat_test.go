package heartbeat

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

func slowStep(ctx context.Context) (string, error) {
	time.Sleep(time.Second)
	return "done", nil
}

func wf(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    300 * time.Millisecond,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, slowStep).Get(ctx, &out)
	return out, err
}

func run(t *testing.T, interceptors ...interceptor.WorkerInterceptor) (int32, error) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: interceptors})
	var beats atomic.Int32
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	env.RegisterWorkflow(wf)
	env.RegisterActivity(slowStep)
	env.ExecuteWorkflow(wf)
	return beats.Load(), env.GetWorkflowError()
}

// An activity that never heartbeats itself still heartbeats, so it outlives
// a heartbeat timeout shorter than its run; without the interceptor it would
// not.
func TestActivitiesHeartbeatWithoutAskingFor(t *testing.T) {
	beats, err := run(t, New())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, beats, int32(3), "a beat every timeout/3, throttled by the SDK")

	beats, err = run(t)
	assert.Zero(t, beats)
	assert.ErrorContains(t, err, "Heartbeat", "the control: no heartbeats, so the heartbeat timeout fires")
}
