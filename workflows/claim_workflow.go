package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/review"
)

// a is the nil receiver the workflow names activities by.
var a *activities.Activities

// maxApprovalRounds bounds how often a claim that keeps changing while it
// waits may raise a new approval request.
const maxApprovalRounds = 5

// ClaimWorkflow processes one claim through the nine steps of
// docs/design.md. The workflow ID is the claim ID; every side effect's
// idempotency key is derived from it and the step.
func ClaimWorkflow(ctx workflow.Context, in ClaimInput) (ClaimResult, error) {
	r, err := newClaimRun(ctx, in)
	if err != nil {
		return ClaimResult{}, err
	}
	return r.run(ctx)
}

// claimRun is the state of one run: what the status query reports and what
// the audit record is built from.
type claimRun struct {
	in         ClaimInput
	workflowID string
	started    time.Time
	settings
	claim claim.Claim // as last read from the system of record
	progress
	gate *approvals.Gate
	// since says which versions' changes the run has (versions.go): set
	// once, at intake.
	since versionSwitches
	// amendedBy lists who amended the claim, as last read: none of them
	// may approve it.
	amendedBy []string
	// review is what intake found for the review rules, as last read
	// (since.review); flags are the fraud signals the triage agent raised
	// with its flag tool.
	review review.Facts
	flags  []string
	// policy is the claim's policy as last read; law its jurisdiction's
	// clocks and letters (since.law, where intake recorded rules: law.go);
	// modelDenies: the model recommends paying nothing, which under the
	// law a person decides.
	policy      *claim.Policy
	law         *lawRun
	modelDenies bool

	published       string    // ClaimStatus as last upserted
	publishedExpiry time.Time // ApprovalDeadline as last upserted

	coverage claim.Coverage
	models   []ModelUse
	pay      activities.PayResult
	notice   activities.NotifyResult

	// beforePay, when set, runs just before the payment: the seam the
	// replay tests use to prove a change to the step sequence behind
	// workflow.GetVersion still replays every recorded history.
	beforePay func(ctx workflow.Context) error

	stepStarted time.Time
	overBudget  bool

	// rechecked is what the last read on the changed signal found
	// (since.recheck).
	rechecked activities.LoadClaimResult
	// What decisions name (since.provenance): policyVersion is the version
	// intake recorded; decided what decided the outcome; triageAnswer and
	// assessAnswer the output_sha256 of the answers a decision rests on.
	policyVersion string
	decided       *Decided
	triageAnswer  string
	assessAnswer  string
	// buildID, when set, names the build instead of the SDK: the test
	// environment has none (see build).
	buildID func(workflow.Context) string
	// workerBuild is the build of the worker this run is cached on
	// (WorkerBuild; "" in a replayer), read once: signal and update
	// handlers get contexts the interceptor never saw (build.go).
	workerBuild string

	// pending names the costly local result the current workflow task has
	// not yet recorded, "" when none (the checkpoint rule, checkpoint.go).
	pending string
	// freeAnswers says the triage's last answer was free to ask for again
	// (its turn's FreeToRepeat: the rules model): from versionFreeAssess on
	// the assessment, asked of the same model, is then a costly step
	// (plan.freeModel) rather than a checkpoint of its own.
	freeAnswers bool
	// unrecorded says a step of the line ran local in the current workflow
	// task: its marker reaches history only when the task completes.
	unrecorded bool
	// queued is the approval queue's write of a wait's end while it runs
	// beside the re-read (since.queueBeside; settleQueue waits for it).
	queued workflow.Future
}

