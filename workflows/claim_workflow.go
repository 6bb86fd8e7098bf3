package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/metrics"
)

// a is the nil receiver the workflow names activities by.
var a *activities.Activities

// How each step runs. Every history event is a write on the server and a
// billed action, so a step is a regular activity (three events, plus the
// workflow task that follows) only where a crash must not cost more than
// that step; it is a local activity (one marker event, recorded with the next
// workflow task) where it is the first thing its workflow task does, so a
// crash during it re-runs it alone:
//
//	step 1 intake  local    first thing the run does; a read
//	step 2 triage  local    after intake only: a crash re-runs a read and the triage
//	step 4 assess  regular  the boundary that checkpoints the first model answer
//	step 5 open    local    first thing after assess's task: the approver directory
//	step 5 re-read local    first thing after the decision arrives; a read
//	step 6 pay     regular  money: its own checkpoint, its own heartbeat
//	step 7 notify  local    first thing after pay's task; recorded when close is scheduled
//	step 8 close   regular  the boundary that checkpoints the e-mail
//	step 9 audit   local    first thing after close's task; the completion records it
//
// The task that schedules the payment runs no local activity, so a redrive
// of a failed payment (a reset to that task) repeats no model call.
//
// On the auto-approve path that is three regular activities, four workflow
// tasks and 28 history events, where nine regular activities would take 59.
//
// Regular activities heartbeat (the worker's interceptor does it for them),
// so a worker killed mid-step is noticed within the heartbeat timeout and
// the step retries elsewhere within seconds. Local activities are retried by
// the next worker after the workflow task times out. Retries are bounded: a
// step that keeps failing ends the run dead-lettered, never looping forever.
type stepOptions struct {
	remote *workflow.ActivityOptions
	local  *workflow.LocalActivityOptions
	// costly marks a local activity whose re-run would cost something (a
	// model call, a side effect): another costly local activity must not
	// follow it in the same workflow task. A costly step therefore carries
	// remote as well, and exec runs it as that regular activity (its own
	// checkpoint) whenever a costly local result is still unrecorded.
	costly bool
}

func (o stepOptions) retry() temporal.RetryPolicy {
	if o.local != nil {
		return *o.local.RetryPolicy
	}
	return *o.remote.RetryPolicy
}

// A local activity's ScheduleToCloseTimeout bounds all its attempts together
// and defaults to its StartToCloseTimeout: left unset, one slow attempt
// would use up the whole budget and fail the step with no retry. Each is
// therefore set to leave room for the retry policy's attempts.
var (
	readStep = stepOptions{local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    10 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	}}
	modelRemote = stepOptions{remote: &workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    3 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 6},
	}}
	modelLocal = stepOptions{costly: true, remote: modelRemote.remote, local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    2 * time.Minute,
		ScheduleToCloseTimeout: 15 * time.Minute,
		RetryPolicy:            modelRemote.remote.RetryPolicy,
	}}
	effectStep = stepOptions{remote: &workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    3 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 20},
	}}
	effectLocal = stepOptions{costly: true, remote: effectStep.remote, local: &workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 15 * time.Minute,
		RetryPolicy:            effectStep.remote.RetryPolicy,
	}}
)

// maxApprovalRounds bounds how often a claim that keeps changing while it
// waits may raise a new approval request.
const maxApprovalRounds = 5

