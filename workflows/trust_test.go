package workflows

import (
	"errors"
	"strings"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
)

// Receipts that prove the wrong thing: each is refused with its code and
// nothing is paid until a good one arrives.
func (s *ClaimSuite) TestReceiptsThatProveTheWrongThingAreRefused() {
	sh := func(d time.Duration) func(*approvals.Receipt) {
		return func(r *approvals.Receipt) {
			r.IssuedAt, r.Expiry = r.IssuedAt+int64(d/time.Second), r.Expiry+int64(d/time.Second)
		}
	}
	s.approve(1*time.Hour, "adjuster-17", func(r *approvals.Receipt) { r.ClaimID = "claim-0001" })
	s.approve(2*time.Hour, "adjuster-17", sh(-time.Hour))                                                              // expired
	s.approve(3*time.Hour, "adjuster-17", sh(time.Hour))                                                               // from the future
	s.approve(4*time.Hour, "adjuster-17", func(r *approvals.Receipt) { r.Expiry = r.IssuedAt + 2*3600 })               // two hours of life
	s.approve(5*time.Hour, "adjuster-17", func(r *approvals.Receipt) { r.Verdict = approvals.Reject; r.Reason = "x" }) // on the approve signal
	s.env.RegisterDelayedCallback(func() {
		tok := s.receipt("adjuster-17", "adjuster-17", approvals.Approve, nil)
		i := strings.LastIndexByte(tok, '.')
		forged := tok[:i+1] + strings.Repeat("A", len(tok)-i-1) // same header and payload, another signature
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: forged})
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: "not.a.jws"})
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: tok, Approver: "supervisor-3"})
	}, 6*time.Hour)
	s.approve(7*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0090", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Len(s.calls.pays, 1)
	var codes []string
	for _, a := range r.Attempts {
		codes = append(codes, a.Code)
	}
	s.Equal([]string{approvals.CodeOtherClaim, approvals.CodeExpired, approvals.CodeNotYetValid, approvals.CodeTooLongLived,
		approvals.CodeWrongVerdict, approvals.CodeBadSignature, approvals.CodeMalformed, approvals.CodeMalformed, ""}, codes)
	s.Equal("adjuster-17", r.Attempts[1].Approver, "a refused attempt records who it claimed to be")
	s.Equal(approvals.ProofReceipt, r.Approval.Decision.Proof)
}

// Above the four-eyes threshold one approval is not enough: the claim
// waits for a second approver, one of the two a supervisor; the same
// approver twice, or the same receipt again, does not count.
func (s *ClaimSuite) TestFourEyesNeedsTwoApproversOneASupervisor() {
	var partial Status
	s.env.RegisterDelayedCallback(func() {
		first := s.receipt("adjuster-17", "adjuster-17", approvals.Approve, nil)
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: first})
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: first}) // replayed
	}, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", nil) // a second receipt, same approver
	s.env.RegisterDelayedCallback(func() { partial = s.status() }, 3*time.Hour)
	s.approve(4*time.Hour, "supervisor-3", nil)
	rules := suiteRules()
	rules.FourEyesAbove = "1500"
	s.calls.rules = &rules
	s.start(testClaim("claim-0091", "1840.00"), Options{})

	s.Equal(StatusWaiting, partial.State, "one approval of two: still waiting")
	s.Equal(2, partial.Approval.Quorum)
	s.Len(partial.Approval.Votes, 1)
	s.Nil(partial.Approval.Decision)
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Len(s.calls.pays, 1)
	s.Require().Len(r.Approval.Votes, 2)
	s.Equal("adjuster-17", r.Approval.Votes[0].Approver)
	s.Equal("supervisor-3", r.Approval.Votes[1].Approver)
	s.Equal([]string{approvals.CodeReplayed, approvals.CodeSameApprover}, codesOf(r.Attempts, false))
	s.Len(s.calls.audits[0].Approvals[0].Votes, 2, "the audit lists both approvers")
	// The approval queue learns the wait opened, the first vote (so
	// adjuster-17 no longer lists it), and its end, each a new revision.
	s.Equal([]queueWrite{{1, true, "waiting", nil}, {2, true, "waiting", []string{"adjuster-17"}}, {3, false, "waiting", []string{"adjuster-17", "supervisor-3"}}},
		s.queueWrites())
}

// queueWrite is what a test checks of one write to the approval queue.
type queueWrite struct {
	Rev    int64
	Open   bool
	Stage  approvals.Stage
	Voters []string
}