func newClaimRun(ctx workflow.Context, in ClaimInput) (*claimRun, error) {
	info := workflow.GetInfo(ctx)
	if err := in.Claim.Validate(); err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
	}
	if info.WorkflowExecution.ID != in.Claim.ID {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("workflow ID %q must be the claim ID %q", info.WorkflowExecution.ID, in.Claim.ID), activities.ErrInvalidInput, nil)
	}
	r := &claimRun{in: in, workflowID: info.WorkflowExecution.ID, started: info.WorkflowStartTime,
		settings: inputSettings(in.Options, in.Claim.Currency), workerBuild: workerBuildOf(ctx)}
	r.setClaim(in.Claim, 0)
	r.state = StatusRunning
	r.published, _ = workflow.GetTypedSearchAttributes(ctx).GetKeyword(ClaimStatusKey)

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		return r.snapshot(), nil
	}); err != nil {
		return nil, err
	}
	var err error
	if r.gate, err = approvals.Listen(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// run is the life of a claim, top to bottom.
func (r *claimRun) run(ctx workflow.Context) (ClaimResult, error) {
	r.publish(ctx, StatusRunning)

	// 1. Intake: the system of record's version of the claim, its policy,
	// and the insurer's rules the worker holds. A claim the system of
	// record does not hold is refused, and so is an input that tries to
	// loosen the rules: the run ends at once, having done nothing.
	r.enter(ctx, claim.StepIntake)
	var loaded activities.LoadClaimResult
	if err := r.exec(ctx, plan.read, a.LoadClaim, activities.LoadClaimInput{Claim: r.claim}, &loaded); err != nil {
		if isErrorType(err, activities.ErrNotRegistered) || isErrorType(err, activities.ErrClaimClosed) {
			return ClaimResult{}, err // nothing was done: the run ends at once
		}
		return r.deadLetter(ctx, err)
	}
	if err := r.admitIntake(ctx, loaded); err != nil {
		return ClaimResult{}, err
	}
	if loaded.Status == "withdrawn" {
		return r.finish(ctx, StatusWithdrawn, "claim was withdrawn before processing")
	}

	// 2. Triage: the model classifies the claim, as an agent that calls
	// tools until it can (runs started before the loop make one call).
	r.enter(ctx, claim.StepTriage)
	var triage activities.TriageResult
	if r.since.agent {
		t, err := r.triageAgent(ctx)
		if err != nil {
			return r.deadLetter(ctx, err)
		}
		triage.Output = t
	} else {
		if err := r.callModel(ctx, plan.turn, a.TriageClaim, activities.TriageInput{Key: r.key(claim.StepTriage), Claim: r.claim}, &triage); err != nil {
			return r.deadLetter(ctx, err)
		}
		r.used(claim.StepTriage, 0, ModelUse{Model: triage.Model, PromptVersion: triage.PromptVersion, BuildID: triage.BuildID,
			OutputSHA256: triage.OutputSHA256}, triage.Usage)
		r.triageAnswer = triage.OutputSHA256
	}

	// 3–4. Coverage (pure arithmetic) and assessment (the model recommends,
	// the rules clamp).
	payout, assess, err := r.assess(ctx, loaded, triage.Output, r.key(claim.StepAssess))
	if err != nil {
		return r.deadLetter(ctx, err)
	}
	if payout == 0 && !r.personDenies() {
		r.decideByRules(ctx, approvals.Reject)
		return r.finish(ctx, StatusRejected, r.reason)
	}

	// 5. Approval: a human decides above the threshold or on review flags;
	// under a jurisdiction's rules, every denial too (law.go).
	payout, end, err := r.approvalRounds(ctx, payout, triage.Output, assess)
	if end != nil {
		return *end, err
	}

	// 6. Pay: one Stripe transfer, keyed by the step.
	r.enter(ctx, claim.StepPay)
	c := r.claim
	if r.beforePay != nil {
		if err := r.beforePay(ctx); err != nil {
			return r.deadLetter(ctx, err)
		}
	}
	if err := r.exec(ctx, plan.effect, a.PayClaimant, activities.PayInput{
		Key: r.key(claim.StepPay), WorkflowID: r.workflowID, ClaimID: c.ID,
		AmountMinor: payout, Currency: c.Currency, Destination: c.Claimant.StripeAccount,
		Approval: payApproval(r.gate.Current()), WaitsOutOutages: r.since.outageWaits,
	}, &r.pay); err != nil {
		return r.deadLetter(ctx, err)
	}
	r.law.paid(r.pay.CreatedAt, workflow.Now(ctx))
	return r.finish(ctx, StatusPaid, "")
}

// approvalRounds is step 5: a human decides when the payout is above the
// threshold or a review rule fires. After any wait the claim is read again;
// a changed claim voids the approval and raises a new request. It returns
// the payout to pay, or, when the claim ends here (rejected, expired,
// withdrawn, dead-lettered), how it ended.
func (r *claimRun) approvalRounds(ctx workflow.Context, payout int64, triage activities.Triage, assess activities.AssessResult) (int64, *ClaimResult, error) {
	ended := func(res ClaimResult, err error) (int64, *ClaimResult, error) { return 0, &res, err }
	for round := 1; ; round++ {
		r.enter(ctx, claim.StepApproval)
		reasons := r.reviewReasons(payout, triage, assess.Output)
		if len(reasons) == 0 {
			r.decideByRules(ctx, approvals.Approve)
			return payout, nil, nil
		}
		if round > maxApprovalRounds {
			return ended(r.deadLetter(ctx, capErr(CapApprovalRounds, "the claim changed during %d approval waits", maxApprovalRounds)))
		}
		appr, err := r.approve(ctx, payout, assess.Output.Rationale, reasons)
		if err != nil {
			return ended(r.deadLetter(ctx, err))
		}
		r.waited()
		switch {
		case appr.Capped:
			return ended(r.deadLetter(ctx, capErr(CapAge, "the run reached its %s age cap while waiting for approval", r.caps.MaxAge)))
		case appr.Interrupted:
			// The claim changed in the system of record while nobody had
			// decided: the wait read it (rechecked) and ended.
		case appr.Decision == nil:
			metrics.Count(ctx, metrics.ApprovalsExpired, nil)
			r.decide(ctx, DecidedByPolicy, approvals.Reject, r.build(ctx))
			return ended(r.finish(ctx, StatusExpired, "no decision before the escalation deadline"))
		case appr.Decision.Verdict == approvals.Reject:
			r.decide(ctx, DecidedByApprover, approvals.Reject, appr.Decision.BuildID)
			return ended(r.finish(ctx, StatusRejected, "rejected by "+appr.Decision.Approver+": "+appr.Decision.Reason))
		}
		r.publish(ctx, StatusRunning)

		now := r.rechecked
		if rereads(appr) { // what is left of the cases above: !appr.Interrupted
			now, err = r.reread(ctx, appr)
			r.settleQueue(ctx)
			if err != nil {
				return ended(r.deadLetter(ctx, err))
			}
		}
		if now.Status == "withdrawn" {
			appr.Voided = fmt.Sprintf("claim withdrawn (version %d)", now.Version)
			r.setClaim(now.Claim, now.Version)
			return ended(r.finish(ctx, StatusWithdrawn, "claim was withdrawn while awaiting approval"))
		}
		if len(now.Revoked) > 0 {
			// A key was revoked after it signed: the decision no longer
			// counts, and a new request waits for approvers whose keys do.
			appr.Voided = fmt.Sprintf("signing key %s revoked before the payment", strings.Join(now.Revoked, ", "))
			workflow.GetLogger(ctx).Warn("approval voided", "reason", appr.Voided)
			continue
		}
		change := changed(r.claim, now.Claim)
		if change == "" && appr.Decision == nil {
			// Never paid without a decision: ask again.
			continue
		}
		if change == "" {
			if r.trust != nil && appr.PayoutMinor() < payout {
				// An approver lowered the payout: pay what was approved, no more.
				payout = appr.PayoutMinor()
				r.setPayout(payout)
			}
			by := DecidedByApprover
			if appr.Expired {
				by = DecidedByPolicy // the policy's final outcome approved it
			}
			r.decide(ctx, by, approvals.Approve, appr.Decision.BuildID)
			return payout, nil, nil
		}
		appr.Voided = fmt.Sprintf("claim changed while waiting (version %d → %d): %s", r.version, now.Version, change)
		workflow.GetLogger(ctx).Warn("approval voided", "reason", appr.Voided)
		r.setClaim(now.Claim, now.Version)
		r.law.amended(workflow.Now(ctx))
		payout, assess, err = r.assess(ctx, now, triage, r.key(claim.StepAssess).Sub(fmt.Sprintf("v%d", now.Version)))
		if err != nil {
			return ended(r.deadLetter(ctx, err))
		}
		if payout == 0 && !r.personDenies() {
			r.decideByRules(ctx, approvals.Reject)
			return ended(r.finish(ctx, StatusRejected, r.reason))
		}
	}
}

// admitIntake takes what intake read: the claim as the system of record holds
// it, the version of the rules the run follows (versionClaim), and from
// versionTrusted on the worker's policy, which the input may only tighten.
// An error ends the run at once: its input tried to loosen the policy.
func (r *claimRun) admitIntake(ctx workflow.Context, loaded activities.LoadClaimResult) error {
	r.setClaim(loaded.Claim, loaded.Version)
	r.amendedBy = loaded.AmendedBy
	r.since = switchesOf(workflow.GetVersion(ctx, versionClaim, workflow.DefaultVersion, versionLatest))
	if r.since.provenance {
		r.policyVersion = loaded.PolicyVersion
		r.gate.Stamp(r.policyVersion, r.build)
	}
	if r.since.review {
		r.review = found(loaded.Review)
	}
	if r.since.trusted {
		if err := r.adoptPolicy(loaded.Rules); err != nil {
			workflow.GetLogger(ctx).Error("claim refused: its input loosens the insurer's policy", "error", err)
			return err
		}
	}
	if r.since.authority && r.trust != nil {
		r.trust.Audience, r.trust.Identities = loaded.Audience, true
	}
	r.policy = loaded.Policy
	if r.since.law {
		if err := r.adoptLaw(loaded.Law, loaded.ReceivedAt); err != nil {
			return temporal.NewNonRetryableApplicationError(err.Error(), activities.ErrInvalidInput, nil)
		}
	}
	return nil
}

// reread reads the claim again after a decision, and asks whether the keys
// that signed it are still in the directory: what the run is about to pay
// for must still be so.
func (r *claimRun) reread(ctx workflow.Context, appr *approvals.Approval) (activities.LoadClaimResult, error) {
	in := activities.LoadClaimInput{Claim: r.claim}
	if r.trust != nil {
		for _, v := range appr.Votes {
			in.Keys = append(in.Keys, v.KeyID)
		}
	}
	var now activities.LoadClaimResult
	if err := r.exec(ctx, plan.read, a.LoadClaim, in, &now); err != nil {
		return now, err
	}
	r.amendedBy = now.AmendedBy
	r.policy = now.Policy
	if r.since.review {
		r.review = found(now.Review)
	}
	return now, nil
}

// assess is steps 3 and 4 on the claim as loaded: coverage inline, then the
// model's recommendation clamped to it. A payout of 0 means rejected, with
// the reason in the status.
func (r *claimRun) assess(ctx workflow.Context, loaded activities.LoadClaimResult, triage activities.Triage, key claim.IdempotencyKey) (int64, activities.AssessResult, error) {
	var res activities.AssessResult
	r.assessAnswer = ""
	r.enter(ctx, claim.StepCoverage)
	r.coverage = claim.Cover(loaded.Policy, r.claim, triage.Category)
	if !r.coverage.Covered {
		r.reason = r.coverage.Reason
		return 0, res, nil
	}
	r.enter(ctx, claim.StepAssess)
	in := activities.AssessInput{Key: key, AssessRequest: activities.AssessRequest{Claim: r.claim, Triage: triage, Coverage: r.coverage},
		WaitsForBudget: r.since.budgetWaits, WaitsOutOutages: r.since.outageWaits}
	if r.since.agent {
		in.Price = r.price
	}
	if r.since.agent && r.spendMicros >= r.caps.MaxModelSpendMicros {
		// Out of model budget: a human assesses, with the covered amount
		// proposed. Nothing is paid without that human.
		res.Output = activities.ReviewAssessment(r.coverage.CoveredMinor, fmt.Sprintf("not assessed by the model: spend cap reached (%d of %d micro-dollars)",
			r.spendMicros, r.caps.MaxModelSpendMicros))
	} else {
		if err := r.callModel(ctx, r.assessPlan(), a.AssessClaim, in, &res); err != nil {
			return 0, res, err
		}
		r.used(claim.StepAssess, 0, ModelUse{Model: res.Model, PromptVersion: res.PromptVersion, BuildID: res.BuildID,
			OutputSHA256: res.OutputSHA256}, res.Usage)
		r.assessAnswer = res.OutputSHA256
	}
	payout := clampPayout(res.Output.RecommendedMinor, r.coverage)
	if r.modelDenies = payout == 0 && r.personDenies(); r.modelDenies {
		// The model's answer is advice: under the law, and for a
		// claimant's review, a denial is a person's, so a person decides,
		// shown the covered amount.
		payout = r.coverage.CoveredMinor
	}
	r.setPayout(payout)
	if payout == 0 {
		r.reason = "assessment recommends no payout: " + res.Output.Rationale
	}
	if r.caps.MaxPayoutMinor > 0 && payout > r.caps.MaxPayoutMinor {
		return 0, res, capErr(CapPayout, "payout %s is above the run's cap %s", claim.FormatAmount(payout, r.claim.Currency),
			claim.FormatAmount(r.caps.MaxPayoutMinor, r.claim.Currency))
	}
	return payout, res, nil
}

// approve opens an approval request and waits for its outcome.
func (r *claimRun) approve(ctx workflow.Context, payout int64, rationale string, reasons []string) (*approvals.Approval, error) {
	c := r.claim
	var dir activities.OpenApprovalResult
	if err := r.exec(ctx, plan.read, a.OpenApproval, activities.OpenApprovalInput{ClaimID: c.ID}, &dir); err != nil {
		return nil, err
	}
	req := approvals.Request{ClaimID: c.ID, Payee: c.Claimant.StripeAccount, PayeeName: c.Claimant.Name,
		AmountMinor: payout, Amount: claim.FormatAmount(payout, c.Currency), Currency: c.Currency,
		Rationale: rationale, Coverage: r.coverage, Reasons: reasons}
	var trust *approvals.Trust
	if r.trust != nil {
		t := *r.trust
		t.Services = dir.Services
		trust = &t
	}
	w := approvals.Wait{Request: req, Policy: r.approval, Approvers: dir.Approvers,
		Self: []string{c.Claimant.Email, c.Claimant.StripeAccount}, NotAfter: r.started.Add(r.caps.MaxAge),
		Excluded: r.amendedBy, Trust: trust,
	}
	if r.law != nil {
		r.law.shape(&w, workflow.Now(ctx))
		stop := r.watchLaw(ctx)
		defer stop(ctx)
	}
	return r.gate.Await(ctx, w, r.waitHooks())
}

// waitHooks are what the approval wait calls back into the run for.
func (r *claimRun) waitHooks() approvals.Hooks {
	h := approvals.Hooks{OnStage: r.onStage, OnChange: r.publishApproval(), Recheck: r.recheck(),
		Remind: r.approvalNotice(a.RemindApprovers, "remind"),
		Escalate: func(ctx workflow.Context, appr *approvals.Approval) error {
			metrics.Count(ctx, metrics.ApprovalsEscalated, nil)
			return r.approvalNotice(a.EscalateApproval, "escalate")(ctx, appr)
		}}
	if r.since.localNotices {
		// A fired timer is a task boundary: the notice that follows runs
		// local even when the one before it (the reminder) did.
		h.TimerFired = r.taskBoundary
	}
	if r.since.law {
		h.Overdue = func(ctx workflow.Context, appr *approvals.Approval) error {
			metrics.Count(ctx, metrics.ApprovalsOverdue, nil)
			return r.approvalNotice(a.OverdueApproval, "overdue")(ctx, appr)
		}
	}
	return h
}

// publishApproval is the wait's OnChange hook from versionQueue on (nil
// before): the wait's whole state, at its revision, to the approval queue.
func (r *claimRun) publishApproval() func(workflow.Context, *approvals.Approval) error {
	if !r.since.queue {
		return nil
	}
	// Not through exec: a projection is not one of the run's steps, so it
	// neither spends the step cap (a failing write would leave the payment
	// no steps) nor stops at the age cap (the end of a wait the age cap
	// ended must still leave the queue).
	return func(ctx workflow.Context, appr *approvals.Approval) error {
		lctx := workflow.WithLocalActivityOptions(ctx, *plan.queue.local)
		f := workflow.ExecuteLocalActivity(lctx, a.PublishApproval, activities.QueueInput{ClaimID: r.claim.ID, Open: appr.Open(), Approval: *appr})
		if r.since.queueBeside && !appr.Open() && rereads(appr) {
			// The wait's end, and the round reads the claim again next: the
			// write runs beside that read (approvalRounds settles it). Until
			// then nothing changes appr: the local activity reads it too.
			r.queued = f
			return nil
		}
		return f.Get(ctx, nil)
	}
}

// settleQueue waits for the queue's write of a wait's end that ran beside
// the re-read, if one did. A failure is logged, as the wait logs its own
// writes' (approvals.Gate): the queue is a projection the healer mends.
func (r *claimRun) settleQueue(ctx workflow.Context) {
	if r.queued == nil {
		return
	}
	f := r.queued
	r.queued = nil
	if err := f.Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Warn("approval queue not updated", "error", err)
	}
}

