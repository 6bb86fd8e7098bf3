package workflows

import (
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/review"
)

// reviewClaim is the review the store registers when the claimant of
// claim id, which claimed claimed and was paid paid by the rules, asks a
// person to look again: the amount still in dispute.
func reviewClaim(id, claimed, paid string) claim.Claim {
	c := testClaim(id, claimed)
	orig := c.AmountMinor
	paidMinor, err := claim.ParseAmount(paid, "usd")
	if err != nil {
		panic(err)
	}
	c.ID, c.AmountMinor = claim.ReviewID(id), orig-paidMinor
	c.ReviewOf = &claim.Review{Of: id, ClaimedMinor: orig, PaidMinor: paidMinor, By: "ada@example.com",
		At: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Reason: "the invoice says 1500.00"}
	return c
}

// A review claim waits for a person although its amount is under the
// auto-approve limit; the status says what it reviews and who asked, and
// an approval pays the remainder once, under the review claim's own key.
func (s *ClaimSuite) TestAClaimantsReviewWaitsForAPersonAndPaysTheRemainderOnce() {
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", note("the invoice checks out"))
	c := reviewClaim("claim-0700", "1500.00", "800.00") // 700.00 in dispute, under 1000.00
	s.start(c, Options{})

	s.Equal(StatusWaiting, waiting.State, "a review is a person's decision, whatever its amount")
	s.Equal(c.ReviewOf, waiting.ReviewOf, "the status names the claim reviewed, who asked and why")
	s.Require().NotNil(waiting.Approval)
	s.Contains(strings.Join(waiting.Approval.Request.Reasons, "; "),
		review.ReviewReason+"claim-0700, asked for by ada@example.com: the invoice says 1500.00")
	s.Equal("700.00", waiting.Approval.Request.Amount)

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(s.calls.pays, 1, "one transfer")
	p := s.calls.pays[0]
	s.Equal(int64(70000), p.AmountMinor, "the remainder: pol-1001 covers all 1500.00, 800.00 already paid")
	s.Equal(claim.IdempotencyKey("claim-0700-review:step6"), p.Key)
	s.Require().NotNil(p.Approval, "the payment carries the person's receipt")
	s.Len(p.Approval.Receipts, 1)
	s.Require().Len(s.calls.audits, 1)
	s.Equal(c.ReviewOf, s.calls.audits[0].ReviewOf, "the audit record names the request")
	s.Equal(int64(80000), s.calls.audits[0].Coverage.PaidBeforeMinor)
}

// A person rejects a review with a reason, never without one; nothing
// is paid.
func (s *ClaimSuite) TestAReviewsRejectionNeedsAReason() {
	s.reject(time.Hour, "adjuster-17", "")
	s.reject(2*time.Hour, "adjuster-17", "the invoice is for another address")
	s.start(reviewClaim("claim-0701", "1500.00", "800.00"), Options{})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Contains(r.Reason, "the invoice is for another address")
	s.Require().NotEmpty(r.Attempts)
	s.Equal("needs-reason", r.Attempts[0].Code, "the rejection without a reason was refused")
	s.Empty(s.calls.pays)
}

// Where no jurisdiction's rules apply and nothing more is covered, the
// rules still do not reject a review: a person does, with a reason (an
// approval of nothing is refused).
func (s *ClaimSuite) TestAReviewWithNothingLeftIsStillAPersonsToDeny() {
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(90*time.Minute, "adjuster-17", nil)
	s.reject(2*time.Hour, "adjuster-17", "the policy's limit was paid")
	// pol-2002: 1500.00 covered at most; 1500.00 paid of 1800.00 claimed.
	c := reviewClaim("claim-0702", "1800.00", "1500.00")
	c.PolicyID = "pol-2002"
	s.start(c, Options{})
	s.Equal(StatusWaiting, waiting.State)
	s.Require().NotNil(waiting.Approval)
	s.Equal(int64(0), waiting.Approval.Request.AmountMinor)
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Contains(r.Reason, "the policy's limit was paid")
	s.Require().NotEmpty(r.Attempts)
	s.Equal("nothing-to-pay", r.Attempts[0].Code)
	s.Empty(s.calls.pays)
}