// ClaimWorkflow processes one claim through the nine steps of DESIGN.md.
// The workflow ID is the claim ID; every side effect's idempotency key is
// derived from it and the step.
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
	claim  claim.Claim // as last read from the system of record
	status Status
	gate   *approvals.Gate
	// amendedBy lists who amended the claim, as last read: none of them
	// may approve it.
	amendedBy []string
	// review is what intake found for the review rules (nil for runs
	// before them); flags are the fraud signals the triage agent raised
	// with its flag tool.
	review *activities.Review
	flags  []string

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

	// agent is true for runs whose triage is the agent loop (versionAgent
	// of versionClaim); older runs replay their single triage call.
	agent bool

	// unrecorded is true while a costly local activity has completed in the
	// current workflow task: its marker is not in history until the task
	// completes, so the next step must be a regular activity (which ends the
	// task), or a crash would re-run both.
	unrecorded bool
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
		settings: inputSettings(in.Options, in.Claim.Currency)}
	r.setClaim(in.Claim, 0)
	r.status.State = StatusRunning
	r.published, _ = workflow.GetTypedSearchAttributes(ctx).GetKeyword(ClaimStatusKey)

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		s := r.status
		s.Approval, s.Attempts, s.AttemptsDropped = r.gate.Current(), r.gate.Attempts(), r.gate.Dropped()
		s.ModelCalls = r.models
		return s, nil
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
	if err := r.exec(ctx, readStep, a.LoadClaim, activities.LoadClaimInput{Claim: r.claim}, &loaded); err != nil {
		if isErrorType(err, activities.ErrNotRegistered) {
			return ClaimResult{}, err
		}
		return r.deadLetter(ctx, err)
	}
	r.setClaim(loaded.Claim, loaded.Version)
	r.amendedBy = loaded.AmendedBy
	version := workflow.GetVersion(ctx, versionClaim, workflow.DefaultVersion, versionReview)
	r.agent = version >= versionAgent
	if version >= versionReview {
		r.review = orEmpty(loaded.Review)
	}
	if version >= versionTrusted {
		if err := r.adopt(loaded.Rules); err != nil {
			workflow.GetLogger(ctx).Error("claim refused: its input loosens the insurer's policy", "error", err)
			return ClaimResult{}, err
		}
	}
	if loaded.Status == "withdrawn" {
		return r.finish(ctx, StatusWithdrawn, "claim was withdrawn before processing")
	}

	// 2. Triage: the model classifies the claim, as an agent that calls
	// tools until it can (runs started before the loop make one call).
	r.enter(ctx, claim.StepTriage)
	var triage activities.TriageResult
	if r.agent {
		t, err := r.triageAgent(ctx)
		if err != nil {
			return r.deadLetter(ctx, err)
		}
		triage.Output = t
	} else {
		if err := r.model(ctx, modelLocal, a.TriageClaim, activities.TriageInput{Key: r.key(claim.StepTriage), Claim: r.claim}, &triage); err != nil {
			return r.deadLetter(ctx, err)
		}
		r.used(claim.StepTriage, 0, triage.Model, triage.OutputSHA256, triage.Usage)
	}

	// 3–4. Coverage (pure arithmetic) and assessment (the model recommends,
	// the rules clamp).
	payout, assess, err := r.assess(ctx, loaded, triage.Output, r.key(claim.StepAssess))
	if err != nil {
		return r.deadLetter(ctx, err)
	}
	if payout == 0 {
		return r.finish(ctx, StatusRejected, r.status.Reason)
	}

	// 5. Approval: a human decides above the threshold or on review flags.
	// After any wait the claim is read again; a changed claim voids the
	// approval and raises a new request.
	for round := 1; ; round++ {
		r.enter(ctx, claim.StepApproval)
		reasons := r.reviewReasons(payout, triage.Output, assess.Output)
		if len(reasons) == 0 {
			break
		}
		if round > maxApprovalRounds {
			return r.deadLetter(ctx, capErr("approval rounds", "the claim changed during %d approval waits", maxApprovalRounds))
		}
		appr, err := r.approve(ctx, payout, assess.Output.Rationale, reasons)
		if err != nil {
			return r.deadLetter(ctx, err)
		}
		r.unrecorded = false // the wait ended in a new workflow task
		switch {
		case appr.Capped:
			return r.deadLetter(ctx, capErr("age", "the run reached its %s age cap while waiting for approval", r.caps.MaxAge))
		case appr.Decision == nil:
			metrics.Count(ctx, metrics.ApprovalsExpired, nil)
			return r.finish(ctx, StatusExpired, "no decision before the escalation deadline")
		case appr.Decision.Verdict == approvals.Reject:
			return r.finish(ctx, StatusRejected, "rejected by "+appr.Decision.Approver+": "+appr.Decision.Reason)
		}
		r.publish(ctx, StatusRunning)

		in := activities.LoadClaimInput{Claim: r.claim}
		if r.trust != nil {
			for _, v := range appr.Votes {
				in.Keys = append(in.Keys, v.KeyID)
			}
		}
		var now activities.LoadClaimResult
		if err := r.exec(ctx, readStep, a.LoadClaim, in, &now); err != nil {
			return r.deadLetter(ctx, err)
		}
		r.amendedBy = now.AmendedBy
		if r.review != nil {
			r.review = orEmpty(now.Review)
		}
		if now.Status == "withdrawn" {
			appr.Voided = fmt.Sprintf("claim withdrawn (version %d)", now.Version)
			r.setClaim(now.Claim, now.Version)
			return r.finish(ctx, StatusWithdrawn, "claim was withdrawn while awaiting approval")
		}
		if len(now.Revoked) > 0 {
			// A key was revoked after it signed: the decision no longer
			// counts, and a new request waits for approvers whose keys do.
			appr.Voided = fmt.Sprintf("signing key %s revoked before the payment", strings.Join(now.Revoked, ", "))
			workflow.GetLogger(ctx).Warn("approval voided", "reason", appr.Voided)
			continue
		}
		change := changed(r.claim, now.Claim)
		if change == "" {
			if r.trust != nil && appr.PayoutMinor() < payout {
				// An approver lowered the payout: pay what was approved, no more.
				payout = appr.PayoutMinor()
				r.status.PayoutMinor, r.status.Payout = payout, claim.FormatAmount(payout, r.claim.Currency)
			}
			break
		}
		appr.Voided = fmt.Sprintf("claim changed while waiting (version %d → %d): %s", r.status.Version, now.Version, change)
		workflow.GetLogger(ctx).Warn("approval voided", "reason", appr.Voided)
		r.setClaim(now.Claim, now.Version)
		payout, assess, err = r.assess(ctx, now, triage.Output, r.key(claim.StepAssess).Sub(fmt.Sprintf("v%d", now.Version)))
		if err != nil {
			return r.deadLetter(ctx, err)
		}
		if payout == 0 {
			return r.finish(ctx, StatusRejected, r.status.Reason)
		}
	}

	// 6. Pay: one Stripe transfer, keyed by the step.
	r.enter(ctx, claim.StepPay)
	c := r.claim
	if r.beforePay != nil {
		if err := r.beforePay(ctx); err != nil {
			return r.deadLetter(ctx, err)
		}
	}
	if err := r.exec(ctx, effectStep, a.PayClaimant, activities.PayInput{
		Key: r.key(claim.StepPay), WorkflowID: r.workflowID, ClaimID: c.ID,
		AmountMinor: payout, Currency: c.Currency, Destination: c.Claimant.StripeAccount,
	}, &r.pay); err != nil {
		return r.deadLetter(ctx, err)
	}
	r.status.TransferID = r.pay.TransferID
	return r.finish(ctx, StatusPaid, "")
}