// rereads says whether the round reads the claim again after a wait that
// ended as appr did: an approval, by people or by the policy's final
// outcome, that no change of the claim interrupted (approvalRounds).
func rereads(appr *approvals.Approval) bool {
	return !appr.Capped && !appr.Interrupted && appr.Decision != nil && appr.Decision.Verdict != approvals.Reject
}

// recheck is the wait's hook for the changed signal (from versionRecheck
// on; nil before, and the signal is ignored): read the claim again at once
// and end the wait if it was withdrawn or changed in what the request
// covers. What it read is kept in rechecked for the round to act on.
func (r *claimRun) recheck() func(workflow.Context, *approvals.Approval) (string, error) {
	if !r.since.recheck {
		return nil
	}
	return func(ctx workflow.Context, appr *approvals.Approval) (string, error) {
		now, err := r.reread(ctx, appr)
		if err != nil {
			return "", err
		}
		r.rechecked = now
		switch {
		case now.Status == "withdrawn":
			return fmt.Sprintf("claim withdrawn (version %d)", now.Version), nil
		case changed(r.claim, now.Claim) != "":
			return fmt.Sprintf("claim changed while waiting (version %d → %d): %s", r.version, now.Version, changed(r.claim, now.Claim)), nil
		}
		return "", nil
	}
}

