package workflows

import (
	"fmt"
	"strings"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// reviewReasons says why a human must decide, if one must.
func (r *claimRun) reviewReasons(payout int64, t activities.Triage, as activities.Assessment) []string {
	c := r.claim
	limit := r.autoApproveMinor
	var reasons []string
	if payout > limit {
		reasons = append(reasons, fmt.Sprintf("payout %s is above the auto-approve limit %s",
			claim.FormatAmount(payout, c.Currency), claim.FormatAmount(limit, c.Currency)))
	}
	if r.since.review {
		reasons = append(reasons, r.ruleReasons(t)...)
	}
	if t.NeedsReview {
		reasons = append(reasons, "triage asks for review: "+t.ReviewReason)
	}
	if as.NeedsReview {
		reasons = append(reasons, fmt.Sprintf("assessment asks for review (fraud score %d: %v)", t.FraudScore, t.FraudSignals))
	}
	return reasons
}

// ruleReasons are the deterministic review rules: each sends the claim to
// a human whatever the model says. The model's answer is advice; it may
// add reasons (needs_review), never take these away.
func (r *claimRun) ruleReasons(t activities.Triage) []string {
	var reasons []string
	if len(r.flags) > 0 {
		reasons = append(reasons, fmt.Sprintf("fraud signal raised for investigators during triage: %s", strings.Join(r.flags, "; ")))
	}
	if t.FraudScore >= r.rules.FraudScoreReview {
		reasons = append(reasons, fmt.Sprintf("fraud score %d is at or over the review threshold %d", t.FraudScore, r.rules.FraudScoreReview))
	}
	if n := r.review.PriorClaims; n >= r.rules.PriorClaimsReview {
		reasons = append(reasons, fmt.Sprintf("the claimant has %d prior claims in the last %d days (a human looks from %d)",
			n, int(r.rules.PriorClaimsWindow.Hours()/24), r.rules.PriorClaimsReview))
	}
	for _, x := range r.review.Exclusions {
		if x.Category != t.Category {
			reasons = append(reasons, fmt.Sprintf("the policy excludes %s and the claim's own words say so (%s), but the model classified it as %s",
				x.Category, strings.Join(x.Terms, ", "), t.Category))
		}
	}
	return reasons
}

// ReasonKind names which rule a review reason comes from, without the
// words a model put in it (its review reason, its fraud signals): two runs
// that send a claim to a human for the same rules have the same kinds,
// however a model phrased them. The what-if compares kinds.
func ReasonKind(reason string) string {
	for _, k := range []struct{ prefix, kind string }{
		{"payout ", "over-limit"},
		{"fraud signal raised for investigators", "fraud-flag"},
		{"fraud score ", "fraud-score"},
		{"the claimant has ", "prior-claims"},
		{"triage asks for review", "triage-review"},
		{"assessment asks for review", "assessment-review"},
	} {
		if strings.HasPrefix(reason, k.prefix) {
			return k.kind
		}
	}
	if rest, ok := strings.CutPrefix(reason, "the policy excludes "); ok {
		category, _, _ := strings.Cut(rest, " ")
		return "exclusion:" + category
	}
	return reason
}

// found is what a read of the claim found for the review rules: nothing
// when it recorded nothing.
func found(rv *activities.Review) activities.Review {
	if rv == nil {
		return activities.Review{}
	}
	return *rv
}
