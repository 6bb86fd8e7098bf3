package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// events reads a run's events.
func (w *world) events(id string) []*historypb.HistoryEvent {
	var out []*historypb.HistoryEvent
	it := w.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(w.t, err)
		out = append(out, e)
	}
	return out
}

// A parked claim is nobody's: the workflow task that parks it on a long
// timer gives up the worker's sticky queue, so when the timer fires its
// task goes to every worker at once. Before, it went to the sticky queue of
// the worker that parked it, which may be dead (this test) or busy with a
// thousand others due the same minute (the catastrophe week's burst of
// escalations): the task waited out the sticky schedule-to-start timeout
// (2 s) before any other worker could take it, and cost the server a
// timeout and a second dispatch.
func TestAParkedClaimWhoseWorkerDiedResumesWithoutAStickyTimeout(t *testing.T) {
	w := newWorld(t)
	// The reminder is due 4 s into the wait: long enough to count as parked
	// (STICKY_RELEASE_AFTER=2s here, 30 s by default).
	w.env = append(w.env, "APPROVAL_TTL=8s", "REMINDER_AT=0.5", "ESCALATION_TTL=1h", "STICKY_RELEASE_AFTER=2s")
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-parked-kill"
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)

	worker.Kill() // the supervisor starts another at once

	var fired, started time.Time
	require.Eventually(t, func() bool {
		fired, started = time.Time{}, time.Time{}
		for _, e := range w.events(id) {
			switch {
			case e.GetEventType() == enumspb.EVENT_TYPE_TIMER_FIRED && fired.IsZero():
				fired = e.GetEventTime().AsTime()
			case e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED && !fired.IsZero() && started.IsZero():
				started = e.GetEventTime().AsTime()
			}
		}
		return !started.IsZero()
	}, time.Minute, 200*time.Millisecond, "the reminder's workflow task never started")

	var timedOut []string
	for _, e := range w.events(id) {
		if a := e.GetWorkflowTaskTimedOutEventAttributes(); a != nil {
			timedOut = append(timedOut, a.GetTimeoutType().String())
		}
	}
	assert.Empty(t, timedOut, "workflow tasks timed out")
	assert.Less(t, started.Sub(fired), time.Second, "the reminder's task started %s after its timer fired", started.Sub(fired))
	assert.Equal(t, 1, worker.Kills())
}

// workflowCoroutines counts the goroutines a worker runs workflow code on
// (the SDK creates each with NewCoroutine), read from its goroutine dump.
func workflowCoroutines(addr string) (int, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("goroutine dump: %d %s %v", resp.StatusCode, body, err)
	}
	return strings.Count(string(body), "created by go.temporal.io/sdk/internal.(*dispatcherImpl).NewCoroutine"), nil
}

// A parked claim leaves the worker's memory too: the SDK would keep it in
// its workflow cache (128 runs) until newer runs push it out, its
// coroutines and state held for a task that, with the sticky queue given
// up, comes with the whole history and is replayed from it anyway. In a
// catastrophe week the cache is full of parked claims (~125 KiB each) and
// the claims being worked lose their place to them.
func TestAParkedClaimLeavesTheWorkersCache(t *testing.T) {
	w := newWorld(t)
	addr := freePort(t)
	worker := testenv.Supervise(t, append(slices.Clone(w.env), "METRICS_ADDR="+addr), filepath.Join(w.bin, "worker"))
	defer worker.Stop()

	// While the claims are worked, the dump shows their coroutines: the
	// count below can see them.
	most, watching := 0, make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-watching:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if n, err := workflowCoroutines(addr); err == nil {
				most = max(most, n)
			}
		}
	}()
	ids := w.park("claim-e2e-evict-", 12)
	close(watching)
	<-watched
	assert.GreaterOrEqual(t, most, 2, "the goroutine dump never showed a claim's coroutines while it was worked")

	n, err := -1, error(nil)
	assert.Eventually(t, func() bool {
		n, err = workflowCoroutines(addr)
		return err == nil && n == 0
	}, 10*time.Second, 100*time.Millisecond, "12 claims waiting for an adjuster: the worker still runs their workflow code")
	t.Logf("workflow coroutines: at most %d while the claims were worked, %d with the 12 parked (%v)", most, n, err)
	assert.Equal(t, 12.0, value(scrape(t, addr), "temporal_sticky_cache_forced_eviction_total", ""), "one release a parked claim")

	// Released, not lost: a decision resumes the claim from its history.
	w.approve(ids[0], "adjuster-17")
	require.Equal(t, workflows.StatusPaid, w.result(ids[0]).Status)
	for _, id := range ids {
		for _, e := range w.events(id) {
			assert.NotContains(t, []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT},
				e.GetEventType(), "%s: event %d", id, e.GetEventId())
		}
	}
	assert.NotContains(t, worker.Output(), "Task processing failed", "the release is not a failure")
}

