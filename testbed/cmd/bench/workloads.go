package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// workload starts its i-th workflow.
type workload struct {
	key, name string
	start     func(ctx context.Context, i int) (client.WorkflowRun, error)
	// want is the claim status every run must end in ("" for the
	// yardsticks): a claim that ends another way (dead-lettered at intake,
	// say) finishes fast and would inflate claims/s unseen.
	want string
}

func (e *env) ceiling() workload {
	return workload{key: "ceiling", name: "ceiling: empty workflow", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: noopQueue}, EmptyWorkflow)
	}}
}

func (e *env) baseline() workload {
	return workload{key: "baseline", name: "baseline: 9 no-op activities", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: noopQueue}, NineActivities)
	}}
}

var seq atomic.Int64

// benchClaim is a claim under the auto-approve limit unless amount says
// otherwise, with one photo already in the blob store.
func benchClaim(id, amount string, doc claim.Document) claim.Claim {
	// One claimant per claim: many claims by one claimant is a review rule.
	account := "acct_1B" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, id)
	c, err := claim.File{ClaimID: id, PolicyID: "pol-1001",
		Claimant: claim.Claimant{Name: "Bench Claimant", Email: id + "@example.com", StripeAccount: account},
		Amount:   amount, Currency: "usd", Description: "A burst pipe flooded the kitchen overnight",
		Documents: []claim.Document{doc}}.Claim()
	if err != nil {
		panic(err)
	}
	return c
}

// startClaim registers a claim in the system of record and starts it, as
// the starter does.
func (e *env) startClaim(ctx context.Context, id, amount string) (client.WorkflowRun, error) {
	return e.startClaimOn(ctx, e.store, e.client, workflows.TaskQueue, id, amount, workflows.Options{})
}

// startClaimOn is startClaim with the store, server, task queue and the
// claim's options given.
// The photo goes into the blob store under the claim's own folder first,
// as the starter puts it: intake refuses (dead-letters) a document outside
// claims/<id>/.
func (e *env) startClaimOn(ctx context.Context, st *store.Store, c client.Client, queue, id, amount string, opts workflows.Options) (client.WorkflowRun, error) {
	return e.startClaimAt(ctx, st, c, queue, id, amount, opts, 0)
}

// startClaimAt is startClaimOn at a task priority (0: the default), as
// starter --priority starts it.
func (e *env) startClaimAt(ctx context.Context, st *store.Store, c client.Client, queue, id, amount string, opts workflows.Options, priority int) (client.WorkflowRun, error) {
	ref, err := e.docs.Put(ctx, blobs.DocumentKey(id, 0, "photo.jpg"), strings.NewReader("a bench photo"))
	if err != nil {
		return nil, err
	}
	cl := benchClaim(id, amount, claim.Document{Name: "photo.jpg", URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size})
	if _, _, err := st.PutClaim(ctx, cl); err != nil {
		return nil, err
	}
	start := workflows.StartOptions(id)
	start.TaskQueue = queue
	start.Priority = temporal.Priority{PriorityKey: priority}
	return c.ExecuteWorkflow(ctx, start, workflows.WorkflowType, workflows.ClaimInput{Claim: cl, Options: opts})
}

func (e *env) autoClaims(tag string) workload {
	return workload{key: "claims", name: "ClaimWorkflow, auto-approve path", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.startClaim(ctx, fmt.Sprintf("bench-%s-%05d-%d", tag, i, seq.Add(1)), "640.00")
	}, want: workflows.StatusPaid}
}

