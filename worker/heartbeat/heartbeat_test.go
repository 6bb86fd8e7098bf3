package heartbeat

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// answered stands for a frontend that answers every heartbeat: it passes
// the heartbeat to the test environment, which keeps the attempt alive.
type answered struct{}

func (answered) RecordActivityHeartbeat(ctx context.Context, _ []byte, _ ...any) error {
	activity.RecordHeartbeat(ctx)
	return nil
}

// unanswered stands for a frontend out of reach, or one that no longer
// knows the attempt.
type unanswered struct{ err error }

func (u unanswered) RecordActivityHeartbeat(context.Context, []byte, ...any) error { return u.err }

const timeout = 1200 * time.Millisecond

// step runs for up to 3 s; gaveUp records when and why its context ended.
type step struct {
	gaveUp atomic.Pointer[ended]
}

type ended struct {
	after time.Duration
	cause error
}

func (s *step) Run(ctx context.Context) (string, error) {
	began := time.Now()
	select {
	case <-time.After(3 * time.Second):
		return "done", nil
	case <-ctx.Done():
		s.gaveUp.Store(&ended{after: time.Since(began), cause: context.Cause(ctx)})
		return "", ctx.Err()
	}
}

func wf(ctx workflow.Context) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    timeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var out string
	err := workflow.ExecuteActivity(ctx, "Run").Get(ctx, &out)
	return out, err
}

func run(t *testing.T, s *step, interceptors ...interceptor.WorkerInterceptor) (int32, error) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: interceptors})
	env.SetTestTimeout(time.Minute)
	var beats atomic.Int32
	env.SetOnActivityHeartbeatListener(func(*activity.Info, converter.EncodedValues) { beats.Add(1) })
	env.RegisterWorkflow(wf)
	env.RegisterActivity(s)
	env.ExecuteWorkflow(wf)
	return beats.Load(), env.GetWorkflowError()
}

// An activity that never heartbeats itself still heartbeats, so it outlives
// a heartbeat timeout shorter than its run; without the interceptor it would
// not.
func TestActivitiesHeartbeatWithoutAskingFor(t *testing.T) {
	s := &step{}
	beats, err := run(t, s, New(answered{}))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, beats, int32(2), "a beat every timeout/3 over 3 s, throttled by the SDK")
	assert.Nil(t, s.gaveUp.Load(), "answered heartbeats keep the lease")

	beats, err = run(t, &step{})
	assert.Zero(t, beats)
	assert.ErrorContains(t, err, "Heartbeat", "the control: no heartbeats, so the heartbeat timeout fires")
}

// Heartbeats the frontend does not answer leave the attempt's lease to run
// out: the activity's context ends with ErrLeaseLost a margin before the
// heartbeat timeout, and the step fails as given up, retryable.
func TestAnAttemptWhoseHeartbeatsGoUnansweredGivesItselfUp(t *testing.T) {
	s := &step{}
	_, err := run(t, s, New(unanswered{serviceerror.NewUnavailable("connection refused")}))
	require.Error(t, err)
	got := s.gaveUp.Load()
	require.NotNil(t, got, "the step's context never ended")
	assert.ErrorIs(t, got.cause, ErrLeaseLost)
	assert.Less(t, got.after, timeout, "given up before the server's timeout")
	assert.GreaterOrEqual(t, got.after, timeout-Margin(timeout)-50*time.Millisecond, "not before the lease's term")
	var app *temporal.ApplicationError
	require.ErrorAs(t, err, &app)
	assert.Equal(t, ErrorType, app.Type())
	assert.False(t, app.NonRetryable(), "another worker may take the step")
}

// The server saying it no longer knows the attempt (it timed out and went
// to another worker) ends it at that heartbeat.
func TestAnAttemptTheServerNoLongerKnowsEndsAtOnce(t *testing.T) {
	s := &step{}
	_, err := run(t, s, New(unanswered{serviceerror.NewNotFound("invalid activityID or activity already timed out or invoking workflow is completed")}))
	require.Error(t, err)
	got := s.gaveUp.Load()
	require.NotNil(t, got)
	assert.ErrorIs(t, got.cause, ErrTaskLost)
	assert.Less(t, got.after, timeout/3+200*time.Millisecond, "at the first heartbeat")
}
