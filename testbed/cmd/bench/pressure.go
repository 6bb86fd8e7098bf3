package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/workflows"
)

// The catastrophe week's two pressures on the model (opt-in, -only
// priority / -only ratelimit):
//
//   - priority: a worker whose model is modelsim at 1–2 s a call, with
//     -pressure-claims new claims in flight (triage and assessment backing
//     up the activity queue), approves -pressure-approvals parked claims
//     one after another and times approve → transfer committed at
//     stripesim. Payments run at task priority 1, model calls at 4
//     (workflows/checkpoint.go); the same workload on a worker built
//     without them is the yardstick. It runs twice: on the worker's
//     defaults, then on the catastrophe week's settings (below).
//   - ratelimit: -ratelimit-workers workers share one model budget
//     (MODEL_TOKENS_PER_MINUTE) against modelsim limited to the same
//     tokens per minute (-ratelimit-tpm); -ratelimit-claims claims run on
//     the auto path, more than the limit allows at once. Every claim must
//     be paid (none dead-lettered), and the tokens modelsim serves per
//     minute, in the steady part of the run, are the figure against the
//     limit. Then the same without the shared budget, each worker on its
//     own against the provider's 429s.

const (
	pressureQueue  = "claims-pressure"
	ratelimitQueue = "claims-ratelimit"
)

// serveModelsim serves sim on a loopback port until stop.
func serveModelsim(sim *modelsim.Server) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/v1", func() { srv.Close() }, nil
}

// runClaims starts n claims of amount under prefix on queue, 32 starts at a
// time (the bench's SQLite store is shared with the workers), all in
// flight together, and waits until every one has ended: it counts them by
// ClaimStatus in visibility every 2 s (a long poll per claim would be
// thousands of them) and returns the count of each end.
func (e *env) runClaims(ctx context.Context, queue, prefix, amount string, n, priority int) (map[string]int, error) {
	if err := parallel(n, 32, func(i int) error {
		_, err := e.startClaimAt(ctx, e.store, e.client, queue, fmt.Sprintf("%s%05d", prefix, i), amount, workflows.Options{}, priority)
		return err
	}); err != nil {
		return nil, err
	}
	ends := []string{workflows.StatusPaid, workflows.StatusDeadLettered, workflows.StatusRejected, workflows.StatusExpired, workflows.StatusWithdrawn}
	for deadline := time.Now().Add(30 * time.Minute); ; {
		ended, total := map[string]int{}, 0
		for _, status := range ends {
			c, err := e.countStatus(ctx, prefix, status)
			if err != nil {
				return nil, err
			}
			if c > 0 {
				ended[status] = int(c)
				total += int(c)
			}
		}
		if total >= n {
			return ended, nil
		}
		if time.Now().After(deadline) {
			return ended, fmt.Errorf("%d of %d claims ended after 30 minutes", total, n)
		}
		time.Sleep(2 * time.Second)
	}
}

// priorityMode is one run of the priority workload: its figures' key
// prefix, its worker's name and label, and the settings its worker gets
// (KEY=value) over the bench's environment.
type priorityMode struct {
	key, worker, label string
	settings           []string
}

// priority is the first pressure (see the top of the file), run twice: on
// the worker's defaults (unless -priority-defaults=false), then on the
// catastrophe week's settings (or -priority-settings).
func (e *env) priority(ctx context.Context, res *results) error {
	settings := e.o.prioritySettings
	var modes []priorityMode
	if e.o.priorityDefaults {
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
		if err := e.priorityRun(ctx, res, m); err != nil {
			return err
		}
	}
	return nil
}

// priorityRun is one run of the priority workload.
func (e *env) priorityRun(ctx context.Context, res *results, m priorityMode) error {
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
	parked := make([]string, e.o.pressureApprovals)
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
		ended, err = e.runClaims(ctx, queue, prefix+"new-", "640.00", e.o.pressureClaims, e.o.pressurePriority)
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
	if ended[workflows.StatusPaid] != e.o.pressureClaims {
		return fmt.Errorf("priority: of %d new claims %v", e.o.pressureClaims, ended)
	}
	res.Values[m.key+"claims"] = float64(e.o.pressureClaims)
	res.Values[m.key+"in_flight_max"] = float64(inFlight)
	res.Values[m.key+"surge_s"] = time.Since(begin).Seconds()
	if line, err := e.afterSignal(ctx, slowest); err == nil {
		res.Notes = append(res.Notes, fmt.Sprintf("priority (%s): the slowest approval, %s (%.0f ms to the transfer), after its signal: %s", m.label, slowest, ms(slowestTook), line))
		fmt.Fprintf(os.Stderr, "  the slowest approval after its signal: %s\n", line)
	}
	s := res.Samples[m.key+"approve_to_transfer_ms"]
	fmt.Fprintf(os.Stderr, "  priority (%s): %d approvals during a surge of %d claims (up to %d running while they were approved, %.0f s in): approve→transfer p50 %.0f ms, p99 %.0f ms, max %.0f ms; the surge took %.0f s\n",
		m.label, len(s), e.o.pressureClaims, inFlight, approvedBy.Seconds(), percentile(s, 50), percentile(s, 99), percentile(s, 100), res.Values[m.key+"surge_s"])
	return nil
}

