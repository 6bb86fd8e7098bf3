package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/letters"
	"github.com/durableclaims/durableclaims/internal/statute"
)

// The law's clock (law.go), on the time-skipping test server: weeks of
// durable timers in milliseconds, each against the shipped rule sets.

const day = 24 * time.Hour

// underLaw has intake record the shipped rules of code, and starts the
// run's clock at start.
func (s *ClaimSuite) underLaw(code string, start time.Time) statute.Law {
	rec, err := statute.Shipped().Record(code)
	s.Require().NoError(err)
	s.calls.law = &rec
	s.env.SetStartTime(start)
	law, err := rec.Law()
	s.Require().NoError(err)
	return law
}

// letterKinds lists the claimant's letters, in the order sent.
func (s *ClaimSuite) letterKinds() []letters.Kind {
	var out []letters.Kind
	for _, l := range s.calls.letters {
		out = append(out, l.Kind)
	}
	return out
}

// lawRecord is the law section of the run's one audit record.
func (s *ClaimSuite) lawRecord() *LawRecord {
	s.Require().Len(s.calls.audits, 1)
	rec := s.calls.audits[0].Law
	s.Require().NotNil(rec, "the audit record has its law section")
	return rec
}

func (s *ClaimSuite) clock(rec *LawRecord, name string) statute.ClockState {
	for _, c := range rec.Clocks {
		if c.Clock == name {
			return c
		}
	}
	s.FailNow("no such clock", name)
	return statute.ClockState{}
}

// Nobody answers a California claim: it is acknowledged at once, escalated
// at the TTL, held for the supervisors at the second deadline (an overdue
// notice, never a denial by silence), and a supervisor's decision on day
// 20 pays it, inside every clock.
func (s *ClaimSuite) TestLawHoldsAnUnansweredClaimForAPerson() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	law := s.underLaw("US-CA", start)
	s.approve(20*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-1", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status, "a person decided; silence did not")
	s.Require().NotNil(r.Approval)
	s.False(r.Approval.Expired)
	s.Equal(start.Add(96*time.Hour), r.Approval.OverdueAt.UTC(), "held after the 72 h TTL and the 24 h escalation")
	s.True(law.Due(law.Jurisdiction().Decide, start).Equal(r.Approval.DueBy), "the inbox is told the statutory due date")
	s.Len(s.calls.escalated, 1)
	s.Len(s.calls.overdue, 1, "the overdue notice, once")
	s.Equal([]claim.IdempotencyKey{"claim-law-1:step5:overdue"}, s.calls.keys["overdue"])

	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Approval}, s.letterKinds())
	s.Equal([]claim.IdempotencyKey{"claim-law-1:step5:letter:acknowledgment"}, s.calls.keys["letter"])
	s.Equal(start, s.calls.letters[0].SentAt, "acknowledged when the claim began to wait")
	s.Contains(s.calls.letters[1].Body, "1840.00 USD")

	rec := s.lawRecord()
	s.Equal("US-CA", rec.Jurisdiction)
	s.Equal(statute.Shipped().Version, rec.RuleSet)
	s.Empty(rec.Breaches)
	s.Equal(start, *rec.AcknowledgedAt)
	s.Equal(start.Add(20*day), *rec.DecidedAt)
	s.Equal(start.Add(20*day), *rec.PaidAt)
	for _, c := range rec.Clocks {
		s.False(c.Breached, c.Clock)
	}
	s.Len(rec.Letters, 2)
	s.Equal(s.calls.letters[1].SHA256, rec.Letters[1].SHA256, "the claim file keeps each letter with its hash")
}

// Nobody decides a California claim for 45 days: a status letter goes out
// a day before the 40-day decision is due, and California lets letters
// sent on time defer the decision (10 CCR §2695.7(c)(1)): decided on day
// 45, before the next letter was due, the claim is in time.
func (s *ClaimSuite) TestLawTimelyLettersDeferTheDecision() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	law := s.underLaw("US-CA", start)
	s.approve(45*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-2", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Status, letters.Approval}, s.letterKinds())
	j := law.Jurisdiction()
	letter := s.calls.letters[1].SentAt
	s.True(law.Due(j.Decide, start).Add(-statusLead).Equal(letter), "the status letter a day before the decision is due")
	rec := s.lawRecord()
	s.Empty(rec.Breaches)
	c := s.clock(rec, "decide")
	s.False(c.Breached)
	s.True(law.Due(*j.StatusEvery, letter).Equal(*c.DueAt), "deferred to when the next letter would be due")
}

