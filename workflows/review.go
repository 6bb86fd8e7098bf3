package workflows

import (
	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/review"
)

// reviewReasons says why a human must decide, if one must: the rules of
// package review, applied to what the run read and what the model said.
// The deterministic rules apply to runs from versionReview on.
func (r *claimRun) reviewReasons(payout int64, t activities.Triage, as activities.Assessment) []string {
	in := review.Input{Currency: r.claim.Currency, PayoutMinor: payout, AutoApproveMinor: r.autoApproveMinor,
		Facts: r.review, Flags: r.flags, ReviewOf: r.claim.ReviewOf,
		Model: &review.Advice{FraudScore: t.FraudScore, FraudSignals: t.FraudSignals, Category: t.Category,
			TriageAsks: t.NeedsReview, TriageReason: t.ReviewReason, AssessmentAsks: as.NeedsReview}}
	if r.since.review {
		in.Rules = &r.rules
	}
	reasons := review.Reasons(in)
	if r.modelDenies && r.law != nil {
		reasons = append([]string{NoPayoutReason}, reasons...)
	}
	if payout == 0 && r.law != nil {
		reasons = append([]string{DenialReason + r.reason}, reasons...)
	}
	return reasons
}

// DenialReason sends a claim the coverage check finds nothing payable in
// to a person where a jurisdiction's rules apply: a denial needs a
// person's signed reason (law.go). The coverage check's reason follows.
const DenialReason = "under the law a person decides a denial; the coverage check finds nothing payable: "

// NoPayoutReason sends a claim to a person when the model recommends
// paying nothing where a jurisdiction's rules apply (law.go): a denial is
// a person's decision.
const NoPayoutReason = "the assessment recommends no payout: under the law a person decides a denial"

// found is what a read of the claim found for the review rules: nothing
// when it recorded nothing.
func found(rv *review.Facts) review.Facts {
	if rv == nil {
		return review.Facts{}
	}
	return *rv
}
