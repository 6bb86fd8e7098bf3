package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// a is the nil receiver the workflow names activities by.
var a *activities.Activities

// Activity options. Every activity heartbeats (the worker's interceptor does
// it for them), so a worker killed mid-step is noticed within the heartbeat
// timeout rather than the start-to-close timeout, and the step retries on
// another worker within seconds. Retries are bounded: a step that keeps
// failing ends the run dead-lettered, never looping forever.
var (
	readOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		HeartbeatTimeout:    5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	}
	modelOptions = workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 2 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 6},
	}
	effectOptions = workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    5 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2,
			MaximumInterval: time.Minute, MaximumAttempts: 20},
	}
)

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
	status     Status
	gate       *approvals.Gate

	published       string    // ClaimStatus as last upserted
	publishedExpiry time.Time // ApprovalDeadline as last upserted

	coverage claim.Coverage
	models   []ModelUse
	pay      activities.PayResult
	notice   activities.NotifyResult
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
	r := &claimRun{in: in, workflowID: info.WorkflowExecution.ID}
	c := in.Claim
	r.status = Status{ClaimID: c.ID, State: StatusRunning, Amount: c.Amount(), AmountMinor: c.AmountMinor, Currency: c.Currency}
	r.published, _ = workflow.GetTypedSearchAttributes(ctx).GetKeyword(ClaimStatusKey)

	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) {
		s := r.status
		s.Approval, s.Attempts = r.gate.Current(), r.gate.Attempts()
		return s, nil
	}); err != nil {
		return nil, err
	}
	r.gate = approvals.Listen(ctx)
	return r, nil
}

// run is the life of a claim, top to bottom.
func (r *claimRun) run(ctx workflow.Context) (ClaimResult, error) {
	r.publish(ctx, StatusRunning)
	c := r.in.Claim

	// 1. Intake: the system of record's version of the claim, and its policy.
	r.enter(claim.StepIntake)
	var loaded activities.LoadClaimResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, readOptions), a.LoadClaim,
		activities.LoadClaimInput{Claim: c}).Get(ctx, &loaded); err != nil {
		return r.deadLetter(ctx, err)
	}
	c = loaded.Claim
	if loaded.Status == "withdrawn" {
		return r.finish(ctx, StatusWithdrawn, "claim was withdrawn before processing")
	}

	// 2. Triage: the model classifies the claim.
	r.enter(claim.StepTriage)
	var triage activities.TriageResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, modelOptions), a.TriageClaim,
		activities.TriageInput{Key: r.key(claim.StepTriage), Claim: c}).Get(ctx, &triage); err != nil {
		return r.deadLetter(ctx, err)
	}
	r.models = append(r.models, modelUse(claim.StepTriage, triage.Model, triage.OutputSHA256, triage.Usage))

	// 3. Coverage: pure arithmetic on the policy read at intake.
	r.enter(claim.StepCoverage)
	r.coverage = claim.Cover(loaded.Policy, c, triage.Output.Category)
	if !r.coverage.Covered {
		return r.finish(ctx, StatusRejected, r.coverage.Reason)
	}

	// 4. Assess: the model recommends; the rules clamp to what is covered.
	r.enter(claim.StepAssess)
	var assess activities.AssessResult
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, modelOptions), a.AssessClaim,
		activities.AssessInput{Key: r.key(claim.StepAssess), AssessRequest: activities.AssessRequest{Claim: c, Triage: triage.Output, Coverage: r.coverage}},
	).Get(ctx, &assess); err != nil {
		return r.deadLetter(ctx, err)
	}
	r.models = append(r.models, modelUse(claim.StepAssess, assess.Model, assess.OutputSHA256, assess.Usage))
	payout := min(max(assess.Output.RecommendedMinor, 0), r.coverage.CoveredMinor)
	r.status.PayoutMinor, r.status.Payout = payout, claim.FormatAmount(payout, c.Currency)
	if payout == 0 {
		return r.finish(ctx, StatusRejected, "assessment recommends no payout: "+assess.Output.Rationale)
	}

	// 5. Approval: a human decides above the threshold or on review flags.
	r.enter(claim.StepApproval)
	if reasons := r.reviewReasons(c, payout, triage.Output, assess.Output); len(reasons) > 0 {
		req := approvals.Request{ClaimID: c.ID, Payee: c.Claimant.StripeAccount, PayeeName: c.Claimant.Name,
			AmountMinor: payout, Amount: claim.FormatAmount(payout, c.Currency), Currency: c.Currency,
			Rationale: assess.Output.Rationale, Coverage: r.coverage, Reasons: reasons}
		appr, err := r.gate.Await(ctx, req, r.in.Options.Approval, approvals.Hooks{OnStage: r.onStage, Escalate: r.escalate})
		if err != nil {
			return ClaimResult{}, err
		}
		switch {
		case appr.Expired:
			return r.finish(ctx, StatusExpired, "no decision before the escalation deadline")
		case appr.Decision.Verdict == approvals.Reject:
			return r.finish(ctx, StatusRejected, "rejected by "+appr.Decision.Approver+": "+appr.Decision.Reason)
		}
		r.publish(ctx, StatusRunning)
	}

	// 6. Pay: one Stripe transfer, keyed by the step.
	r.enter(claim.StepPay)
	if err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, effectOptions), a.PayClaimant, activities.PayInput{
		Key: r.key(claim.StepPay), WorkflowID: r.workflowID, ClaimID: c.ID,
		AmountMinor: payout, Currency: c.Currency, Destination: c.Claimant.StripeAccount,
	}).Get(ctx, &r.pay); err != nil {
		return r.deadLetter(ctx, err)
	}
	r.status.TransferID = r.pay.TransferID
	return r.finish(ctx, StatusPaid, "")
}

