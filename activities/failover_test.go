package activities

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

// simAt serves a modelsim and returns the OpenAI-compatible model that asks
// it for name, set by the variables of env (MODEL_ or MODEL_FALLBACK_).
func simAt(t *testing.T, name, env string) (*model.OpenAIModel, *modelsim.Server) {
	t.Helper()
	sim := modelsim.New("")
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	m, err := model.NewOpenAIModel(model.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: name, Env: env, Timeout: 5 * time.Second})
	require.NoError(t, err)
	return m, sim
}

// failoverRig is a worker's activities with a primary model and, where
// failover is allowed, a fallback, each its own modelsim.
type failoverRig struct {
	a                 *Activities
	primary, fallback *modelsim.Server
	claim             claim.Claim
}

// newFailoverRig registers claim id for the test workflow environment's
// run; fallback says whether the worker has a fallback model.
func newFailoverRig(t *testing.T, id string, fallback bool) *failoverRig {
	t.Helper()
	a := newActivities(t, nil)
	c := registerFor(t, a, id, 64000, "default-test-run-id")
	r := &failoverRig{a: a, claim: c}
	a.Model, r.primary = simAt(t, "primary-1", "MODEL_")
	if fallback {
		a.Fallback, r.fallback = simAt(t, "fallback-1", "MODEL_FALLBACK_")
		a.FallbackAfter = 3
	}
	return r
}

// modelRetry is the model steps' retry policy (workflows.modelRegular's),
// so attempts and their numbers are Temporal's.
var modelRetry = &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 6}

func assessWorkflow(ctx workflow.Context, in AssessInput) (AssessResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 2 * time.Minute, RetryPolicy: modelRetry})
	var r AssessResult
	err := workflow.ExecuteActivity(ctx, (*Activities).AssessClaim, in).Get(ctx, &r)
	return r, err
}

func turnWorkflow(ctx workflow.Context, in TurnInput) (TurnResult, error) {
	ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 2 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute, RetryPolicy: modelRetry})
	var r TurnResult
	err := workflow.ExecuteLocalActivity(ctx, (*Activities).TriageTurn, in).Get(ctx, &r)
	return r, err
}

// withRetries runs wf (assessWorkflow or turnWorkflow) for the rig's claim and
// returns its result and how many calls failed over.
func withRetries[T any](t *testing.T, r *failoverRig, wf, in any) (T, float64, error) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	m := newCaptured()
	ts.SetMetricsHandler(m)
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(r.a)
	env.RegisterWorkflow(wf)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: r.claim.ID})
	env.ExecuteWorkflow(wf, in)
	require.True(t, env.IsWorkflowCompleted())
	failovers, _ := m.get(metrics.ModelFailovers)
	var out T
	if err := env.GetWorkflowError(); err != nil {
		return out, failovers, err
	}
	require.NoError(t, env.GetWorkflowResult(&out))
	return out, failovers, nil
}

func (r *failoverRig) assess() AssessInput {
	cov := claim.Coverage{CoveredMinor: r.claim.AmountMinor}
	return AssessInput{Key: claim.StepKey(r.claim.ID, claim.StepAssess), AssessRequest: AssessRequest{Claim: r.claim,
		Triage: Triage{Category: "water-damage", Severity: "medium", FraudScore: 5, Summary: "a burst pipe"}, Coverage: cov},
		Price: Price{InMicrosPerMTok: 2_500_000, OutMicrosPerMTok: 10_000_000}}
}

func (r *failoverRig) turn() TurnInput {
	return TurnInput{Key: claim.StepKey(r.claim.ID, claim.StepTriage).Sub("turn1"), Claim: r.claim, Turn: 1,
		Price: Price{InMicrosPerMTok: 2_500_000, OutMicrosPerMTok: 10_000_000}}
}

func injectN(sim *modelsim.Server, f modelsim.Fault, n int) {
	for range n {
		sim.Inject(f)
	}
}

// The primary fails its three attempts with 500s: the fourth asks the
// fallback, once, and the recorded answer, the ledger and its cost name
// the fallback.
func TestAStepFailsOverOnceThePrimaryFailedItsAttempts(t *testing.T) {
	r := newFailoverRig(t, "claim-0301", true)
	injectN(r.primary, modelsim.ServerError, 10)
	res, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)

	assert.Equal(t, "openai/fallback-1", res.Model, "the answer names the model that gave it")
	assert.EqualValues(t, 4, res.Attempt)
	assert.Len(t, r.primary.Calls(), 3, "the primary is asked for its three attempts")
	assert.Len(t, r.fallback.Calls(), 1, "the fallback once, on the fourth")
	assert.Equal(t, r.a.Fallback.PromptVersion(), res.PromptVersion)
	assert.Equal(t, int64(64000), res.Output.RecommendedMinor)
	assert.Positive(t, res.Usage.CostMicros, "the fallback's tokens are counted at the run's price, as the primary's")
	assert.Equal(t, res.Usage.CostMicros, r.assess().Price.Cost(res.Usage.TokensIn, res.Usage.TokensOut))
	assert.Equal(t, 1.0, failovers)

	calls, err := r.a.Store.ModelCalls(context.Background(), r.claim.ID)
	require.NoError(t, err)
	require.Len(t, calls, 1, "failed attempts bill nothing")
	assert.Equal(t, "openai/fallback-1", calls[0].Provider)
	assert.Equal(t, 4, calls[0].Attempt)
	assert.Equal(t, res.OutputSHA256, calls[0].OutputSHA256)
}

