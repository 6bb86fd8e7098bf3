package review

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// The reasons are recorded in history (the approval request, signed by
// its hash) and compared by kind (the what-if): each rule's words are
// pinned here, byte for byte.
func TestReasons(t *testing.T) {
	rules := RulesOf(insurer.Defaults())
	calm := &Advice{FraudScore: 10, Category: "water-damage"}
	wearAndTear := Facts{Exclusions: []ExclusionHit{{Category: "wear-and-tear", Terms: []string{"rust", "old age"}}}}
	for name, tc := range map[string]struct {
		in   Input
		want []string
	}{
		"nothing":      {in: Input{Currency: "usd", PayoutMinor: 64000, AutoApproveMinor: 100000, Rules: &rules, Model: calm}},
		"at the limit": {in: Input{Currency: "usd", PayoutMinor: 100000, AutoApproveMinor: 100000, Rules: &rules, Model: calm}},
		"over the limit": {in: Input{Currency: "usd", PayoutMinor: 184000, AutoApproveMinor: 100000, Rules: &rules, Model: calm},
			want: []string{"payout 1840.00 is above the auto-approve limit 1000.00"}},
		"over the limit, yen": {in: Input{Currency: "jpy", PayoutMinor: 184000, AutoApproveMinor: 100000},
			want: []string{"payout 184000 is above the auto-approve limit 100000"}},
		"flagged": {in: Input{Currency: "usd", Rules: &rules, Flags: []string{"invoice-altered", "round-amount"}, Model: calm},
			want: []string{"fraud signal raised for investigators during triage: invoice-altered; round-amount"}},
		"fraud score": {in: Input{Currency: "usd", Rules: &rules, Model: &Advice{FraudScore: 50}},
			want: []string{"fraud score 50 is at or over the review threshold 50"}},
		"frequent": {in: Input{Currency: "usd", Rules: &rules, Facts: Facts{PriorClaims: 3}, Model: calm},
			want: []string{"the claimant has 3 prior claims in the last 365 days (a human looks from 3)"}},
		"not yet frequent": {in: Input{Currency: "usd", Rules: &rules, Facts: Facts{PriorClaims: 2}, Model: calm}},
		"excluded, classified otherwise": {in: Input{Currency: "usd", Rules: &rules, Facts: wearAndTear, Model: calm},
			want: []string{"the policy excludes wear-and-tear and the claim's own words say so (rust, old age), but the model classified it as water-damage"}},
		// Classified as excluded: coverage rejects the claim, no human needed.
		"excluded, classified so": {in: Input{Currency: "usd", Rules: &rules, Facts: wearAndTear, Model: &Advice{Category: "wear-and-tear"}}},
		"triage asks": {in: Input{Currency: "usd", Rules: &rules, Model: &Advice{TriageAsks: true, TriageReason: "the photo shows another house"}},
			want: []string{"triage asks for review: the photo shows another house"}},
		"assessment asks": {in: Input{Currency: "usd", Rules: &rules, Model: &Advice{FraudScore: 20, FraudSignals: []string{"late report"}, AssessmentAsks: true}},
			want: []string{"assessment asks for review (fraud score 20: [late report])"}},
		"assessment asks, no signals": {in: Input{Currency: "usd", Model: &Advice{AssessmentAsks: true}},
			want: []string{"assessment asks for review (fraud score 0: [])"}},
		// Runs recorded before the deterministic rules weigh only the limit
		// and the model's asks.
		"before the rules": {in: Input{Currency: "usd", Flags: []string{"invoice-altered"}, Facts: Facts{PriorClaims: 9, Exclusions: wearAndTear.Exclusions},
			Model: &Advice{FraudScore: 99, Category: "water-damage"}}},
		// A review claim waits for a person at any amount, before the
		// model or the payment's own check is asked anything, and before
		// the deterministic rules existed too.
		"a claimant's review": {in: Input{Currency: "usd", PayoutMinor: 30000, AutoApproveMinor: 100000, Rules: &rules, Model: calm,
			ReviewOf: &claim.Review{Of: "claim-0042", By: "ada@example.com", Reason: "the invoice says 1840.00"}},
			want: []string{"a person reviews, as the claimant asked, the automated outcome of claim claim-0042, asked for by ada@example.com: the invoice says 1840.00"}},
		"a claimant's review, facts only": {in: Input{Currency: "usd", PayoutMinor: 30000, AutoApproveMinor: 100000,
			ReviewOf: &claim.Review{Of: "claim-0042", By: "ada", Reason: "why"}},
			want: []string{"a person reviews, as the claimant asked, the automated outcome of claim claim-0042, asked for by ada: why"}},
		// The payment's own check: facts only, no model.
		"facts only": {in: Input{Currency: "usd", PayoutMinor: 30000, AutoApproveMinor: 100000, Rules: &rules, Facts: wearAndTear},
			want: []string{"the policy excludes wear-and-tear and the claim's own words say so (rust, old age)"}},
		"facts only, nothing": {in: Input{Currency: "usd", PayoutMinor: 30000, AutoApproveMinor: 100000, Rules: &rules}},
		"in order": {in: Input{Currency: "usd", PayoutMinor: 184000, AutoApproveMinor: 100000, Rules: &rules, Flags: []string{"invoice-altered"},
			Facts: Facts{PriorClaims: 4, Exclusions: wearAndTear.Exclusions},
			Model: &Advice{FraudScore: 80, FraudSignals: []string{"late report"}, Category: "water-damage", TriageAsks: true, TriageReason: "odd", AssessmentAsks: true}},
			want: []string{
				"payout 1840.00 is above the auto-approve limit 1000.00",
				"fraud signal raised for investigators during triage: invoice-altered",
				"fraud score 80 is at or over the review threshold 50",
				"the claimant has 4 prior claims in the last 365 days (a human looks from 3)",
				"the policy excludes wear-and-tear and the claim's own words say so (rust, old age), but the model classified it as water-damage",
				"triage asks for review: odd",
				"assessment asks for review (fraud score 80: [late report])",
			}},
	} {
		assert.Equal(t, tc.want, Reasons(tc.in), name)
	}
}

