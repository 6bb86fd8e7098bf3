package workflows

import (
	"context"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// decide sends the decide update at a workflow time and records how it
// ended: rejected by the validator, or completed with a decision or error.
type updateOutcome struct {
	rejected error
	accepted bool
	decision approvals.Decision
	err      error
}

func (s *ClaimSuite) decide(after time.Duration, in approvals.DecideInput) *updateOutcome {
	return s.decideWith(after, func() approvals.DecideInput { return in })
}

// decideWith is decide with the input made when it is sent (a receipt for
// the request then waiting).
func (s *ClaimSuite) decideWith(after time.Duration, input func() approvals.DecideInput) *updateOutcome {
	out := &updateOutcome{}
	s.env.RegisterDelayedCallback(func() {
		in := input()
		s.env.UpdateWorkflow(approvals.UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { out.rejected = err },
			OnAccept: func() { out.accepted = true },
			OnComplete: func(v interface{}, err error) {
				out.err = err
				if d, ok := v.(approvals.Decision); ok {
					out.decision = d
				}
			},
		}, in)
	}, after)
	return out
}

func (s *ClaimSuite) refusals(r ClaimResult) []string {
	var out []string
	for _, a := range r.Attempts {
		if !a.Accepted {
			out = append(out, a.Refusal)
		}
	}
	return out
}

func (s *ClaimSuite) TestReminderComesAtItsFractionOfTheTTL() {
	start := s.env.Now()
	var remindedAt time.Duration
	// The reminder runs local (versionLocalNotices), regular before.
	s.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []interface{}) {
		if info.ActivityType.Name == "RemindApprovers" {
			remindedAt = s.env.Now().Sub(start)
		}
	})
	s.approve(40*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0060", "1840.00"), Options{Approval: approvals.Policy{ReminderAt: 0.25}})
	s.Equal(StatusPaid, s.result().Status)
	s.Equal(18*time.Hour, remindedAt.Round(time.Hour))
	s.True(s.result().Approval.Reminded)
}

func (s *ClaimSuite) TestFinalOutcomeApproveIsPaidByPolicy() {
	rules := suiteRules()
	rules.FinalOutcome = "approve" // the worker's policy allows it
	s.calls.rules = &rules
	s.start(testClaim("claim-0061", "1840.00"), Options{Approval: approvals.Policy{FinalOutcome: approvals.Approve}})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.True(r.Approval.Expired)
	s.Equal("policy", r.Approval.Decision.Approver)
	s.Equal(approvals.StageEscalated, r.Approval.Decision.Stage)
	s.Require().Len(s.calls.pays, 1)
	s.Require().NotNil(s.calls.pays[0].Approval)
	s.True(s.calls.pays[0].Approval.ByPolicy, "the payment is told the policy approved, to check it itself")
	s.Empty(s.calls.pays[0].Approval.Receipts)
}

