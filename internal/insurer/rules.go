// Package insurer is the insurer's policy as the worker holds it: when a
// human must decide, how long a wait lasts and how it ends, what bounds a
// run, and what proves a decision. The worker reads it from its own
// configuration (POLICY_FILE, then environment variables) and intake records
// it in the workflow's history when a run starts, so a replay sees what the
// run saw. Workflow input may only tighten it: whoever can start a workflow
// is not thereby the insurer.
package insurer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Rules is the policy. Amounts are whole numbers in major units of the
// claim's currency ("1000" is 1000.00 USD, or 1000 JPY).
type Rules struct {
	// AutoApproveLimit is the largest payout paid without a human.
	AutoApproveLimit string `json:"auto_approve_limit"`
	// FourEyesAbove is the payout above which two approvers must agree.
	FourEyesAbove string `json:"four_eyes_above"`
	// ApprovalTTL is how long adjusters have before a wait escalates.
	ApprovalTTL Duration `json:"approval_ttl"`
	// ReminderAt is the fraction of the TTL at which adjusters are
	// reminded (1 or more: no reminder).
	ReminderAt float64 `json:"reminder_at"`
	// EscalationTTL is how long supervisors then have.
	EscalationTTL Duration `json:"escalation_ttl"`
	// FinalOutcome is what happens when nobody decided: hold (the
	// default: the claim stays with the supervisors, flagged overdue, until
	// a person decides or the age cap), approve (paid by policy) or reject
	// (the claim expires unpaid: a denial by silence, refused where a
	// jurisdiction's rules apply, CheckLaw). Workflow input may ask for
	// approve only where this says approve.
	FinalOutcome string `json:"final_outcome"`

	// Caps bound every run; a run that hits one is dead-lettered.
	MaxSteps            int      `json:"max_steps"`
	MaxModelSpendMicros int64    `json:"max_model_spend_micros"`
	MaxPayout           string   `json:"max_payout,omitempty"` // empty: coverage is the only limit
	MaxAge              Duration `json:"max_age"`
	MaxTriageTurns      int      `json:"max_triage_turns"`
	MaxTriageTokens     int64    `json:"max_triage_tokens"`

	// ModelPrice is the worker's model's price in micro-dollars per
	// million tokens: what spend is counted at.
	ModelPriceIn  int64 `json:"model_price_in_micros_per_mtok"`
	ModelPriceOut int64 `json:"model_price_out_micros_per_mtok"`

	// HistoryBudgetBytes is the history size past which a run warns.
	HistoryBudgetBytes int64 `json:"history_budget_bytes"`

	// ReceiptMaxTTL is the longest life (exp − iat) a decision receipt may
	// have: a leaked receipt is useless soon after.
	ReceiptMaxTTL Duration `json:"receipt_max_ttl"`
	// Deployment names this insurer deployment (production, staging…):
	// with the Temporal namespace it is the audience decision receipts are
	// signed for, so a receipt from one deployment decides nothing in
	// another that shares its keys.
	Deployment string `json:"deployment"`
	// AllowUnsignedDecisions is the development switch: decisions without
	// a receipt are accepted, and audited as unauthenticated. Never on in
	// production; the worker warns when it is.
	AllowUnsignedDecisions bool `json:"allow_unsigned_decisions,omitempty"`

	// When a human must look, whatever the model says. The model's answer
	// is advice: it may add reasons for a review, never remove these.
	//
	// FraudScoreReview: a triage fraud score at or over it.
	FraudScoreReview int `json:"fraud_score_review"`
	// PriorClaimsReview: at least this many other claims by the same
	// claimant (e-mail or payout account) within PriorClaimsWindow.
	PriorClaimsReview int      `json:"prior_claims_review"`
	PriorClaimsWindow Duration `json:"prior_claims_window"`
	// ExclusionTerms are, per claim category, words that mean it: when a
	// claim's policy excludes a category and the claim's description or
	// documents use its words while the model puts the claim in another
	// category, a human decides. (Any fraud signal the triage agent raised
	// with its flag tool, and a payout over the auto-approve limit, always
	// send the claim to a human too.)
	ExclusionTerms map[string][]string `json:"exclusion_terms"`

	// ReviewWindow is how long after an automated decision its claimant
	// may ask for a person to review it, where no jurisdiction's rules
	// apply (under them, the rule set's review_window: docs/law.md).
	ReviewWindow Duration `json:"review_window"`
}

