package claim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/durableclaims/durableclaims/internal/statute"
)

// Policy is what coverage is computed from: a limit and a deductible in the
// policy's currency, and the claim categories it excludes; and the
// jurisdiction whose claim-handling law applies (an ISO 3166-2 code such as
// US-CA; empty: the rule sets' default).
type Policy struct {
	ID                 string   `json:"policy_id"`
	Currency           string   `json:"currency"`
	LimitMinor         int64    `json:"limit_minor"`
	DeductibleMinor    int64    `json:"deductible_minor"`
	ExcludedCategories []string `json:"excluded_categories,omitempty"`
	Jurisdiction       string   `json:"jurisdiction,omitempty"`
}

// policyFile is the policy book's file form, amounts as decimal strings.
type policyFile struct {
	Policies []struct {
		ID                 string   `json:"policy_id"`
		Currency           string   `json:"currency"`
		Limit              string   `json:"limit"`
		Deductible         string   `json:"deductible"`
		ExcludedCategories []string `json:"excluded_categories"`
		Jurisdiction       string   `json:"jurisdiction"`
	} `json:"policies"`
}

// ParsePolicies reads a policy book: {"policies":[{"policy_id":…,"currency":"usd","limit":"10000.00","deductible":"250.00","jurisdiction":"US-CA"}]}.
func ParsePolicies(data []byte) (map[string]Policy, error) {
	var f policyFile
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	out := make(map[string]Policy, len(f.Policies))
	for i, p := range f.Policies {
		cur := strings.ToLower(p.Currency)
		limit, err := ParseAmount(p.Limit, cur)
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s).limit: %w", i, p.ID, err)
		}
		deductible, err := parseMinor(p.Deductible, cur)
		if err != nil {
			return nil, fmt.Errorf("policies[%d] (%s).deductible: %w", i, p.ID, err)
		}
		if p.ID == "" || !idPattern.MatchString(p.ID) {
			return nil, fmt.Errorf("policies[%d].policy_id %q is not a valid ID", i, p.ID)
		}
		if p.Jurisdiction != "" {
			if err := statute.Code(p.Jurisdiction); err != nil {
				return nil, fmt.Errorf("policies[%d] (%s).jurisdiction: %w", i, p.ID, err)
			}
		}
		if _, dup := out[p.ID]; dup {
			return nil, fmt.Errorf("policies[%d]: policy %s is listed twice", i, p.ID)
		}
		out[p.ID] = Policy{ID: p.ID, Currency: cur, LimitMinor: limit, DeductibleMinor: deductible, ExcludedCategories: p.ExcludedCategories,
			Jurisdiction: p.Jurisdiction}
	}
	return out, nil
}

// Coverage is step 3's answer: how much of a claim the policy covers, and why.
type Coverage struct {
	PolicyID        string `json:"policy_id"`
	Covered         bool   `json:"covered"`
	Reason          string `json:"reason"`
	Currency        string `json:"currency"`
	ClaimedMinor    int64  `json:"claimed_minor"`
	DeductibleMinor int64  `json:"deductible_minor"`
	LimitMinor      int64  `json:"limit_minor"`
	CoveredMinor    int64  `json:"covered_minor"`
	// PaidBeforeMinor is, for a review claim, what the claim it reviews
	// already paid: the limit and the deductible count once across both.
	PaidBeforeMinor int64 `json:"paid_before_minor,omitempty"`
}

// Cover computes coverage. It is pure arithmetic, so the workflow runs it
// inline (no activity, no history event) and recomputes it on replay.
func Cover(p *Policy, c Claim, category string) Coverage {
	cov := Coverage{PolicyID: c.PolicyID, Currency: c.Currency, ClaimedMinor: c.AmountMinor}
	switch {
	case p == nil:
		cov.Reason = "no such policy"
		return cov
	case p.Currency != c.Currency:
		cov.Reason = fmt.Sprintf("policy pays in %s, claim is in %s", strings.ToUpper(p.Currency), strings.ToUpper(c.Currency))
		return cov
	case slices.Contains(p.ExcludedCategories, category):
		cov.Reason = fmt.Sprintf("category %q is excluded by the policy", category)
		return cov
	}
	cov.DeductibleMinor, cov.LimitMinor = p.DeductibleMinor, p.LimitMinor
	if rv := c.ReviewOf; rv != nil {
		return coverReview(cov, p, c, rv)
	}
	cov.CoveredMinor = min(max(c.AmountMinor-p.DeductibleMinor, 0), p.LimitMinor)
	switch {
	case cov.CoveredMinor == 0:
		cov.Reason = "claimed amount does not exceed the deductible"
	case cov.CoveredMinor < c.AmountMinor:
		cov.Covered = true
		cov.Reason = fmt.Sprintf("covered after deductible %s and limit %s", FormatAmount(p.DeductibleMinor, c.Currency), FormatAmount(p.LimitMinor, c.Currency))
	default:
		cov.Covered = true
		cov.Reason = "covered in full"
	}
	return cov
}

// coverReview covers a review claim: what the policy covers of the
// original's whole claim, less what the original paid, and never more than
// the review claims.
func coverReview(cov Coverage, p *Policy, c Claim, rv *Review) Coverage {
	cov.PaidBeforeMinor = rv.PaidMinor
	whole := min(max(rv.ClaimedMinor-p.DeductibleMinor, 0), p.LimitMinor)
	cov.CoveredMinor = min(max(whole-rv.PaidMinor, 0), c.AmountMinor)
	if cov.CoveredMinor == 0 {
		cov.Reason = fmt.Sprintf("claim %s already paid %s of the %s its policy covers (deductible %s, limit %s)", rv.Of,
			FormatAmount(rv.PaidMinor, c.Currency), FormatAmount(whole, c.Currency), FormatAmount(p.DeductibleMinor, c.Currency), FormatAmount(p.LimitMinor, c.Currency))
		return cov
	}
	cov.Covered = true
	cov.Reason = fmt.Sprintf("covered up to %s: the policy covers %s of claim %s (deductible %s, limit %s), which paid %s", FormatAmount(cov.CoveredMinor, c.Currency),
		FormatAmount(whole, c.Currency), rv.Of, FormatAmount(p.DeductibleMinor, c.Currency), FormatAmount(p.LimitMinor, c.Currency), FormatAmount(rv.PaidMinor, c.Currency))
	return cov
}
