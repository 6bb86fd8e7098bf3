package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Reconciliation names other programs rely on.
const (
	ReconcileWorkflowType = "ReconcileWorkflow"
	// ReconcileScheduleID is the Temporal Schedule that runs
	// ReconcileWorkflow every interval; its runs' workflow IDs are this ID
	// and the scheduled time.
	ReconcileScheduleID = "claims-reconcile"
	// DefaultReconcileEvery is the schedule's interval (RECONCILE_EVERY).
	DefaultReconcileEvery = time.Hour
)

// ReconcileInput says which window to reconcile. Every field may be zero:
// Until is then the workflow's start time, Since is Until minus twice the
// interval (so consecutive scheduled runs overlap by one interval and a
// transfer near one run's edge is judged whole by the next), Key is
// "<workflowID>:reconcile".
//
// A schedule's action has fixed arguments, so the schedule sets only
// Interval: a fixed Key would make every scheduled run replay the first
// run's stored report.
type ReconcileInput struct {
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	Key   string    `json:"key,omitempty"`
	// Interval is how often the schedule runs (0: DefaultReconcileEvery);
	// it sets the default window.
	Interval time.Duration `json:"interval,omitempty"`
	// MaxEntries bounds the report's entries (0: 1000).
	MaxEntries int `json:"max_entries,omitempty"`
	// InFlightGrace spares transfers of claims still open in the store that
	// are younger than it (0: 5 minutes; negative: none).
	InFlightGrace time.Duration `json:"in_flight_grace,omitempty"`
}

// ReconcileReport is ReconcileWorkflow's result (and what the claims store
// keeps in its reconciliations table).
type ReconcileReport = activities.ReconcileReport

// reconcileStep runs the one activity: a read of the provider and the store
// that may page through many transfers, so it heartbeats (the worker beats
// for it; it adds its progress), and a retry starts the read over. Its only
// write, the report, is keyed.
var reconcileStep = workflow.ActivityOptions{
	StartToCloseTimeout: 30 * time.Minute,
	HeartbeatTimeout:    30 * time.Second,
	RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2,
		MaximumInterval: 2 * time.Minute, MaximumAttempts: 10},
}

// ReconcileWorkflow compares the payment provider's transfers with the
// claims' step log over a window and returns (and stores) the report: every
// claim matched, orphaned, duplicate, missing or amount_mismatch. The work
// is one activity, ReconcilePayments; this code only fixes the window and
// the key, from workflow time, so a replay computes the same.
func ReconcileWorkflow(ctx workflow.Context, in ReconcileInput) (ReconcileReport, error) {
	info := workflow.GetInfo(ctx)
	started := workflow.Now(ctx).UTC()
	interval := in.Interval
	if interval <= 0 {
		interval = DefaultReconcileEvery
	}
	until := in.Until
	if until.IsZero() {
		until = started
	}
	since := in.Since
	if since.IsZero() {
		since = until.Add(-2 * interval)
	}
	if !since.Before(until) {
		return ReconcileReport{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("nothing to reconcile: since %s is not before until %s", since.Format(time.RFC3339), until.Format(time.RFC3339)),
			activities.ErrInvalidInput, nil)
	}
	key := claim.IdempotencyKey(in.Key)
	if key == "" {
		key = ReconcileKey(info.WorkflowExecution.ID)
	}
	workflow.GetLogger(ctx).Info("reconciling payments", "since", since, "until", until, "key", key)
	var rep ReconcileReport
	err := workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, reconcileStep), a.ReconcilePayments,
		activities.ReconcilePaymentsInput{Key: key, WorkflowID: info.WorkflowExecution.ID, Started: started,
			Since: since.UTC(), Until: until.UTC(), MaxEntries: in.MaxEntries, InFlightGrace: in.InFlightGrace}).Get(ctx, &rep)
	return rep, err
}

// ReconcileKey is the key a reconciliation run stores its report under.
func ReconcileKey(workflowID string) claim.IdempotencyKey {
	return claim.IdempotencyKey(workflowID).Sub("reconcile")
}

// ReconcileStartOptions starts an on-demand reconciliation (claimsctl
// reconcile): workflow ID "reconcile-<timestamp>" on the claims task queue.
func ReconcileStartOptions(now time.Time) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                                       "reconcile-" + now.UTC().Format("20060102T150405.000Z"),
		TaskQueue:                                TaskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowExecutionTimeout:                 time.Hour,
	}
}

