package approvals

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each check of the rule book on its own, on a decision that passes every
// other (Gate.Check and the decide update's CheckDecide, no workflow).

// A decision under the development switch (plain, unsigned) may carry a
// reason and a note of MaxTextBytes each and an approver of MaxIDLen; one
// byte more in any one of them is too large.
func TestAPlainDecisionsSizesEachAtTheirLimit(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(120_000, func(w *Wait) { w.Trust.AllowUnsigned = true }))
	full := strings.Repeat("r", MaxTextBytes)
	code := func(in Input) string {
		_, err := g.Check(Reject, in, now)
		return RefusalCode(err)
	}
	assert.Equal(t, "", code(Input{Approver: "adjuster-17", Reason: full, Note: full}), "at the limits")
	assert.Equal(t, CodeUnknown, code(Input{Approver: strings.Repeat("a", 128), Reason: "r"}), "an approver ID of 128 bytes is looked up")
	for name, in := range map[string]Input{
		"reason":   {Approver: "adjuster-17", Reason: full + "r"},
		"note":     {Approver: "adjuster-17", Reason: "r", Note: full + "n"},
		"approver": {Approver: strings.Repeat("a", 129), Reason: "r"},
	} {
		assert.Equal(t, CodeTooLarge, code(in), name)
	}
}

// A decision with a receipt is what the receipt says: any one of the plain
// fields beside it is refused as malformed.
func TestAReceiptComesAlone(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(120_000, nil))
	signed := b.receipt(g, "adjuster-17", Approve, 0)
	for name, edit := range map[string]func(*Input){
		"approver":       func(in *Input) { in.Approver = "adjuster-17" },
		"reason":         func(in *Input) { in.Reason = "r" },
		"note":           func(in *Input) { in.Note = "n" },
		"payload_sha256": func(in *Input) { in.PayloadSHA256 = g.current.RequestSHA256[:12] },
	} {
		in := signed
		edit(&in)
		_, err := g.Check(Approve, in, now)
		assert.Equal(t, CodeMalformed, RefusalCode(err), name)
	}
	_, err := g.Check(Approve, signed, now)
	assert.NoError(t, err, "the receipt alone")
}

// An approval may name a lower amount: above zero and below the request.
func TestALowerAmountIsAboveZeroAndBelowTheRequest(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(120_000, nil))
	for amount, want := range map[int64]string{-1: CodeBadAmount, -120_000: CodeBadAmount, 120_000: CodeBadAmount, 120_001: CodeBadAmount, 1: "", 119_999: ""} {
		assert.Equal(t, want, b.decides(g, "adjuster-17", Approve, amount), "amount %d", amount)
	}
}

// Runs from before receipts decide by a plain approver name: approve, or
// reject with a reason; a cited hash binds the decision to the request when
// it is a prefix of the request's, and is stale otherwise.
func TestPlainDecisionsOfRunsBeforeReceipts(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(120_000, func(w *Wait) { w.Trust = nil }))
	hash := g.current.RequestSHA256
	for _, tc := range []struct {
		name  string
		v     Verdict
		in    Input
		code  string
		bound bool
	}{
		{"approve", Approve, Input{Approver: "adjuster-17"}, "", false},
		{"reject with a reason", Reject, Input{Approver: "adjuster-17", Reason: "not covered"}, "", false},
		{"reject without one", Reject, Input{Approver: "adjuster-17"}, CodeNeedsReason, false},
		{"citing the hash", Approve, Input{Approver: "adjuster-17", PayloadSHA256: hash[:12]}, "", true},
		{"citing all of it", Approve, Input{Approver: "adjuster-17", PayloadSHA256: hash}, "", true},
		{"citing another", Approve, Input{Approver: "adjuster-17", PayloadSHA256: strings.Repeat("0", 12)}, CodeStaleHash, true},
		{"citing a malformed one", Approve, Input{Approver: "adjuster-17", PayloadSHA256: "xyz"}, CodeMalformed, true},
	} {
		c, err := g.check(tc.v, tc.in, now)
		assert.Equal(t, tc.code, RefusalCode(err), "%s: %v", tc.name, err)
		if err == nil {
			assert.Equal(t, tc.bound, c.hashBound, "%s: the decision says whether it cited the request", tc.name)
			assert.Equal(t, tc.v, c.verdict, tc.name)
		}
	}
}

