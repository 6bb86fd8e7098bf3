package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// payOnce runs PayClaimant under a retry policy of 10 attempts, with no
// loop around it: the error the workflow sees is what the step handed back.
func payOnce(ctx workflow.Context, in PayInput) (PayResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 10},
	})
	var r PayResult
	err := workflow.ExecuteActivity(ctx, (*Activities).PayClaimant, in).Get(ctx, &r)
	return r, err
}

// Stripe answering 503 to everything: the payment retries once, then hands
// the wait back to its workflow (DependencyDown, naming Stripe and the
// attempt) rather than burning its policy's ten attempts; nothing is paid.
func TestAPaymentHandsAStripeOutageBackAfterItsFirstAttempts(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	f.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, Times: -1})
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.RegisterWorkflow(payOnce)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "claim-0061"})
	ownedByTestWorkflow(t, a, "claim-0061")
	in := payInput("claim-0061", 184000)
	in.WaitsOutOutages = true
	env.ExecuteWorkflow(payOnce, in)
	err := env.GetWorkflowError()
	require.Error(t, err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, ErrDependencyDown, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	var dep string
	var attempt int32
	require.NoError(t, appErr.Details(&dep, &attempt))
	assert.Equal(t, DependencyStripe, dep)
	assert.Equal(t, int32(OutageAfter), attempt)
	assert.Len(t, f.posts(), OutageAfter, "one POST an attempt, no more")
	assert.Empty(t, transfers(t, a, "claim-0061"))
}

// What is not an outage stays what it was: a refusal, a key in use, an
// attempt given up (its lease ran out), and any error of a first attempt.
func TestOnlyAnUnavailableDependencyIsAnOutage(t *testing.T) {
	for name, err := range map[string]error{
		"refused":       temporal.NewNonRetryableApplicationError("stripe 400", ErrPaymentRefused, nil),
		"key in use":    temporal.NewApplicationError("stripe 409", "StripeKeyInUse", nil),
		"given up":      context.Canceled,
		"model refused": temporal.NewNonRetryableApplicationError("400", "ModelInvalidRequest", nil),
	} {
		assert.False(t, unavailable(DependencyStripe, err), name)
		assert.False(t, unavailable(DependencyModel, err), name)
	}
	assert.True(t, unavailable(DependencyStripe, temporal.NewApplicationError("stripe 503", errStripeUnavailable, nil)))
	assert.True(t, unavailable(DependencyStripe, errors.New("dial tcp 127.0.0.1:12111: connection refused")))
	assert.False(t, unavailable(DependencyModel, errors.New("dial tcp: connection refused")), "a model error is typed by the provider")
	assert.False(t, unavailable(DependencyStripe, context.Canceled))
	a := &Activities{}
	plain := errors.New("boom")
	assert.Same(t, plain, a.outage(context.Background(), DependencyStripe, true, plain), "outside an activity nothing changes")
}
