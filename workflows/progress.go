package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
)

// progress is where a run stands. The status query and the run's result
// are built from it and the rest of the run's state (snapshot, result),
// never kept twice.
type progress struct {
	step   claim.Step
	state  string
	reason string
	// version is the claim's version in the system of record, as last read.
	version int64
	// payoutMinor is the payout once assessed (payoutKnown), or 0 for an
	// outcome that pays nothing.
	payoutMinor   int64
	payoutKnown   bool
	stepsExecuted int
	spendMicros   int64
	tokensIn      int64
	tokensOut     int64
	toolCalls     int
	// waitingOn is the dependency the current step waits for (outage
	// waits, checkpoint.go), since waitingSince; empty when none.
	waitingOn    string
	waitingSince time.Time
}

func (p *progress) setPayout(minor int64) { p.payoutMinor, p.payoutKnown = minor, true }

func (p *progress) stepName() string {
	if p.step == 0 {
		return ""
	}
	return p.step.String()
}

// snapshot is the answer to the status query.
func (r *claimRun) snapshot() Status {
	c := r.claim
	s := Status{ClaimID: c.ID, ReviewOf: c.ReviewOf, Step: int(r.step), StepName: r.stepName(), State: r.state, Amount: c.Amount(), AmountMinor: c.AmountMinor,
		Currency: c.Currency, PayoutMinor: r.payoutMinor, TransferID: r.pay.TransferID, Reason: r.reason, Version: r.version,
		StepsExecuted: r.stepsExecuted, ModelSpendMicros: r.spendMicros, TokensIn: r.tokensIn, TokensOut: r.tokensOut,
		ModelCalls: r.models, ToolCalls: r.toolCalls, PolicyVersion: r.policyVersion, Decided: r.decided,
		Approval: r.gate.Current(), Attempts: r.gate.Attempts(), AttemptsDropped: r.gate.Dropped()}
	if r.payoutKnown {
		s.Payout = claim.FormatAmount(r.payoutMinor, c.Currency)
	}
	if r.waitingOn != "" {
		s.WaitingOn, s.WaitingSince = r.waitingOn, r.waitingSince
	}
	if r.trust != nil {
		s.Audience = r.trust.Audience
	}
	return s
}

// result is how the run ended, from the same state as the snapshot.
func (r *claimRun) result() ClaimResult {
	s := r.snapshot()
	return ClaimResult{ClaimID: s.ClaimID, Status: s.State, Reason: s.Reason, PayoutMinor: s.PayoutMinor, Payout: s.Payout,
		Currency: s.Currency, TransferID: s.TransferID, PaymentReplayed: r.pay.Replayed,
		Approval: s.Approval, Approvals: r.gate.All(), Attempts: s.Attempts, AttemptsDropped: s.AttemptsDropped,
		StepsExecuted: s.StepsExecuted, ModelSpendMicros: s.ModelSpendMicros, PolicyVersion: s.PolicyVersion, Decided: s.Decided}
}

// setClaim takes the claim as the system of record holds it.
func (r *claimRun) setClaim(c claim.Claim, version int64) {
	r.claim = c
	r.version = version
}

func (r *claimRun) onStage(ctx workflow.Context, stage approvals.Stage, deadline time.Time) error {
	r.publishDeadline(ctx, string(stage), deadline)
	return nil
}

// enter moves the run to a step, closing the one before.
func (r *claimRun) enter(ctx workflow.Context, step claim.Step) {
	if r.step != 0 && r.step != step {
		r.stepDone(ctx, "ok")
	}
	if r.step != step {
		r.stepStarted = workflow.Now(ctx)
	}
	r.step = step
}

// stepDone measures the step that ends: its duration and outcome, and the
// checkpoint it left (history size and length), against the run's budget.
func (r *claimRun) stepDone(ctx workflow.Context, outcome string) {
	step := map[string]string{"step": r.stepName()}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"step": r.stepName(), "outcome": outcome}).
		Timer(metrics.ClaimStepDuration).Record(workflow.Now(ctx).Sub(r.stepStarted))
	info := workflow.GetInfo(ctx)
	size := int64(info.GetCurrentHistorySize())
	metrics.Observe(ctx, metrics.ClaimHistoryBytes, size, step)
	metrics.Observe(ctx, metrics.ClaimHistoryEvents, int64(info.GetCurrentHistoryLength()), step)
	if budget := r.historyBudget; size > budget && !r.overBudget {
		r.overBudget = true
		workflow.GetLogger(ctx).Warn("claim history is over its budget", "bytes", size, "budget", budget, "step", r.stepName())
		metrics.Count(ctx, metrics.HistoryBudgetCrossed, step)
	}
}

// publish upserts ClaimStatus only when it changes: every upsert is a
// history event.
func (r *claimRun) publish(ctx workflow.Context, status string) {
	r.publishDeadline(ctx, status, time.Time{})
}

func (r *claimRun) publishDeadline(ctx workflow.Context, status string, deadline time.Time) {
	r.state = status
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
