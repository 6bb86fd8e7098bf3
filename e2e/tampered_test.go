package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commandpb "go.temporal.io/api/command/v1"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// TestAForeignWorkflowTaskAnswerIsDeadLettered is issue 42's third attack
// on a server that is not the insurer's own: with the worker away, a rogue
// client takes the workflow task that carries an adjuster's approval and
// answers it with commands of its own, a payment of a million to its own
// account. The worker that comes back fails to replay the history, finds
// the completion it did not sign, and dead-letters the run with the
// reason, no money moved. claimsctl dlq lists it, and redrive resets it to
// the stranger's answer: the approval is applied again, and the claimant
// is paid once, as approved.
func TestAForeignWorkflowTaskAnswerIsDeadLettered(t *testing.T) {
	w := newWorld(t)
	id := "claim-e2e-tampered"
	thief, task := w.thiefTakesTheApproval(id, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pay, err := converter.GetDefaultDataConverter().ToPayloads(activities.PayInput{Key: claim.StepKey(id, claim.StepPay), WorkflowID: id,
		ClaimID: id, AmountMinor: 1_000_000_00, Currency: "usd", Destination: "acct_thief"})
	require.NoError(t, err)
	_, err = thief.WorkflowService().RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{
		Namespace: "default", TaskToken: task.GetTaskToken(), Identity: "thief",
		Commands: []*commandpb.Command{{CommandType: enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
			Attributes: &commandpb.Command_ScheduleActivityTaskCommandAttributes{ScheduleActivityTaskCommandAttributes: &commandpb.ScheduleActivityTaskCommandAttributes{
				ActivityId: "thief-pay", ActivityType: &commonpb.ActivityType{Name: "PayClaimant"},
				TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.TaskQueue}, Input: pay,
				StartToCloseTimeout: durationpb.New(30 * time.Second)}}}}})
	require.NoError(t, err, "the dev server takes the thief's answer")

	// The worker comes back, fails to replay the run, and dead-letters it.
	w.redriven(id, testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker")))
}

// thiefTakesTheApproval parks claim id, stops the worker, sends a real
// approval, and has a rogue client without keys take the workflow task
// that carries it, polling as the worker's deployment version.
func (w *world) thiefTakesTheApproval(id string, env []string) (client.Client, *workflowservice.PollWorkflowTaskQueueResponse) {
	t := w.t
	worker := testenv.Supervise(t, append(append([]string{}, w.env...), env...), filepath.Join(w.bin, "worker"))
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	receipt := w.receipt("approve", id, "adjuster-17")
	worker.Stop()
	out, err := w.cli("workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", receipt)
	require.NoError(t, err, out) // a real decision, in a task nobody takes

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	th := w.thief(ctx)
	return th.c, th.workflowTask(ctx, id)
}

// redriven checks the dead letter the stranger's answer left on claim id
// and redrives it: what the stranger wrote is dropped, the approval
// applied again, and the claimant paid once, as approved.
func (w *world) redriven(id string, worker *testenv.Supervised) {
	t := w.t
	var list string
	require.Eventually(t, func() bool {
		out, err := w.ctl("dlq", "list")
		list = out
		return err == nil && strings.Contains(out, id+"  step 0 (history)  ForeignHistory: tampered:")
	}, 2*time.Minute, 200*time.Millisecond, "the tampered run was never dead-lettered:\n%s", worker.Output())
	assert.Contains(t, list, `(by "thief")`)
	n, _ := w.transfers(id)
	assert.Zero(t, n, "no money moved")
	assert.Contains(t, worker.Output(), "alert=foreign_workflow_task")
	audit, err := w.ctl("audit", id)
	require.NoError(t, err, audit)
	assert.Contains(t, audit, "refused before history: tampered:", "the dead letter is on the claim's record")

	out, err := w.ctl("dlq", "redrive", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "the stranger's answer dropped")
	res := w.result(id)
	require.Equal(t, workflows.StatusPaid, res.Status, "%+v", res)
	n, total := w.transfers(id)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)
}

// TestAStrangerWhoEndsTheRunIsFoundToo: the thief answers the approval's
// task by completing the run outright, "paid". Nothing will replay that
// run; the worker's sweep finds it closed while its claim is open in the
// store, bound to it, and dead-letters it the same way.
func TestAStrangerWhoEndsTheRunIsFoundToo(t *testing.T) {
	w := newWorld(t)
	id := "claim-e2e-ended"
	sweep := []string{"FOREIGN_SWEEP_EVERY=1s"}
	thief, task := w.thiefTakesTheApproval(id, sweep)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	paid, err := converter.GetDefaultDataConverter().ToPayloads(workflows.ClaimResult{ClaimID: id, Status: workflows.StatusPaid, TransferID: "tr_thief"})
	require.NoError(t, err)
	_, err = thief.WorkflowService().RespondWorkflowTaskCompleted(ctx, &workflowservice.RespondWorkflowTaskCompletedRequest{
		Namespace: "default", TaskToken: task.GetTaskToken(), Identity: "thief",
		Commands: []*commandpb.Command{{CommandType: enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
			Attributes: &commandpb.Command_CompleteWorkflowExecutionCommandAttributes{CompleteWorkflowExecutionCommandAttributes: &commandpb.CompleteWorkflowExecutionCommandAttributes{
				Result: paid}}}}})
	require.NoError(t, err, "the dev server takes the thief's answer")
	require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.describe(id).GetWorkflowExecutionInfo().GetStatus(), "the run ended")

	back := testenv.Supervise(t, append(append([]string{}, w.env...), sweep...), filepath.Join(w.bin, "worker"))
	w.redriven(id, back)
}