// throughput runs n workflows, at most e.o.concurrency at a time, and
// returns completed workflows per second.
func (e *env) throughput(ctx context.Context, w workload, n int) (float64, error) {
	begin := time.Now()
	err := parallel(n, e.o.concurrency, func(i int) error {
		run, err := w.start(ctx, i)
		if err == nil {
			err = outcome(ctx, run, w.want)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(begin).Seconds(), nil
}

// parallel calls f for 0..n-1, workers at a time; a worker whose call
// fails stops, the others go on, and the first error is returned.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// outcome waits for run and checks it ended in status want, if given.
func outcome(ctx context.Context, run client.WorkflowRun, want string) error {
	if want == "" {
		return run.Get(ctx, nil)
	}
	var r workflows.ClaimResult
	if err := run.Get(ctx, &r); err != nil {
		return err
	}
	if r.Status != want {
		return fmt.Errorf("%s ended %s, not %s: %s", run.GetID(), r.Status, want, r.Reason)
	}
	return nil
}

// history reads events and bytes per completed auto-approved claim.
func (e *env) history(ctx context.Context, res *results, tag string) error {
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		PageSize: 50, Query: fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Completed" AND WorkflowId STARTS_WITH "bench-%s-"`, workflows.WorkflowType, tag),
	})
	if err != nil {
		return err
	}
	for _, ex := range resp.GetExecutions() {
		d, err := e.client.DescribeWorkflow(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
		if err != nil {
			return err
		}
		res.add("history_events", float64(d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength()))
		res.add("history_bytes", float64(d.RawResponse.GetWorkflowExecutionInfo().GetHistorySizeBytes()))
	}
	if len(resp.GetExecutions()) == 0 {
		return errors.New("history: no completed claims found")
	}
	return nil
}

// approvalLatency parks claims, then approves them one at a time on an
// otherwise idle system and times approve signal → transfer committed.
func (e *env) approvalLatency(ctx context.Context, res *results) error {
	ids := make([]string, e.o.approvals)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-approve-%05d-%d", i, seq.Add(1))
		if _, err := e.startClaim(ctx, ids[i], "1840.00"); err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := e.waitStatus(ctx, id, workflows.StatusWaiting, time.Minute); err != nil {
			return err
		}
	}
	time.Sleep(time.Second) // let the parking workflow tasks drain
	for _, id := range ids {
		committed, at := e.commits.when(string(claim.StepKey(id, claim.StepPay)))
		receipt, err := e.decision(ctx, id, approvals.Approve) // the approver has read the request before deciding
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := e.client.SignalWorkflow(ctx, id, "", "approve", receipt); err != nil {
			return err
		}
		select {
		case <-committed:
		case <-time.After(time.Minute):
			return fmt.Errorf("%s: no transfer a minute after approval", id)
		}
		res.add("approve_to_transfer_ms", float64(at().Sub(t0).Microseconds())/1000)
		if err := e.client.GetWorkflow(ctx, id, "").Get(ctx, nil); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "  approve→transfer over %d claims: p50 %.0f ms, p99 %.0f ms\n", len(ids),
		percentile(res.Samples["approve_to_transfer_ms"], 50), percentile(res.Samples["approve_to_transfer_ms"], 99))
	return nil
}

func (e *env) waitStatus(ctx context.Context, id, status string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		v, err := e.client.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
		if err == nil {
			var s workflows.Status
			if v.Get(&s) == nil && s.State == status {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not reach %s within %s", id, status, within)
}

// countStatus counts claims with a ClaimStatus, from visibility.
func (e *env) countStatus(ctx context.Context, prefix, status string) (int64, error) {
	resp, err := e.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Query: fmt.Sprintf(`ClaimStatus = %q AND WorkflowId STARTS_WITH %q`, status, prefix),
	})
	if err != nil {
		return 0, err
	}
	return resp.GetCount(), nil
}

// idleAfter is the worker's memory idle after n claims on the auto path,
// as many at a time as the workload will park: "idle" is a worker that
// has just run as much work, so a difference is what parked claims hold
// and not what any burst of work leaves behind (a larger heap goal the
// runtime keeps for minutes).
func (e *env) idleAfter(ctx context.Context, w *proc, tag string, n int) (workerVars, error) {
	if _, err := e.throughput(ctx, e.autoClaims(tag), n); err != nil {
		return workerVars{}, err
	}
	time.Sleep(5 * time.Second)
	return w.vars()
}

// parkedMemory compares the worker's RSS and goroutines idle with the same
// after e.o.parked claims have parked for approval.
func (e *env) parkedMemory(ctx context.Context, res *results, w *proc) error {
	before, err := e.idleAfter(ctx, w, "park-warm", e.o.parked)
	if err != nil {
		return err
	}
	prefix := fmt.Sprintf("bench-parked-%d-", seq.Add(1))
	begin := time.Now()
	if _, err := e.park(ctx, prefix, 0, e.o.parked); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	after, err := w.vars()
	if err != nil {
		return err
	}
	res.Values["rss_idle_mib"] = float64(before.RSSBytes) / (1 << 20)
	res.Values["rss_parked_mib"] = float64(after.RSSBytes) / (1 << 20)
	res.Values["rss_parked_ratio"] = float64(after.RSSBytes) / float64(before.RSSBytes)
	res.Values["goroutines_idle"] = float64(before.Goroutines)
	res.Values["goroutines_parked"] = float64(after.Goroutines)
	res.Values["parked_claims"] = float64(e.o.parked)
	fmt.Fprintf(os.Stderr, "  %d parked in %s: RSS %.1f → %.1f MiB, goroutines %d → %d\n", e.o.parked, time.Since(begin).Round(time.Second),
		res.Values["rss_idle_mib"], res.Values["rss_parked_mib"], before.Goroutines, after.Goroutines)
	return nil
}

// killRecovery starts e.o.inflight claims, SIGKILLs the worker while they
// run, starts a replacement at once, and times, for each claim the kill
// interrupted, how long after the kill its interrupted step completed.
// Interrupted means: a regular activity that the server retried after its
// heartbeat stopped, or a workflow task (local activities included) that
// timed out on the dead worker or waited on its sticky queue.
func (e *env) killRecovery(ctx context.Context, res *results, w *proc, inflight int) error {
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
	if _, err := e.spawnClaimsWorker("claims-worker-replacement"); err != nil {
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
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
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

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
