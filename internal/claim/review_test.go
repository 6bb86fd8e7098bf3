package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A review claim is covered for what the policy covers of the original's
// whole claim, less what the original paid: the deductible is taken once,
// and the two together never pay more than the limit.
func TestCoverReviewCountsTheDeductibleAndTheLimitOnce(t *testing.T) {
	p := &Policy{ID: "pol-1", Currency: "usd", LimitMinor: 500000, DeductibleMinor: 25000}
	review := func(claimed, paid int64) Claim {
		return Claim{ID: "c-1-review", PolicyID: "pol-1", Currency: "usd", AmountMinor: claimed - paid,
			ReviewOf: &Review{Of: "c-1", ClaimedMinor: claimed, PaidMinor: paid, By: "ada", At: time.Unix(0, 0), Reason: "why"}}
	}
	for _, tc := range []struct {
		name          string
		claimed, paid int64
		covered       int64
		isCovered     bool
	}{
		{"the model paid less", 184000, 80000, 79000, true},      // 1840 − 250 = 1590 covered, 800 paid
		{"the clamp paid all it covers", 90000, 65000, 0, false}, // 900 − 250 = 650, all paid
		{"the limit binds", 900000, 300000, 200000, true},        // limit 5000, 3000 paid
		{"rejected: nothing paid", 184000, 0, 159000, true},
		{"the deductible was never met", 20000, 0, 0, false},
	} {
		cov := Cover(p, review(tc.claimed, tc.paid), "")
		assert.Equal(t, tc.covered, cov.CoveredMinor, tc.name)
		assert.Equal(t, tc.isCovered, cov.Covered, tc.name)
		assert.Equal(t, tc.paid, cov.PaidBeforeMinor, tc.name)
		assert.LessOrEqual(t, tc.paid+cov.CoveredMinor, min(max(tc.claimed-p.DeductibleMinor, 0), p.LimitMinor), tc.name)
		assert.NotEmpty(t, cov.Reason, tc.name)
	}
	// A claim that reviews nothing is covered as before.
	assert.Equal(t, int64(159000), Cover(p, Claim{PolicyID: "pol-1", Currency: "usd", AmountMinor: 184000}, "").CoveredMinor)
}

// A review claim is named after its original and claims exactly what is
// still in dispute, asked for by someone, with a reason.
func TestValidateChecksTheReviewLink(t *testing.T) {
	good := Claim{ID: "c-1-review", PolicyID: "pol-1", Currency: "usd", AmountMinor: 104000,
		Claimant: Claimant{Name: "Ada", Email: "ada@example.com", StripeAccount: "acct_1Ada"},
		ReviewOf: &Review{Of: "c-1", ClaimedMinor: 184000, PaidMinor: 80000, By: "ada", At: time.Unix(0, 0), Reason: "why"}}
	assert.NoError(t, good.Validate())
	for name, change := range map[string]func(*Claim){
		"another name":    func(c *Claim) { c.ID = "c-2-review" },
		"more in dispute": func(c *Claim) { c.AmountMinor++ },
		"negative paid":   func(c *Claim) { c.ReviewOf.PaidMinor = -1; c.AmountMinor = 184001 },
		"nobody asked":    func(c *Claim) { c.ReviewOf.By = " " },
		"no reason":       func(c *Claim) { c.ReviewOf.Reason = "" },
		"a control in it": func(c *Claim) { c.ReviewOf.Reason = "a\x07" },
	} {
		c := good
		rv := *good.ReviewOf
		c.ReviewOf = &rv
		change(&c)
		assert.Error(t, c.Validate(), name)
	}
}

// A review carries its original's evidence: its documents are in the
// original's folder; every other claim's are in its own.
func TestDocumentsOf(t *testing.T) {
	assert.Equal(t, "c-1", Claim{ID: "c-1-review", ReviewOf: &Review{Of: "c-1"}}.DocumentsOf())
	assert.Equal(t, "c-1-review", Claim{ID: "c-1-review"}.DocumentsOf(), "a claim merely named so is no review")
}