// The catastrophe week's settings (docs/operations.md) put every workflow
// task of a claim on the shared queue, where task priority orders a
// decision ahead of a surge's intake, and bound the tasks the worker takes
// at once so that the rest wait there. A claim still runs to its payment.
func TestTheCatastropheSettingsRunOneQueueWithBoundedSlots(t *testing.T) {
	settings := config.CatastropheSettings
	require.Contains(t, settings, "WORKFLOW_CACHE_SIZE=0", "the catastrophe settings run without a sticky cache")
	slots := 0
	for _, kv := range settings {
		if v, ok := strings.CutPrefix(kv, "WORKFLOW_TASK_SLOTS="); ok {
			slots, _ = strconv.Atoi(v)
		}
	}
	require.Positive(t, slots, "the catastrophe settings bound the workflow task slots: %v", settings)

	w := newWorld(t)
	addr := freePort(t)
	worker := testenv.Supervise(t, append(slices.Concat(w.env, settings), "METRICS_ADDR="+addr), filepath.Join(w.bin, "worker"))
	defer worker.Stop()

	ids := w.park("claim-e2e-week-", 3)
	w.approve(ids[0], "adjuster-17")
	require.Equal(t, workflows.StatusPaid, w.result(ids[0]).Status)

	assert.Eventually(t, func() bool {
		return value(scrape(t, addr), "temporal_worker_task_slots_available", `worker_type="WorkflowWorker"`) == float64(slots)
	}, 10*time.Second, 100*time.Millisecond, "idle, the worker offers the %d workflow task slots it was given", slots)
	for _, id := range ids {
		tasks := 0
		for _, e := range w.events(id) {
			assert.NotContains(t, []enumspb.EventType{enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT},
				e.GetEventType(), "%s: event %d", id, e.GetEventId())
			if a := e.GetWorkflowTaskScheduledEventAttributes(); a != nil {
				tasks++
				assert.Equal(t, enumspb.TASK_QUEUE_KIND_NORMAL, a.GetTaskQueue().GetKind(), "%s: workflow task %d went to a worker's sticky queue", id, e.GetEventId())
			}
		}
		// With the rules model a claim parks in its first task (intake,
		// triage, the assessment and the approval's opening all local);
		// the approved one has at least one more for its decision.
		least := 1
		if id == ids[0] {
			least = 2
		}
		assert.GreaterOrEqual(t, tasks, least, "%s: its workflow tasks", id)
	}
	assert.NotContains(t, worker.Output(), "Task processing failed")
}

// park starts n claims above the auto-approve limit, named prefix and a
// number, and waits until each is waiting for an adjuster.
func (w *world) park(prefix string, n int) []string {
	var files, ids []string
	for i := range n {
		id := fmt.Sprintf("%s%02d", prefix, i)
		ids, files = append(ids, id), append(files, w.claimFile(id, "1840.00"))
	}
	w.start(files...)
	for _, id := range ids {
		w.waitStatus(id, workflows.StatusWaiting)
	}
	return ids
}