// assess is steps 3 and 4 on the claim as loaded: coverage inline, then the
// model's recommendation clamped to it. A payout of 0 means rejected, with
// the reason in the status.
func (r *claimRun) assess(ctx workflow.Context, loaded activities.LoadClaimResult, triage activities.Triage, key claim.IdempotencyKey) (int64, activities.AssessResult, error) {
	var res activities.AssessResult
	r.enter(ctx, claim.StepCoverage)
	r.coverage = claim.Cover(loaded.Policy, r.claim, triage.Category)
	if !r.coverage.Covered {
		r.status.Reason = r.coverage.Reason
		return 0, res, nil
	}
	r.enter(ctx, claim.StepAssess)
	in := activities.AssessInput{Key: key, AssessRequest: activities.AssessRequest{Claim: r.claim, Triage: triage, Coverage: r.coverage}}
	if r.agent {
		in.Price = r.price
	}
	if r.agent && r.status.ModelSpendMicros >= r.caps.MaxModelSpendMicros {
		// Out of model budget: a human assesses, with the covered amount
		// proposed. Nothing is paid without that human.
		res.Output = activities.ReviewAssessment(r.coverage.CoveredMinor, fmt.Sprintf("not assessed by the model: spend cap reached (%d of %d micro-dollars)",
			r.status.ModelSpendMicros, r.caps.MaxModelSpendMicros))
	} else {
		if err := r.model(ctx, modelRemote, a.AssessClaim, in, &res); err != nil {
			return 0, res, err
		}
		r.used(claim.StepAssess, 0, res.Model, res.OutputSHA256, res.Usage)
	}
	payout := min(max(res.Output.RecommendedMinor, 0), r.coverage.CoveredMinor)
	r.status.PayoutMinor, r.status.Payout = payout, claim.FormatAmount(payout, r.claim.Currency)
	if payout == 0 {
		r.status.Reason = "assessment recommends no payout: " + res.Output.Rationale
	}
	if r.caps.MaxPayoutMinor > 0 && payout > r.caps.MaxPayoutMinor {
		return 0, res, capErr("payout", "payout %s is above the run's cap %s", r.status.Payout, claim.FormatAmount(r.caps.MaxPayoutMinor, r.claim.Currency))
	}
	return payout, res, nil
}