func (s *ClaimSuite) TestEscalatedClaimNeedsASupervisor() {
	s.approve(80*time.Hour, "adjuster-17", nil)
	s.approve(81*time.Hour, "supervisor-3", nil)
	s.start(testClaim("claim-0062", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal("supervisor-3", r.Approval.Decision.Approver)
	s.Equal("supervisor", r.Approval.Decision.Role)
	s.Require().Len(s.refusals(r), 1)
	s.Contains(s.refusals(r)[0], "a supervisor must decide")
}

func (s *ClaimSuite) TestAuthorityRules() {
	s.calls.approvers = authority.Directory{
		{ID: "ada-herself", Role: authority.Adjuster, Email: "ada@example.com", Limits: map[string]int64{"usd": 1_000_000}},
		{ID: "adjuster-17", Role: authority.Adjuster, Email: "a17@insurer.example", Limits: map[string]int64{"usd": 500_000}},
		{ID: "adjuster-9", Role: authority.Adjuster, Email: "a9@insurer.example", Limits: map[string]int64{"usd": 150_000}},
		{ID: "euro-only", Role: authority.Adjuster, Email: "eu@insurer.example", Limits: map[string]int64{"eur": 9_000_000}},
	}
	s.approve(1*time.Hour, "mallory", nil)                         // her own key, which the directory does not list
	s.approveAs(90*time.Minute, "inbox", "mallory", nil)           // vouched for by the inbox, but not an approver
	s.approveAs(100*time.Minute, "adjuster-9", "adjuster-17", nil) // an approver's key signs only their own decisions
	s.approve(2*time.Hour, "ada-herself", nil)
	s.approve(3*time.Hour, "adjuster-9", nil)
	s.approve(4*time.Hour, "euro-only", nil)
	s.approve(5*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0063", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	ref := s.refusals(r)
	s.Require().Len(ref, 6)
	s.Contains(ref[0], `signed by key "mallory-`)
	s.Contains(ref[0], "which the approver directory does not list")
	s.Contains(ref[1], `unknown approver "mallory"`)
	s.Contains(ref[2], "an approver's key signs only their own decisions")
	s.Contains(ref[3], "self-approval")
	s.Contains(ref[4], "over limit: adjuster-9 may decide up to 1500.00 USD, the request is 1840.00")
	s.Contains(ref[5], "over limit: euro-only may decide up to nothing in USD")
	var codes []string
	for _, a := range r.Attempts {
		codes = append(codes, a.Code)
	}
	s.Equal([]string{approvals.CodeUnknownKey, approvals.CodeUnknown, approvals.CodeNotVouched, approvals.CodeSelfApproval,
		approvals.CodeOverLimit, approvals.CodeOverLimit, ""}, codes)
	s.Equal("adjuster-17", r.Approval.Decision.Approver)
	s.Equal("adjuster", r.Approval.Decision.Role)
}

func (s *ClaimSuite) TestDecideUpdateValidatesBeforeHistory() {
	early := s.decide(0, approvals.DecideInput{Approver: "adjuster-17", Decision: approvals.Approve})
	plain := s.decide(time.Hour, approvals.DecideInput{Approver: "supervisor-3", Decision: approvals.Approve})
	// An unsigned JSON body is refused as unsigned, not for the decision field it lacks.
	unsignedBody := s.decide(time.Hour+30*time.Second, approvals.DecideInput{Approver: "supervisor-3"})
	unknown := s.decideWith(time.Hour+time.Minute, func() approvals.DecideInput {
		return approvals.DecideInput{Receipt: s.receipt("inbox", "mallory", approvals.Approve, nil)}
	})
	badVerdict := s.decideWith(time.Hour+2*time.Minute, func() approvals.DecideInput {
		return approvals.DecideInput{Decision: "maybe", Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Approve, nil)}
	})
	wrongVerdict := s.decideWith(time.Hour+3*time.Minute, func() approvals.DecideInput {
		return approvals.DecideInput{Decision: approvals.Reject, Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Approve, nil)}
	})
	stale := s.decideWith(time.Hour+4*time.Minute, func() approvals.DecideInput {
		return approvals.DecideInput{Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Approve,
			func(r *approvals.Receipt) { r.RequestSHA256 = strings.Repeat("a", 64) })}
	})
	var ok *updateOutcome
	late := &updateOutcome{}
	s.env.RegisterDelayedCallback(func() {
		ok = &updateOutcome{}
		s.env.UpdateWorkflow(approvals.UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { ok.rejected = err }, OnAccept: func() { ok.accepted = true },
			OnComplete: func(v interface{}, err error) { ok.err = err; ok.decision, _ = v.(approvals.Decision) },
		}, approvals.DecideInput{Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Approve, note("ok"))})
		// A second decision right behind the first finds nothing waiting.
		s.env.UpdateWorkflow(approvals.UpdateDecide, "", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { late.rejected = err }, OnAccept: func() {}, OnComplete: func(interface{}, error) {},
		}, approvals.DecideInput{Receipt: s.receipt("adjuster-17", "adjuster-17", approvals.Reject,
			func(r *approvals.Receipt) { r.Reason = "changed my mind" })})
	}, 3*time.Hour)

	s.start(testClaim("claim-0064", "1840.00"), Options{})
	s.ErrorContains(early.rejected, "not waiting")
	s.ErrorContains(plain.rejected, "unsigned")
	s.ErrorContains(unsignedBody.rejected, "unsigned: a decision needs a signed receipt")
	s.ErrorContains(unknown.rejected, "unknown approver")
	s.ErrorContains(badVerdict.rejected, `decision must be "approve" or "reject"`)
	s.ErrorContains(wrongVerdict.rejected, "receipt says approve; it cannot reject")
	s.ErrorContains(stale.rejected, "stale decision")
	s.Require().NotNil(ok)
	s.NoError(ok.rejected)
	s.True(ok.accepted)
	s.NoError(ok.err)
	s.Equal("adjuster-17", ok.decision.Approver)
	s.True(ok.decision.HashBound)
	s.ErrorContains(late.rejected, "not waiting")

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal("update", r.Approval.Decision.Channel)
	// Validator refusals never reach history: only the accepted update is an attempt.
	s.Require().Len(r.Attempts, 1)
	s.Equal("update", r.Attempts[0].Channel)
	s.True(r.Attempts[0].Accepted)
}

func (s *ClaimSuite) TestWithdrawnWhileWaitingPaysNothing() {
	s.calls.reread = func(r *activities.LoadClaimResult) { r.Status, r.Version = "withdrawn", 2 }
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0065", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusWithdrawn, r.Status)
	s.Empty(s.calls.pays)
	s.Contains(r.Approval.Voided, "withdrawn")
	s.Equal(StatusWithdrawn, s.calls.closes[0].Outcome)
}