// The decide update's first cause is another claim only for a receipt
// that reads as one for another claim: a receipt that does not parse is
// malformed. When nothing waits, that is the cause, even for an approver
// past their limit.
func TestTheFirstCauseOfAMalformedReceiptOrAClosedWait(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(600_000, nil)) // adjuster-17 may decide up to 5,000.00
	err := g.CheckDecide(DecideInput{Receipt: "not.a.receipt"}, now)
	assert.Equal(t, CodeMalformed, RefusalCode(err), "%v", err)

	over := b.receipt(g, "adjuster-17", Approve, 0)
	assert.Equal(t, CodeOverLimit, RefusalCode(g.CheckDecide(DecideInput{Receipt: over.Receipt}, now)))
	g.current.SetOpen(false)
	assert.Equal(t, CodeNotWaiting, RefusalCode(g.CheckDecide(DecideInput{Receipt: over.Receipt}, now)))
}

// A four-eyes threshold of zero means never: one approver decides any
// amount.
func TestNoFourEyesWithoutAThreshold(t *testing.T) {
	b := newRuleBook(t)
	g := b.open(b.wait(4_000_000, func(w *Wait) { w.Trust.FourEyesAboveMinor = 0 }))
	assert.Equal(t, 1, g.current.Quorum)
}

// An unset policy waits the defaults: 72 hours with the adjusters, 24 with
// the supervisors, a reminder half-way, and rejection at the end.
func TestPolicyDefaults(t *testing.T) {
	want := Policy{TTL: DefaultTTL, EscalationTTL: DefaultEscalationTTL, ReminderAt: DefaultReminderAt, FinalOutcome: Reject}
	assert.Equal(t, want, Policy{}.WithDefaults())
	set := Policy{TTL: time.Hour, EscalationTTL: 2 * time.Hour, ReminderAt: 0.75, FinalOutcome: Hold}
	assert.Equal(t, set, set.WithDefaults())
}

// The trail keeps 256 bytes of free text whole, and cuts what is longer.
func TestTrailTextIsCutAfter256Bytes(t *testing.T) {
	s := strings.Repeat("x", 256)
	assert.Equal(t, s, trimText(s))
	assert.Equal(t, s+"…", trimText(s+"y"))
}

// handoff is approver's signed hand-off of w's request to colleague.
func (b *ruleBook) handoff(w Wait, at time.Duration, approver, colleague string) Input {
	b.t.Helper()
	r, err := NewReceipt(Receipt{Audience: rulesAudience, Subject: approver, ClaimID: w.Request.ClaimID,
		RequestSHA256: w.Request.SHA256(), Verdict: Handoff, AssignTo: colleague, Note: "back on Monday"}, now.Add(at), DefaultReceiptTTL)
	require.NoError(b.t, err)
	tok, err := Sign(b.keys[approver], r)
	require.NoError(b.t, err)
	return Input{Receipt: tok}
}

// A request is handed on by someone who could decide it, to a colleague
// in the directory, not themselves, who could decide it too, and at most
// MaxHandoffs times.
func TestHandOffRules(t *testing.T) {
	b := newRuleBook(t)
	code := func(g *Gate, from, to string) string {
		w := g.wait
		_, err := g.Check(Handoff, b.handoff(w, 0, from, to), now)
		return RefusalCode(err)
	}
	g := b.open(b.wait(600_000, nil)) // above adjuster-17's 5,000.00
	assert.Equal(t, "", code(g, "adjuster-9", "adjuster-21"))
	assert.Equal(t, CodeOverLimit, code(g, "adjuster-17", "adjuster-21"), "whoever hands on could decide it")
	assert.Equal(t, CodeUnknown, code(g, "adjuster-9", "adjuster-99"), "to someone in the directory")
	assert.Equal(t, CodeSameApprover, code(g, "adjuster-9", "adjuster-9"), "to someone else")
	assert.Equal(t, CodeOverLimit, code(g, "adjuster-9", "adjuster-17"), "to someone who could decide it")

	for range MaxHandoffs - 1 {
		g.current.Handoffs = append(g.current.Handoffs, HandedOn{From: "adjuster-9", To: "adjuster-21"})
	}
	assert.Equal(t, "", code(g, "adjuster-9", "adjuster-21"), "the last hand-off allowed")
	g.current.Handoffs = append(g.current.Handoffs, HandedOn{From: "adjuster-9", To: "adjuster-21"})
	assert.Equal(t, CodeHandedOn, code(g, "adjuster-9", "adjuster-21"))
}
