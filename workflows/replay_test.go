package workflows

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// histories are real runs recorded by `make histories`, one per path.
func histories(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join("testdata", "histories", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: run `make histories`")
	return files
}

// replay runs a recorded history against wf. The file is named after the
// workflow ID, which the replay must keep: the claim workflow checks it and
// derives every idempotency key from it.
func replay(t *testing.T, wf any, file string) error {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: WorkflowType})
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	id := strings.TrimSuffix(filepath.Base(file), ".json")
	return r.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id},
	})
}

// Every recorded history still replays against today's workflow code: a
// change that would break a claim in flight fails here, not in production.
func TestRecordedHistoriesReplay(t *testing.T) {
	for _, f := range histories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			assert.NoError(t, replay(t, ClaimWorkflow, f))
		})
	}
}

// withExtraStep is ClaimWorkflow with a step added before the payment (a
// payee screen, say), with or without workflow.GetVersion. Replays never
// execute the activity, so it need not exist.
func withExtraStep(versioned bool) func(workflow.Context, ClaimInput) (ClaimResult, error) {
	return func(ctx workflow.Context, in ClaimInput) (ClaimResult, error) {
		r, err := newClaimRun(ctx, in)
		if err != nil {
			return ClaimResult{}, err
		}
		r.beforePay = func(ctx workflow.Context) error {
			if versioned && workflow.GetVersion(ctx, "screen-payee", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				return nil // a run that started before the change keeps its old steps
			}
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
			return workflow.ExecuteActivity(ctx, "ScreenPayee").Get(ctx, nil)
		}
		return r.run(ctx)
	}
}

// A new step before the payment, added behind workflow.GetVersion, replays
// every old history; the same change without it breaks those that paid.
func TestAStepAddedBehindGetVersionKeepsOldHistoriesReplaying(t *testing.T) {
	var broken int
	for _, f := range histories(t) {
		assert.NoError(t, replay(t, withExtraStep(true), f), "%s: versioned change must replay", filepath.Base(f))
		if err := replay(t, withExtraStep(false), f); err != nil {
			broken++
			assert.Contains(t, err.Error(), "TMPRL1100", "%s: a nondeterminism error", filepath.Base(f))
		}
	}
	assert.Positive(t, broken, "the unversioned change should break the histories that reached the payment")
}

// The task priorities as a real server recorded them (checkpoint.go): the
// payment and the notices ahead of the model calls.
func TestRecordedHistoriesCarryTaskPriorities(t *testing.T) {
	got := map[string]int32{}
	for _, name := range []string{"hist-budget-openai-approved.json", "hist-budget-openai-expired.json"} {
		f, err := os.Open(filepath.Join("testdata", "histories", name))
		require.NoError(t, err)
		h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
		f.Close()
		require.NoError(t, err)
		for _, ev := range h.GetEvents() {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				got[a.GetActivityType().GetName()] = a.GetPriority().GetPriorityKey()
			}
		}
	}
	assert.Equal(t, map[string]int32{"TriageTurn": 4, "AssessClaim": 4, "PayClaimant": 1,
		"RemindApprovers": 1, "EscalateApproval": 1, "NotifyClaimant": 1}, got)
}

// A model step that found no capacity in time waited on a durable timer
// and ran again: the rate-limited history holds the handed-back wait.
func TestRecordedHistoryOfADurableModelWait(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "histories", "hist-budget-openai-rate-limited.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "ModelBudgetWait")
	assert.Contains(t, string(b), "EVENT_TYPE_TIMER_FIRED")
}
