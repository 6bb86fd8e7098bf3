package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	claimstory "github.com/durableclaims/durableclaims/story"
	"github.com/durableclaims/durableclaims/workflows"
)

const policyV = "sha256:5f4d48ddc594a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5"

// shownStory is an approved claim's story as claimsctl show reads it from
// history; provenance says whether the run recorded what made its
// decisions.
func shownStory(t *testing.T, provenance bool) *story {
	t.Helper()
	out := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	build, prompt, policy := "", "", ""
	if provenance {
		build, prompt, policy = "8b62c2a863fe75376d0c960b0257f585", "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", policyV
	}
	c := claim.Claim{ID: "claim-0042", PolicyID: "pol-1001", AmountMinor: 184000, Currency: "usd"}
	triage := activities.Triage{Category: "water-damage", Severity: "medium", FraudScore: 0}
	step := func(n claim.Step, activity string, local bool, output any) *claimstory.Step {
		return &claimstory.Step{Step: int(n), StepName: n.String(), Activity: activity, Local: local, Attempt: 1, Outcome: "completed", Output: out(output)}
	}
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	d := &approvals.Decision{Verdict: approvals.Approve, Approver: "adjuster-17", Channel: "signal", Stage: approvals.StageWaiting,
		DecidedAt: at.Add(time.Hour), Proof: approvals.ProofReceipt, KeyID: "k-17", BuildID: build, PolicyVersion: policy}
	res := &workflows.ClaimResult{ClaimID: c.ID, Status: workflows.StatusPaid, Payout: "1840.00", PayoutMinor: 184000, Currency: "usd",
		TransferID: "tr_1", Approval: &approvals.Approval{RequestedAt: at, Decision: d}, PolicyVersion: policy}
	if provenance {
		res.Decided = &workflows.Decided{By: workflows.DecidedByApprover, Verdict: approvals.Approve, BuildID: build, PolicyVersion: policy,
			ModelAnswers: []string{"aaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"}}
	}
	return &story{Story: &claimstory.Story{ClaimID: c.ID, Result: res, Steps: []*claimstory.Step{
		step(claim.StepIntake, "LoadClaim", true, activities.LoadClaimResult{Claim: c, Status: "open", Version: 1, PolicyVersion: policy}),
		step(claim.StepTriage, "TriageTurn", false, activities.TurnResult{Triage: &triage, Model: "openai/gpt-4o-mini", PromptVersion: prompt,
			BuildID: build, OutputSHA256: "aaaaaaaaaaaaaaaaaaaaaaaa"}),
		step(claim.StepAssess, "AssessClaim", false, activities.AssessResult{Output: activities.Assessment{RecommendedMinor: 184000},
			Model: "openai/gpt-4o-mini", PromptVersion: prompt, BuildID: build, OutputSHA256: "bbbbbbbbbbbbbbbbbbbbbbbb"}),
	}}, ModelCalls: map[string]int{"triage": 1, "assess": 1}}
}

// claimsctl show names, for each model answer, the prompt version it was
// given and the build that asked; for the intake, the policy; for the
// decision, the build that accepted it; and what decided the outcome.
func TestShowNamesWhatMadeEachDecision(t *testing.T) {
	var b strings.Builder
	shownStory(t, true).print(&b)
	got := b.String()
	for _, want := range []string{
		"claim version 1, 1840.00 usd, open, policy sha256:5f4d48ddc594\n",
		"(openai/gpt-4o-mini, prompt sha256:0123456789ab, build 8b62c2a863fe75376d0c960b0257f585, 0+0 tokens, $0.000000, output aaaaaaaaaaaa)",
		"recommends 1840.00 usd (openai/gpt-4o-mini, prompt sha256:0123456789ab, build 8b62c2a863fe75376d0c960b0257f585, output bbbbbbbbbbbb)",
		"then approved by adjuster-17 via signal (receipt signed with k-17)\n" +
			"                   accepted on build 8b62c2a863fe75376d0c960b0257f585 under policy sha256:5f4d48ddc594\n",
		"  decided: approved by an approver, on build 8b62c2a863fe75376d0c960b0257f585, under policy sha256:5f4d48ddc594, " +
			"on model answers aaaaaaaaaaaa, bbbbbbbbbbbb\n",
	} {
		assert.Contains(t, got, want)
	}
}

// A claim from before names none of it, and show says nothing it does
// not know.
func TestShowOfAnOlderClaimNamesNoBuild(t *testing.T) {
	var b strings.Builder
	shownStory(t, false).print(&b)
	got := b.String()
	for _, absent := range []string{"prompt", "build", "policy", "decided"} {
		assert.NotContains(t, got, absent)
	}
	assert.Contains(t, got, "(openai/gpt-4o-mini, 0+0 tokens, $0.000000, output aaaaaaaaaaaa)")
}