// personDenies says whether only a person may deny the claim, never the
// rules alone: under a jurisdiction's rules (law.go), and when the claim is
// a claimant's review of an automated outcome (claim.Review).
func (r *claimRun) personDenies() bool { return r.law != nil || r.claim.ReviewOf != nil }

// payApproval is the decision behind the payment, for the payment to
// check again itself: the request shown and the receipts that approved it.
// Nil when no human decided (the auto-approve path).
func payApproval(appr *approvals.Approval) *activities.PayApproval {
	if appr == nil || appr.Decision == nil || appr.Decision.Verdict != approvals.Approve || appr.Voided != "" {
		return nil
	}
	pa := &activities.PayApproval{Request: appr.Request, ByPolicy: appr.Expired}
	for _, v := range appr.Votes {
		switch {
		case v.Receipt != "":
			pa.Receipts = append(pa.Receipts, v.Receipt)
		case v.Proof == approvals.ProofUnauthenticated:
			pa.Unsigned = append(pa.Unsigned, v.Approver)
		}
	}
	return pa
}

// changed says what about the claim matters to an approval and changed.
func changed(was, now claim.Claim) string {
	switch {
	case was.AmountMinor != now.AmountMinor || was.Currency != now.Currency:
		return fmt.Sprintf("amount %s %s → %s %s", was.Amount(), was.Currency, now.Amount(), now.Currency)
	case was.Claimant.StripeAccount != now.Claimant.StripeAccount:
		return fmt.Sprintf("payee %s → %s", was.Claimant.StripeAccount, now.Claimant.StripeAccount)
	case was.PolicyID != now.PolicyID:
		return fmt.Sprintf("policy %s → %s", was.PolicyID, now.PolicyID)
	}
	return ""
}

