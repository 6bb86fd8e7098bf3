// Package review holds the rules that send a claim to a human: the
// auto-approve limit, the deterministic review rules (a fraud signal
// raised, a fraud score, the claimant's prior claims, an excluded
// category in the claim's own words) and the model's own asks. The claim
// workflow decides step 5 by them, and the payment checks them again
// where money moves (activities.PayClaimant). Inputs in, reasons out:
// nothing here reads, writes or waits.
package review

import (
	"fmt"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// Rules are the insurer's thresholds for the deterministic review rules.
type Rules struct {
	FraudScoreReview  int
	PriorClaimsReview int
	PriorClaimsWindow time.Duration
}

// RulesOf are the review rules of the insurer's policy.
func RulesOf(p insurer.Rules) Rules {
	return Rules{FraudScoreReview: p.FraudScoreReview, PriorClaimsReview: p.PriorClaimsReview,
		PriorClaimsWindow: time.Duration(p.PriorClaimsWindow)}
}

// Facts is what a read of the claim found that the rules weigh, whatever
// the model says: recorded with intake, so the workflow decides from
// history.
type Facts struct {
	// PriorClaims counts the claimant's other claims (same e-mail or payout
	// account) registered within the policy's window, capped.
	PriorClaims int `json:"prior_claims"`
	// Exclusions lists, for each category the claim's policy excludes,
	// the exclusion's terms found in the claim's description or documents.
	Exclusions []ExclusionHit `json:"exclusions,omitempty"`
}

// ExclusionHit is an excluded category whose words the claim uses.
type ExclusionHit struct {
	Category string   `json:"category"`
	Terms    []string `json:"terms"`
}

// Advice is what the model answered that the rules weigh: its triage's
// fraud score and category, and whether its triage or its assessment asks
// for a human.
type Advice struct {
	FraudScore     int
	FraudSignals   []string
	Category       string
	TriageAsks     bool
	TriageReason   string
	AssessmentAsks bool
}

// Input is what the rules weigh.
type Input struct {
	Currency         string
	PayoutMinor      int64
	AutoApproveMinor int64
	// Rules are the deterministic rules' thresholds; nil for runs recorded
	// before those rules, which apply only the limit and the model's asks.
	Rules *Rules
	Facts Facts
	// Flags are the fraud signals raised for investigators.
	Flags []string
	// Model is the model's answer; nil where only facts count (the
	// payment's own check): no fraud score then, and every excluded
	// category whose words the claim uses sends it to a human.
	Model *Advice
	// ReviewOf is the claim's link to the claim whose automated outcome
	// its claimant asked a person to review (claim.Review): such a claim
	// is a person's to decide, whatever its amount.
	ReviewOf *claim.Review
}

// Reasons says why a human must decide, if one must; none means the rules
// let the payout go without one. The model's answer is advice: it may add
// reasons, never take the deterministic rules' away.
func Reasons(in Input) []string {
	var reasons []string
	if rv := in.ReviewOf; rv != nil {
		reasons = append(reasons, fmt.Sprintf("%s%s, asked for by %s: %s", ReviewReason, rv.Of, rv.By, rv.Reason))
	}
	if in.PayoutMinor > in.AutoApproveMinor {
		reasons = append(reasons, fmt.Sprintf("payout %s is above the auto-approve limit %s",
			claim.FormatAmount(in.PayoutMinor, in.Currency), claim.FormatAmount(in.AutoApproveMinor, in.Currency)))
	}
	if in.Rules != nil {
		reasons = append(reasons, ruleReasons(*in.Rules, in)...)
	}
	if m := in.Model; m != nil {
		if m.TriageAsks {
			reasons = append(reasons, "triage asks for review: "+m.TriageReason)
		}
		if m.AssessmentAsks {
			reasons = append(reasons, fmt.Sprintf("assessment asks for review (fraud score %d: %v)", m.FraudScore, m.FraudSignals))
		}
	}
	return reasons
}

// ReviewReason begins the reason a review claim waits for a person.
const ReviewReason = "a person reviews, as the claimant asked, the automated outcome of claim "

// ruleReasons are the deterministic review rules: each sends the claim to
// a human whatever the model says.
func ruleReasons(rules Rules, in Input) []string {
	var reasons []string
	if len(in.Flags) > 0 {
		reasons = append(reasons, fmt.Sprintf("fraud signal raised for investigators during triage: %s", strings.Join(in.Flags, "; ")))
	}
	if in.Model != nil && in.Model.FraudScore >= rules.FraudScoreReview {
		reasons = append(reasons, fmt.Sprintf("fraud score %d is at or over the review threshold %d", in.Model.FraudScore, rules.FraudScoreReview))
	}
	if n := in.Facts.PriorClaims; n >= rules.PriorClaimsReview {
		reasons = append(reasons, fmt.Sprintf("the claimant has %d prior claims in the last %d days (a human looks from %d)",
			n, int(rules.PriorClaimsWindow.Hours()/24), rules.PriorClaimsReview))
	}
	for _, x := range in.Facts.Exclusions {
		said := fmt.Sprintf("the policy excludes %s and the claim's own words say so (%s)", x.Category, strings.Join(x.Terms, ", "))
		switch {
		case in.Model == nil:
			reasons = append(reasons, said)
		case x.Category != in.Model.Category:
			reasons = append(reasons, said+", but the model classified it as "+in.Model.Category)
		}
	}
	return reasons
}

// Kind names which rule a review reason comes from, without the words a
// model put in it (its review reason, its fraud signals): two runs that
// send a claim to a human for the same rules have the same kinds, however
// a model phrased them. The what-if compares kinds.
func Kind(reason string) string {
	for _, k := range []struct{ prefix, kind string }{
		{ReviewReason, "claimant-review"},
		{"payout ", "over-limit"},
		{"the assessment recommends no payout", "no-payout"},
		{"under the law a person decides a denial", "denial"},
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
