package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5/pgxpool"

	"durableclaims.local/peers/killpoint"
	"durableclaims.local/peers/seed"
)

const (
	statusEvent   = "status"   // dbos.SetEvent key the control API reads
	approvalTopic = "approval" // dbos.Send / dbos.Recv topic
)

type peer struct {
	cfg   seed.Config
	db    *pgxpool.Pool
	world *seed.World
	log   *slog.Logger
	kill  *killpoint.Killer
}

// Steps retry transient failures (network, 429, 5xx) with backoff; a
// permanent error (a 4xx refusal, a malformed answer) fails the claim.
var retry = []dbos.StepOption{
	dbos.WithStepMaxRetries(8),
	dbos.WithStepBaseInterval(250 * time.Millisecond),
	dbos.WithStepMaxInterval(5 * time.Second),
	dbos.WithStepRetryPredicate(func(err error) bool { return !seed.IsPermanent(err) }),
}

func step(name string) []dbos.StepOption {
	return append([]dbos.StepOption{dbos.WithStepName(name)}, retry...)
}

// claimWorkflow is the claim: a DBOS workflow whose ID is the claim ID.
// Its code between steps is deterministic, so recovery replays the
// recorded step results and resumes at the first step with none.
func (p *peer) claimWorkflow(ctx dbos.Context, c seed.Claim) (seed.View, error) {
	if err := dbos.SetEvent(ctx, statusEvent, seed.View{ClaimID: c.ClaimID, Status: seed.StatusRunning}); err != nil {
		return seed.View{}, err
	}

	// 1. Intake (no I/O: validation only, recomputed on replay).
	if err := c.Validate(); err != nil {
		return seed.View{}, fmt.Errorf("intake: %w", err)
	}

	// 2. Triage: one model call.
	triage, err := dbos.RunAsStep(ctx, func(sctx context.Context) (seed.Triage, error) {
		return p.world.Triage(sctx, c)
	}, step("triage")...)
	if err != nil {
		return seed.View{}, err
	}

	// 3. Coverage (no I/O).
	cov := seed.Cover(c)

	// 4. Assess: one model call; the rules clamp the recommendation.
	assess, err := dbos.RunAsStep(ctx, func(sctx context.Context) (seed.Assessment, error) {
		return p.world.Assess(sctx, c, triage, cov)
	}, step("assess")...)
	if err != nil {
		return seed.View{}, err
	}
	payout := seed.Payout(assess, cov)

	// 5. Approval: above the limit, or on the model's say-so, a human
	// decides; the claim waits in a durable Recv whose deadline is recorded,
	// so a restart waits only for what is left of APPROVAL_TIMEOUT.
	out := seed.View{ClaimID: c.ClaimID, PayoutMinor: payout}
	approver := ""
	switch {
	case payout == 0:
		out.Status = seed.StatusRejected
	case payout > p.cfg.LimitMinor || assess.NeedsReview:
		if err := dbos.SetEvent(ctx, statusEvent, seed.View{ClaimID: c.ClaimID, Status: seed.StatusWaiting, PayoutMinor: payout}); err != nil {
			return seed.View{}, err
		}
		a, err := dbos.Recv[seed.Approval](ctx, approvalTopic, p.cfg.ApprovalTimeout)
		switch {
		case errors.Is(err, dbos.ErrTimeout):
			out.Status = seed.StatusExpired
		case err != nil:
			return seed.View{}, err
		default:
			approver = a.Approver
			if err := dbos.SetEvent(ctx, statusEvent, seed.View{ClaimID: c.ClaimID, Status: seed.StatusRunning, PayoutMinor: payout}); err != nil {
				return seed.View{}, err
			}
		}
	}

	// 6. Pay. DBOS steps are at least once (a crash after the POST and
	// before the step's checkpoint runs it again): the transfer carries
	// Stripe's Idempotency-Key, so a second POST replays the first answer.
	if out.Status == "" {
		tr, err := dbos.RunAsStep(ctx, func(sctx context.Context) (seed.Transfer, error) {
			t, err := p.world.Pay(sctx, c, payout)
			if err == nil {
				// Kill point: the transfer exists, the step has not
				// returned, so DBOS has not recorded it.
				p.kill.At("after-pay", c.ClaimID)
			}
			return t, err
		}, step("pay")...)
		if err != nil {
			return seed.View{}, err
		}
		out.Status, out.TransferID = seed.StatusPaid, tr.ID
	} else {
		out.PayoutMinor = 0
	}

	// 7. Notify.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
		p.kill.At("in-notify", c.ClaimID)
		return p.world.Notify(c, out, approver)
	}, step("notify")...); err != nil {
		return seed.View{}, err
	}

	// 8. Close: an upsert, so a repeated step writes the same.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return true, seed.Close(sctx, p.db, out)
	}, step("close")...); err != nil {
		return seed.View{}, err
	}

	// 9. Audit: one row per claim, so a repeated step inserts nothing.
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return true, seed.Audit(sctx, p.db, out, approver, triage, assess)
	}, step("audit")...); err != nil {
		return seed.View{}, err
	}

	return out, dbos.SetEvent(ctx, statusEvent, out)
}