func (s *ClaimSuite) queueWrites() []queueWrite {
	s.calls.mu.Lock()
	defer s.calls.mu.Unlock()
	var out []queueWrite
	for _, in := range s.calls.queue {
		w := queueWrite{Rev: in.Approval.Rev, Open: in.Open, Stage: in.Approval.Stage}
		for _, v := range in.Approval.Votes {
			w.Voters = append(w.Voters, v.Approver)
		}
		out = append(out, w)
	}
	return out
}

func (s *ClaimSuite) TestFourEyesTwoAdjustersAreNotEnough() {
	s.approve(1*time.Hour, "adjuster-17", nil)
	s.approve(2*time.Hour, "adjuster-9", func(r *approvals.Receipt) {
		r.AmountMinor, r.Reason = 140000, "invoice covers 1400.00"
	})
	rules := suiteRules()
	rules.FourEyesAbove = "1500"
	s.calls.rules = &rules
	s.start(testClaim("claim-0092", "1840.00"), Options{Approval: approvals.Policy{TTL: 5 * time.Hour, EscalationTTL: time.Hour}})
	r := s.result()
	s.Equal(StatusExpired, r.Status, "one approver alone never pays a four-eyes claim")
	s.Empty(s.calls.pays)
	s.Equal([]string{approvals.CodeNeedSupervisor}, codesOf(r.Attempts, false))
}