// DefaultExclusionTerms are the words the rules look for, per category.
func DefaultExclusionTerms() map[string][]string {
	return map[string][]string{
		"wear-and-tear": {"wear and tear", "wear-and-tear", "worn out", "worn through", "wore through", "rust", "corrosion", "corroded",
			"old age", "deteriorat", "gradual"},
		"auto":         {"car ", "vehicle", "collision", "motorbike", "motorcycle", "windscreen", "windshield"},
		"theft":        {"stolen", "theft", "burglary", "break-in"},
		"fire":         {"fire", "smoke", "burnt", "burned"},
		"glass":        {"glass", "window pane", "windscreen", "windshield"},
		"water-damage": {"water", "flood", "leak", "burst pipe"},
	}
}

// Defaults is the policy when nothing is configured.
func Defaults() Rules {
	return Rules{
		AutoApproveLimit: "1000", FourEyesAbove: "10000",
		ApprovalTTL: Duration(72 * time.Hour), ReminderAt: 0.5, EscalationTTL: Duration(24 * time.Hour), FinalOutcome: "hold",
		MaxSteps: 100, MaxModelSpendMicros: 2_000_000, MaxAge: Duration(90 * 24 * time.Hour), MaxTriageTurns: 6, MaxTriageTokens: 40_000,
		ModelPriceIn: 2_500_000, ModelPriceOut: 10_000_000,
		HistoryBudgetBytes: 64 << 10,
		ReceiptMaxTTL:      Duration(time.Hour),
		Deployment:         "local",
		FraudScoreReview:   50, PriorClaimsReview: 3, PriorClaimsWindow: Duration(365 * 24 * time.Hour),
		ExclusionTerms: DefaultExclusionTerms(),
		ReviewWindow:   Duration(30 * 24 * time.Hour),
	}
}

