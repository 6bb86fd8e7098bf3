package workflows

import (
	"fmt"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
)

// Where the rules of steps 3–5 send a claim, as a pure function of what the
// run saw: the same settings, clamp and review rules the claim workflow
// decides by, for a what-if to apply to recorded runs under a candidate
// model or policy (package whatif). Nothing here waits, reads or writes.

// The routes a claim can take.
const (
	RouteAutoApprove = "auto-approve" // paid without a human
	RouteHuman       = "human"        // a human must decide
	RouteReject      = "reject"       // rejected by the coverage or the assessment
	RouteCap         = "cap"          // a run cap stops it (dead-lettered)
)

// RouteInput is what steps 3–5 weigh.
type RouteInput struct {
	Claim claim.Claim
	// Rules is the insurer's policy the run follows; nil for runs started
	// before the worker held it (the input's options then decide).
	Rules   *insurer.Rules
	Options Options
	// Review is what intake read for the review rules (nil before them);
	// Flags the fraud signals the triage agent raised.
	Review *review.Facts
	Flags  []string
	Triage activities.Triage
	// Coverage is step 3's (claim.Cover); Assessment step 4's answer, nil
	// when the claim is not covered or the model was not asked.
	Coverage   claim.Coverage
	Assessment *activities.Assessment
}

// Route is where the claim goes.
type Route struct {
	Route       string `json:"route"`
	PayoutMinor int64  `json:"payout_minor"`
	// Reasons say why a human must decide (RouteHuman); Reason why the
	// claim is rejected or capped.
	Reasons []string `json:"reasons,omitempty"`
	Reason  string   `json:"reason,omitempty"`
	// FourEyes: the payout is above the four-eyes limit, so two approvers
	// must agree.
	FourEyes bool `json:"four_eyes,omitempty"`
}

// RouteClaim applies the rules of steps 3–5 to in. An error is a policy
// the options loosen: the claim workflow refuses such a run at intake.
func RouteClaim(in RouteInput) (Route, error) {
	r := &claimRun{claim: in.Claim, settings: inputSettings(in.Options, in.Claim.Currency), flags: in.Flags}
	r.since.review, r.review = in.Review != nil, found(in.Review)
	if in.Rules != nil {
		s, err := policySettings(*in.Rules, in.Options, in.Claim.Currency)
		if err != nil {
			return Route{}, err
		}
		r.settings = s
	}
	if !in.Coverage.Covered {
		return Route{Route: RouteReject, Reason: in.Coverage.Reason}, nil
	}
	if in.Assessment == nil {
		return Route{}, fmt.Errorf("claim %s is covered but has no assessment", in.Claim.ID)
	}
	payout := clampPayout(in.Assessment.RecommendedMinor, in.Coverage)
	switch {
	case payout == 0:
		return Route{Route: RouteReject, Reason: "assessment recommends no payout: " + in.Assessment.Rationale}, nil
	case r.caps.MaxPayoutMinor > 0 && payout > r.caps.MaxPayoutMinor:
		return Route{Route: RouteCap, PayoutMinor: payout, Reason: fmt.Sprintf("payout %s is above the run's cap %s",
			claim.FormatAmount(payout, in.Claim.Currency), claim.FormatAmount(r.caps.MaxPayoutMinor, in.Claim.Currency))}, nil
	}
	rt := Route{Route: RouteAutoApprove, PayoutMinor: payout}
	if rt.Reasons = r.reviewReasons(payout, in.Triage, *in.Assessment); len(rt.Reasons) > 0 {
		rt.Route = RouteHuman
		rt.FourEyes = r.trust != nil && r.trust.FourEyesAboveMinor > 0 && payout > r.trust.FourEyesAboveMinor
	}
	return rt, nil
}

// clampPayout is step 4's rule: the model recommends, the coverage bounds.
func clampPayout(recommendedMinor int64, cov claim.Coverage) int64 {
	return min(max(recommendedMinor, 0), cov.CoveredMinor)
}

// TriageCaps are the caps of step 2's agent loop under a policy: the turns
// (the last must answer) and the tokens it may spend.
func TriageCaps(rules *insurer.Rules, o Options, currency string) (turns int, tokens int64, err error) {
	s := inputSettings(o, currency)
	if rules != nil {
		if s, err = policySettings(*rules, o, currency); err != nil {
			return 0, 0, err
		}
	}
	return s.caps.MaxTriageTurns, s.caps.MaxTriageTokens, nil
}