// approve opens an approval request and waits for its outcome.
func (r *claimRun) approve(ctx workflow.Context, payout int64, rationale string, reasons []string) (*approvals.Approval, error) {
	c := r.claim
	var dir activities.OpenApprovalResult
	if err := r.exec(ctx, readStep, a.OpenApproval, activities.OpenApprovalInput{ClaimID: c.ID}, &dir); err != nil {
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
	return r.gate.Await(ctx, approvals.Wait{Request: req, Policy: r.approval, Approvers: dir.Approvers,
		Self: []string{c.Claimant.Email, c.Claimant.StripeAccount}, NotAfter: r.started.Add(r.caps.MaxAge),
		Excluded: r.amendedBy, Trust: trust,
	}, approvals.Hooks{OnStage: r.onStage, Remind: r.approvalNotice(a.RemindApprovers, "remind"), Escalate: func(ctx workflow.Context, appr *approvals.Approval) error {
		metrics.Count(ctx, metrics.ApprovalsEscalated, nil)
		return r.approvalNotice(a.EscalateApproval, "escalate")(ctx, appr)
	}})
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
	r.status.Reason = reason
	// The outcome is decided: the status query says so at once. ClaimStatus
	// follows when the run completes (upserting it here instead would change
	// the command sequence of every run in flight: see "Changing workflow
	// code" in the README).
	r.status.State = outcome
	if outcome != StatusPaid {
		r.status.PayoutMinor, r.status.Payout = 0, claim.FormatAmount(0, c.Currency)
	}

	r.enter(ctx, claim.StepNotify)
	if err := r.exec(ctx, effectLocal, a.NotifyClaimant, activities.NotifyInput{
		Key: r.key(claim.StepNotify), ClaimID: c.ID, To: c.Claimant.Email, Name: c.Claimant.Name, Outcome: outcome,
		PayoutMinor: r.status.PayoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, Reason: reason,
	}, &r.notice); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.enter(ctx, claim.StepClose)
	var closed activities.CloseResult
	if err := r.exec(ctx, effectStep, a.CloseClaim, activities.CloseInput{
		Key: r.key(claim.StepClose), ClaimID: c.ID, Outcome: outcome, TransferID: r.pay.TransferID, PayoutMinor: r.status.PayoutMinor,
	}, &closed); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.enter(ctx, claim.StepAudit)
	record, err := json.Marshal(AuditRecord{ClaimID: c.ID, WorkflowID: r.workflowID, Outcome: outcome, Reason: reason,
		PayoutMinor: r.status.PayoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, PaymentReplayed: r.pay.Replayed,
		Coverage: r.coverage, Models: r.models, Approvals: r.gate.All(), Attempts: r.gate.Attempts(), AttemptsDropped: r.gate.Dropped(),
		// ClosedAt comes from step 8's recorded result, not workflow.Now: if
		// this step runs again in a later workflow task, its record must be
		// byte for byte the one it may already have written.
		ClaimVersion: r.status.Version, NotificationID: r.notice.MessageID, ClosedAt: closed.ClosedAt})
	if err != nil {
		return ClaimResult{}, err
	}
	var audited activities.AuditResult
	if err := r.exec(ctx, effectLocal, a.WriteAudit, activities.AuditInput{
		Key: r.key(claim.StepAudit), ClaimID: c.ID, Record: record,
	}, &audited); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.stepDone(ctx, "ok")
	r.publish(ctx, outcome)
	metrics.Count(ctx, metrics.ClaimsCompleted, map[string]string{"status": outcome})
	return r.result(), nil
}

// capError is a cap the run hit: never retried, always dead-lettered.
type capError struct{ cap, msg string }

func (e *capError) Error() string { return "cap reached (" + e.cap + "): " + e.msg }

func capErr(cap, format string, args ...any) error {
	return &capError{cap: cap, msg: fmt.Sprintf(format, args...)}
}

// ErrCap is the DeadLetter.ErrorType of a run stopped by one of its caps.
const ErrCap = "CapReached"

// isErrorType reports whether err is (or wraps) an application error of typ.
func isErrorType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

// adopt takes the worker's policy, as intake recorded it, tightened by the
// input. Set once, before any step that depends on it.
func (r *claimRun) adopt(rules *insurer.Rules) error {
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

// exec runs one activity under the run's caps: it refuses to start past the
// age or step cap, gives the activity no more retries than steps are left,
// and counts the attempts it took.
func (r *claimRun) exec(ctx workflow.Context, opts stepOptions, fn, in any, out interface{ Attempts() int32 }) error {
	if age := workflow.Now(ctx).Sub(r.started); age >= r.caps.MaxAge {
		return capErr("age", "the run is %s old, its cap is %s", age.Round(time.Second), r.caps.MaxAge)
	}
	left := r.caps.MaxSteps - r.status.StepsExecuted
	if left <= 0 {
		return capErr("steps", "%d activity executions, retries included", r.status.StepsExecuted)
	}
	if opts.local != nil && opts.remote != nil && r.unrecorded {
		opts.local = nil // e.g. notify right after a local assessment rejected the claim
	}
	rp := opts.retry()
	cut := rp.MaximumAttempts == 0 || int(rp.MaximumAttempts) > left
	if cut {
		rp.MaximumAttempts = int32(left)
	}
	var f workflow.Future
	if opts.local != nil {
		lo := *opts.local
		lo.RetryPolicy = &rp
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), fn, in)
	} else {
		ro := *opts.remote
		ro.RetryPolicy = &rp
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ro), fn, in)
	}
	err := f.Get(ctx, out)
	r.unrecorded = opts.local != nil && (opts.costly || r.unrecorded)
	if err != nil {
		var actErr *temporal.ActivityError
		if cut && errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
			r.status.StepsExecuted = r.caps.MaxSteps
			return capErr("steps", "%d activity executions, retries included; the last: %v", r.caps.MaxSteps, err)
		}
		return err
	}
	r.status.StepsExecuted += int(out.Attempts())
	return nil
}

