package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Whoever reaches the Temporal frontend can run workflow code of their own
// and have it schedule these activities on the claims task queue, with any
// input. So no activity takes its authority from its input or from the
// workflow that asks: each one that acts on a claim asks the system of
// record first, the way Stripe honours its own idempotency key.
//
//   - A claim belongs to one run: intake, which runs only as a local
//     activity of this worker's own claim workflow, binds the claim to the
//     run ID the Temporal server reports (a client names a workflow's ID and
//     type, never its run ID). Every other claim activity acts only for
//     that run; a closed claim is never taken again.
//   - A run the claim is not bound to may take it over only when the server
//     says it is a running claim workflow on this worker's task queue (a run
//     reset by an operator, or started again after a dead letter): then it
//     runs this worker's code, not the caller's.
//   - Reads that answer claimant data or the insurer's rules, and writes to
//     the system of record, go only to the owning run; the payment also
//     re-checks payee, ceiling and decision receipts (payout.go).
//
// A refusal is non-retryable, names why, is counted (activity_refusals)
// and logged as an alert, and is recorded against the claim when the store
// holds it (bounded: store.MaxRefusalsPerClaim).

// Error types of refusals.
const (
	// ErrForeignRun: the calling run does not own the claim.
	ErrForeignRun = "ForeignRun"
	// ErrClaimClosed: the claim's outcome is recorded; no run takes it again.
	ErrClaimClosed = "ClaimClosed"
	// ErrPaymentUnauthorised: the payout is not one the system of record
	// and the signed decisions allow.
	ErrPaymentUnauthorised = "PaymentUnauthorised"
)

// Runs is how the activities tell this worker's own runs from anyone
// else's: the task queue and workflow types it serves, and the Temporal
// server's answer about a run.
type Runs struct {
	TaskQueue         string
	ClaimWorkflow     string
	ReconcileWorkflow string
	// Describe asks the server about a run (nil: no run is ever described,
	// so none takes a claim over).
	Describe func(ctx context.Context, workflowID, runID string) (RunFacts, error)
}

// RunFacts is what the Temporal server says about a run.
type RunFacts struct {
	WorkflowType string
	TaskQueue    string
	Running      bool
}

// Caller is the workflow run that asked for an activity, as the server put
// it in the activity's info.
type Caller struct {
	Namespace    string
	WorkflowID   string
	RunID        string
	WorkflowType string
	ActivityType string
	ActivityID   string
	// Local: a local activity, run in this process by this worker's own
	// workflow code; a regular activity may have been scheduled by anyone's.
	Local bool
}

func (c Caller) String() string {
	kind := "activity"
	if c.Local {
		kind = "local activity"
	}
	if c.WorkflowID == "" {
		return kind + " started by no workflow"
	}
	return fmt.Sprintf("%s of %s run %s (%s)", kind, c.WorkflowType, c.RunID, c.WorkflowID)
}

// callerOf reads who asked from the activity's info; tests swap it.
func callerOf(ctx context.Context) (Caller, bool) {
	if !activity.IsActivity(ctx) {
		return Caller{}, false
	}
	info := activity.GetInfo(ctx)
	c := Caller{Namespace: info.Namespace, WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		ActivityType: info.ActivityType.Name, ActivityID: info.ActivityID, Local: info.IsLocalActivity}
	if info.WorkflowType != nil {
		c.WorkflowType = info.WorkflowType.Name
	}
	return c, true
}

func (a *Activities) caller(ctx context.Context) (Caller, bool) {
	if a.callerFn != nil {
		return a.callerFn(ctx)
	}
	return callerOf(ctx)
}

