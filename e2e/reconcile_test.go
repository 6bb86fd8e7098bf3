package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// transferFor makes a transfer straight at the provider, as step 6 would
// (transfer_group, step=6 metadata) but with no step log behind it.
func (w *world) transferFor(group string, minor int64, key string) string {
	p := &stripe.TransferParams{Amount: stripe.Int64(minor), Currency: stripe.String("usd"),
		Destination: stripe.String("acct_1Ada"), TransferGroup: stripe.String(group)}
	p.AddMetadata("workflow_id", group)
	p.AddMetadata("step", "6")
	p.AddMetadata("idempotency_key", key)
	p.SetIdempotencyKey(key)
	tr, err := w.stripe.Stripe.Transfers.New(p)
	require.NoError(w.t, err)
	return tr.ID
}

func (w *world) schedule() *client.ScheduleDescription {
	d, err := w.client.ScheduleClient().GetHandle(context.Background(), workflows.ReconcileScheduleID).Describe(context.Background())
	require.NoError(w.t, err)
	return d
}

// The real worker creates the reconciliation schedule; the real claimsctl
// reconciles on demand, exits 0 on a clean window and 3 naming the orphan and
// the duplicate made directly at the provider; the schedule's own run agrees.
func TestReconcileFindsWhatTheStepLogNeverRecorded(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	ctx := context.Background()

	// The worker created the schedule at start: hourly, ReconcileWorkflow on
	// the claims queue.
	require.Eventually(t, func() bool {
		_, err := w.client.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Describe(ctx)
		return err == nil
	}, testTimeout, pollEvery, "the worker never created %s", workflows.ReconcileScheduleID)
	d := w.schedule()
	require.Len(t, d.Schedule.Spec.Intervals, 1)
	assert.Equal(t, time.Hour, d.Schedule.Spec.Intervals[0].Every)
	act := d.Schedule.Action.(*client.ScheduleWorkflowAction)
	assert.Equal(t, workflows.ReconcileWorkflowType, act.Workflow)
	assert.Equal(t, workflows.TaskQueue, act.TaskQueue)
	out, err := w.cli("schedule", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, workflows.ReconcileScheduleID)

	// A claim paid normally: the window is clean.
	clean := "claim-e2e-reconciled"
	w.start(w.claimFile(clean, "640.00"))
	paid := w.result(clean)
	require.Equal(t, workflows.StatusPaid, paid.Status)
	out, err = w.ctl("reconcile", "--since", "1h")
	require.NoError(t, err, "a clean window exits 0: %s", out)
	assert.Regexp(t, `(?m)^matched\s+1$`, out)
	assert.Contains(t, out, "all matched")

	// The crash window made by hand: a transfer for a claim no run ever
	// recorded, and a second transfer for the paid claim.
	orphan := w.transferFor("claim-e2e-orphan", 12000, "claim-e2e-orphan:step6")
	dup := w.transferFor(clean, 64000, clean+":step6:manual")

	out, err = w.ctl("reconcile", "--since", "1h")
	t.Logf("claimsctl reconcile --since 1h:\n%s", out)
	assert.Equal(t, 3, exitCode(err), "anything not matched exits 3: %s", out)
	assert.Regexp(t, `(?m)^orphaned\s+1$`, out)
	assert.Regexp(t, `(?m)^duplicate\s+1$`, out)
	assert.Regexp(t, `(?m)^matched\s+0$`, out)
	assert.Regexp(t, `(?m)^ORPHANED\s+claim-e2e-orphan\s+`+orphan+` \(120\.00 usd\)\s+the claim is not in the claims store`, out)
	assert.Regexp(t, `(?m)^DUPLICATE\s+`+clean+`\s+.*`+dup, out)
	assert.Contains(t, out, paid.TransferID, "the duplicate's entry names the recorded transfer too")
	assert.Contains(t, out, "2 not matched")

	out, err = w.ctl("reconcile", "--since", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--json")
	assert.Equal(t, 3, exitCode(err), out)
	var rep activities.ReconcileReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.Equal(t, map[string]int{"matched": 0, "orphaned": 1, "duplicate": 1, "missing": 0, "amount_mismatch": 0}, rep.Counts)
	require.Len(t, rep.Entries, 2)
	assert.Equal(t, activities.ReconcileEntry{ClaimID: "claim-e2e-orphan", Category: "orphaned", TransferIDs: []string{orphan},
		AmountsMinor: []int64{12000}, Currency: "usd", Detail: "the claim is not in the claims store"}, rep.Entries[0])
	assert.Equal(t, clean, rep.Entries[1].ClaimID)
	assert.ElementsMatch(t, []string{paid.TransferID, dup}, rep.Entries[1].TransferIDs)
	assert.True(t, strings.HasPrefix(rep.ID, "reconcile-") && strings.HasSuffix(rep.ID, ":reconcile"), rep.ID)

	// Every run's report is in the claims store.
	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	stored, err := st.Reconciliations(ctx, 10)
	require.NoError(t, err)
	assert.Len(t, stored, 3)
	r, err := st.GetReconciliation(ctx, rep.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"matched":0,"orphaned":1,"duplicate":1,"missing":0,"amount_mismatch":0}`, string(r.Counts))

	// claimsctl schedule changes the interval once; the schedule's own run
	// reconciles the last two intervals and finds the same.
	out, err = w.ctl("schedule", "--every", "2h")
	require.NoError(t, err, out)
	assert.Contains(t, out, "claims-reconcile: updated, every 2h0m0s")
	out, err = w.ctl("schedule", "--every", "2h")
	require.NoError(t, err, out)
	assert.Contains(t, out, "claims-reconcile: unchanged")
	assert.Equal(t, 2*time.Hour, w.schedule().Schedule.Spec.Intervals[0].Every)
	// A worker restarted (no RECONCILE_EVERY of its own) leaves it so.
	restarted := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	require.Eventually(t, func() bool { return strings.Contains(restarted.Output(), "reconcile schedule") }, testTimeout, pollEvery)
	assert.Equal(t, 2*time.Hour, w.schedule().Schedule.Spec.Intervals[0].Every, "a restart keeps the interval an operator set")

	require.NoError(t, w.client.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{}))
	var runID string
	require.Eventually(t, func() bool {
		if acts := w.schedule().Info.RecentActions; len(acts) > 0 && acts[0].StartWorkflowResult != nil {
			runID = acts[0].StartWorkflowResult.WorkflowID
		}
		return runID != ""
	}, testTimeout, pollEvery)
	assert.True(t, strings.HasPrefix(runID, workflows.ReconcileScheduleID+"-"), runID)
	var scheduled workflows.ReconcileReport
	require.NoError(t, w.client.GetWorkflow(ctx, runID, "").Get(ctx, &scheduled))
	assert.Equal(t, 4*time.Hour, scheduled.Until.Sub(scheduled.Since), "the last two intervals")
	assert.Equal(t, 1, scheduled.Counts["orphaned"])
	assert.Equal(t, 1, scheduled.Counts["duplicate"])
	assert.Equal(t, runID+":reconcile", scheduled.ID)

	out, err = w.ctl("schedule", "--every", "0")
	require.NoError(t, err, out)
	assert.Contains(t, out, "claims-reconcile: deleted")
}