// model runs a model activity under the spend cap as well.
func (r *claimRun) model(ctx workflow.Context, opts stepOptions, fn, in any, out interface{ Attempts() int32 }) error {
	if r.status.ModelSpendMicros >= r.caps.MaxModelSpendMicros {
		return capErr("model spend", "spent %d of %d micro-dollars", r.status.ModelSpendMicros, r.caps.MaxModelSpendMicros)
	}
	return r.exec(ctx, opts, fn, in, out)
}

// used accounts for a model answer: recorded for the audit, counted
// against the spend cap (checked before the next call).
func (r *claimRun) used(step claim.Step, turn int, model, sum string, u activities.Usage) {
	use := ModelUse{Step: int(step), Turn: turn, Model: model, OutputSHA256: sum, TokensIn: u.TokensIn, TokensOut: u.TokensOut}
	cost := r.price.Cost(u.TokensIn, u.TokensOut)
	if r.agent { // runs before the loop recorded no per-call cost
		use.CostMicros = cost
	}
	r.models = append(r.models, use)
	r.status.TokensIn += u.TokensIn
	r.status.TokensOut += u.TokensOut
	r.status.ModelSpendMicros += cost
}

// deadLetter ends a run whose step failed for good, or that hit a cap. The
// claim is left for an operator (claimsctl dlq) with the step, the error,
// and the side effects whose outcome is not known.
func (r *claimRun) deadLetter(ctx workflow.Context, err error) (ClaimResult, error) {
	if temporal.IsCanceledError(err) {
		return ClaimResult{}, err
	}
	dl := &DeadLetter{Step: r.status.Step, StepName: r.status.StepName, Error: err.Error()}
	var appErr *temporal.ApplicationError
	var ce *capError
	switch {
	case errors.As(err, &ce):
		dl.ErrorType = ErrCap
	case errors.As(err, &appErr):
		dl.ErrorType = appErr.Type()
	}
	// Only a payment and an e-mail can be half-done in a way an operator must
	// check at the receiver; closing and auditing are idempotent upserts.
	// A cap stops the run between steps, so it leaves nothing half-done.
	if ce == nil {
		switch step := claim.Step(r.status.Step); step {
		case claim.StepPay:
			dl.UnknownEffects = append(dl.UnknownEffects, "payment "+string(r.key(step)))
		case claim.StepNotify:
			dl.UnknownEffects = append(dl.UnknownEffects, "notification "+string(r.key(step)))
		}
	}
	workflow.GetLogger(ctx).Error("claim dead-lettered", "step", dl.StepName, "error", dl.Error)
	r.stepDone(ctx, "error")
	metrics.Count(ctx, metrics.ClaimsCompleted, map[string]string{"status": StatusDeadLettered})
	r.status.Reason = fmt.Sprintf("step %d (%s) failed: %s", dl.Step, dl.StepName, dl.Error)
	r.publish(ctx, StatusDeadLettered)
	res := r.result()
	res.DeadLetter = dl
	return res, nil
}