// finish runs steps 7–9 for any outcome: tell the claimant, close the claim
// in the system of record, write the audit record.
func (r *claimRun) finish(ctx workflow.Context, outcome, reason string) (ClaimResult, error) {
	c := r.claim
	r.reason = reason
	// The outcome is decided: the status query says so at once. ClaimStatus
	// follows when the run completes (upserting it here instead would change
	// the command sequence of every run in flight: see docs/reliability.md,
	// "Changing workflow code").
	r.state = outcome
	if outcome != StatusPaid {
		r.setPayout(0)
	}

	r.enter(ctx, claim.StepNotify)
	if err := r.exec(ctx, plan.sideStep, a.NotifyClaimant, activities.NotifyInput{
		Key: r.key(claim.StepNotify), ClaimID: c.ID, To: c.Claimant.Email, Name: c.Claimant.Name, Outcome: outcome,
		PayoutMinor: r.payoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, Reason: reason,
		Letter: r.decisionLetter(outcome),
	}, &r.notice); err != nil {
		return r.deadLetter(ctx, err)
	}
	if r.law != nil && r.notice.Letter != nil {
		r.law.sent(*r.notice.Letter)
	}

	r.enter(ctx, claim.StepClose)
	var closed activities.CloseResult
	closeStep, auditStep := plan.effect, plan.sideStep
	if r.since.localRecords {
		closeStep, auditStep = plan.record, plan.record
	}
	if err := r.exec(ctx, closeStep, a.CloseClaim, activities.CloseInput{
		Key: r.key(claim.StepClose), ClaimID: c.ID, Outcome: outcome, TransferID: r.pay.TransferID, PayoutMinor: r.payoutMinor,
	}, &closed); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.enter(ctx, claim.StepAudit)
	record, err := json.Marshal(AuditRecord{ClaimID: c.ID, WorkflowID: r.workflowID, ReviewOf: c.ReviewOf, Outcome: outcome, Reason: reason,
		PayoutMinor: r.payoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, PaymentReplayed: r.pay.Replayed,
		Coverage: r.coverage, Models: r.models, Approvals: r.gate.All(), Attempts: r.gate.Attempts(), AttemptsDropped: r.gate.Dropped(),
		// ClosedAt comes from step 8's recorded result, not workflow.Now: if
		// this step runs again in a later workflow task, its record must be
		// byte for byte the one it may already have written.
		ClaimVersion: r.version, NotificationID: r.notice.MessageID, ClosedAt: closed.ClosedAt,
		PolicyVersion: r.policyVersion, Decided: r.decided, Law: r.lawRecord(ctx, closed.ClosedAt, true)})
	if err != nil {
		return ClaimResult{}, err
	}
	var audited activities.AuditResult
	if err := r.exec(ctx, auditStep, a.WriteAudit, activities.AuditInput{
		Key: r.key(claim.StepAudit), ClaimID: c.ID, Record: record,
	}, &audited); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.stepDone(ctx, "ok")
	r.publish(ctx, outcome)
	metrics.Count(ctx, metrics.ClaimsCompleted, map[string]string{"status": outcome})
	return r.result(), nil
}

