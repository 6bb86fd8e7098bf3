package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/promtext"
	"github.com/durableclaims/durableclaims/workflows"
	enumspb "go.temporal.io/api/enums/v1"
)

// The real-model workload: the auto-approve path through the
// OpenAI-compatible provider against modelsim answering in 1-2 s a call, as
// a hosted model does. A claim's latency floor is the sum of the model's own
// latencies on its path (two triage turns and the assessment, one after the
// other); the rest is durable execution. Each claim's history says where
// that rest went (breakdown.go), /proc what each process spent per claim,
// and the worker's slots are sampled from its metrics, to show whether
// they limit it.

const latencyQueue = "claims-latency"

// latencyWorkload is -only latency: the workload above.
type latencyWorkload struct {
	n int // -latency-n
}

func (*latencyWorkload) names() []string { return []string{"latency"} }

func (l *latencyWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&l.n, "latency-n", 1000, "claims the real-model latency workload runs (-concurrency at a time); its claims/s is counted over the window in which every slot is busy, which needs several rounds of claims")
}

func (l *latencyWorkload) run(ctx context.Context, e *env, res *results) error {
	if err := e.latency(ctx, res, l.n); err != nil {
		return fmt.Errorf("real model latency: %w", err)
	}
	return nil
}

// latency runs n claims, e.o.concurrency at a time, against a worker of
// its own whose model is modelsim with e.o.modelLatency.
func (e *env) latency(ctx context.Context, res *results, n int) error {
	sim := modelsim.New("")
	sim.Latency = e.o.modelLatency
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	w, err := e.spawnClaimsWorker("claims-worker-openai", "MODEL_PROVIDER=openai", "MODEL_BASE_URL=http://"+ln.Addr().String()+"/v1",
		"MODEL_NAME=sim-1", "CLAIMS_TASK_QUEUE="+latencyQueue)
	if err != nil {
		return err
	}
	defer w.stop()

	prefix := fmt.Sprintf("bench-latency-%d-", seq.Add(1))
	// Warm up (connections, the worker's caches) with a few claims.
	if err := e.latencyRun(ctx, prefix+"warm-", min(10, n), nil); err != nil {
		return fmt.Errorf("latency warm-up: %w", err)
	}

	slots := &slotSampler{url: w.metrics + "/metrics"}
	runs := map[string]claimSpan{}
	var mu sync.Mutex
	groups := []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{w.cmd.Process.Pid}},
		{name: "bench", pids: []int{os.Getpid()}}}
	cpuBefore, err := snapshot(groups)
	if err != nil {
		return err
	}
	sctx, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	sampled.Go(func() { slots.run(sctx) })
	begin := time.Now()
	err = e.latencyRun(ctx, prefix, n, func(id string, span claimSpan) {
		mu.Lock()
		runs[id] = span
		mu.Unlock()
	})
	wall := time.Since(begin)
	cpuAfter, cerr := snapshot(groups)
	stopSampling()
	sampled.Wait()
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	var use cpuUsage
	use.add(cpuBefore, cpuAfter)
	use.record(res, "latency", len(runs))
	completions := map[string]time.Duration{}
	for id, sp := range runs {
		completions[id] = sp.end.Sub(sp.start)
	}

	// The floor of each claim: its model calls' own latencies, in sequence.
	floor := map[string]time.Duration{}
	calls := map[string][]modelCall{}
	for _, c := range sim.Calls() {
		if strings.HasPrefix(c.ClaimID, prefix) && !strings.HasPrefix(c.ClaimID, prefix+"warm-") {
			floor[c.ClaimID] += c.Waited
			calls[c.ClaimID] = append(calls[c.ClaimID], modelCall{c.At, c.Waited})
		}
	}
	for id, took := range completions {
		res.add("latency_completion_ms", float64(took.Milliseconds()))
		res.add("latency_floor_ms", float64(floor[id].Milliseconds()))
		res.add("latency_overhead_ms", float64((took - floor[id]).Milliseconds()))
	}
	// claims/s while every slot is busy: completions between the start of
	// the third round and the last start (after which the slots empty), so
	// neither the ramp nor the drain counts. Over the whole run, n ÷ wall,
	// the drain of the last round alone would cost a run of two rounds a
	// sixth of its rate with no overhead at all.
	steady, window := steadyRate(runs, 2*e.o.concurrency)
	if window <= 0 {
		return fmt.Errorf("latency: %d claims at %d in flight leave no steady window: give -latency-n at least %d", len(runs), e.o.concurrency, 3*e.o.concurrency)
	}
	res.Values["latency_claims_per_s"] = steady
	res.Values["latency_steady_window_s"] = window.Seconds()
	res.Values["latency_claims_per_s_whole_run"] = float64(len(completions)) / wall.Seconds()
	res.Values["latency_model_min_ms"] = float64(e.o.modelLatency.Min.Milliseconds())
	res.Values["latency_model_max_ms"] = float64(e.o.modelLatency.Max.Milliseconds())
	res.Values["latency_concurrency"] = float64(e.o.concurrency)
	// The most claims could do at this concurrency if only the model's
	// latency counted: concurrency / mean floor.
	var sum time.Duration
	for _, f := range floor {
		sum += f
	}
	if len(floor) > 0 && sum > 0 {
		res.Values["latency_floor_bound_per_s"] = float64(e.o.concurrency) / (sum / time.Duration(len(floor))).Seconds()
	}
	for kind, v := range slots.minimum() {
		res.Values["latency_slots_min_available_"+kind] = v
	}
	for kind, v := range slots.maximumUsed() {
		res.Values["latency_slots_max_used_"+kind] = v
	}
	// Where every claim's time went, part by part.
	var times []claimTime
	for id, took := range completions {
		ct, err := e.breakdown(ctx, id, runs[id].start, took, calls[id])
		if err != nil {
			return err
		}
		times = append(times, ct)
	}
	recordBreakdown(res, times)
	// Where the slowest claim's time went beyond its model calls: the
	// longest gaps between its history events.
	var slowest string
	for id, took := range completions {
		if slowest == "" || took-floor[id] > completions[slowest]-floor[slowest] {
			slowest = id
		}
	}
	if slowest != "" {
		gaps, err := e.historyGaps(ctx, slowest, 3)
		if err != nil {
			return err
		}
		res.Notes = append(res.Notes, fmt.Sprintf("latency: the claim with the most time beyond its model calls, %s, took %.1f s against a floor of %.1f s; its longest waits: %s",
			slowest, completions[slowest].Seconds(), floor[slowest].Seconds(), strings.Join(gaps, "; ")))
	}
	fmt.Fprintf(os.Stderr, "  real model latency (%s–%s a call): %d claims in %.1f s, %.1f/s; completion p50 %.1f s, p99 %.1f s; floor p50 %.1f s\n",
		e.o.modelLatency.Min, e.o.modelLatency.Max, len(completions), wall.Seconds(), res.Values["latency_claims_per_s"],
		percentile(res.Samples["latency_completion_ms"], 50)/1000, percentile(res.Samples["latency_completion_ms"], 99)/1000,
		percentile(res.Samples["latency_floor_ms"], 50)/1000)
	return nil
}

