package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
)

// triageAgent is step 2 as an agent loop: a model turn, the tools it asks
// for, the next turn, until the model answers or a cap hits. Each turn and
// each tool call is its own activity, keyed <id>:step2:turn<M> and
// <id>:step2:turn<M>:<tool>, so each is recorded and a resumed run reads it
// instead of asking again.
//
// A turn runs as a local activity when nothing costly is waiting in the
// current workflow task to be recorded, and as a regular activity (its own
// checkpoint) when something is: a crash therefore repeats at most one
// model call. Answers of a deterministic, free provider (the rules model)
// need no checkpoint, so the offline loop costs local activities only.
//
// A cap (turns, tokens, spend) ends the loop with a triage that asks for a
// human: the claim goes down the approval path, it is not dead-lettered.
func (r *claimRun) triageAgent(ctx workflow.Context) (activities.Triage, error) {
	step := r.key(claim.StepTriage)
	var conv activities.Conversation
	var results []activities.ToolResult
	var tokens int64
	for turn := 1; ; turn++ {
		if why := r.triageCap(turn, tokens); why != "" {
			workflow.GetLogger(ctx).Warn("triage stopped by a cap", "cap", why)
			return toHuman(ctx, "cap", activities.ReviewTriage("triage stopped: "+why)), nil
		}
		in := activities.TurnInput{Key: step.Sub(fmt.Sprintf("turn%d", turn)), Claim: r.claim, Turn: turn,
			Final: turn == r.caps.MaxTriageTurns, Conversation: conv, ToolResults: results, Price: r.price,
			WaitsForBudget: r.since.budgetWaits, WaitsOutOutages: r.since.outageWaits}
		var res activities.TurnResult
		if err := r.exec(ctx, plan.turn, a.TriageTurn, in, &res); err != nil {
			return activities.Triage{}, err
		}
		r.used(claim.StepTriage, turn, ModelUse{Model: res.Model, PromptVersion: res.PromptVersion, BuildID: res.BuildID,
			OutputSHA256: res.OutputSHA256}, res.Usage)
		tokens += res.Usage.TokensIn + res.Usage.TokensOut
		r.freeAnswers = res.FreeToRepeat()
		conv = res.Conversation
		if res.Triage != nil {
			r.triageAnswer = res.OutputSHA256
			return toHuman(ctx, "model", *res.Triage), nil
		}
		if len(res.ToolCalls) == 0 {
			return toHuman(ctx, "model", activities.ReviewTriage(fmt.Sprintf("triage turn %d neither answered nor asked for a tool", turn))), nil
		}
		results = nil
		seen := map[string]int{}
		for i, call := range res.ToolCalls {
			if i >= activities.MaxToolCallsPerTurn {
				results = append(results, activities.ToolResult{CallID: call.ID, Name: call.Name, IsError: true,
					Content: fmt.Sprintf(`{"error":"at most %d tool calls per turn"}`, activities.MaxToolCallsPerTurn)})
				continue
			}
			seen[call.Name]++
			key := in.Key.Sub(call.Name)
			if n := seen[call.Name]; n > 1 {
				key = in.Key.Sub(fmt.Sprintf("%s.%d", call.Name, n))
			}
			var out activities.ToolResult
			if err := r.exec(ctx, plan.tool, a.CallTool, activities.ToolInput{Key: key, Scope: activities.ScopeOf(r.claim), Call: call}, &out); err != nil {
				return activities.Triage{}, err
			}
			r.toolCalls++
			if call.Name == activities.ToolFlagFraudSignal && !out.IsError {
				var flagged struct {
					Signal string `json:"signal"`
				}
				_ = json.Unmarshal([]byte(out.Content), &flagged)
				r.flags = append(r.flags, flagged.Signal)
			}
			results = append(results, out)
		}
	}
}

// toHuman counts a triage that hands the claim to a human, by cause, and
// returns it.
func toHuman(ctx workflow.Context, cause string, t activities.Triage) activities.Triage {
	if t.NeedsReview {
		metrics.Count(ctx, metrics.TriageReviews, map[string]string{"cause": cause})
	}
	return t
}

// triageCap names the cap that stops the loop before turn, if one does.
func (r *claimRun) triageCap(turn int, tokens int64) string {
	switch {
	case turn > r.caps.MaxTriageTurns:
		return fmt.Sprintf("no answer in %d turns (the turn cap)", r.caps.MaxTriageTurns)
	case tokens >= r.caps.MaxTriageTokens:
		return fmt.Sprintf("%d tokens used (the token cap is %d)", tokens, r.caps.MaxTriageTokens)
	case r.spendMicros >= r.caps.MaxModelSpendMicros:
		return fmt.Sprintf("spent %d of %d micro-dollars (the spend cap)", r.spendMicros, r.caps.MaxModelSpendMicros)
	}
	return ""
}