// adoptPolicy takes the worker's policy, as intake recorded it, tightened by the
// input. Set once, before any step that depends on it.
func (r *claimRun) adoptPolicy(rules *insurer.Rules) error {
	if rules == nil {
		return temporal.NewNonRetryableApplicationError("intake recorded no policy: the worker that ran it holds none", ErrLooserThanPolicy, nil)
	}
	s, err := policySettings(*rules, r.in.Options, r.claim.Currency)
	if err != nil {
		return err
	}
	r.settings = s
	return nil
}

// deadLetter ends a run whose step failed for good, or that hit a cap. The
// claim is left for an operator (claimsctl dlq) with the step, the error,
// and the side effects whose outcome is not known.
func (r *claimRun) deadLetter(ctx workflow.Context, err error) (ClaimResult, error) {
	if temporal.IsCanceledError(err) {
		return ClaimResult{}, err
	}
	dl := &DeadLetter{Step: int(r.step), StepName: r.stepName(), Error: err.Error()}
	var appErr *temporal.ApplicationError
	var ce *capError
	switch {
	case errors.As(err, &ce):
		dl.ErrorType, dl.Cap = ErrCap, ce.cap
	case errors.As(err, &appErr):
		dl.ErrorType = appErr.Type()
	}
	// Only a payment and an e-mail can be half-done in a way an operator must
	// check at the receiver; closing and auditing are idempotent upserts.
	// A cap stops the run between steps, so it leaves nothing half-done.
	if ce == nil {
		switch step := r.step; step {
		case claim.StepPay:
			dl.UnknownEffects = append(dl.UnknownEffects, "payment "+string(r.key(step)))
		case claim.StepNotify:
			dl.UnknownEffects = append(dl.UnknownEffects, "notification "+string(r.key(step)))
		}
	}
	workflow.GetLogger(ctx).Error("claim dead-lettered", "step", dl.StepName, "error", dl.Error)
	r.stepDone(ctx, "error")
	metrics.Count(ctx, metrics.ClaimsCompleted, map[string]string{"status": StatusDeadLettered})
	r.reason = fmt.Sprintf("step %d (%s) failed: %s", dl.Step, dl.StepName, dl.Error)
	if r.since.deadLetterFile {
		r.fileDeadLetter(ctx)
	}
	r.publish(ctx, StatusDeadLettered)
	res := r.result()
	res.DeadLetter = dl
	return res, nil
}

