package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
)

// versionClaim is the claim workflow's change ID for workflow.GetVersion,
// read once, right after intake. Each version is a change to the command
// sequence; runs recorded under an older one replay as they ran:
//
//	DefaultVersion  one triage call; decisions name their approver
//	versionAgent    triage is the agent loop
//	versionTrusted  the worker's policy (recorded at intake) rules the run and the
//	                input may only tighten it; decisions need signed receipts;
//	                four eyes above the threshold
//	versionReview   deterministic review rules (fraud flags and score, prior
//	                claims, exclusion words) send a claim to a human whatever
//	                the model says
//	versionRecords  the close and the audit record run local (plan.record):
//	                keyed writes to the system of record whose repeat returns
//	                the first result, so one workflow task ends the claim
//	versionAuthority receipts name their namespace and insurer deployment
//	                (their audience); conflicts of interest compare people,
//	                not spellings (canonical e-mail addresses, the directory's
//	                other addresses and payout accounts)
//
// (The ID keeps the name it was introduced under.)
const versionClaim = "triage-agent"

const (
	versionAgent   = 1
	versionTrusted = 2
	versionReview  = 3
	versionRecords = 4
	// versionAuthority's changes decide which decisions count, not which
	// commands a run issues; they are versioned all the same, so that a run
	// decides on replay exactly as it did (an accepted decision accepted
	// again, a refused one refused).
	versionAuthority = 5

	// versionLatest is what new runs record.
	versionLatest = versionAuthority
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
			Final: turn == r.caps.MaxTriageTurns, Conversation: conv, ToolResults: results, Price: r.price}
		var res activities.TurnResult
		if err := r.exec(ctx, plan.turn, a.TriageTurn, in, &res); err != nil {
			return activities.Triage{}, err
		}
		r.used(claim.StepTriage, turn, res.Model, res.OutputSHA256, res.Usage)
		tokens += res.Usage.TokensIn + res.Usage.TokensOut
		conv = res.Conversation
		if res.Triage != nil {
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