// An approver may approve less than asked, with a reason: the claim is
// paid that much, within that approver's limit.
func (s *ClaimSuite) TestLowerAmountApprovalPaysTheLowerAmount() {
	s.approve(1*time.Hour, "adjuster-9", func(r *approvals.Receipt) { r.AmountMinor = 140000 }) // no reason
	s.approve(2*time.Hour, "adjuster-9", func(r *approvals.Receipt) {
		r.AmountMinor, r.Reason = 140000, "the invoice covers 1400.00"
	})
	s.start(testClaim("claim-0093", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(s.calls.pays, 1)
	s.Equal(int64(140000), s.calls.pays[0].AmountMinor, "adjuster-9 (limit 1500.00) approved 1400.00")
	s.Equal("1400.00", r.Payout)
	d := r.Approval.Decision
	s.Equal(int64(140000), d.AmountMinor)
	s.Require().NotNil(d.Approved)
	s.Equal("1400.00", d.Approved.Amount)
	s.Equal(d.Approved.SHA256(), d.ApprovedSHA256)
	s.NotEqual(d.RequestSHA256, d.ApprovedSHA256, "the approved request has its own hash")
	s.Equal([]string{approvals.CodeNeedsReason}, codesOf(r.Attempts, false))
}

// Whoever amended a claim may not approve it.
func (s *ClaimSuite) TestTheAmenderMayNotApprove() {
	s.calls.reread = func(r *activities.LoadClaimResult) {
		r.Claim.AmountMinor, r.Version, r.AmendedBy = 210000, 2, []string{"adjuster-17"}
	}
	s.approve(time.Hour, "adjuster-17", nil)
	s.approve(2*time.Hour, "adjuster-17", nil)  // the new request: refused, she amended it
	s.approve(3*time.Hour, "supervisor-3", nil) // someone else
	s.start(testClaim("claim-0094", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(int64(210000), s.calls.pays[0].AmountMinor)
	s.Equal("supervisor-3", r.Approval.Decision.Approver)
	s.Equal([]string{approvals.CodeAmender}, codesOf(r.Attempts, false))
}

// The development switch accepts a plain decision and the audit says it
// was not proven.
func (s *ClaimSuite) TestUnsignedDecisionsOnlyUnderTheDevelopmentSwitch() {
	rules := suiteRules()
	rules.AllowUnsignedDecisions = true
	s.calls.rules = &rules
	s.signal(time.Hour, approvals.SignalApprove, map[string]string{"approver": "adjuster-17"})
	s.start(testClaim("claim-0095", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(approvals.ProofUnauthenticated, r.Approval.Decision.Proof)
	s.Equal(approvals.ProofUnauthenticated, s.calls.audits[0].Approvals[0].Decision.Proof)
	s.Require().Len(s.calls.pays, 1)
	s.Require().NotNil(s.calls.pays[0].Approval, "the payment is told what approved it")
	s.Equal([]string{"adjuster-17"}, s.calls.pays[0].Approval.Unsigned, "who decided, for the payment's own check of the switch")
	s.Empty(s.calls.pays[0].Approval.Receipts)
}

// Runs recorded before receipts (versionAgent) keep deciding by name, as
// their histories did: replays of those runs depend on it.
func (s *ClaimSuite) TestRunsBeforeReceiptsDecideAsTheyDid() {
	s.env.OnGetVersion(versionClaim, workflow.DefaultVersion, versionLatest).Return(workflow.Version(versionAgent))
	s.signal(time.Hour, approvals.SignalApprove, map[string]string{"approver": "adjuster-17"})
	s.start(testClaim("claim-0096", "1840.00"), Options{AutoApproveLimitMinor: 100_000})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(approvals.ProofNone, r.Approval.Decision.Proof)
	s.Zero(r.Approval.Quorum)
}

// A run for a claim the system of record does not hold fails at intake,
// having done nothing.
func (s *ClaimSuite) TestUnregisteredClaimIsRefused() {
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(ClaimWorkflow)
	env.OnActivity(a.LoadClaim, mock.Anything, mock.Anything).Return(activities.LoadClaimResult{},
		temporal.NewNonRetryableApplicationError("claim claim-0097 is not registered", activities.ErrNotRegistered, nil))
	env.SetStartWorkflowOptions(StartOptions("claim-0097"))
	env.ExecuteWorkflow(ClaimWorkflow, ClaimInput{Claim: testClaim("claim-0097", "640.00")})
	var appErr *temporal.ApplicationError
	s.Require().True(errors.As(env.GetWorkflowError(), &appErr))
	s.Equal(activities.ErrNotRegistered, appErr.Type())
}

// Input that loosens the worker's policy ends the run at intake, naming
// the option; input that tightens it is honoured.
func (s *ClaimSuite) TestLooserInputIsRefusedNamingTheOption() {
	for option, opts := range map[string]Options{
		"auto_approve_limit_minor": {AutoApproveLimitMinor: 1 << 62},
		"approval.ttl":             {Approval: approvals.Policy{TTL: 1000 * time.Hour}},
		"approval.escalation_ttl":  {Approval: approvals.Policy{EscalationTTL: 1000 * time.Hour}},
		"approval.final_outcome":   {Approval: approvals.Policy{TTL: time.Second, EscalationTTL: time.Second, FinalOutcome: approvals.Approve}},
		"approval.reminder_at":     {Approval: approvals.Policy{ReminderAt: 2}},
		"four_eyes_above_minor":    {FourEyesAboveMinor: 1 << 40},
		"caps.max_steps":           {Caps: Caps{MaxSteps: 1000}},
		"caps.max_age":             {Caps: Caps{MaxAge: 365 * 24 * time.Hour}},
		"caps.max_model_spend":     {Caps: Caps{MaxModelSpendMicros: 1 << 40}},
	} {
		s.SetupTest()
		s.env.SetStartWorkflowOptions(StartOptions("claim-0098"))
		s.env.ExecuteWorkflow(ClaimWorkflow, ClaimInput{Claim: testClaim("claim-0098", "9999.00"), Options: opts})
		var appErr *temporal.ApplicationError
		s.Require().True(errors.As(s.env.GetWorkflowError(), &appErr), option)
		s.Equal(ErrLooserThanPolicy, appErr.Type(), option)
		s.Contains(appErr.Error(), "options."+option, option)
		s.Empty(s.calls.keys["triage"], "%s: nothing ran after intake", option)
		s.Empty(s.calls.pays, option)
	}
}

func (s *ClaimSuite) TestTighterInputIsHonoured() {
	start := s.env.Now()
	s.start(testClaim("claim-0099", "2500.00"), Options{Approval: approvals.Policy{TTL: 3 * time.Second, EscalationTTL: 4 * time.Second,
		FinalOutcome: approvals.Reject}, Caps: Caps{MaxSteps: 50}})
	s.Equal(StatusExpired, s.result().Status)
	s.Equal(7*time.Second, s.env.Now().Sub(start).Round(time.Second))
}

func codesOf(attempts []approvals.Attempt, accepted bool) []string {
	var out []string
	for _, a := range attempts {
		if a.Accepted == accepted {
			out = append(out, a.Code)
		}
	}
	return out
}

// A key revoked after it signed: the decision is voided at the re-read
// before the payment, and a new request waits for an approver whose key
// still counts.
func (s *ClaimSuite) TestARevokedKeysDecisionIsVoidedBeforeThePayment() {
	s.calls.revoked = []string{testKeys()["adjuster-17"].Key.KeyID}
	s.approve(time.Hour, "adjuster-17", nil)
	s.approve(2*time.Hour, "supervisor-3", nil)
	s.start(testClaim("claim-0100", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(r.Approvals, 2)
	s.Contains(r.Approvals[0].Voided, "revoked before the payment")
	s.Equal("supervisor-3", r.Approval.Decision.Approver)
	s.Len(s.calls.pays, 1)
}

// An approver may hand the request to a named colleague who could decide
// it: recorded, the wait goes on. The wait's timeline is in the status.
func (s *ClaimSuite) TestHandOffToAColleague() {
	var waiting Status
	handed := s.decideWith(time.Hour, func() approvals.DecideInput {
		return approvals.DecideInput{Receipt: s.receipt("inbox", "adjuster-17", approvals.Handoff, func(r *approvals.Receipt) {
			r.AssignTo, r.Note = "supervisor-3", "needs a supervisor's eye"
		})}
	})
	refused := s.decideWith(time.Hour+time.Minute, func() approvals.DecideInput {
		return approvals.DecideInput{Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Handoff, func(r *approvals.Receipt) { r.AssignTo = "adjuster-9" })}
	})
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, 2*time.Hour)
	s.approve(3*time.Hour, "supervisor-3", nil)
	s.start(testClaim("claim-0120", "1840.00"), Options{})

	s.NoError(handed.rejected)
	s.Equal(approvals.Handoff, handed.decision.Verdict)
	s.ErrorContains(refused.rejected, "cannot hand the request to adjuster-9: over limit")
	s.Equal(StatusWaiting, waiting.State, "a hand-off decides nothing")
	s.Require().Len(waiting.Approval.Handoffs, 1)
	h := waiting.Approval.Handoffs[0]
	s.Equal([]string{"adjuster-17", "supervisor-3", "needs a supervisor's eye"}, []string{h.From, h.To, h.Note})
	s.Equal("supervisor-3", waiting.Approval.AssignedTo())
	a := waiting.Approval
	s.Equal(36*time.Hour, a.RemindAt.Sub(a.RequestedAt))
	s.Equal(72*time.Hour, a.EscalatesAt.Sub(a.RequestedAt))
	s.Equal(96*time.Hour, a.ExpiresAt.Sub(a.RequestedAt))
	s.Equal(StatusPaid, s.result().Status)
	writes := s.queueWrites()
	s.Equal([]queueWrite{{1, true, "waiting", nil}, {2, true, "waiting", nil}, {3, false, "waiting", []string{"supervisor-3"}}}, writes)
	s.Equal("supervisor-3", s.calls.queue[1].Approval.AssignedTo(), "the hand-off is in the queue")
	s.Equal(s.calls.queue[0].Approval.Deadline, s.calls.queue[1].Approval.Deadline, "the deadline keeps running")
}

// Hand-offs are accepted attempts, so nothing else bounds them: two
// approvers handing a request back and forth would grow the wait's state
// and the history until Temporal ends the run. After maxHandoffs the
// request must be decided (or left to escalate); more hand-offs are
// refused, and the claim still completes.
func (s *ClaimSuite) TestHandOffsAreBounded() {
	var outcomes []*updateOutcome
	for i := range 20 {
		from, to := "adjuster-17", "supervisor-3"
		if i%2 == 1 {
			from, to = to, from
		}
		outcomes = append(outcomes, s.decideWith(time.Hour+time.Duration(i)*time.Minute, func() approvals.DecideInput {
			return approvals.DecideInput{Receipt: s.receipt("inbox", from, approvals.Handoff, func(r *approvals.Receipt) { r.AssignTo = to })}
		}))
	}
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, 2*time.Hour)
	s.approve(3*time.Hour, "supervisor-3", nil)
	s.start(testClaim("claim-0121", "1840.00"), Options{})

	accepted := 0
	for _, o := range outcomes {
		if o.rejected == nil {
			accepted++
			continue
		}
		s.ErrorContains(o.rejected, "handed on")
	}
	s.Equal(approvals.MaxHandoffs, accepted)
	s.Len(waiting.Approval.Handoffs, approvals.MaxHandoffs)
	s.Equal(StatusPaid, s.result().Status)
}

// Only a claim the system of record does not hold, or has closed, ends
// the run at intake having done nothing: any other failure of the first
// read dead-letters the claim for an operator, with its error (caps.go,
// isErrorType; claim_workflow.go, intake).
func (s *ClaimSuite) TestAnIntakeFailureDeadLettersTheClaim() {
	s.calls.loadErr = temporal.NewNonRetryableApplicationError("documents[0]: changed since it was stored", activities.ErrInvalidInput, nil)
	s.start(testClaim("claim-0090", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(activities.ErrInvalidInput, r.DeadLetter.ErrorType)
	s.Empty(s.calls.pays)
}