// fileDeadLetter writes a dead-lettered run's audit record and claim file:
// one local activity, outside the run's caps (a cap may be what stopped it),
// keyed by the run, since a redrive is another run that may end the claim
// and write its own. A failure is logged, not raised: the dead letter
// stands, and `claimsctl dlq` shows it either way.
func (r *claimRun) fileDeadLetter(ctx workflow.Context) {
	if r.step == claim.StepAudit {
		return // step 9 itself failed for good: the same write would again
	}
	c := r.claim
	record, err := json.Marshal(AuditRecord{ClaimID: c.ID, WorkflowID: r.workflowID, ReviewOf: c.ReviewOf, Outcome: StatusDeadLettered, Reason: r.reason,
		PayoutMinor: r.payoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, PaymentReplayed: r.pay.Replayed,
		Coverage: r.coverage, Models: r.models, Approvals: r.gate.All(), Attempts: r.gate.Attempts(), AttemptsDropped: r.gate.Dropped(),
		ClaimVersion: r.version, NotificationID: r.notice.MessageID, PolicyVersion: r.policyVersion, Decided: r.decided,
		Law: r.lawRecord(ctx, workflow.Now(ctx), false)})
	if err != nil {
		return
	}
	rp := &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 30 * time.Second, MaximumAttempts: 5}
	key := r.key(claim.StepAudit).Sub("dead-letter").Sub(workflow.GetInfo(ctx).WorkflowExecution.RunID)
	in := activities.AuditInput{Key: key, ClaimID: c.ID, Record: record}
	var f workflow.Future
	if r.since.freeAssess && r.unrecorded {
		// The claim file is built from the history the server holds: steps
		// this task ran local (the payout cap is met at the rules model's
		// local assessment, in the run's first task) must be recorded
		// first, which the regular form's schedule does.
		ro := *plan.sideStep.remote
		ro.RetryPolicy = rp
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ro), a.WriteAudit, in)
	} else {
		lo := *plan.record.local
		lo.RetryPolicy = rp
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), a.WriteAudit, in)
	}
	var audited activities.AuditResult
	if err := f.Get(ctx, &audited); err != nil {
		workflow.GetLogger(ctx).Error("the dead letter's claim file was not written", "error", err)
	}
}