func (r *claimRun) result() ClaimResult {
	return ClaimResult{ClaimID: r.status.ClaimID, Status: r.status.State, Reason: r.status.Reason,
		PayoutMinor: r.status.PayoutMinor, Payout: r.status.Payout, Currency: r.status.Currency,
		TransferID: r.pay.TransferID, PaymentReplayed: r.pay.Replayed,
		Approval: r.gate.Current(), Approvals: r.gate.All(), Attempts: r.gate.Attempts(), AttemptsDropped: r.gate.Dropped(),
		StepsExecuted: r.status.StepsExecuted, ModelSpendMicros: r.status.ModelSpendMicros}
}

// reviewReasons says why a human must decide, if one must.
func (r *claimRun) reviewReasons(payout int64, t activities.Triage, as activities.Assessment) []string {
	c := r.claim
	limit := r.autoApproveMinor
	var reasons []string
	if payout > limit {
		reasons = append(reasons, fmt.Sprintf("payout %s is above the auto-approve limit %s",
			claim.FormatAmount(payout, c.Currency), claim.FormatAmount(limit, c.Currency)))
	}
	if r.review != nil {
		reasons = append(reasons, r.ruleReasons(t)...)
	}
	if t.NeedsReview {
		reasons = append(reasons, "triage asks for review: "+t.ReviewReason)
	}
	if as.NeedsReview {
		reasons = append(reasons, fmt.Sprintf("assessment asks for review (fraud score %d: %v)", t.FraudScore, t.FraudSignals))
	}
	return reasons
}

// ruleReasons are the deterministic review rules: each sends the claim to
// a human whatever the model says. The model's answer is advice; it may
// add reasons (needs_review), never take these away.
func (r *claimRun) ruleReasons(t activities.Triage) []string {
	var reasons []string
	if len(r.flags) > 0 {
		reasons = append(reasons, fmt.Sprintf("fraud signal raised for investigators during triage: %s", strings.Join(r.flags, "; ")))
	}
	if t.FraudScore >= r.rules.FraudScoreReview {
		reasons = append(reasons, fmt.Sprintf("fraud score %d is at or over the review threshold %d", t.FraudScore, r.rules.FraudScoreReview))
	}
	if n := r.review.PriorClaims; n >= r.rules.PriorClaimsReview {
		reasons = append(reasons, fmt.Sprintf("the claimant has %d prior claims in the last %d days (a human looks from %d)",
			n, int(r.rules.PriorClaimsWindow.Hours()/24), r.rules.PriorClaimsReview))
	}
	for _, x := range r.review.Exclusions {
		if x.Category != t.Category {
			reasons = append(reasons, fmt.Sprintf("the policy excludes %s and the claim's own words say so (%s), but the model classified it as %s",
				x.Category, strings.Join(x.Terms, ", "), t.Category))
		}
	}
	return reasons
}

