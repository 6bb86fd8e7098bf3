package workflows

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// greedyModel never stops asking for tools: ten lookups a turn, last turn
// included. Only the caps end its loop.
type greedyModel struct{ activities.RulesModel }

func (greedyModel) Name() string { return "greedy" }

func (greedyModel) TriageTurn(_ context.Context, req activities.TurnRequest) (activities.Reply[activities.Turn], error) {
	var calls []activities.ToolCall
	for i := range 10 {
		calls = append(calls, activities.ToolCall{ID: fmt.Sprintf("c%d-%d", req.Turn, i), Name: activities.ToolLookupPolicy, Arguments: "{}"})
	}
	return activities.Reply[activities.Turn]{Output: activities.Turn{ToolCalls: calls,
		Messages: []activities.Message{{Role: "assistant", ToolCalls: calls}}}, Usage: activities.Usage{TokensIn: 100, TokensOut: 10}}, nil
}

func (s *ClaimSuite) TestTriageTurnCapSendsTheClaimToAHuman() {
	s.calls.model = greedyModel{}
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.reject(2*time.Hour, "adjuster-17", "cannot classify")
	s.start(testClaim("claim-0080", "640.00"), Options{Caps: Caps{MaxTriageTurns: 3}})

	s.Equal([]claim.IdempotencyKey{"claim-0080:step2:turn1", "claim-0080:step2:turn2", "claim-0080:step2:turn3"}, s.calls.keys["triage"])
	tools := s.calls.keys["tool"]
	s.Len(tools, 3*activities.MaxToolCallsPerTurn, "calls past the per-turn limit are answered with an error, not run")
	s.Contains(tools, claim.IdempotencyKey("claim-0080:step2:turn1:lookup_policy"))
	s.Contains(tools, claim.IdempotencyKey("claim-0080:step2:turn2:lookup_policy.8"), "repeated tools get distinct keys")
	s.Equal(StatusWaiting, waiting.State)
	s.Require().NotNil(waiting.Approval)
	s.Contains(waiting.Approval.Request.Reasons, "triage asks for review: triage stopped: no answer in 3 turns (the turn cap)")
	s.Equal(3*activities.MaxToolCallsPerTurn, waiting.ToolCalls)
	s.Len(waiting.ModelCalls, 4, "three turns and the assessment")
	s.Equal(3, waiting.ModelCalls[2].Turn)
	s.Equal(StatusRejected, s.result().Status)
	s.Empty(s.calls.pays)
}

func (s *ClaimSuite) TestTriageTokenCapSendsTheClaimToAHuman() {
	s.calls.tokens = 30_000
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.start(testClaim("claim-0081", "640.00"), Options{Caps: Caps{MaxTriageTokens: 20_000},
		Approval: approvals.Policy{TTL: 2 * time.Hour, EscalationTTL: time.Hour}})

	s.Equal([]claim.IdempotencyKey{"claim-0081:step2:turn1"}, s.calls.keys["triage"])
	s.Require().NotNil(waiting.Approval)
	s.Contains(waiting.Approval.Request.Reasons, "triage asks for review: triage stopped: 30040 tokens used (the token cap is 20000)")
	s.Equal(int64(30_040), waiting.ModelCalls[0].TokensIn+waiting.ModelCalls[0].TokensOut)
	s.Equal(StatusExpired, s.result().Status, "nobody decided: the wait ends in its defined outcome")
	s.Empty(s.calls.pays)
}

// Usage and cost of every call are in the status, and sum to the totals.
func (s *ClaimSuite) TestStatusShowsUsageAndCostPerCall() {
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0082", "1840.00"), Options{})

	s.Require().Len(waiting.ModelCalls, 3)
	var in, out, cost int64
	for i, m := range waiting.ModelCalls {
		in, out, cost = in+m.TokensIn, out+m.TokensOut, cost+m.CostMicros
		s.Positive(m.CostMicros, "call %d", i)
	}
	s.Equal([]int{1, 2, 0}, []int{waiting.ModelCalls[0].Turn, waiting.ModelCalls[1].Turn, waiting.ModelCalls[2].Turn})
	s.Equal(int(claim.StepAssess), waiting.ModelCalls[2].Step)
	s.Equal(waiting.TokensIn, in)
	s.Equal(waiting.TokensOut, out)
	s.Equal(waiting.ModelSpendMicros, cost)
	s.Equal(3, waiting.ToolCalls)
}

// A local activity's ScheduleToCloseTimeout defaults to its
// StartToCloseTimeout, which leaves a slow first attempt no retry at all:
// under load (10,000 claims parked in the bench) triage tool calls timed out
// once and dead-lettered their claims. Every local step sets it.
func TestLocalStepsLeaveRoomForRetries(t *testing.T) {
	for name, o := range map[string]stepPlan{"read": plan.read, "model": plan.turn, "effect": plan.sideStep, "tool": plan.tool} {
		lo := o.local
		if assert.NotNil(t, lo, name) {
			assert.GreaterOrEqual(t, lo.ScheduleToCloseTimeout, 5*lo.StartToCloseTimeout, name)
		}
	}
}
