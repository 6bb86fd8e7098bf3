package main

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"durableclaims.local/peers/killpoint"
	"durableclaims.local/peers/seed"
)

const (
	workflowName = "claim"
	approveSig   = "approve" // the signal POST /claims/{id}/approve sends
	statusMemo   = "status"  // the memo field GET /claims/{id} reads while the claim runs
)

// Input is the workflow's input: the claim and the two settings of the
// contract, fixed when the claim starts (workflow code reads no
// environment: a replay must see what the first run saw).
type Input struct {
	Claim           seed.Claim    `json:"claim"`
	LimitMinor      int64         `json:"limit_minor"`
	ApprovalTimeout time.Duration `json:"approval_timeout"`
}

// Outcome is what steps 7-9 record.
type Outcome struct {
	seed.View
	Approver   string          `json:"approver"`
	Triage     seed.Triage     `json:"triage"`
	Assessment seed.Assessment `json:"assessment"`
}

// activityOptions: every step is an activity with a start-to-close timeout
// and a bounded retry (the SDK's default policy retries for ever). A
// non-retryable ApplicationError (a 4xx refusal, a malformed answer) fails
// the claim at once.
var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 10 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    250 * time.Millisecond,
		BackoffCoefficient: 2,
		MaximumInterval:    5 * time.Second,
		MaximumAttempts:    9,
	},
}

// ClaimWorkflow is the claim: one workflow whose ID is the claim ID. Its
// code is deterministic; everything that does I/O is an activity, whose
// result the server records, so a replay after a crash resumes at the
// first step with no recorded result.
func ClaimWorkflow(ctx workflow.Context, in Input) (seed.View, error) {
	c := in.Claim
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	var a *Activities

	// 1. Intake (no I/O).
	if err := c.Validate(); err != nil {
		return seed.View{}, temporal.NewNonRetryableApplicationError("intake: "+err.Error(), "intake", nil)
	}

	// 2. Triage: one model call.
	var triage seed.Triage
	if err := workflow.ExecuteActivity(ctx, a.Triage, c).Get(ctx, &triage); err != nil {
		return seed.View{}, err
	}

	// 3. Coverage (no I/O).
	cov := seed.Cover(c)

	// 4. Assess: one model call; the rules clamp the recommendation.
	var assess seed.Assessment
	if err := workflow.ExecuteActivity(ctx, a.Assess, c, triage, cov).Get(ctx, &assess); err != nil {
		return seed.View{}, err
	}
	payout := seed.Payout(assess, cov)

	// 5. Approval: a signal, or the timer first.
	out := Outcome{View: seed.View{ClaimID: c.ClaimID, PayoutMinor: payout}, Triage: triage, Assessment: assess}
	switch {
	case payout == 0:
		out.Status = seed.StatusRejected
	case payout > in.LimitMinor || assess.NeedsReview:
		if err := setStatus(ctx, seed.StatusWaiting); err != nil {
			return seed.View{}, err
		}
		var ap seed.Approval
		approved := false
		timerCtx, cancelTimer := workflow.WithCancel(ctx)
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(workflow.GetSignalChannel(ctx, approveSig), func(ch workflow.ReceiveChannel, _ bool) {
			ch.Receive(ctx, &ap)
			approved = true
		})
		sel.AddFuture(workflow.NewTimer(timerCtx, in.ApprovalTimeout), func(workflow.Future) {})
		sel.Select(ctx)
		cancelTimer()
		if !approved {
			out.Status = seed.StatusExpired
			break
		}
		out.Approver = ap.Approver
		if err := setStatus(ctx, seed.StatusRunning); err != nil {
			return seed.View{}, err
		}
	}

	// 6. Pay.
	if out.Status == "" {
		if err := workflow.ExecuteActivity(ctx, a.Pay, c, payout).Get(ctx, &out.TransferID); err != nil {
			return seed.View{}, err
		}
		out.Status = seed.StatusPaid
	} else {
		out.PayoutMinor = 0
	}

	// 7-9. Notify, close, audit.
	for _, step := range []any{a.Notify, a.Close, a.Audit} {
		if err := workflow.ExecuteActivity(ctx, step, c, out).Get(ctx, nil); err != nil {
			return seed.View{}, err
		}
	}
	return out.View, nil
}

// setStatus publishes the status GET /claims/{id} reports while the claim
// runs: a memo, which the server returns with the workflow's description.
func setStatus(ctx workflow.Context, status string) error {
	return workflow.UpsertMemo(ctx, map[string]any{statusMemo: status})
}

// Activities are the steps that do I/O: the seed's, each turned into an
// activity's result or error (a permanent refusal is non-retryable).
type Activities struct {
	world *seed.World
	db    *pgxpool.Pool
	kill  *killpoint.Killer
}

func (a *Activities) Triage(ctx context.Context, c seed.Claim) (seed.Triage, error) {
	t, err := a.world.Triage(ctx, c)
	return t, activityErr(err)
}

func (a *Activities) Assess(ctx context.Context, c seed.Claim, t seed.Triage, cov seed.Coverage) (seed.Assessment, error) {
	as, err := a.world.Assess(ctx, c, t, cov)
	return as, activityErr(err)
}

// Pay creates the transfer and returns its ID, with the contract's
// Idempotency-Key: a worker that dies after the POST and before the server
// records the result runs the activity again after its timeout.
func (a *Activities) Pay(ctx context.Context, c seed.Claim, amount int64) (string, error) {
	t, err := a.world.Pay(ctx, c, amount)
	if err != nil {
		return "", activityErr(err)
	}
	// Kill point: the transfer exists; the activity has not returned, so
	// the server has not recorded it.
	a.kill.At("after-pay", c.ClaimID)
	return t.ID, nil
}

func (a *Activities) Notify(ctx context.Context, c seed.Claim, o Outcome) error {
	a.kill.At("in-notify", c.ClaimID)
	_, err := a.world.Notify(c, o.View, o.Approver)
	return activityErr(err)
}

func (a *Activities) Close(ctx context.Context, c seed.Claim, o Outcome) error {
	return activityErr(seed.Close(ctx, a.db, o.View))
}

func (a *Activities) Audit(ctx context.Context, c seed.Claim, o Outcome) error {
	return activityErr(seed.Audit(ctx, a.db, o.View, o.Approver, o.Triage, o.Assessment))
}

// activityErr makes a permanent refusal non-retryable; the rest retry by
// the activity's policy.
func activityErr(err error) error {
	if seed.IsPermanent(err) {
		return temporal.NewNonRetryableApplicationError(err.Error(), "permanent", err)
	}
	return err
}
