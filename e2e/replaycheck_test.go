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
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/worker/replaycheck"
	"github.com/durableclaims/durableclaims/workflows"
)

// screened is ClaimWorkflow with a new first step, a claimant screen, the
// kind of change a new build brings: behind workflow.GetVersion (the runs
// started before it keep their old steps) or not.
func screened(versioned bool) func(workflow.Context, workflows.ClaimInput) (workflows.ClaimResult, error) {
	return func(ctx workflow.Context, in workflows.ClaimInput) (workflows.ClaimResult, error) {
		if !versioned || workflow.GetVersion(ctx, "screen-claimant", workflow.DefaultVersion, 1) == 1 {
			actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
			if err := workflow.ExecuteActivity(actx, "ScreenClaimant").Get(ctx, nil); err != nil {
				return workflows.ClaimResult{}, err
			}
		}
		return workflows.ClaimWorkflow(ctx, in)
	}
}

// otherBuild is a run of another build's ClaimWorkflow: it screens the
// claimant first, then waits (for a signal that never comes).
func otherBuild(ctx workflow.Context, in workflows.ClaimInput) (workflows.ClaimResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, "ScreenClaimant").Get(ctx, nil); err != nil {
		return workflows.ClaimResult{}, err
	}
	workflow.GetSignalChannel(ctx, "never").Receive(ctx, nil)
	return workflows.ClaimResult{}, nil
}

// claimsctl replay-check replays what the namespace runs now against this
// build: the live runs pass; a change behind GetVersion passes; the same
// change without it is named, run by run; and a run another build left in
// the namespace, which this build cannot replay, stops the deploy (exit 3)
// with its ID and the command that diverged.
func TestReplayCheckGatesABuildOnTheLiveRuns(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	w.start(w.claimFile("claim-rc-paid", "640.00"), w.claimFile("claim-rc-waiting", "1840.00"), w.claimFile("claim-rc-approved", "1840.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-rc-paid").Status)
	w.waitStatus("claim-rc-waiting", workflows.StatusWaiting)
	w.waitStatus("claim-rc-approved", workflows.StatusWaiting)
	w.approve("claim-rc-approved", "adjuster-17")
	require.Equal(t, workflows.StatusPaid, w.result("claim-rc-approved").Status)

	// This build against the live runs: every one replays.
	out, err := w.ctl("replay-check", "--quiet", "--json")
	require.NoError(t, err, out)
	var rep struct {
		Open, Closed, Replayed int
		Failures               []map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	assert.GreaterOrEqual(t, rep.Open, 1, "claim-rc-waiting is open: %s", out)
	assert.GreaterOrEqual(t, rep.Closed, 2, "the two paid claims: %s", out)
	assert.Equal(t, rep.Open+rep.Closed, rep.Replayed)
	assert.Empty(t, rep.Failures)

	// A next build, in-process: the new step behind GetVersion replays
	// every live run; without it, every claim breaks, the parked one too.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	build := func(versioned bool) func(workflows.Registry) {
		return func(r workflows.Registry) {
			r.RegisterWorkflowWithOptions(screened(versioned), workflow.RegisterOptions{Name: workflows.WorkflowType})
		}
	}
	only := `WorkflowId STARTS_WITH "claim-rc-"`
	dc, fc := testenv.Converters(t, w.env)
	good, err := replaycheck.Check(ctx, w.client, replaycheck.Options{TaskQueue: workflows.TaskQueue, Closed: 10, Query: only, Register: build(true),
		DataConverter: dc, FailureConverter: fc})
	require.NoError(t, err)
	assert.Empty(t, good.Failures)
	assert.Equal(t, 3, good.Replayed)
	bad, err := replaycheck.Check(ctx, w.client, replaycheck.Options{TaskQueue: workflows.TaskQueue, Closed: 10, Query: only, Register: build(false), KeepGoing: true,
		DataConverter: dc, FailureConverter: fc})
	require.NoError(t, err)
	var broken []string
	for _, f := range bad.Failures {
		broken = append(broken, f.WorkflowID)
		assert.Contains(t, f.Err.Error(), "TMPRL1100", "%s: a nondeterminism error", f.WorkflowID)
	}
	assert.ElementsMatch(t, []string{"claim-rc-paid", "claim-rc-waiting", "claim-rc-approved"}, broken)

	// Another build's run, still open in the namespace.
	other := worker.New(w.client, "claims-other-build", worker.Options{})
	other.RegisterWorkflowWithOptions(otherBuild, workflow.RegisterOptions{Name: workflows.WorkflowType})
	other.RegisterActivityWithOptions(func(context.Context) error { return nil }, activity.RegisterOptions{Name: "ScreenClaimant"})
	require.NoError(t, other.Start())
	defer other.Stop()
	in := workflows.ClaimInput{Claim: claim.Claim{ID: "claim-rc-other", PolicyID: "pol-1001", AmountMinor: 64000, Currency: "usd"}}
	_, err = w.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "claim-rc-other", TaskQueue: "claims-other-build"}, workflows.WorkflowType, in)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		it := w.client.GetWorkflowHistory(ctx, "claim-rc-other", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return false
			}
			if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, testTimeout, 100*time.Millisecond, "the other build's run never screened its claimant")

	out, err = w.ctl("replay-check", "--quiet")
	assert.Equal(t, 3, exitCode(err), "replay-check must stop the deploy: %s", out)
	assert.Contains(t, out, "WOULD BREAK: claim-rc-other (run ")
	assert.Contains(t, out, "TMPRL1100")
	assert.Regexp(t, `the history has event \d+: ActivityTaskScheduled ScreenClaimant`, out, "the diverging command is named")
	assert.Contains(t, out, "do not deploy this build")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "WOULD BREAK:") {
			assert.Contains(t, line, "claim-rc-other", "only the other build's run breaks")
		}
	}
}
