package e2e

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/worker/inflight"
	"github.com/durableclaims/durableclaims/workflows"
)

// A worker SIGKILLed while it holds tasks, restarted with its task journal
// (TASK_JOURNAL_DIR), hands them back before it polls: the payment's
// attempt fails as WorkerKilled and is retried at once (not after its
// heartbeat timeout and the retry's backoff), the workflow task running
// the local notify fails back (not times out after 4 s), and the dead
// worker's sticky queue is shut down, so no task waits out a
// schedule-to-start timeout on it. Still one transfer and one e-mail each.
func TestAKilledWorkersTasksAreHandedBackByItsSuccessor(t *testing.T) {
	w := newWorld(t)
	env := append(append([]string{}, w.env...), "TASK_JOURNAL_DIR="+filepath.Join(t.TempDir(), "journal"))
	worker := testenv.Supervise(t, env, filepath.Join(w.bin, "worker"),
		"--crash-at", "claim-e2e-back-pay:6:after-effect,claim-e2e-back-notify:7",
		"--crash-state", filepath.Join(t.TempDir(), "crash-fired"))

	w.start(w.claimFile("claim-e2e-back-pay", "640.00"))
	pay := w.result("claim-e2e-back-pay")
	assert.Equal(t, workflows.StatusPaid, pay.Status)
	assert.True(t, pay.PaymentReplayed, "the retried step 6 returned the original transfer")
	assert.Equal(t, 1, worker.Kills())

	w.start(w.claimFile("claim-e2e-back-notify", "1840.00"))
	w.waitStatus("claim-e2e-back-notify", workflows.StatusWaiting)
	w.approve("claim-e2e-back-notify", "adjuster-17")
	assert.Equal(t, workflows.StatusPaid, w.result("claim-e2e-back-notify").Status)
	assert.Equal(t, 2, worker.Kills())

	for _, id := range []string{"claim-e2e-back-pay", "claim-e2e-back-notify"} {
		n, _ := w.transfers(id)
		assert.Equal(t, 1, n, "%s: one transfer", id)
		assert.Equal(t, 1, w.mails(id), "%s: one e-mail", id)
	}
	h := w.handBacks("claim-e2e-back-pay")
	assert.Equal(t, []string{inflight.ErrKilled}, h.retriedAfter, "the payment's second attempt followed the first handed back, not its heartbeat timeout")
	assert.Zero(t, h.timeouts, "no workflow task of the paid claim timed out: %+v", h)
	h = w.handBacks("claim-e2e-back-notify")
	assert.Equal(t, 1, h.failedBack, "the workflow task running notify was handed back: %+v", h)
	assert.Zero(t, h.timeouts, "and no workflow task timed out, on either queue: %+v", h)
}

// handBack is what a claim's history says of tasks a killed worker held.
type handBack struct {
	retriedAfter []string // failure types before a regular activity's retry
	failedBack   int      // workflow tasks failed as WorkerKilled
	timeouts     int      // workflow tasks timed out (start-to-close or a sticky queue's schedule-to-start)
}

func (w *world) handBacks(id string) handBack {
	var h handBack
	it := w.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(w.t, err)
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
			f := a.GetLastFailure()
			typ := f.GetApplicationFailureInfo().GetType()
			if f.GetTimeoutFailureInfo() != nil {
				typ = "timeout " + f.GetTimeoutFailureInfo().GetTimeoutType().String()
			}
			h.retriedAfter = append(h.retriedAfter, typ)
		}
		if a := e.GetWorkflowTaskFailedEventAttributes(); a != nil && a.GetFailure().GetApplicationFailureInfo().GetType() == inflight.ErrKilled {
			h.failedBack++
		}
		if e.GetWorkflowTaskTimedOutEventAttributes() != nil {
			h.timeouts++
		}
	}
	return h
}
