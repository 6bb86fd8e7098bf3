package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/workflows"
)

// priorityWorkload is the first pressure on the model (pressure.go), run
// twice: on the worker's defaults (unless -priority-defaults=false), then
// on the catastrophe week's settings (or -priority-settings).
type priorityWorkload struct {
	pressureClaims, pressureApprovals, pressurePriority int
	prioritySettings                                    []string
	priorityDefaults                                    bool
}

func (*priorityWorkload) names() []string { return []string{"priority"} }

func (pw *priorityWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&pw.pressureClaims, "pressure-claims", 2000, "the priority workload (-only priority): new claims in flight while parked ones are approved")
	fs.IntVar(&pw.pressureApprovals, "pressure-approvals", 50, "the priority workload: parked claims approved during the surge")
	pw.prioritySettings = config.CatastropheSettings
	fs.Func("priority-settings", "the priority workload: its second run's worker settings, comma-separated KEY=value (default: the catastrophe week's, "+strings.Join(config.CatastropheSettings, ",")+")", func(v string) error {
		pw.prioritySettings = nil
		for kv := range strings.SplitSeq(v, ",") {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				return fmt.Errorf("%q: want KEY=value", kv)
			}
			pw.prioritySettings = append(pw.prioritySettings, kv)
		}
		return nil
	})
	fs.BoolVar(&pw.priorityDefaults, "priority-defaults", true, "the priority workload: run it first on the worker's defaults, the yardstick of the second run (false: the second run only)")
	fs.IntVar(&pw.pressurePriority, "pressure-priority", 4, "the priority workload: the task priority the surge's new claims start at (starter --priority; 0: the default, 3)")
}

func (pw *priorityWorkload) run(ctx context.Context, e *env, res *results) error {
	settings := pw.prioritySettings
	var modes []priorityMode
	if pw.priorityDefaults {
		// The defaults whatever the bench's own environment says (a
		// worker inherits it): an empty value is the default.
		var defaults []string
		for _, kv := range settings {
			name, _, _ := strings.Cut(kv, "=")
			defaults = append(defaults, name+"=")
		}
		modes = append(modes, priorityMode{key: "priority_", worker: "claims-worker-priority", label: "defaults", settings: defaults})
	}
	modes = append(modes, priorityMode{key: "priority_catastrophe_", worker: "claims-worker-priority-catastrophe", label: strings.Join(settings, " "), settings: settings})
	for _, m := range modes {
		if err := pw.runMode(ctx, e, res, m); err != nil {
			return fmt.Errorf("priority: %w", err)
		}
	}
	return nil
}

// priorityMode is one run of the priority workload: its figures' key
// prefix, its worker's name and label, and the settings its worker gets
// (KEY=value) over the bench's environment.
type priorityMode struct {
	key, worker, label string
	settings           []string
}