func TestRulesOf(t *testing.T) {
	p := insurer.Defaults()
	p.FraudScoreReview, p.PriorClaimsReview, p.PriorClaimsWindow = 70, 5, insurer.Duration(90*24*time.Hour)
	assert.Equal(t, Rules{FraudScoreReview: 70, PriorClaimsReview: 5, PriorClaimsWindow: 90 * 24 * time.Hour}, RulesOf(p))
}

// A reason's kind is its rule, whatever words a model put in it.
func TestKind(t *testing.T) {
	for reason, kind := range map[string]string{
		"payout 1840.00 is above the auto-approve limit 1000.00":                                             "over-limit",
		"the assessment recommends no payout: under the law a person decides a denial":                       "no-payout",
		"fraud signal raised for investigators during triage: anything at all":                               "fraud-flag",
		"fraud score 80 is at or over the review threshold 50":                                               "fraud-score",
		"the claimant has 4 prior claims in the last 365 days (a human looks from 3)":                        "prior-claims",
		"triage asks for review: whatever the model said":                                                    "triage-review",
		"assessment asks for review (fraud score 80: [late report])":                                         "assessment-review",
		"the policy excludes wear-and-tear and the claim's own words say so (rust), but the model…":          "exclusion:wear-and-tear",
		"the policy excludes auto and the claim's own words say so (car)":                                    "exclusion:auto",
		"a person reviews, as the claimant asked, the automated outcome of claim c-1, asked for by ada: why": "claimant-review",
		"a reason of no rule": "a reason of no rule",
	} {
		assert.Equal(t, kind, Kind(reason), reason)
	}
}