// approvalNotice makes the reminder and escalation hooks: one e-mail each, keyed
// <id>:step5:remind / :escalate (suffixed by the round when a changed claim
// raised a new request). From versionLocalNotices on each is a costly side
// step: local in the task its timer woke (nothing is pending there), so an
// escalation due with thousands of others costs the server one workflow
// task; regular when something costly is still pending (a local reminder
// in the same task, when the escalation was already due).
func (r *claimRun) approvalNotice(fn any, kind string) func(workflow.Context, *approvals.Approval) error {
	return func(ctx workflow.Context, appr *approvals.Approval) error {
		key := r.key(claim.StepApproval).Sub(kind)
		if n := len(r.gate.All()); n > 1 {
			key = key.Sub(fmt.Sprintf("r%d", n))
		}
		in := activities.NoticeInput{
			Key: key, ClaimID: r.claim.ID, Amount: appr.Request.Amount, Currency: r.claim.Currency,
			RequestSHA256: appr.RequestSHA256, Deadline: appr.Deadline,
		}
		notice := plan.effect
		if r.since.localNotices {
			notice = plan.notice
		}
		var res activities.NotifyResult
		local := notice.runsLocal(r.pending)
		err := r.exec(ctx, notice, fn, in, &res)
		if err != nil && local && retryRegular(err) {
			// Its quick local attempts failed (a relay slow or down): the
			// regular form retries without a workflow task each time.
			workflow.GetLogger(ctx).Warn("approval notice failed locally: sending it as a regular activity", "kind", kind, "error", err)
			err = r.exec(ctx, plan.effect, fn, in, &res)
		}
		return err
	}
}

// retryRegular says whether a step that failed in its local form may be
// tried again in its regular form: not when a cap stopped it, nor when
// the activity refused for good (a non-retryable error).
func retryRegular(err error) bool {
	var ce *capError
	var appErr *temporal.ApplicationError
	return !errors.As(err, &ce) && !(errors.As(err, &appErr) && appErr.NonRetryable())
}

// decide records what decided the outcome (from versionProvenance on): how
// (Decided.By), the verdict, the build that decided, the policy version and
// the model answers it rests on.
func (r *claimRun) decide(ctx workflow.Context, by string, v approvals.Verdict, build string) {
	r.law.decided(workflow.Now(ctx), v)
	if !r.since.provenance {
		return
	}
	var answers []string
	for _, sum := range []string{r.triageAnswer, r.assessAnswer} {
		if sum != "" {
			answers = append(answers, sum)
		}
	}
	r.decided = &Decided{By: by, Verdict: v, BuildID: build, PolicyVersion: r.policyVersion, ModelAnswers: answers}
}

// decideByRules is a decision of the rules, made in this workflow task by
// this build: pending until recorded (ruled, checkpoint.go).
func (r *claimRun) decideByRules(ctx workflow.Context, v approvals.Verdict) {
	r.decide(ctx, DecidedByRules, v, r.build(ctx))
	r.ruled()
}

// build names the build of the worker running the current workflow task:
// on replay, the build the history records for the task, so a replay names
// the build the run named (build.go).
func (r *claimRun) build(ctx workflow.Context) string {
	if r.buildID != nil {
		return r.buildID(ctx)
	}
	return currentBuild(ctx, r.workerBuild)
}

func (r *claimRun) key(step claim.Step) claim.IdempotencyKey {
	return claim.StepKey(r.workflowID, step)
}
