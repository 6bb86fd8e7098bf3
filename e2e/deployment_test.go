package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// deployment reads the claims deployment's routing: its current and
// ramping builds ("" for none).
func (w *world) deployment() (current, ramping string) {
	d, err := w.client.WorkerDeploymentClient().GetHandle(config.DefaultDeploymentName).
		Describe(context.Background(), client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return "", ""
	}
	if v := d.Info.RoutingConfig.CurrentVersion; v != nil {
		current = v.BuildID
	}
	if v := d.Info.RoutingConfig.RampingVersion; v != nil {
		ramping = v.BuildID
	}
	return current, ramping
}

// setCurrent makes build the deployment's current version with the real
// CLI, as an operator does. Until the build has polled both the workflow
// and the activity queue the server refuses (those queues "would become
// unversioned"), as it would an operator who is too quick: they try again.
func (w *world) setCurrent(build string) {
	w.t.Helper()
	var out string
	require.Eventually(w.t, func() bool {
		var err error
		out, err = w.cli("worker", "deployment", "set-current-version", "--deployment-name", config.DefaultDeploymentName,
			"--build-id", build, "--yes")
		return err == nil
	}, testTimeout, time.Second, "set-current-version %s: %s", build, out)
}

// builds lists, in order, the build that completed each workflow task of
// a claim's run, as its history records it.
func (w *world) builds(id string) []string {
	var out []string
	it := w.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(w.t, err)
		if a := e.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			out = append(out, a.GetDeploymentVersion().GetBuildId())
		}
	}
	return out
}

// Every worker is a Worker Deployment Version. On a new namespace the
// first build makes itself current; a second build started beside it
// takes nothing until an operator makes it current with the real CLI;
// then a claim parked under the first build is decided and paid by the
// second (ClaimWorkflow auto-upgrades), once.
func TestWorkerDeploymentVersions(t *testing.T) {
	w := newWorld(t)
	v1 := testenv.Supervise(t, append(w.env[:len(w.env):len(w.env)], "WORKER_BUILD_ID=build-1"), filepath.Join(w.bin, "worker"))
	require.Eventually(t, func() bool { cur, _ := w.deployment(); return cur == "build-1" }, testTimeout, pollEvery,
		"the first build never made itself current (WORKER_PROMOTE=if-none)")

	w.start(w.claimFile("claim-dv-parked", "1840.00"), w.claimFileBy("claim-dv-update", "1840.00", "grace@example.com", "acct_1Grace"), w.claimFile("claim-dv-auto", "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-dv-auto").Status)
	w.waitStatus("claim-dv-parked", workflows.StatusWaiting)
	w.waitStatus("claim-dv-update", workflows.StatusWaiting)
	info := w.describe("claim-dv-parked").GetWorkflowExecutionInfo().GetVersioningInfo()
	assert.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, info.GetBehavior(), "a claim that waits days follows the current build")
	assert.Equal(t, "build-1", info.GetDeploymentVersion().GetBuildId())

	// The second build comes up beside the first: it polls, but the
	// deployment has a current version, so it does not take it.
	v2 := testenv.Supervise(t, append(w.env[:len(w.env):len(w.env)], "WORKER_BUILD_ID=build-2"), filepath.Join(w.bin, "worker"))
	require.Eventually(t, func() bool {
		return strings.Contains(v2.Output(), "this build takes no new work") && strings.Contains(v2.Output(), "current: build-1")
	}, testTimeout, pollEvery, "build-2 never said it takes no work while build-1 is current")
	cur, ramp := w.deployment()
	assert.Equal(t, "build-1", cur, "a build started beside the current one must not make itself current")
	assert.Empty(t, ramp)
	w.start(w.claimFile("claim-dv-during", "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-dv-during").Status)
	for _, b := range w.builds("claim-dv-during") {
		assert.Equal(t, "build-1", b, "a new claim runs on the current build only")
	}

	// The operator makes the second build current, with the real CLI.
	w.setCurrent("build-2")
	v1.Stop() // the first build can go: no claim is pinned to it

	w.approve("claim-dv-parked", "adjuster-17")
	r := w.result("claim-dv-parked")
	require.Equal(t, workflows.StatusPaid, r.Status, "%+v", r)
	n, total := w.transfers("claim-dv-parked")
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)
	b := w.builds("claim-dv-parked")
	require.NotEmpty(t, b)
	assert.Equal(t, "build-1", b[0], "intake ran on the first build")
	assert.Equal(t, "build-2", b[len(b)-1], "the approved claim was paid by the second build")

	// The inbox's path: the decide update, handled by build-2 on a run it
	// never had in its cache.
	out, err := w.decideRaw("claim-dv-update", w.receipt("approve", "claim-dv-update", "adjuster-17"))
	require.NoError(t, err, out)
	ru := w.result("claim-dv-update")
	require.Equal(t, workflows.StatusPaid, ru.Status, "%+v", ru)
	require.NotNil(t, ru.Approval)
	require.NotNil(t, ru.Approval.Decision)
	assert.Equal(t, "update", ru.Approval.Decision.Channel)
	assert.Equal(t, "build-2", ru.Approval.Decision.BuildID, "the build that accepted the update")
	require.NotNil(t, ru.Decided)
	assert.Equal(t, "build-2", ru.Decided.BuildID)

	// The claim names the code and the model behind each step: the
	// answers came from build-1, the decision was taken by build-2, under
	// the policy intake recorded.
	st := w.status("claim-dv-parked")
	require.NotEmpty(t, st.ModelCalls)
	for _, m := range st.ModelCalls {
		assert.Equal(t, "build-1", m.BuildID, "step %d turn %d", m.Step, m.Turn)
		assert.Equal(t, "rules-1", m.PromptVersion, "step %d turn %d", m.Step, m.Turn)
		assert.Equal(t, "rules/v1", m.Model)
	}
	require.NotNil(t, r.Decided)
	assert.Equal(t, workflows.DecidedByApprover, r.Decided.By)
	assert.Equal(t, "build-2", r.Decided.BuildID, "the build that accepted the adjuster's decision")
	assert.NotEmpty(t, r.PolicyVersion)
	assert.Equal(t, r.PolicyVersion, r.Decided.PolicyVersion)
	require.NotNil(t, r.Approval)
	require.NotNil(t, r.Approval.Decision)
	assert.Equal(t, "build-2", r.Approval.Decision.BuildID)
	auto := w.result("claim-dv-auto")
	require.NotNil(t, auto.Decided)
	assert.Equal(t, workflows.DecidedByRules, auto.Decided.By)
	assert.Equal(t, "build-1", auto.Decided.BuildID)
	show, err := w.ctl("show", "claim-dv-parked")
	require.NoError(t, err, show)
	assert.Contains(t, show, "build-1")
	assert.Contains(t, show, "build-2")
}