// Load reads the policy: the defaults, then the JSON file at path (when
// set; fields it leaves out keep their defaults), then the environment
// variables that name a setting (AUTO_APPROVE_LIMIT, FOUR_EYES_ABOVE,
// APPROVAL_TTL, REMINDER_AT, ESCALATION_TTL, FINAL_OUTCOME,
// ALLOW_UNSIGNED_DECISIONS, INSURER_DEPLOYMENT). The result is validated.
func Load(path string, getenv func(string) string) (Rules, error) {
	r := Defaults()
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return Rules{}, fmt.Errorf("policy: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			return Rules{}, fmt.Errorf("policy %s: %w", path, err)
		}
	}
	env := func(name string, set func(string) error) error {
		if v := getenv(name); v != "" {
			if err := set(v); err != nil {
				return fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
		return nil
	}
	dur := func(d *Duration) func(string) error {
		return func(v string) error { return d.set(v) }
	}
	str := func(s *string) func(string) error { return func(v string) error { *s = v; return nil } }
	for _, e := range []struct {
		name string
		set  func(string) error
	}{
		{"AUTO_APPROVE_LIMIT", str(&r.AutoApproveLimit)},
		{"FOUR_EYES_ABOVE", str(&r.FourEyesAbove)},
		{"APPROVAL_TTL", dur(&r.ApprovalTTL)},
		{"ESCALATION_TTL", dur(&r.EscalationTTL)},
		{"FINAL_OUTCOME", str(&r.FinalOutcome)},
		{"INSURER_DEPLOYMENT", str(&r.Deployment)},
		{"REMINDER_AT", func(v string) (err error) { r.ReminderAt, err = strconv.ParseFloat(v, 64); return err }},
		{"ALLOW_UNSIGNED_DECISIONS", func(v string) (err error) { r.AllowUnsignedDecisions, err = strconv.ParseBool(v); return err }},
	} {
		if err := env(e.name, e.set); err != nil {
			return Rules{}, fmt.Errorf("policy: %w", err)
		}
	}
	return r, r.Validate()
}

// CheckLaw refuses a policy that would deny a claim by silence where a
// jurisdiction's rules apply: a claim nobody decided may be held for a
// person or approved by policy, never rejected because time ran out.
func (r Rules) CheckLaw() error {
	if r.FinalOutcome == "reject" {
		return fmt.Errorf("policy: final_outcome: reject denies an unanswered claim by silence, which no regulator accepts; " +
			"where jurisdiction rules apply (JURISDICTION_RULES_FILE) it must be hold or approve")
	}
	return nil
}

// Validate checks every setting, naming the first that is wrong.
func (r Rules) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("policy: %s: %s", field, fmt.Sprintf(format, args...))
	}
	for _, a := range []struct{ field, v string }{
		{"auto_approve_limit", r.AutoApproveLimit}, {"four_eyes_above", r.FourEyesAbove}, {"max_payout", r.MaxPayout},
	} {
		if a.v == "" && a.field == "max_payout" {
			continue
		}
		if _, err := WholeAmount(a.v); err != nil {
			return bad(a.field, "%v", err)
		}
	}
	switch {
	case r.ApprovalTTL <= 0 || r.EscalationTTL <= 0:
		return bad("approval_ttl, escalation_ttl", "must be positive")
	case r.ReminderAt <= 0:
		return bad("reminder_at", "must be a positive fraction of the TTL (1 or more: no reminder)")
	case r.FinalOutcome != "hold" && r.FinalOutcome != "reject" && r.FinalOutcome != "approve":
		return bad("final_outcome", "must be hold, approve or reject, not %q", r.FinalOutcome)
	case r.MaxSteps <= 0 || r.MaxModelSpendMicros <= 0 || r.MaxAge <= 0 || r.MaxTriageTurns <= 0 || r.MaxTriageTokens <= 0:
		return bad("max_steps, max_model_spend_micros, max_age, max_triage_turns, max_triage_tokens", "must be positive")
	case r.ModelPriceIn < 0 || r.ModelPriceOut < 0:
		return bad("model_price", "must not be negative")
	case r.HistoryBudgetBytes <= 0:
		return bad("history_budget_bytes", "must be positive")
	case !deploymentName.MatchString(r.Deployment):
		return bad("deployment", "%q must be 1 to 63 lowercase letters, digits, '.', '_' or '-'", r.Deployment)
	case r.ReceiptMaxTTL <= 0 || r.ReceiptMaxTTL > Duration(24*time.Hour):
		return bad("receipt_max_ttl", "must be positive and at most 24h")
	case r.FraudScoreReview < 0 || r.FraudScoreReview > 100:
		return bad("fraud_score_review", "must be from 0 to 100")
	case r.PriorClaimsReview < 1 || r.PriorClaimsWindow <= 0:
		return bad("prior_claims_review, prior_claims_window", "must be positive")
	case r.ReviewWindow <= 0:
		return bad("review_window", "must be positive")
	}
	for category, terms := range r.ExclusionTerms {
		for _, term := range terms {
			if strings.TrimSpace(term) == "" || len(term) > 100 {
				return bad("exclusion_terms."+category, "terms must be 1 to 100 characters")
			}
		}
	}
	return nil
}

var deploymentName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// WholeAmount reads a policy amount: a whole number of major units.
func WholeAmount(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 1e12 || strings.HasPrefix(v, "+") {
		return 0, fmt.Errorf("%q is not a whole number of major units between 0 and 10^12 (like 1000)", v)
	}
	return n, nil
}

// Duration is a time.Duration written as Go writes one ("72h0m0s").
type Duration time.Duration

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "72h" (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("a duration must be a string like \"72h\"")
		}
		*d = Duration(n)
		return nil
	}
	return d.set(s)
}

func (d *Duration) set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
