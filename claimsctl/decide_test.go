package main

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/workflows"
)

// A decision the claim accepted reads as one line: the verdict, the claim,
// the amount as money, who decided; what an approval leaves to a second
// pair of eyes, and a lower amount, are said.
func TestDecisionLine(t *testing.T) {
	req := approvals.Request{ClaimID: "claim-0045", AmountMinor: 240_000, Amount: "2400.00", Currency: "usd"}
	d := func(v approvals.Verdict, by string, edit func(*approvals.Decision)) approvals.Decision {
		out := approvals.Decision{Verdict: v, Approver: by, Request: req, AmountMinor: req.AmountMinor}
		if edit != nil {
			edit(&out)
		}
		return out
	}
	waiting := &workflows.Status{Approval: &approvals.Approval{Quorum: 2, Votes: []approvals.Decision{d(approvals.Approve, "adjuster-17", nil)}}}
	for want, line := range map[string]string{
		"approved claim-0045: 2,400.00 USD by adjuster-17": decisionLine("claim-0045", d(approvals.Approve, "adjuster-17", nil), "", nil),
		"approved claim-0045: 1,250.00 USD of the 2,400.00 USD asked, by adjuster-17": decisionLine("claim-0045",
			d(approvals.Approve, "adjuster-17", func(d *approvals.Decision) { d.AmountMinor = 125_000 }), "", nil),
		"approved claim-0045: 2,400.00 USD by adjuster-17; 1 of 2 approvals, another approver must agree": decisionLine("claim-0045",
			d(approvals.Approve, "adjuster-17", nil), "", waiting),
		"rejected claim-0045: 2,400.00 USD by supervisor-3: the damage predates the policy": decisionLine("claim-0045",
			d(approvals.Reject, "supervisor-3", func(d *approvals.Decision) { d.Reason = "the damage predates the policy" }), "", nil),
		"handed claim-0045 on: 2,400.00 USD, from adjuster-17 to supervisor-3": decisionLine("claim-0045",
			d(approvals.Handoff, "adjuster-17", nil), "supervisor-3", nil),
	} {
		assert.Equal(t, want, line)
	}
}