// WORKER_VERSIONING=false runs the worker unversioned, as before Temporal
// server 1.29: claims still run to the end.
func TestWorkerUnversioned(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, append(w.env[:len(w.env):len(w.env)], "WORKER_VERSIONING=false"), filepath.Join(w.bin, "worker"))
	w.start(w.claimFile("claim-uv", "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-uv").Status)
	info := w.describe("claim-uv").GetWorkflowExecutionInfo().GetVersioningInfo()
	assert.Empty(t, info.GetDeploymentVersion().GetBuildId())
	cur, _ := w.deployment()
	assert.Empty(t, cur)
}

// TestARoutingHijackIsReported is issue 42's second attack on the dev
// server: a client with frontend access alone polls as a build of its own,
// makes that build the deployment's current version, and so would receive
// every new claim. The worker reports it within a minute, in its log (an
// alert naming the build) and its metrics, because the build never ran as
// a worker on the claims store: whoever reaches the frontend cannot write
// there. Routed back, the alert clears.
func TestARoutingHijackIsReported(t *testing.T) {
	w := newWorld(t)
	metricsAddr := freePort(t)
	worker := testenv.Supervise(t, append(append([]string{}, w.env...), "METRICS_ADDR="+metricsAddr), filepath.Join(w.bin, "worker"))

	thief, err := client.Dial(client.Options{HostPort: addr(w.env), Namespace: "default"})
	require.NoError(t, err)
	defer thief.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := thief.WorkerDeploymentClient().GetHandle(config.DefaultDeploymentName)
	var ours string
	require.Eventually(t, func() bool {
		d, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		if err == nil && d.Info.RoutingConfig.CurrentVersion != nil {
			ours = d.Info.RoutingConfig.CurrentVersion.BuildID
		}
		return ours != ""
	}, time.Minute, 100*time.Millisecond, "the worker's build never became current")

	// The thief's build exists once it polls.
	const rogue = "rogue-build-1"
	pctx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	go func() {
		for pctx.Err() == nil {
			_, _ = thief.WorkflowService().PollWorkflowTaskQueue(pctx, &workflowservice.PollWorkflowTaskQueueRequest{
				Namespace: "default", Identity: "thief",
				TaskQueue: &taskqueuepb.TaskQueue{Name: workflows.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
				DeploymentOptions: &deploymentpb.WorkerDeploymentOptions{DeploymentName: config.DefaultDeploymentName, BuildId: rogue,
					WorkerVersioningMode: enumspb.WORKER_VERSIONING_MODE_VERSIONED}})
		}
	}()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: rogue, Identity: "thief"})
		assert.NoError(ct, err)
	}, time.Minute, 200*time.Millisecond, "the dev server lets anyone route")
	hijacked := time.Now()

	require.Eventually(t, func() bool {
		return strings.Contains(worker.Output(), "alert=deployment_unknown_build") && strings.Contains(worker.Output(), rogue)
	}, time.Minute, 200*time.Millisecond, "the worker never reported the hijack:\n%s", worker.Output())
	t.Logf("reported %v after the hijack", time.Since(hijacked).Round(100*time.Millisecond))
	assert.Contains(t, worker.Output(), "last_modified_by=thief")
	assert.Equal(t, 1.0, gauge(scrape(t, metricsAddr), "deployment_unknown_builds"))

	// Routed back to the worker's own build, the alert clears.
	_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: ours, IgnoreMissingTaskQueues: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gauge(scrape(t, metricsAddr), "deployment_unknown_builds") == 0 },
		time.Minute, 500*time.Millisecond, "the gauge never cleared")
}

// gauge is the value of an unlabelled (or singly exported) series.
func gauge(text, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(?:\{[^}]*\})? ([0-9.e+-]+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