// Florida's rules do not let letters defer: nobody decides a Florida claim
// for 65 days; it is written to every 30 days meanwhile, held for a person,
// and the breaches of the 60-day clocks (decide and pay) are recorded,
// not silent.
func (s *ClaimSuite) TestLawRecordsABreach() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	law := s.underLaw("US-FL", start)
	s.approve(65*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-6", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status, "held for a person, and paid when one decided")
	kinds := s.letterKinds()
	s.Equal(letters.Acknowledgment, kinds[0])
	s.Equal(letters.Approval, kinds[len(kinds)-1])
	s.Equal([]letters.Kind{letters.Status, letters.Status}, kinds[1:len(kinds)-1], "a letter every 30 days")

	rec := s.lawRecord()
	s.Equal([]string{"decide", "pay"}, rec.Breaches, "Florida: pay or deny within 60 days of notice")
	c := s.clock(rec, "decide")
	s.True(c.Breached)
	s.True(law.Due(law.Jurisdiction().Decide, start).Equal(*c.DueAt))
	s.True(start.Add(65 * day).Equal(*c.MetAt))
	s.False(s.clock(rec, "acknowledge").Breached)
}

// A claim the coverage check finds nothing payable in is not denied by
// the rules under the law: a person decides, shown the check's reason. An
// approval of a request that pays nothing is refused; the adjuster's
// rejection, with a reason, is the denial, and its letter gives that
// reason, the coverage check's and the provisions relied on.
func (s *ClaimSuite) TestLawADenialIsAPersonsWithReasonsAndProvisions() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	s.underLaw("US-TX", start)
	c := testClaim("claim-law-3", "1840.00")
	c.PolicyID = "pol-9999"
	s.approve(30*time.Minute, "adjuster-17", nil)
	s.reject(time.Hour, "adjuster-17", "no policy of ours covers this address")
	s.start(c, Options{})

	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Require().NotNil(r.Approval)
	s.Equal(int64(0), r.Approval.Request.AmountMinor, "the request pays nothing")
	s.Equal(DenialReason+"no such policy", r.Approval.Request.Reasons[0])
	s.Equal("adjuster-17", r.Approval.Decision.Approver)
	st := s.status()
	s.Require().Len(st.Attempts, 2)
	s.Equal(approvals.CodeNothingToPay, st.Attempts[0].Code, "approving a denial is refused")
	s.Equal(DecidedByApprover, st.Decided.By)

	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Denial}, s.letterKinds())
	n := s.calls.notices[0]
	s.Require().NotNil(n.Letter)
	s.Equal([]string{"no such policy", "the decision of the claims adjuster who reviewed your claim: no policy of ours covers this address"}, n.Letter.Reasons)
	s.Equal([]string{"Policy pol-9999: no such policy is in force with us"}, n.Letter.Provisions)
	s.False(n.Letter.Automated, "a person decided")
	body := s.calls.letters[1].Body
	s.Contains(body, "no policy of ours covers this address")
	s.Contains(body, "Texas Department of Insurance")

	rec := s.lawRecord()
	s.Equal(start, *rec.AcknowledgedAt)
	s.Nil(rec.PaidAt)
	s.Empty(rec.Breaches)
	for _, c := range rec.Clocks {
		s.NotEqual("pay", c.Clock, "a denied claim has no payment clock")
	}
}