// claimSpan is when the client started a claim and saw it end.
type claimSpan struct{ start, end time.Time }

// latencyRun runs n auto-approve claims on the latency queue, e.o.concurrency
// at a time, each of which must end paid; done gets each one's span. The
// first round is admitted over one expected claim time (three calls at
// the mean model latency), not at once, as claims arrive in a surge: a
// round started together stays in step for rounds after.
func (e *env) latencyRun(ctx context.Context, prefix string, n int, done func(id string, span claimSpan)) error {
	ramp := 3 * (e.o.modelLatency.Min + e.o.modelLatency.Max) / 2
	return parallel(n, e.o.concurrency, func(i int) error {
		if i < e.o.concurrency {
			time.Sleep(ramp * time.Duration(i) / time.Duration(e.o.concurrency))
		}
		id := fmt.Sprintf("%s%05d", prefix, i)
		start := time.Now()
		run, err := e.startClaimOn(ctx, e.store, e.client, latencyQueue, id, "640.00", workflows.Options{})
		if err == nil {
			err = outcome(ctx, run, workflows.StatusPaid)
		}
		if err == nil && done != nil {
			done(id, claimSpan{start, time.Now()})
		}
		return err
	})
}

// steadyRate is claims/s over the window in which every slot is busy:
// from the start of claim number from (in start order) to the last start,
// counting the claims that ended inside it.
func steadyRate(runs map[string]claimSpan, from int) (float64, time.Duration) {
	var starts []time.Time
	for _, sp := range runs {
		starts = append(starts, sp.start)
	}
	if len(starts) <= from {
		return 0, 0
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	w0, w1 := starts[from], starts[len(starts)-1]
	if !w1.After(w0) {
		return 0, 0
	}
	var ended int
	for _, sp := range runs {
		if !sp.end.Before(w0) && !sp.end.After(w1) {
			ended++
		}
	}
	return float64(ended) / w1.Sub(w0).Seconds(), w1.Sub(w0)
}

// slotSampler reads the SDK's slot gauges from a worker's Prometheus
// endpoint every second: temporal_worker_task_slots_available and
// temporal_worker_task_slots_used, by worker type (WorkflowWorker,
// ActivityWorker, LocalActivityWorker). Each scrape costs the worker a
// Prometheus page: every 250 ms they were 6 % of its CPU in this workload.
type slotSampler struct {
	url       string
	mu        sync.Mutex
	available map[string]float64 // minimum seen
	used      map[string]float64 // maximum seen
}

func (s *slotSampler) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *slotSampler) sample(ctx context.Context) {
	samples, err := promtext.Get(ctx, s.url, "temporal_worker_task_slots_available", "temporal_worker_task_slots_used")
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.available == nil {
		s.available, s.used = map[string]float64{}, map[string]float64{}
	}
	for _, sm := range samples {
		kind, v := sm.Label("worker_type"), sm.Value
		if kind == "" {
			continue
		}
		if sm.Name == "temporal_worker_task_slots_available" {
			if cur, ok := s.available[kind]; !ok || v < cur {
				s.available[kind] = v
			}
		} else if v > s.used[kind] {
			s.used[kind] = v
		}
	}
}

func (s *slotSampler) minimum() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.available
}

func (s *slotSampler) maximumUsed() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// historyGaps returns the k longest waits between consecutive events of a
// workflow's history, longest first: "4.0 s before WorkflowTaskTimedOut
// (event 7)".
func (e *env) historyGaps(ctx context.Context, id string, k int) ([]string, error) {
	type gap struct {
		d    time.Duration
		what string
	}
	var gaps []gap
	var prev time.Time
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		at := ev.GetEventTime().AsTime()
		if !prev.IsZero() {
			name := strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_")
			gaps = append(gaps, gap{at.Sub(prev), fmt.Sprintf("%.1f s before %s (event %d)", at.Sub(prev).Seconds(), name, ev.GetEventId())})
		}
		prev = at
	}
	slices.SortFunc(gaps, func(a, b gap) int { return cmp.Compare(b.d, a.d) })
	var out []string
	for _, g := range gaps[:min(k, len(gaps))] {
		out = append(out, g.what)
	}
	return out, nil
}
