package whatif

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/workflows"
)

// claimIDs are n claim IDs.
func claimIDs(n int) []string {
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("claim-%04d", i))
	}
	return ids
}

// runWhatIf runs the what-if workflow over in with each claim costing
// costMicros, and returns its summary and the claims it started.
func runWhatIf(t *testing.T, in Input, costMicros int64) (Summary, []string) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var started []string
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, c ClaimInput) (Row, error) {
		started = append(started, c.ClaimID)
		return Row{ClaimID: c.ClaimID, Changed: c.ClaimID == "claim-0001", Now: Side{Usage: Usage{CostMicros: costMicros}}}, nil
	}, workflow.RegisterOptions{Name: ClaimWorkflowName})
	env.ExecuteWorkflow(WorkflowName, in)
	require.True(t, env.IsWorkflowCompleted())
	require.NoError(t, env.GetWorkflowError())
	var sum Summary
	require.NoError(t, env.GetWorkflowResult(&sum))
	return sum, started
}

func TestTheSpendCapStopsStartingClaims(t *testing.T) {
	sum, started := runWhatIf(t, Input{ClaimIDs: claimIDs(20), Concurrency: 2, SpendCapMicros: 10_000}, 1_500)
	// 1,500 a claim: the cap is reached after the 7th; the claim in flight
	// beside it finishes, so at most one more per slot is spent.
	assert.True(t, sum.StoppedBySpend)
	assert.Len(t, started, sum.Started)
	assert.GreaterOrEqual(t, sum.SpentMicros, int64(10_000))
	assert.LessOrEqual(t, sum.SpentMicros, int64(10_000+2*1_500), "the overshoot is at most one claim per slot")
	assert.Equal(t, claimIDs(20)[sum.Started:], sum.NotStarted, "the claims never started are listed")
	assert.Equal(t, sum.Started, sum.Evaluated)
	assert.Equal(t, 1, sum.Changed)
}

func TestAWhatIfContinuesAsNewCarryingItsCounts(t *testing.T) {
	// More claims than one run of the what-if starts: it continues as new
	// with the counts so far, and the continued run finishes the rest.
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, c ClaimInput) (Row, error) {
		return Row{ClaimID: c.ClaimID, Now: Side{Usage: Usage{CostMicros: 10}}}, nil
	}, workflow.RegisterOptions{Name: ClaimWorkflowName})
	env.ExecuteWorkflow(WorkflowName, Input{ClaimIDs: claimIDs(batch + 20), Concurrency: 8})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, env.GetWorkflowError(), &can)
	var next Input
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	assert.Equal(t, batch, next.Progress.Started)
	assert.Equal(t, batch, next.Progress.Evaluated)
	assert.Equal(t, int64(10*batch), next.Progress.SpentMicros)

	sum, started := runWhatIf(t, next, 10)
	assert.False(t, sum.StoppedBySpend)
	assert.Empty(t, sum.NotStarted)
	assert.Equal(t, batch+20, sum.Evaluated)
	assert.Equal(t, int64(10*(batch+20)), sum.SpentMicros)
	assert.ElementsMatch(t, claimIDs(batch + 20)[batch:], started, "the continued run starts where the first stopped")
}

func TestAWhatIfRefusesAnEmptyOrHugeSample(t *testing.T) {
	for _, n := range []int{0, MaxClaims + 1} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(Workflow, workflow.RegisterOptions{Name: WorkflowName})
		env.ExecuteWorkflow(WorkflowName, Input{ClaimIDs: claimIDs(n)})
		require.True(t, env.IsWorkflowCompleted())
		assert.ErrorContains(t, env.GetWorkflowError(), "claim_ids", "%d claims", n)
	}
}

func TestAReworderedReasonIsNoChangeButAnotherRuleIs(t *testing.T) {
	route := func(reasons ...string) workflows.Route {
		return workflows.Route{Route: workflows.RouteHuman, PayoutMinor: 184000, Reasons: reasons}
	}
	over := "payout 1840.00 is above the auto-approve limit 1000.00"
	r := Row{Then: Side{Route: route(over, "triage asks for review: possible staged damage")},
		Now: Side{Route: route(over, "triage asks for review: the damage may have been staged")}}
	compare(&r)
	assert.False(t, r.Changed, "the same rules sent it to a human; the model worded its reason otherwise")

	r = Row{Then: Side{Route: route(over)}, Now: Side{Route: route(over, "fraud score 80 is at or over the review threshold 50")}}
	compare(&r)
	assert.True(t, r.Changed)
	assert.Equal(t, []string{"fraud score 80 is at or over the review threshold 50"}, r.ReasonsAdded)

	r = Row{Now: Side{Route: route(over)}} // the recorded route is unknown
	compare(&r)
	assert.False(t, r.Changed)
	assert.Contains(t, r.Note, "not compared")
}

func TestToolCallsMatchByTheirArgumentsAsJSONValues(t *testing.T) {
	assert.Equal(t, toolKey("prior_claims", `{"b":1, "a":"x"}`), toolKey("prior_claims", `{"a":"x","b":1}`))
	assert.NotEqual(t, toolKey("t", `{"n":9007199254740993}`), toolKey("t", `{"n":9007199254740992}`), "large integers stay themselves")
	assert.NotEqual(t, toolKey("lookup_policy", `{}`), toolKey("prior_claims", `{}`))
}
