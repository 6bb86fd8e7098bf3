package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

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