// A Texas claim filed the Monday before Christmas: the decision is due in
// business days of the Texas calendar (Christmas Eve, Christmas Day, the
// day after and New Year's Day are not); the status letter sent before
// then extends it to the 45th day after the letter, and a supervisor's
// decision on day 30 is in time.
func (s *ClaimSuite) TestLawTexasBusinessDaysAndTheExtension() {
	start := time.Date(2026, time.December, 21, 15, 0, 0, 0, time.UTC)
	law := s.underLaw("US-TX", start)
	j := law.Jurisdiction()
	s.Require().NotNil(j.Extension)
	s.approve(30*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-4", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Status, letters.Approval}, s.letterKinds())
	letter := s.calls.letters[1].SentAt
	s.True(law.Due(j.Decide, start).Add(-statusLead).Equal(letter), "the status letter a day before the 15th business day")
	rec := s.lawRecord()
	s.Empty(rec.Breaches)
	s.True(law.Due(*j.Extension, letter).Equal(*s.clock(rec, "decide").DueAt), "the status letter extended the decision clock to 45 days after it")
}

// The model recommending nothing is advice: under the law a person
// decides a denial, so the claim waits for one with the covered amount.
func (s *ClaimSuite) TestLawAModelCannotDeny() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	s.underLaw("US-CA", start)
	s.calls.recommendNothing = true
	s.reject(time.Hour, "adjuster-17", "the damage predates the policy")
	s.start(testClaim("claim-law-5", "640.00"), Options{})

	s.Equal(StatusRejected, s.result().Status)
	s.Require().NotNil(s.result().Approval, "a person was asked")
	s.Contains(s.result().Approval.Request.Reasons[0], "the assessment recommends no payout")
	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Denial}, s.letterKinds())
	s.Contains(s.calls.letters[1].Body, "the damage predates the policy")
	s.False(s.calls.notices[0].Letter.Automated)
}

// A status letter that cannot be sent (the relay refuses it for good)
// stops nothing: the run tries again a day on, not in a loop, a person
// still decides, and the missed letter is a breach on record.
func (s *ClaimSuite) TestLawALetterThatCannotBeSentIsABreachNotAStop() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	s.underLaw("US-CA", start)
	s.calls.statusLetterErr = temporal.NewNonRetryableApplicationError("smtp: 550 mailbox unavailable", "MailRefused", nil)
	s.approve(45*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-7", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Approval}, s.letterKinds())
	tries := len(s.calls.keys["letter"]) - 1 // the acknowledgment
	s.GreaterOrEqual(tries, 6, "tried again each day from day 39 to day 45")
	s.LessOrEqual(tries, 8, "once a day, not in a loop")
	rec := s.lawRecord()
	s.Contains(rec.Breaches, "decide", "no timely letter: the 40 days stand")
	s.Contains(rec.Breaches, "status", "the letter due was never sent")
}

// A policy that names no jurisdiction is under the rule sets' default, the
// NAIC model regulation: a status letter on day 20, before the 21-day
// decision is due, defers it (§7 C), and a decision on day 25 is in time.
func (s *ClaimSuite) TestLawTheDefaultRulesApply() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	law := s.underLaw("", start)
	s.Equal("US", s.calls.law.Code, "the default")
	s.approve(25*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-8", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]letters.Kind{letters.Acknowledgment, letters.Status, letters.Approval}, s.letterKinds())
	j := law.Jurisdiction()
	s.True(law.Due(j.Decide, start).Add(-statusLead).Equal(s.calls.letters[1].SentAt))
	rec := s.lawRecord()
	s.Equal("US", rec.Jurisdiction)
	s.Empty(rec.Breaches)
}

// An acknowledgment that cannot be sent is a late acknowledgment: the
// claim is acknowledged only by its decision letter, on day 20, past
// California's 15 days, and the breach is on record.
func (s *ClaimSuite) TestLawALateAcknowledgmentIsABreach() {
	start := time.Date(2026, time.November, 2, 17, 0, 0, 0, time.UTC)
	s.underLaw("US-CA", start)
	s.calls.ackLetterErr = temporal.NewNonRetryableApplicationError("smtp: 550 mailbox unavailable", "MailRefused", nil)
	s.approve(20*day, "supervisor-3", nil)
	s.start(testClaim("claim-law-9", "1840.00"), Options{})

	s.Equal(StatusPaid, s.result().Status)
	s.Equal([]letters.Kind{letters.Approval}, s.letterKinds())
	rec := s.lawRecord()
	s.Equal([]string{"acknowledge"}, rec.Breaches)
	s.True(start.Add(20*day).Equal(*rec.AcknowledgedAt), "acknowledged by the decision letter")
}
