package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/workflows"
)

// killWorkload is -only kill: recovery after the claims worker is
// SIGKILLed with claims in flight, once per -inflight value.
type killWorkload struct {
	inflight []int
}

func (*killWorkload) names() []string { return []string{"kill"} }

func (k *killWorkload) flags(fs *flag.FlagSet) {
	k.inflight = []int{1000, 200}
	fs.Func("inflight", "claims in flight when the worker is SIGKILLed; a comma-separated list runs the kill once per value (default 1000,200)", func(v string) (err error) {
		k.inflight, err = counts("inflight", v)
		return err
	})
}

func (k *killWorkload) run(ctx context.Context, e *env, res *results) error {
	res.inflight = k.inflight
	for i, n := range k.inflight {
		e.claims.kill()
		var err error
		// The killed worker and its replacement share a task journal, as
		// a worker restarted where it ran does (worker/inflight).
		journal := "TASK_JOURNAL_DIR=" + filepath.Join(e.dir, fmt.Sprintf("kill-journal-%d", i))
		if e.claims, err = e.spawnClaimsWorker(fmt.Sprintf("claims-worker-kill-%d", i), journal); err != nil {
			return err
		}
		if err := e.killRecovery(ctx, res, e.claims, n, journal); err != nil {
			return err
		}
		// killRecovery leaves its replacement worker running; adopt it.
		e.claims = e.children[len(e.children)-1]
	}
	return nil
}

// killRecovery starts inflight claims, SIGKILLs the worker while they
// run, starts a replacement at once, and times, for each claim the kill
// interrupted, how long after the kill its interrupted step completed.
// Interrupted means: a regular activity that the server retried after its
// heartbeat stopped, or a workflow task (local activities included) that
// timed out on the dead worker or waited on its sticky queue.
func (e *env) killRecovery(ctx context.Context, res *results, w *proc, inflight int, env ...string) error {
	prefix := fmt.Sprintf("bench-kill-%d-", seq.Add(1))
	runs := make([]client.WorkflowRun, inflight)
	for i := range runs {
		var err error
		if runs[i], err = e.startClaim(ctx, fmt.Sprintf("%s%05d", prefix, i), "640.00"); err != nil {
			return err
		}
	}
	// Kill once a good share is mid-flight.
	for {
		n, err := e.countStatus(ctx, prefix, workflows.StatusPaid)
		if err != nil {
			return err
		}
		if n >= int64(inflight/10) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.kill()
	killed := time.Now()
	if _, err := e.spawnClaimsWorker("claims-worker-replacement", env...); err != nil {
		return err
	}
	for _, r := range runs {
		if err := r.Get(ctx, nil); err != nil {
			return err
		}
	}
	allDone := time.Since(killed)
	var interrupted int
	kinds := map[string]int{} // "activity" (retried after its heartbeat stopped) or "task" (a workflow task lost)
	key := fmt.Sprintf("kill_recovery_ms_%d_inflight", inflight)
	for _, r := range runs {
		gap, kind, err := e.interruptedStep(ctx, r.GetID(), killed)
		if err != nil {
			return err
		}
		if kind != "" {
			interrupted++
			kinds[kind]++
			res.add(key, float64(gap.Milliseconds()))
		}
	}
	for kind, n := range kinds {
		res.Values[fmt.Sprintf("kill_interrupted_%s_%d_inflight", kind, inflight)] = float64(n)
	}
	res.Values[fmt.Sprintf("kill_interrupted_claims_%d_inflight", inflight)] = float64(interrupted)
	res.Values[fmt.Sprintf("kill_all_done_s_%d_inflight", inflight)] = allDone.Seconds()
	fmt.Fprintf(os.Stderr, "  kill with %d in flight: %d claims interrupted (%d activities, %d workflow tasks); interrupted step done again p50 %.1f s, p99 %.1f s; all done %.1f s after the kill\n",
		inflight, interrupted, kinds["activity"], kinds["task"], percentile(res.Samples[key], 50)/1000, percentile(res.Samples[key], 99)/1000, allDone.Seconds())
	return nil
}

// interruptedStep reports when a claim's step interrupted by a kill at t
// completed, if the kill interrupted one, and what it was ("" if none): an activity the
// server retried after its heartbeat stopped, or a workflow task (local
// activities included) that timed out on the dead worker.
func (e *env) interruptedStep(ctx context.Context, id string, t time.Time) (time.Duration, string, error) {
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	retried := map[int64]bool{} // scheduled event IDs of activities retried after the kill
	waitingTask := false        // a workflow task lost with the worker, not yet redone
	var done time.Time
	kind := ""
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return 0, "", err
		}
		at := ev.GetEventTime().AsTime()
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := ev.GetActivityTaskStartedEventAttributes(); a.GetAttempt() > 1 && a.GetLastFailure() != nil && at.After(t) {
				retried[a.GetScheduledEventId()] = true
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if retried[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()] {
				done, kind = at, "activity"
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED: // failed: handed back (worker/inflight)
			if at.After(t) {
				waitingTask = true
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if waitingTask {
				waitingTask, done, kind = false, at, "task"
			}
		}
	}
	if done.IsZero() {
		return 0, "", nil
	}
	return done.Sub(t), kind, nil
}