// ratelimit is the second pressure (see the top of the file).
func (e *env) ratelimit(ctx context.Context, res *results) error {
	for _, shared := range []bool{true, false} {
		if err := e.ratelimitRun(ctx, res, shared); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) ratelimitRun(ctx context.Context, res *results, shared bool) error {
	tag := "shared"
	if !shared {
		tag = "alone"
	}
	sim := modelsim.New("")
	sim.TokensPerMinute = int64(e.o.ratelimitTPM)
	sim.Latency = modelsim.Latency{Min: 200 * time.Millisecond, Max: 400 * time.Millisecond}
	url, stop, err := serveModelsim(sim)
	if err != nil {
		return err
	}
	defer stop()
	budget := "MODEL_TOKENS_PER_MINUTE=0"
	if shared {
		budget = fmt.Sprintf("MODEL_TOKENS_PER_MINUTE=%d", e.o.ratelimitTPM)
	}
	queue := fmt.Sprintf("%s-%s-%d", ratelimitQueue, tag, seq.Add(1))
	for i := range e.o.ratelimitWorkers {
		w, err := e.spawnClaimsWorker(fmt.Sprintf("claims-worker-ratelimit-%s-%d", tag, i), "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+url,
			"MODEL_NAME=sim-1", "MODEL_BUDGET="+queue, "CLAIMS_TASK_QUEUE="+queue, budget)
		if err != nil {
			return err
		}
		defer w.stop()
	}
	prefix := fmt.Sprintf("bench-ratelimit-%s-%d-", tag, seq.Add(1))
	begin := time.Now()
	ended, err := e.runClaims(ctx, queue, prefix, "640.00", e.o.ratelimitClaims, 0)
	took := time.Since(begin)
	if err != nil && shared {
		return fmt.Errorf("ratelimit (%s): %w (%v)", tag, err, ended)
	}

	// The steady part: from 10 s after the first answer (the bucket's
	// burst spent) to the last answer.
	var answered []modelsim.Call
	refused := 0
	for _, c := range sim.Calls() {
		switch {
		case c.RateLimited:
			refused++
		case c.Tokens > 0:
			answered = append(answered, c)
		}
	}
	sort.Slice(answered, func(i, j int) bool { return answered[i].At.Before(answered[j].At) })
	var rate float64
	if len(answered) > 1 {
		from, to := answered[0].At.Add(10*time.Second), answered[len(answered)-1].At
		var tokens int64
		for _, c := range answered {
			if !c.At.Before(from) {
				tokens += c.Tokens
			}
		}
		if to.After(from) {
			rate = float64(tokens) / to.Sub(from).Minutes()
		}
	}
	deadLettered := e.o.ratelimitClaims - ended[workflows.StatusPaid]
	k := "ratelimit_" + tag + "_"
	res.Values[k+"tokens_per_min"] = rate
	res.Values[k+"ratio"] = rate / float64(e.o.ratelimitTPM)
	res.Values[k+"refused_429"] = float64(refused)
	res.Values[k+"not_paid"] = float64(deadLettered)
	res.Values[k+"claims_per_min"] = float64(ended[workflows.StatusPaid]) / took.Minutes()
	fmt.Fprintf(os.Stderr, "  ratelimit, %d workers %s: %d claims in %.0f s (%v); modelsim served %.0f tokens a minute against a limit of %d (×%.2f) and refused %d calls with 429\n",
		e.o.ratelimitWorkers, map[bool]string{true: "sharing one budget", false: "each on its own"}[shared], e.o.ratelimitClaims, took.Seconds(), ended,
		rate, e.o.ratelimitTPM, rate/float64(e.o.ratelimitTPM), refused)
	if shared && deadLettered > 0 {
		return fmt.Errorf("ratelimit: %d claims not paid with a shared budget: %v", deadLettered, ended)
	}
	return nil
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

// timers is the catastrophe week's burst of deadlines (-only timers,
// -timers claims): claims parked with approval TTLs chosen so that their
// escalations fall due together (each claim's TTL is the time left, when
// it starts, to one common deadline), a reminder half way. It follows the
// approval queue (one query every 2 s): a claim's deadline as its wait
// opened, and the moment its row turned escalated. The figures: how many
// deadlines fell in the busiest minute, how late escalations came after
// their deadline (p50, p99, max), and that none was dead-lettered.
func (e *env) timers(ctx context.Context, res *results) error {
	n := e.o.timers
	prefix := fmt.Sprintf("bench-timers-%d-", seq.Add(1))
	// A wait's deadline is its TTL from when it opens, after triage. Claims
	// started faster than the worker parks them queue for triage longer
	// and longer, and their deadlines spread with the queue: at once, 3,298
	// of 5,000 fell in the busiest minute. So they start at a pace the
	// worker keeps (-timers-pace a second), each with the TTL that puts its
	// deadline at the same moment, a minute after the last start.
	pace := max(e.o.timersPace, 1)
	begin := time.Now()
	due := begin.Add(time.Duration(float64(n)/pace*float64(time.Second)) + time.Minute)
	if err := parallel(n, e.o.concurrency, func(i int) error {
		time.Sleep(time.Until(begin.Add(time.Duration(float64(i) / pace * float64(time.Second)))))
		ttl := max(time.Until(due), time.Minute).Round(time.Second)
		opts := workflows.Options{Approval: approvals.Policy{TTL: ttl, EscalationTTL: time.Hour}}
		_, err := e.startClaimOn(ctx, e.store, e.client, workflows.TaskQueue, fmt.Sprintf("%s%05d", prefix, i), "1840.00", opts)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  timers: %d claims started; their escalations fall due from about %s\n", n, due.Format(time.TimeOnly))

	deadlines := map[string]time.Time{}
	late := map[string]time.Duration{}
	for stop := due.Add(10 * time.Minute); len(late) < n; {
		if time.Now().After(stop) {
			return fmt.Errorf("timers: %d of %d claims escalated 10 minutes after the deadline", len(late), n)
		}
		rows, err := e.store.OpenQueue(ctx)
		if err != nil {
			return err
		}
		for id, r := range rows {
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			switch r.Stage {
			case string(approvals.StageWaiting):
				deadlines[id] = r.Deadline
			case string(approvals.StageEscalated):
				if d, ok := deadlines[id]; ok {
					if _, done := late[id]; !done {
						late[id] = r.Updated.Sub(d)
					}
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	dead, err := e.countStatus(ctx, prefix, workflows.StatusDeadLettered)
	if err != nil {
		return err
	}
	// The busiest minute of deadlines.
	var ds []time.Time
	for _, d := range deadlines {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Before(ds[j]) })
	busiest := 0
	for i, j := 0, 0; j < len(ds); j++ {
		for ds[j].Sub(ds[i]) > time.Minute {
			i++
		}
		busiest = max(busiest, j-i+1)
	}
	for _, d := range late {
		res.add("timers_escalation_late_ms", float64(d.Milliseconds()))
	}
	res.Values["timers_claims"] = float64(n)
	res.Values["timers_busiest_minute"] = float64(busiest)
	res.Values["timers_dead_lettered"] = float64(dead)
	ids := make([]string, 0, len(late))
	for id := range late {
		ids = append(ids, id)
	}
	lost, read, err := e.lostTasks(ctx, ids, 200)
	if err != nil {
		return err
	}
	for k, v := range lost {
		res.Values["timers_wft_timeouts_"+k] = float64(v)
	}
	res.Values["timers_histories_read"] = float64(read)
	fmt.Fprintf(os.Stderr, "  timers: workflow tasks timed out in %d of the claims' histories, by timers fired before them: %v\n", read, lost)
	s := res.Samples["timers_escalation_late_ms"]
	fmt.Fprintf(os.Stderr, "  timers: %d escalations, %d of their deadlines in the busiest minute; late after the deadline p50 %.1f s, p99 %.1f s, max %.1f s; %d dead-lettered\n",
		len(late), busiest, percentile(s, 50)/1000, percentile(s, 99)/1000, percentile(s, 100)/1000, dead)
	if dead > 0 {
		return fmt.Errorf("timers: %d claims dead-lettered", dead)
	}
	return nil
}

// lostTasks counts, in the histories of up to sample of the claims whose
// IDs are given, the workflow tasks that timed out (a task the server
// handed to no worker in time, or one a worker did not finish in time:
// work the server does again), by the number of timers that had fired in
// the claim before it and by kind. A burst that costs such tasks costs the
// server a timeout and a second dispatch each.
func (e *env) lostTasks(ctx context.Context, ids []string, sample int) (map[string]int, int, error) {
	sort.Strings(ids)
	step := max(1, len(ids)/max(sample, 1))
	lost := map[string]int{}
	read := 0
	for i := 0; i < len(ids); i += step {
		it := e.client.GetWorkflowHistory(ctx, ids[i], "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		fired := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, 0, err
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_TIMER_FIRED:
				fired++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				kind := strings.ToLower(strings.TrimPrefix(ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType().String(), "TIMEOUT_TYPE_"))
				lost[fmt.Sprintf("after_%d_timers_%s", fired, kind)]++
			}
		}
		read++
	}
	return lost, read, nil
}
