package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// A bad build that needed a second attempt at a claim's first workflow
// task (its first attempt failed, or its worker was killed holding it)
// leaves that attempt's started event in history stamped with its build.
// Temporal 1.29 rebuilds a reset run from history, and on such an event
// assigns the run to the build the old, build-ID way: from then on it
// refuses every task completion from the build now serving
// ("this workflow task was dispatched to Build ID , not build-1"), and the
// claim never moves again. make rollout's short run in CI met this once
// in five (a v3 worker SIGKILLed holding a task). claimsctl reset-build
// must reset such a run to before the stamped event, and repair a run an
// earlier reset (by hand, or by an older claimsctl) left stuck that way.
func TestResetBuildAfterARetriedFirstTask(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, append(w.env[:len(w.env):len(w.env)], "WORKER_BUILD_ID=build-1"), filepath.Join(w.bin, "worker"))
	require.Eventually(t, func() bool { cur, _ := w.deployment(); return cur == "build-1" }, testTimeout, pollEvery,
		"the first build never made itself current")

	// The bad build: a ClaimWorkflow that fails its first attempt at each
	// run's first task and then parks, as a build that cannot do the
	// claim's work would.
	var mu sync.Mutex
	failed := map[string]bool{}
	bad := worker.New(w.client, workflows.TaskQueue, worker.Options{DeploymentOptions: worker.DeploymentOptions{
		UseVersioning: true,
		Version:       worker.WorkerDeploymentVersion{DeploymentName: config.DefaultDeploymentName, BuildID: "build-bad"},
	}})
	bad.RegisterWorkflowWithOptions(func(ctx workflow.Context, _ map[string]any) error {
		id := workflow.GetInfo(ctx).WorkflowExecution.ID
		mu.Lock()
		first := !failed[id]
		failed[id] = true
		mu.Unlock()
		if first {
			panic("build-bad cannot run " + id)
		}
		return workflow.Await(ctx, func() bool { return false })
	}, workflow.RegisterOptions{Name: workflows.WorkflowType, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	bad.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "BadBuildNoop"})
	require.NoError(t, bad.Start())
	badStopped := false
	defer func() {
		if !badStopped {
			bad.Stop()
		}
	}()
	w.setCurrent("build-bad")

	ids := []string{"claim-rb-retried", "claim-rb-stuck"}
	w.start(w.claimFile(ids[0], "640.00"), w.claimFile(ids[1], "640.00"))
	resetPoint := map[string]int64{}
	require.Eventually(t, func() bool {
		for _, id := range ids {
			for _, p := range w.describe(id).GetWorkflowExecutionInfo().GetAutoResetPoints().GetPoints() {
				if p.GetBuildId() == "build-bad" {
					resetPoint[id] = p.GetFirstWorkflowTaskCompletedId()
				}
			}
		}
		return len(resetPoint) == len(ids)
	}, testTimeout, pollEvery, "build-bad never completed a task of both claims (on its second attempt)")

	// Rolled back, as the runbook says: the previous build current again,
	// the bad one stopped.
	w.setCurrent("build-1")
	bad.Stop()
	badStopped = true

	// One claim reset by hand to build-bad's reset point, as claimsctl
	// reset-build once did: the server assigns the new run to build-bad.
	out, err := w.cli("workflow", "reset", "--workflow-id", ids[1], "--event-id", strconv.FormatInt(resetPoint[ids[1]], 10),
		"--reason", "reset by hand to build-bad's reset point", "--yes")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		//lint:ignore SA1019 the old build-ID assignment is exactly what is wrong with the run
		return w.describe(ids[1]).GetWorkflowExecutionInfo().GetAssignedBuildId() == "build-bad"
	}, testTimeout, pollEvery, "the hand reset did not leave the run assigned to build-bad: the server no longer does this")
	// reset-build finds runs by visibility: wait until it lists the new run.
	newRun := w.describe(ids[1]).GetWorkflowExecutionInfo().GetExecution().GetRunId()
	require.Eventually(t, func() bool {
		resp, err := w.client.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Query: fmt.Sprintf(`WorkflowId = %q AND ExecutionStatus = "Running"`, ids[1])})
		return err == nil && len(resp.GetExecutions()) == 1 && resp.GetExecutions()[0].GetExecution().GetRunId() == newRun
	}, testTimeout, pollEvery, "visibility never listed the hand-reset run")

	out, err = w.ctl("reset-build", "build-bad")
	require.NoError(t, err, out)
	t.Log(out)
	assert.Regexp(t, ids[0]+`: run \S+ reset to event \d+, before build build-bad's first workflow task \(not \d+: event \d+ started a task with build build-bad's stamp`, out,
		"the retried claim reset to before the stamped retry")
	assert.Contains(t, out, ids[1]+": run "+newRun+", left assigned to build build-bad by an earlier reset")

	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		var r workflows.ClaimResult
		err := w.client.GetWorkflow(ctx, id, "").Get(ctx, &r)
		cancel()
		require.NoError(t, err, "%s never finished after claimsctl reset-build; its run: %+v", id, w.describe(id).GetPendingWorkflowTask())
		assert.Equal(t, workflows.StatusPaid, r.Status, id)
		n, total := w.transfers(id)
		assert.Equal(t, 1, n, id)
		assert.Equal(t, int64(64000), total, id)
		for _, b := range w.builds(id) {
			assert.Equal(t, "build-1", b, "%s: after the reset only build-1 completed its tasks", id)
		}
	}
}