// forClaim is the check every activity that acts on a claim makes first:
// the claim exists, and the calling run is the one it belongs to (or
// takes it over, see above). It returns the claim as the system of record
// holds it: what the activity acts on, rather than its input.
func (a *Activities) forClaim(ctx context.Context, claimID string) (store.Record, Caller, error) {
	c, ok := a.caller(ctx)
	switch {
	case !ok || c.WorkflowID == "" || c.RunID == "":
		return store.Record{}, c, a.refuse(ctx, c, "", "no-run", ErrForeignRun, "%s acts only for the claim workflow that owns a claim", nameOf(c))
	case c.WorkflowID != claimID:
		return store.Record{}, c, a.refuse(ctx, c, claimID, "other-claim", ErrForeignRun,
			"%s: workflow %s acts only for its own claim, not claim %s", nameOf(c), c.WorkflowID, claimID)
	}
	rec, err := a.Store.GetClaim(ctx, claimID)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, c, a.refuse(ctx, c, "", "not-registered", ErrForeignRun, "%s: claim %s is not registered", nameOf(c), claimID)
	}
	if err != nil {
		return store.Record{}, c, err
	}
	if rec.RunID == c.RunID {
		return rec, c, nil
	}
	if !c.Local {
		// A regular activity from a run the claim is not bound to: only a
		// running claim workflow on this worker's queue takes it over.
		ours, err := a.ownRun(ctx, c, a.Runs.ClaimWorkflow)
		if err != nil {
			return store.Record{}, c, err
		}
		if !ours {
			return store.Record{}, c, a.refuse(ctx, c, claimID, "foreign-run", ErrForeignRun,
				"%s: claim %s belongs to another run; this run is not a claim workflow of this worker's", nameOf(c), claimID)
		}
	}
	if rec.Closed() {
		return store.Record{}, c, a.refuse(ctx, c, claimID, "closed", ErrClaimClosed,
			"%s: claim %s is closed (%s); no run takes it again", nameOf(c), claimID, rec.Status)
	}
	moved, err := a.Store.HandOver(ctx, claimID, rec.RunID, c.RunID)
	if err != nil {
		return store.Record{}, c, err
	}
	if !moved {
		return store.Record{}, c, temporal.NewApplicationError(fmt.Sprintf("claim %s changed hands while %s took it over; retrying", claimID, nameOf(c)), "HandOverRace")
	}
	logger(ctx).Warn("claim handed over to a new run", "claim", claimID, "from_run", rec.RunID, "to_run", c.RunID, "caller", c.String())
	rec.RunID = c.RunID
	return rec, c, nil
}

// ownRun asks the Temporal server whether the caller is a running workflow
// of type workflowType on this worker's task queue.
func (a *Activities) ownRun(ctx context.Context, c Caller, workflowType string) (bool, error) {
	if a.Runs.Describe == nil || workflowType == "" || a.Runs.TaskQueue == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	f, err := a.Runs.Describe(ctx, c.WorkflowID, c.RunID)
	if err != nil {
		return false, fmt.Errorf("describe run %s of %s: %w", c.RunID, c.WorkflowID, err) // retryable: the server will answer
	}
	return f.Running && f.WorkflowType == workflowType && f.TaskQueue == a.Runs.TaskQueue, nil
}

// refuse makes the non-retryable refusal of a call, counts it, logs it as
// an alert and records it against claimID when the store holds that claim.
func (a *Activities) refuse(ctx context.Context, c Caller, claimID, code, typ, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	logger(ctx).Error("ALERT: activity refused", "alert", "activity_refused", "code", code, "caller", c.String(), "refusal", msg)
	metrics.Activity(ctx, metrics.ActivityRefusals, map[string]string{"activity": activityLabel(c.ActivityType), "code": code})
	if claimID != "" {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, err := a.Store.RecordRefusal(rctx, store.Refusal{Key: clip(claimID+":"+c.RunID+":"+c.ActivityType+":"+c.ActivityID, 256), ClaimID: claimID,
			At: time.Now().UTC(), Channel: "activity", Decision: clip(c.ActivityType, 64), Code: code, Reason: clip(msg, 1024)})
		cancel()
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			logger(ctx).Error("activity refusal not recorded", "claim", claimID, "error", err)
		}
	}
	return temporal.NewNonRetryableApplicationError(msg, typ, nil)
}

func nameOf(c Caller) string {
	if c.ActivityType != "" {
		return c.ActivityType
	}
	return "this activity"
}

// activityLabel keeps the metric's label set bounded.
func activityLabel(name string) string {
	switch name {
	case "LoadClaim", "OpenApproval", "CallTool", "TriageTurn", "TriageClaim", "AssessClaim", "PayClaimant",
		"NotifyClaimant", "RemindApprovers", "EscalateApproval", "CloseClaim", "WriteAudit", "ReconcilePayments", "PublishApproval":
		return name
	}
	return "other"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