// What EnsureReconcileSchedule did.
const (
	ScheduleCreated   = "created"
	ScheduleUpdated   = "updated"
	ScheduleUnchanged = "unchanged"
	ScheduleDeleted   = "deleted"
	ScheduleAbsent    = "absent"
)

// EnsureReconcileSchedule makes the claims-reconcile schedule run
// ReconcileWorkflow every interval, on the claims task queue: it creates
// the schedule, or, if one exists, leaves it alone when it already runs at
// that interval and updates it otherwise. An interval of 0 deletes it. Safe
// to call from every worker at start and from claimsctl at once.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, every time.Duration) (string, error) {
	return ensureReconcileSchedule(ctx, c, every, true)
}

// CreateReconcileSchedule creates the schedule at that interval if none
// exists, and leaves an existing one as an operator set it (claimsctl
// schedule): what a worker does at start unless told an interval.
func CreateReconcileSchedule(ctx context.Context, c client.Client, every time.Duration) (string, error) {
	return ensureReconcileSchedule(ctx, c, every, false)
}

func ensureReconcileSchedule(ctx context.Context, c client.Client, every time.Duration, update bool) (string, error) {
	if every < 0 {
		return "", fmt.Errorf("reconcile schedule: interval %s is negative", every)
	}
	sc := c.ScheduleClient()
	h := sc.GetHandle(ctx, ReconcileScheduleID)
	if every == 0 {
		err := h.Delete(ctx)
		var nf *serviceerror.NotFound
		switch {
		case errors.As(err, &nf):
			return ScheduleAbsent, nil
		case err != nil:
			return "", fmt.Errorf("reconcile schedule: delete: %w", err)
		}
		return ScheduleDeleted, nil
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}
	_, err := sc.Create(ctx, client.ScheduleOptions{
		ID:            ReconcileScheduleID,
		Spec:          spec,
		Action:        reconcileAction(every),
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		CatchupWindow: max(every, time.Minute),
		Note:          "durableclaims: reconcile Stripe transfers with the claims' step log",
	})
	if err == nil {
		return ScheduleCreated, nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return "", fmt.Errorf("reconcile schedule: create: %w", err)
	}
	if !update {
		return ScheduleUnchanged, nil
	}
	desc, err := h.Describe(ctx)
	if err != nil {
		return "", fmt.Errorf("reconcile schedule: describe: %w", err)
	}
	if reconcileScheduleIs(desc.Schedule, every) {
		return ScheduleUnchanged, nil
	}
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		s := in.Description.Schedule
		s.Spec = &spec
		s.Action = reconcileAction(every)
		if s.Policy == nil {
			s.Policy = &client.SchedulePolicies{}
		}
		s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
		s.Policy.CatchupWindow = max(every, time.Minute)
		return &client.ScheduleUpdate{Schedule: &s}, nil
	}})
	if err != nil {
		return "", fmt.Errorf("reconcile schedule: update: %w", err)
	}
	return ScheduleUpdated, nil
}

// ReconcileScheduleEvery reports the interval of an existing schedule.
func ReconcileScheduleEvery(ctx context.Context, c client.Client) (time.Duration, error) {
	desc, err := c.ScheduleClient().GetHandle(ctx, ReconcileScheduleID).Describe(ctx)
	if err != nil {
		return 0, err
	}
	if desc.Schedule.Spec == nil || len(desc.Schedule.Spec.Intervals) != 1 {
		return 0, fmt.Errorf("schedule %s has no single interval", ReconcileScheduleID)
	}
	return desc.Schedule.Spec.Intervals[0].Every, nil
}

func reconcileAction(every time.Duration) *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:        ReconcileScheduleID,
		Workflow:  ReconcileWorkflowType,
		Args:      []any{ReconcileInput{Interval: every}},
		TaskQueue: TaskQueue,
		// A run stuck without a worker ends rather than skipping every
		// later run (the overlap policy skips while one runs).
		WorkflowExecutionTimeout: max(2*every, time.Hour),
	}
}

func reconcileScheduleIs(s client.Schedule, every time.Duration) bool {
	if s.Spec == nil || len(s.Spec.Intervals) != 1 || s.Spec.Intervals[0].Every != every || s.Spec.Intervals[0].Offset != 0 ||
		len(s.Spec.Calendars) != 0 || len(s.Spec.CronExpressions) != 0 {
		return false
	}
	act, ok := s.Action.(*client.ScheduleWorkflowAction)
	return ok && act.Workflow == ReconcileWorkflowType && act.TaskQueue == TaskQueue &&
		act.WorkflowExecutionTimeout == max(2*every, time.Hour)
}