func (s *ClaimSuite) TestAmendedWhileWaitingVoidsTheApprovalAndAsksAgain() {
	s.calls.reread = func(r *activities.LoadClaimResult) {
		r.Claim.AmountMinor, r.Version = 210000, 2
	}
	s.approve(time.Hour, "adjuster-17", nil)
	var second string
	s.env.RegisterDelayedCallback(func() { second = s.status().Approval.RequestSHA256 }, 2*time.Hour)
	s.approve(3*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0066", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(r.Approvals, 2)
	first := r.Approvals[0]
	s.Contains(first.Voided, "amount 1840.00 usd → 2100.00 usd")
	s.NotEqual(first.RequestSHA256, r.Approvals[1].RequestSHA256, "a new request, a new hash")
	s.Equal(second, r.Approvals[1].RequestSHA256)
	s.Equal("2100.00", r.Approvals[1].Request.Amount)
	s.Equal([]claim.IdempotencyKey{"claim-0066:step4", "claim-0066:step4:v2"}, s.calls.keys["assess"], "re-assessed under a new key")
	s.Require().Len(s.calls.pays, 1)
	s.Equal(int64(210000), s.calls.pays[0].AmountMinor)
}

func (s *ClaimSuite) TestAmendedBelowTheLimitNeedsNoSecondApproval() {
	s.calls.reread = func(r *activities.LoadClaimResult) {
		r.Claim.AmountMinor, r.Version = 90000, 2
	}
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0067", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Len(r.Approvals, 1)
	s.Equal(int64(90000), s.calls.pays[0].AmountMinor)
}

func (s *ClaimSuite) TestPayeeChangeVoids() {
	s.calls.reread = func(r *activities.LoadClaimResult) { r.Claim.Claimant.StripeAccount, r.Version = "acct_1Mallory", 2 }
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0068", "1840.00"), Options{Approval: approvals.Policy{TTL: 2 * time.Hour, EscalationTTL: time.Hour}})
	r := s.result()
	s.Equal(StatusExpired, r.Status, "nobody approved the new payee")
	s.Contains(r.Approvals[0].Voided, "payee acct_1Ada → acct_1Mallory")
	s.Empty(s.calls.pays)
}

func (s *ClaimSuite) TestStepCap() {
	// intake, two triage turns with three tools between them, assess: 7.
	s.start(testClaim("claim-0069", "640.00"), Options{Caps: Caps{MaxSteps: 7}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Equal(ErrCap, r.DeadLetter.ErrorType)
	s.Contains(r.DeadLetter.Error, "cap reached (steps)")
	s.Equal(int(claim.StepPay), r.DeadLetter.Step)
	s.Empty(s.calls.pays)
	s.Empty(r.DeadLetter.UnknownEffects, "a cap stops between steps")
}

// The spend cap stops the triage loop and the assessment: the claim goes
// to a human, with the covered amount proposed, instead of being paid on a
// half-finished analysis or dead-lettered.
func (s *ClaimSuite) TestModelSpendCapSendsTheClaimToAHuman() {
	s.calls.tokens = 1_000_000 // $2.50 of input tokens at the default price
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", nil)
	rules := suiteRules()
	rules.MaxTriageTokens = 10_000_000
	s.calls.rules = &rules
	s.start(testClaim("claim-0070", "640.00"), Options{})

	s.Equal(StatusWaiting, waiting.State)
	s.Require().NotNil(waiting.Approval)
	s.Contains(waiting.Approval.Request.Reasons[0], "triage asks for review: triage stopped: spent 2500400 of 2000000 micro-dollars (the spend cap)")
	s.Contains(waiting.Approval.Request.Rationale, "not assessed by the model: spend cap reached")
	s.Equal("640.00", waiting.Approval.Request.Amount, "the covered amount is proposed")
	s.Equal([]claim.IdempotencyKey{"claim-0070:step2:turn1"}, s.calls.keys["triage"], "no turn past the cap")
	s.Empty(s.calls.keys["assess"], "no model call past the cap")
	s.Require().Len(waiting.ModelCalls, 1)
	s.Equal(int64(2_500_400), waiting.ModelCalls[0].CostMicros)

	r := s.result()
	s.Equal(StatusPaid, r.Status, "paid after a human approved")
	s.GreaterOrEqual(r.ModelSpendMicros, int64(2_500_000))
}

func (s *ClaimSuite) TestPayoutCap() {
	s.start(testClaim("claim-0071", "640.00"), Options{Caps: Caps{MaxPayoutMinor: 50_000}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Contains(r.DeadLetter.Error, "payout 640.00 is above the run's cap 500.00")
	s.Empty(s.calls.pays)
}

func (s *ClaimSuite) TestAgeCapEndsAWait() {
	start := s.env.Now()
	s.start(testClaim("claim-0072", "1840.00"), Options{Caps: Caps{MaxAge: 10 * time.Hour}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Contains(r.DeadLetter.Error, "cap reached (age)")
	s.True(r.Approval.Capped)
	s.Equal(10*time.Hour, s.env.Now().Sub(start).Round(time.Hour))
	s.Empty(s.calls.pays)
}