// runMode is one run of the priority workload.
func (pw *priorityWorkload) runMode(ctx context.Context, e *env, res *results, m priorityMode) error {
	sim := modelsim.New("")
	sim.Latency = e.o.modelLatency
	url, stop, err := serveModelsim(sim)
	if err != nil {
		return err
	}
	defer stop()
	// A queue of each run's own: the claims the run before left parked
	// (the surge ended before all were approved) must not reach this
	// run's worker.
	n := seq.Add(1)
	queue := fmt.Sprintf("%s-%d", pressureQueue, n)
	w, err := e.spawnClaimsWorker(m.worker, append([]string{"MODEL_PROVIDER=openai", "MODEL_BASE_URL=" + url,
		"MODEL_NAME=sim-1", "CLAIMS_TASK_QUEUE=" + queue}, m.settings...)...)
	if err != nil {
		return err
	}
	defer w.stop()

	prefix := fmt.Sprintf("bench-priority-%d-", n)
	parked := make([]string, pw.pressureApprovals)
	for i := range parked {
		parked[i] = fmt.Sprintf("%sparked-%05d", prefix, i)
		if _, err := e.startClaimOn(ctx, e.store, e.client, queue, parked[i], "1840.00", workflows.Options{}); err != nil {
			return err
		}
	}
	for _, id := range parked {
		if err := e.waitStatus(ctx, id, workflows.StatusWaiting, 5*time.Minute); err != nil {
			return err
		}
	}
	receipts := map[string]approvals.Input{}
	for _, id := range parked {
		r, err := e.decision(ctx, id, approvals.Approve)
		if err != nil {
			return err
		}
		receipts[id] = r
	}

	// The surge: every new claim in flight at once.
	surgeDone := make(chan error, 1)
	var ended map[string]int
	begin := time.Now()
	go func() {
		var err error
		ended, err = e.runClaims(ctx, queue, prefix+"new-", "640.00", pw.pressureClaims, pw.pressurePriority)
		surgeDone <- err
	}()
	// Approve once the model calls have backed up: the first assessments
	// are being asked for.
	for deadline := time.Now().Add(5 * time.Minute); ; {
		n := 0
		for _, c := range sim.Calls() {
			if c.Kind == "assessment" && strings.HasPrefix(c.ClaimID, prefix+"new-") {
				n++
			}
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("priority: no assessment asked for in 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	inFlight := 0
	slowest, slowestTook := "", time.Duration(0)
	for _, id := range parked {
		committed, at := e.commits.when(string(claim.StepKey(id, claim.StepPay)))
		t0 := time.Now()
		if err := e.client.SignalWorkflow(ctx, id, "", "approve", receipts[id]); err != nil {
			return err
		}
		select {
		case <-committed:
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("%s: no transfer two minutes after approval", id)
		}
		res.add(m.key+"approve_to_transfer_ms", float64(at().Sub(t0).Microseconds())/1000)
		if took := at().Sub(t0); took > slowestTook {
			slowest, slowestTook = id, took
		}
		n, err := e.countStatus(ctx, prefix+"new-", workflows.StatusRunning)
		if err != nil {
			return err
		}
		inFlight = max(inFlight, int(n))
		if n == 0 {
			break // the surge is over: an approval now would measure an idle system
		}
		time.Sleep(200 * time.Millisecond)
	}
	approvedBy := time.Since(begin)
	if err := <-surgeDone; err != nil {
		return fmt.Errorf("priority: the surge: %w", err)
	}
	if ended[workflows.StatusPaid] != pw.pressureClaims {
		return fmt.Errorf("priority: of %d new claims %v", pw.pressureClaims, ended)
	}
	// No worker died, so any timeout in these histories is a false one: a
	// task the worker held, and the server took back as lost.
	ids := slices.Clone(parked)
	for i := range pw.pressureClaims {
		ids = append(ids, fmt.Sprintf("%snew-%05d", prefix, i))
	}
	to, err := e.timeouts(ctx, ids)
	if err != nil {
		return fmt.Errorf("priority: the histories: %w", err)
	}
	res.Values[m.key+"workflow_task_timeouts"] = float64(to.workflowTask)
	res.Values[m.key+"sticky_timeouts"] = float64(to.sticky)
	res.Values[m.key+"activity_timeouts"] = float64(to.activity)
	fmt.Fprintf(os.Stderr, "  priority (%s): false timeouts in the %d claims' histories (no worker died): %d workflow tasks started and timed out, %d sticky-queue schedule-to-start, %d activities\n",
		m.label, len(ids), to.workflowTask, to.sticky, to.activity)
	res.Values[m.key+"claims"] = float64(pw.pressureClaims)
	res.Values[m.key+"in_flight_max"] = float64(inFlight)
	res.Values[m.key+"surge_s"] = time.Since(begin).Seconds()
	if line, err := e.afterSignal(ctx, slowest); err == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("priority (%s): the slowest approval, %s (%.0f ms to the transfer), after its signal: %s", m.label, slowest, ms(slowestTook), line))
		fmt.Fprintf(os.Stderr, "  the slowest approval after its signal: %s\n", line)
	}
	s := res.Samples[m.key+"approve_to_transfer_ms"]
	fmt.Fprintf(os.Stderr, "  priority (%s): %d approvals during a surge of %d claims (up to %d running while they were approved, %.0f s in): approve→transfer p50 %.0f ms, p99 %.0f ms, max %.0f ms; the surge took %.0f s\n",
		m.label, len(s), pw.pressureClaims, inFlight, approvedBy.Seconds(), percentile(s, 50), percentile(s, 99), percentile(s, 100), res.Values[m.key+"surge_s"])
	return nil
}

// timeoutCount counts the timeouts recorded in histories: workflow tasks
// timed out after a worker started them, workflow tasks that waited on a
// worker's sticky queue past its schedule-to-start timeout (then went to
// the normal queue), and activity attempts timed out.
type timeoutCount struct{ workflowTask, sticky, activity int }

func (e *env) timeouts(ctx context.Context, ids []string) (timeoutCount, error) {
	var mu sync.Mutex
	var n timeoutCount
	err := parallel(len(ids), 8, func(i int) error {
		events, err := history(ctx, e.client, ids[i], "")
		if err != nil {
			return err
		}
		var c timeoutCount
		for _, ev := range events {
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				if ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
					c.sticky++
				} else {
					c.workflowTask++
				}
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
				c.activity++
			}
		}
		mu.Lock()
		n.workflowTask, n.sticky, n.activity = n.workflowTask+c.workflowTask, n.sticky+c.sticky, n.activity+c.activity
		mu.Unlock()
		return nil
	})
	return n, err
}

// afterSignal is a claim's history from its approval signal to its
// payment's completion, each event with its time since the signal.
func (e *env) afterSignal(ctx context.Context, id string) (string, error) {
	var parts []string
	var t0 time.Time
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return "", err
		}
		typ := ev.GetEventType()
		if typ == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED && t0.IsZero() {
			t0 = ev.GetEventTime().AsTime()
		}
		if t0.IsZero() {
			continue
		}
		parts = append(parts, fmt.Sprintf("+%d ms %s", ev.GetEventTime().AsTime().Sub(t0).Milliseconds(), strings.TrimPrefix(typ.String(), "EVENT_TYPE_")))
		if typ == enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED {
			break // the payment: the first regular activity after the decision
		}
	}
	return strings.Join(parts, ", "), nil
}