// A triage turn fails over the same way; a fallback's answer is never
// free to ask again (after a crash the step starts with the primary).
func TestATriageTurnFailsOverAndIsNotFreeToRepeat(t *testing.T) {
	r := newFailoverRig(t, "claim-0302", true)
	injectN(r.primary, modelsim.ServerError, 3)
	res, failovers, err := withRetries[TurnResult](t, r, turnWorkflow, r.turn())
	require.NoError(t, err)
	assert.Equal(t, "openai/fallback-1", res.Model)
	assert.EqualValues(t, 4, res.Attempt)
	assert.NotEmpty(t, res.ToolCalls, "the fallback plays the loop like the primary")
	assert.False(t, res.Deterministic)
	assert.Len(t, r.primary.Calls(), 3)
	assert.Len(t, r.fallback.Calls(), 1)
	assert.Equal(t, 1.0, failovers)

	// Even the rules model, free and deterministic as a primary, is not
	// as a fallback.
	r = rulesAsFallback(t, "claim-0303")
	res, _, err = withRetries[TurnResult](t, r, turnWorkflow, r.turn())
	require.NoError(t, err)
	assert.Equal(t, RulesModel{}.Name(), res.Model)
	assert.Equal(t, RulesModel{}.PromptVersion(), res.PromptVersion)
	assert.False(t, res.Deterministic)
}

// Without a fallback, the same failures keep retrying the primary.
func TestWithoutAFallbackThePrimaryIsRetried(t *testing.T) {
	r := newFailoverRig(t, "claim-0304", false)
	injectN(r.primary, modelsim.ServerError, 5)
	res, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.Equal(t, "openai/primary-1", res.Model)
	assert.EqualValues(t, 6, res.Attempt)
	assert.Len(t, r.primary.Calls(), 6)
	assert.Zero(t, failovers)
}

// Within its attempts the primary's own answer is the one recorded.
func TestThePrimaryAnswersWithinItsAttempts(t *testing.T) {
	r := newFailoverRig(t, "claim-0305", true)
	injectN(r.primary, modelsim.ServerError, 2)
	res, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.Equal(t, "openai/primary-1", res.Model)
	assert.EqualValues(t, 3, res.Attempt)
	assert.Empty(t, r.fallback.Calls())
	assert.Zero(t, failovers)
}

// A refusal the retry cannot fix ends the step: no failover. Answers that
// break the schema go to a human, from the primary.
func TestARefusalDoesNotFailOver(t *testing.T) {
	r := newFailoverRig(t, "claim-0306", true)
	r.a.FallbackAfter = 1
	r.primary.Inject(modelsim.BadRequest)
	_, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelRequest, appErr.Type())
	assert.Len(t, r.primary.Calls(), 1)
	assert.Empty(t, r.fallback.Calls(), "a 400 is not the provider being down")
	assert.Zero(t, failovers)

	r = newFailoverRig(t, "claim-0307", true)
	r.a.FallbackAfter = 1
	injectN(r.primary, modelsim.Invalid, 3)
	res, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.Equal(t, "openai/primary-1", res.Model)
	assert.True(t, res.Output.NeedsReview, "no valid answer: a human decides")
	assert.EqualValues(t, 1, res.Attempt)
	assert.Empty(t, r.fallback.Calls())
	assert.Zero(t, failovers)
}

// A fallback that fails too is asked once per attempt, and the step fails
// when its attempts run out, with the fallback's error naming its
// variables.
func TestTheFallbackIsAskedOncePerAttempt(t *testing.T) {
	r := newFailoverRig(t, "claim-0308", true)
	injectN(r.primary, modelsim.ServerError, 10)
	injectN(r.fallback, modelsim.ServerError, 10)
	_, failovers, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelUnavailable, appErr.Type())
	assert.Len(t, r.primary.Calls(), 3)
	assert.Len(t, r.fallback.Calls(), 3, "attempts 4, 5 and 6: one request each")
	assert.Equal(t, 3.0, failovers)

	r = newFailoverRig(t, "claim-0309", true)
	injectN(r.primary, modelsim.ServerError, 3)
	r.fallback.Inject(modelsim.Unauthorized)
	_, _, err = withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelAuth, appErr.Type())
	assert.Contains(t, appErr.Error(), "check MODEL_FALLBACK_API_KEY")
	assert.Len(t, r.fallback.Calls(), 1, "a refusal ends the step")
}

// An assessment is free to ask for again only when the rules model, as the
// primary, gave it: a real model's is not, nor the rules' as a fallback
// (after a crash the step starts with the primary, which may answer
// otherwise).
func TestAnAssessmentIsFreeToRepeatOnlyFromTheRulesAsPrimary(t *testing.T) {
	r := newFailoverRig(t, "claim-0305", false)
	res, _, err := withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.False(t, res.FreeToRepeat(), "a real model's answer costs to ask again")

	r = newFailoverRig(t, "claim-0306", false)
	r.a.Model = RulesModel{}
	res, _, err = withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.Equal(t, RulesModel{}.Name(), res.Model)
	assert.True(t, res.FreeToRepeat(), "the rules as the primary answer the same, at no cost")

	r = rulesAsFallback(t, "claim-0307")
	res, _, err = withRetries[AssessResult](t, r, assessWorkflow, r.assess())
	require.NoError(t, err)
	assert.Equal(t, RulesModel{}.Name(), res.Model)
	assert.False(t, res.FreeToRepeat(), "the rules as a fallback are not what a retry asks first")
}

// rulesAsFallback is a rig whose primary fails its first two attempts, so
// the rules model, its fallback, answers the third.
func rulesAsFallback(t *testing.T, id string) *failoverRig {
	t.Helper()
	r := newFailoverRig(t, id, false)
	r.a.Fallback, r.a.FallbackAfter = RulesModel{}, 2
	injectN(r.primary, modelsim.ServerError, 2)
	return r
}