func orEmpty(rv *activities.Review) *activities.Review {
	if rv == nil {
		return &activities.Review{}
	}
	return rv
}

func (r *claimRun) onStage(ctx workflow.Context, stage approvals.Stage, deadline time.Time) error {
	r.publishDeadline(ctx, string(stage), deadline)
	return nil
}

// approvalNotice makes the reminder and escalation hooks: one e-mail each, keyed
// <id>:step5:remind / :escalate (suffixed by the round when a changed claim
// raised a new request).
func (r *claimRun) approvalNotice(fn any, kind string) func(workflow.Context, *approvals.Approval) error {
	return func(ctx workflow.Context, appr *approvals.Approval) error {
		key := r.key(claim.StepApproval).Sub(kind)
		if n := len(r.gate.All()); n > 1 {
			key = key.Sub(fmt.Sprintf("r%d", n))
		}
		var res activities.NotifyResult
		return r.exec(ctx, effectStep, fn, activities.NoticeInput{
			Key: key, ClaimID: r.claim.ID, Amount: appr.Request.Amount, Currency: r.claim.Currency,
			RequestSHA256: appr.RequestSHA256, Deadline: appr.Deadline,
		}, &res)
	}
}

func (r *claimRun) setClaim(c claim.Claim, version int64) {
	r.claim = c
	r.status.ClaimID, r.status.Amount, r.status.AmountMinor, r.status.Currency = c.ID, c.Amount(), c.AmountMinor, c.Currency
	r.status.Version = version
}

func (r *claimRun) key(step claim.Step) claim.IdempotencyKey {
	return claim.StepKey(r.workflowID, step)
}

// enter moves the run to a step, closing the one before.
func (r *claimRun) enter(ctx workflow.Context, step claim.Step) {
	if r.status.Step != 0 && claim.Step(r.status.Step) != step {
		r.stepDone(ctx, "ok")
	}
	if claim.Step(r.status.Step) != step {
		r.stepStarted = workflow.Now(ctx)
	}
	r.status.Step, r.status.StepName = int(step), step.String()
}

// stepDone measures the step that ends: its duration and outcome, and the
// checkpoint it left (history size and length), against the run's budget.
func (r *claimRun) stepDone(ctx workflow.Context, outcome string) {
	step := map[string]string{"step": r.status.StepName}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"step": r.status.StepName, "outcome": outcome}).
		Timer(metrics.ClaimStepDuration).Record(workflow.Now(ctx).Sub(r.stepStarted))
	info := workflow.GetInfo(ctx)
	size := int64(info.GetCurrentHistorySize())
	metrics.Observe(ctx, metrics.ClaimHistoryBytes, size, step)
	metrics.Observe(ctx, metrics.ClaimHistoryEvents, int64(info.GetCurrentHistoryLength()), step)
	if budget := r.historyBudget; size > budget && !r.overBudget {
		r.overBudget = true
		workflow.GetLogger(ctx).Warn("claim history is over its budget", "bytes", size, "budget", budget, "step", r.status.StepName)
		metrics.Count(ctx, metrics.HistoryBudgetCrossed, step)
	}
}

// publish upserts ClaimStatus only when it changes: every upsert is a
// history event.
func (r *claimRun) publish(ctx workflow.Context, status string) {
	r.publishDeadline(ctx, status, time.Time{})
}

func (r *claimRun) publishDeadline(ctx workflow.Context, status string, deadline time.Time) {
	r.status.State = status
	var updates []temporal.SearchAttributeUpdate
	if status != r.published {
		updates = append(updates, ClaimStatusKey.ValueSet(status))
		r.published = status
	}
	if !deadline.IsZero() && !deadline.Equal(r.publishedExpiry) {
		updates = append(updates, ApprovalDeadlineKey.ValueSet(deadline))
		r.publishedExpiry = deadline
	}
	if len(updates) == 0 {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, updates...); err != nil {
		// Visibility is for operators; failing the claim over it would be
		// worse than a stale list entry.
		workflow.GetLogger(ctx).Error("search attribute upsert failed", "error", err)
	}
}
