package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/model"
)

// waitingModel hands every call's wait back, as the OpenAI provider does
// when the shared budget has no room in time, and says whether the call
// was marked as one whose workflow waits itself.
type waitingModel struct {
	RulesModel
	durable *bool
}

func (m waitingModel) Assess(ctx context.Context, _ AssessRequest) (Reply[Assessment], error) {
	*m.durable = model.DurableWait(ctx)
	return Reply[Assessment]{}, temporal.NewNonRetryableApplicationError("no model capacity", ErrModelBudgetWait, nil, 3*time.Minute)
}

// A wait handed back reaches the workflow with the attempt that handed it
// back, so the attempts before it count against the step cap.
func TestAHandedBackWaitCarriesItsAttempt(t *testing.T) {
	a := newActivities(t, nil)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	var durable bool
	a.Model = waitingModel{durable: &durable}
	_, err := as[AssessResult](t, a, runOf(c.ID, testRun, false), a.AssessClaim,
		AssessInput{Key: claim.StepKey(c.ID, claim.StepAssess), AssessRequest: AssessRequest{Claim: c}, WaitsForBudget: true})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, ErrModelBudgetWait, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	var wait time.Duration
	var attempt int32
	require.NoError(t, appErr.Details(&wait, &attempt))
	assert.Equal(t, 3*time.Minute, wait)
	assert.EqualValues(t, 1, attempt)
	assert.True(t, durable, "the input's WaitsForBudget marks the call")
}