// finish runs steps 7–9 for any outcome: tell the claimant, close the claim
// in the system of record, write the audit record.
func (r *claimRun) finish(ctx workflow.Context, outcome, reason string) (ClaimResult, error) {
	c := r.in.Claim
	r.status.Reason = reason
	if outcome != StatusPaid {
		r.status.PayoutMinor, r.status.Payout = 0, claim.FormatAmount(0, c.Currency)
	}
	effects := workflow.WithActivityOptions(ctx, effectOptions)

	r.enter(claim.StepNotify)
	if err := workflow.ExecuteActivity(effects, a.NotifyClaimant, activities.NotifyInput{
		Key: r.key(claim.StepNotify), ClaimID: c.ID, To: c.Claimant.Email, Name: c.Claimant.Name, Outcome: outcome,
		PayoutMinor: r.status.PayoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, Reason: reason,
	}).Get(ctx, &r.notice); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.enter(claim.StepClose)
	if err := workflow.ExecuteActivity(effects, a.CloseClaim, activities.CloseInput{
		Key: r.key(claim.StepClose), ClaimID: c.ID, Outcome: outcome, TransferID: r.pay.TransferID, PayoutMinor: r.status.PayoutMinor,
	}).Get(ctx, nil); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.enter(claim.StepAudit)
	record, err := json.Marshal(AuditRecord{ClaimID: c.ID, WorkflowID: r.workflowID, Outcome: outcome, Reason: reason,
		PayoutMinor: r.status.PayoutMinor, Currency: c.Currency, TransferID: r.pay.TransferID, PaymentReplayed: r.pay.Replayed,
		Coverage: r.coverage, Models: r.models, Approval: r.gate.Current(), Attempts: r.gate.Attempts(),
		NotificationID: r.notice.MessageID, ClosedAt: workflow.Now(ctx).UTC()})
	if err != nil {
		return ClaimResult{}, err
	}
	if err := workflow.ExecuteActivity(effects, a.WriteAudit, activities.AuditInput{
		Key: r.key(claim.StepAudit), ClaimID: c.ID, Record: record,
	}).Get(ctx, nil); err != nil {
		return r.deadLetter(ctx, err)
	}

	r.publish(ctx, outcome)
	return r.result(), nil
}

// deadLetter ends a run whose step failed for good. The claim is left for an
// operator with the step, the error, and the side effects whose outcome is
// not known.
func (r *claimRun) deadLetter(ctx workflow.Context, err error) (ClaimResult, error) {
	if temporal.IsCanceledError(err) {
		return ClaimResult{}, err
	}
	dl := &DeadLetter{Step: r.status.Step, StepName: r.status.StepName, Error: err.Error()}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		dl.ErrorType = appErr.Type()
	}
	// Only a payment and an e-mail can be half-done in a way an operator must
	// check at the receiver; closing and auditing are idempotent upserts.
	switch step := claim.Step(r.status.Step); step {
	case claim.StepPay:
		dl.UnknownEffects = append(dl.UnknownEffects, "payment "+string(r.key(step)))
	case claim.StepNotify:
		dl.UnknownEffects = append(dl.UnknownEffects, "notification "+string(r.key(step)))
	}
	workflow.GetLogger(ctx).Error("claim dead-lettered", "step", dl.StepName, "error", dl.Error)
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
		Approval: r.gate.Current(), Attempts: r.gate.Attempts()}
}

// reviewReasons says why a human must decide, if one must.
func (r *claimRun) reviewReasons(c claim.Claim, payout int64, t activities.Triage, as activities.Assessment) []string {
	limit := r.in.Options.AutoApproveLimitMinor
	if limit <= 0 {
		limit, _ = claim.ParseAmount(DefaultAutoApproveLimit, c.Currency)
	}
	var reasons []string
	if payout > limit {
		reasons = append(reasons, fmt.Sprintf("payout %s is above the auto-approve limit %s",
			claim.FormatAmount(payout, c.Currency), claim.FormatAmount(limit, c.Currency)))
	}
	if as.NeedsReview {
		reasons = append(reasons, fmt.Sprintf("assessment asks for review (fraud score %d: %v)", t.FraudScore, t.FraudSignals))
	}
	return reasons
}

func (r *claimRun) onStage(ctx workflow.Context, stage approvals.Stage, deadline time.Time) error {
	r.publishDeadline(ctx, string(stage), deadline)
	return nil
}

func (r *claimRun) escalate(ctx workflow.Context, appr *approvals.Approval) error {
	c := r.in.Claim
	return workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, effectOptions), a.EscalateApproval, activities.EscalateInput{
		Key: r.key(claim.StepApproval).Sub("escalate"), ClaimID: c.ID, Amount: appr.Request.Amount, Currency: c.Currency,
		RequestSHA256: appr.RequestSHA256, Deadline: appr.Deadline,
	}).Get(ctx, nil)
}

func (r *claimRun) key(step claim.Step) claim.IdempotencyKey {
	return claim.StepKey(r.workflowID, step)
}

func (r *claimRun) enter(step claim.Step) {
	r.status.Step, r.status.StepName = int(step), step.String()
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

func modelUse(step claim.Step, model, sum string, u activities.Usage) ModelUse {
	return ModelUse{Step: int(step), Model: model, OutputSHA256: sum, TokensIn: u.TokensIn, TokensOut: u.TokensOut}
}
