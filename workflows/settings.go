package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
)

// settings are what a run works by: when a human must decide, how a wait
// runs and ends, what proves a decision, the caps, the model's price. They
// are set once, from the worker's policy recorded at intake (runs started
// before that read them from their input).
type settings struct {
	autoApproveMinor int64
	approval         approvals.Policy
	// trust is how decisions are proven; nil for runs started before
	// signed receipts, which took an approver's name.
	trust         *approvals.Trust
	caps          Caps
	price         ModelPrice
	historyBudget int64
	// rules are the policy's thresholds for the deterministic review
	// rules (runs from versionReview on).
	rules review.Rules
}

// inputSettings are the settings of runs started before the worker held
// the policy: the input's options with the defaults filled in. Every run
// uses them until intake has read the worker's policy.
func inputSettings(o Options, currency string) settings {
	s := settings{autoApproveMinor: o.AutoApproveLimitMinor, approval: o.Approval,
		caps: o.Caps.withDefaults(), price: priceWithDefaults(o.ModelPrice), historyBudget: o.HistoryBudgetBytes}
	if s.autoApproveMinor <= 0 {
		s.autoApproveMinor, _ = claim.ParseAmount(DefaultAutoApproveLimit, currency)
	}
	if s.historyBudget <= 0 {
		s.historyBudget = DefaultHistoryBudgetBytes
	}
	return s
}

// ErrLooserThanPolicy is the error type of a run whose input tried to
// loosen the insurer's policy: it ends at once, having done nothing.
const ErrLooserThanPolicy = "LooserThanPolicy"

// policySettings are the worker's policy, tightened by the input's options
// where they ask for it. An option looser than the policy is refused with
// its name: the workflow's input comes from whoever can reach the Temporal
// frontend, not from the insurer.
func policySettings(p insurer.Rules, o Options, currency string) (settings, error) {
	var firstErr error
	looser := func(option string, got, policy any) {
		if firstErr == nil {
			firstErr = temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"options.%s: %v is looser than the worker's policy (%v); workflow input may only tighten the insurer's policy. Nothing was done",
				option, got, policy), ErrLooserThanPolicy, nil)
		}
	}
	amount := func(option, major string) int64 {
		if major == "" {
			return 0
		}
		n, err := claim.ParseAmount(major, currency)
		if err != nil && firstErr == nil {
			firstErr = temporal.NewNonRetryableApplicationError(fmt.Sprintf("the worker's policy %s %q: %v", option, major, err), ErrLooserThanPolicy, nil)
		}
		return n
	}
	// tighterInt takes the input's value when it is set and no looser
	// than the policy's (0 in the policy means no limit).
	tighterInt := func(option string, in, policy int64) int64 {
		switch {
		case in <= 0:
			return policy
		case policy > 0 && in > policy:
			looser(option, in, policy)
		}
		return in
	}
	tighterDur := func(option string, in time.Duration, policy insurer.Duration) time.Duration {
		if in > time.Duration(policy) {
			looser(option, in, policy)
		}
		if in <= 0 {
			return time.Duration(policy)
		}
		return in
	}
	money := func(minor int64) string { return claim.FormatAmount(minor, currency) + " " + currency }

	var s settings
	limit := amount("auto_approve_limit", p.AutoApproveLimit)
	if s.autoApproveMinor = limit; o.AutoApproveLimitMinor > 0 {
		if o.AutoApproveLimitMinor > limit {
			looser("auto_approve_limit_minor", o.AutoApproveLimitMinor, money(limit))
		}
		s.autoApproveMinor = o.AutoApproveLimitMinor
	}

	s.approval = approvals.Policy{
		TTL:           tighterDur("approval.ttl", o.Approval.TTL, p.ApprovalTTL),
		EscalationTTL: tighterDur("approval.escalation_ttl", o.Approval.EscalationTTL, p.EscalationTTL),
		ReminderAt:    p.ReminderAt,
		FinalOutcome:  approvals.Verdict(p.FinalOutcome),
	}
	if r := o.Approval.ReminderAt; r > 0 {
		if r > p.ReminderAt {
			looser("approval.reminder_at", r, p.ReminderAt)
		}
		s.approval.ReminderAt = r
	}
	switch f := o.Approval.FinalOutcome; f {
	case "":
	case approvals.Reject, approvals.Hold:
		s.approval.FinalOutcome = f
	case approvals.Approve:
		if p.FinalOutcome != string(approvals.Approve) {
			looser("approval.final_outcome", f, "reject")
		}
	default:
		looser("approval.final_outcome", fmt.Sprintf("%q", f), "approve or reject only")
	}

	fourEyes := amount("four_eyes_above", p.FourEyesAbove)
	if o.FourEyesAboveMinor > 0 {
		if o.FourEyesAboveMinor > fourEyes {
			looser("four_eyes_above_minor", o.FourEyesAboveMinor, money(fourEyes))
		}
		fourEyes = o.FourEyesAboveMinor
	}
	s.trust = &approvals.Trust{ReceiptMaxTTL: time.Duration(p.ReceiptMaxTTL), AllowUnsigned: p.AllowUnsignedDecisions,
		FourEyesAboveMinor: fourEyes}

	c := o.Caps
	s.caps = Caps{
		MaxSteps:            int(tighterInt("caps.max_steps", int64(c.MaxSteps), int64(p.MaxSteps))),
		MaxModelSpendMicros: tighterInt("caps.max_model_spend_micros", c.MaxModelSpendMicros, p.MaxModelSpendMicros),
		MaxPayoutMinor:      tighterInt("caps.max_payout_minor", c.MaxPayoutMinor, amount("max_payout", p.MaxPayout)),
		MaxAge:              tighterDur("caps.max_age", c.MaxAge, p.MaxAge),
		MaxTriageTurns:      int(tighterInt("caps.max_triage_turns", int64(c.MaxTriageTurns), int64(p.MaxTriageTurns))),
		MaxTriageTokens:     tighterInt("caps.max_triage_tokens", c.MaxTriageTokens, p.MaxTriageTokens),
	}
	// A higher price counts spend faster: that tightens the spend cap.
	s.price = ModelPrice{InMicrosPerMTok: max(o.ModelPrice.InMicrosPerMTok, p.ModelPriceIn),
		OutMicrosPerMTok: max(o.ModelPrice.OutMicrosPerMTok, p.ModelPriceOut)}
	s.historyBudget = tighterInt("history_budget_bytes", o.HistoryBudgetBytes, p.HistoryBudgetBytes)
	s.rules = review.RulesOf(p)
	return s, firstErr
}
