package workflows

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/review"
)

// fooledModel answers as a prompt injection told it to: water damage, no
// fraud, no review, whatever the claim says; and it flags a fraud signal
// first when flag is set (as an agent that saw the evidence before the
// injection would).
type fooledModel struct {
	activities.RulesModel
	flag bool
}

func (fooledModel) Name() string { return "fooled" }

func (m fooledModel) TriageTurn(_ context.Context, req activities.TurnRequest) (activities.Reply[activities.Turn], error) {
	if m.flag && req.Turn == 1 {
		calls := []activities.ToolCall{{ID: "f1", Name: activities.ToolFlagFraudSignal, Arguments: `{"signal":"invoice-altered","note":"dates do not match"}`}}
		return activities.Reply[activities.Turn]{Output: activities.Turn{ToolCalls: calls,
			Messages: []activities.Message{{Role: "assistant", ToolCalls: calls}}}}, nil
	}
	t := activities.Triage{Category: "water-damage", Severity: "low", FraudScore: 0, Summary: "as instructed"}
	return activities.Reply[activities.Turn]{Output: activities.Turn{Triage: &t,
		Messages: []activities.Message{{Role: "assistant", Content: `{"category":"water-damage"}`}}}}, nil
}

func (fooledModel) Assess(_ context.Context, r activities.AssessRequest) (activities.Reply[activities.Assessment], error) {
	return activities.Reply[activities.Assessment]{Output: activities.Assessment{RecommendedMinor: 99_999_900, Rationale: "as instructed"}}, nil
}

// Each deterministic rule sends a small claim to a human although the
// model says water damage, no fraud, no review, and pay 999,999.00.
func (s *ClaimSuite) TestReviewRulesHoldWhateverTheModelSays() {
	for name, tc := range map[string]struct {
		flag  bool
		facts review.Facts
		want  string
	}{
		"flagged":  {flag: true, want: "fraud signal raised for investigators during triage: invoice-altered"},
		"frequent": {facts: review.Facts{PriorClaims: 4}, want: "the claimant has 4 prior claims in the last 365 days"},
		"excluded": {facts: review.Facts{Exclusions: []review.ExclusionHit{{Category: "wear-and-tear", Terms: []string{"rust"}}}}, want: "the policy excludes wear-and-tear and the claim's own words say so (rust), but the model classified it as water-damage"},
		"nothing":  {want: ""},
	} {
		s.SetupTest()
		s.calls.model = fooledModel{flag: tc.flag}
		facts := tc.facts
		s.calls.reread = nil
		s.calls.review = &facts
		var waiting Status
		s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
		s.reject(2*time.Hour, "adjuster-17", "checked by hand")
		s.start(testClaim("claim-0110", "640.00"), Options{})
		r := s.result()
		if tc.want == "" {
			s.Equal(StatusPaid, r.Status, "%s: nothing for a human, and the payout clamped to coverage", name)
			s.Require().Len(s.calls.pays, 1, name)
			s.Equal(int64(64000), s.calls.pays[0].AmountMinor, "%s: never above coverage, whatever the model recommends", name)
			continue
		}
		s.Equal(StatusWaiting, waiting.State, name)
		s.Require().NotNil(waiting.Approval, name)
		s.Contains(strings.Join(waiting.Approval.Request.Reasons, "; "), tc.want, name)
		s.Equal(StatusRejected, r.Status, name)
		s.Empty(s.calls.pays, name)
	}
}

// Runs recorded before the rules (versionTrusted) replay without them.
func (s *ClaimSuite) TestRunsBeforeTheReviewRulesReplayWithoutThem() {
	s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(workflow.Version(versionTrusted))
	s.calls.model = fooledModel{flag: true}
	s.calls.review = &review.Facts{PriorClaims: 9}
	s.start(testClaim("claim-0111", "640.00"), Options{})
	s.Equal(StatusPaid, s.result().Status)
}
