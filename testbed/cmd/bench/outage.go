package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/promtext"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
	"github.com/durableclaims/durableclaims/workflows"
)

// outageWorkload is the catastrophe week's outages (-only outage, opt-in:
// it takes some 40 minutes): the model provider goes down and a surge of
// claims arrives (-outage-claims over -outage-arrive); after -outage-down,
// at the next point between two sweeps of the grid the claims' long waits
// share (betweenSweeps), the model is back and Stripe goes down for as
// long. The claims must wait both out on their timers and be paid, each
// once, none dead-lettered and none assessed twice.
//
// Measured: how many claims waited on which dependency, as the workflows
// and `claimsctl stuck` say a minute before each return; the refused calls
// a claim made to each (the attempts its waits took); the workers'
// activity slots in use once every claim was waiting (a waiting claim
// holds none); how fast the claims came back, and in what order: of every
// two claims that began waiting more than half a minute apart, the
// fraction whose older one came back first (the model: its first call
// after the return, answered or refused by the rate limit; Stripe: its
// transfer's commit, behind the workers' STRIPE_REQUESTS_PER_SECOND), and
// of all pairs.
type outageWorkload struct {
	claims, workers, tpm int
	arrive, down         time.Duration
}

func (*outageWorkload) names() []string { return []string{"outage"} }

func (o *outageWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&o.claims, "outage-claims", 1000, "the outage workload (-only outage): claims that arrive while the model is down")
	fs.IntVar(&o.workers, "outage-workers", 2, "the outage workload: workers")
	fs.IntVar(&o.tpm, "outage-tpm", 600000, "the outage workload: modelsim's tokens per minute, and the workers' shared budget (0: no limit)")
	fs.DurationVar(&o.arrive, "outage-arrive", 4*time.Minute, "the outage workload: the claims arrive evenly over this, from the model going down")
	fs.DurationVar(&o.down, "outage-down", 15*time.Minute, "the outage workload: how long the model is down at least, then Stripe (each comes back at the next point between the grid's sweeps; past 8 min of waiting the claims are on the grid, oldest first)")
}

func (o *outageWorkload) run(ctx context.Context, e *env, res *results) error {
	if o.claims < 2 || o.workers < 1 || o.arrive <= 0 || o.down <= o.arrive+time.Minute {
		return fmt.Errorf("outage: -outage-claims must be at least 2, -outage-workers at least 1, -outage-arrive positive and -outage-down longer than it by a minute (got %d, %d, %s, %s)",
			o.claims, o.workers, o.arrive, o.down)
	}
	sim, url, stop, err := startModelsim(int64(o.tpm), modelsim.Latency{Min: 50 * time.Millisecond, Max: 150 * time.Millisecond})
	if err != nil {
		return err
	}
	defer stop()
	n := seq.Add(1)
	queue := fmt.Sprintf("claims-outage-%d", n)
	prefix := fmt.Sprintf("bench-outage-%d-", n)
	var workers []*proc
	for i := range o.workers {
		w, err := e.spawnClaimsWorker(fmt.Sprintf("claims-worker-outage-%d-%d", n, i), "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+url,
			"MODEL_NAME=sim-1", "MODEL_BUDGET="+queue, "CLAIMS_TASK_QUEUE="+queue, fmt.Sprintf("MODEL_TOKENS_PER_MINUTE=%d", o.tpm),
			fmt.Sprintf("STRIPE_REQUESTS_PER_SECOND=%d", activities.DefaultStripeRequestsPerSecond))
		if err != nil {
			return err
		}
		defer w.stop()
		workers = append(workers, w)
	}
	slots := &slotSeries{}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go slots.run(sctx, workers)

	// The model goes down, and the claims arrive.
	sim.SetDown(true)
	modelDown := time.Now()
	ids := make([]string, o.claims)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%05d", prefix, i)
		time.Sleep(time.Until(modelDown.Add(o.arrive * time.Duration(i) / time.Duration(o.claims))))
		if _, err := e.startClaimAt(ctx, e.store, e.client, queue, ids[i], "640.00", workflows.Options{}, 0); err != nil {
			return fmt.Errorf("outage: start %s: %w", ids[i], err)
		}
	}
	fmt.Fprintf(os.Stderr, "  outage: the model down, %d claims started in %s\n", o.claims, time.Since(modelDown).Round(time.Second))
	ctl := filepath.Join(filepath.Dir(e.o.workerBin), "claimsctl")
	ctlEnv := append(os.Environ(), "CLAIMS_DB="+filepath.Join(e.dir, "claims.db"), "LOG_LEVEL=warn",
		"TEMPORAL_ADDRESS="+e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default")

	modelSince, modelSaid, err := o.untilBack(ctx, e, ids, ctl, ctlEnv, "model", modelDown)
	if err != nil {
		return err
	}
	sim.SetDown(false)
	stripeDown := time.Now()
	// Down for every call: the outage's creates (by key), and every
	// listing (no other workload runs meanwhile).
	rules := []int{
		e.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, Times: -1, KeyPrefix: prefix}),
		e.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, Times: -1, Method: "GET"}),
	}
	fmt.Fprintf(os.Stderr, "  outage: the model back at %s, Stripe down (%s)\n", stripeDown.Format("15:04:05"), modelSaid)

	stripeSince, stripeSaid, err := o.untilBack(ctx, e, ids, ctl, ctlEnv, "stripe", stripeDown)
	if err != nil {
		return err
	}
	var refusedStripe int
	for _, r := range e.sim.Faults() {
		if slices.Contains(rules, r.ID) {
			refusedStripe += r.Fired
		}
	}
	e.sim.ClearFaults()
	stripeBack := time.Now()
	fmt.Fprintf(os.Stderr, "  outage: Stripe back at %s (%s)\n", stripeBack.Format("15:04:05"), stripeSaid)

	ended, err := e.waitEnded(ctx, prefix, o.claims, 30*time.Minute)
	if err != nil {
		return fmt.Errorf("outage: %w (%v)", err, ended)
	}
	cancel()
	last := time.Now()

	// Every claim paid once; no assessment asked twice.
	var twice []string
	if err := parallel(len(ids), 16, func(i int) error {
		k, err := e.transfersOf(ctx, ids[i])
		if err == nil && k != 1 {
			err = fmt.Errorf("%s has %d transfers", ids[i], k)
		}
		return err
	}); err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	refusedModel := map[string]int{}
	modelBack := map[string]time.Time{} // its first call once the model was back, answered or not
	assessed := map[string]int{}
	var limitedAt []time.Duration // each 429, from the model's return
	for _, c := range sim.Calls() {
		if _, ok := modelBack[c.ClaimID]; !ok && c.Fault != modelsim.Outage && !c.At.Before(stripeDown) {
			modelBack[c.ClaimID] = c.At
		}
		switch {
		case c.Fault == modelsim.Outage:
			refusedModel[c.ClaimID]++
		case c.RateLimited:
			limitedAt = append(limitedAt, c.At.Sub(stripeDown))
		case c.Answered != "error" && c.Kind == "assessment":
			assessed[c.ClaimID]++
		}
	}
	for _, id := range ids {
		if assessed[id] != 1 {
			twice = append(twice, fmt.Sprintf("%s assessed %d times", id, assessed[id]))
		}
	}
	paidAt := map[string]time.Time{}
	for _, id := range ids {
		if at, ok := e.commits.committed(string(claim.StepKey(id, claim.StepPay))); ok {
			paidAt[id] = at
		}
	}

	k := "outage_"
	res.Values[k+"claims"] = float64(o.claims)
	res.Values[k+"paid"] = float64(ended[workflows.StatusPaid])
	res.Values[k+"dead_lettered"] = float64(ended[workflows.StatusDeadLettered])
	res.Values[k+"model_waiting"] = float64(len(modelSince))
	res.Values[k+"stripe_waiting"] = float64(len(stripeSince))
	res.Values[k+"model_refused_per_claim"] = meanOver(refusedModel, ids)
	res.Values[k+"model_refused_max"] = maxOf(refusedModel)
	res.Values[k+"stripe_refused_per_claim"] = float64(refusedStripe) / float64(o.claims)
	res.Values[k+"model_rate_limited"] = float64(len(limitedAt))
	// When the 429s came, from the model's return: a burst at the return,
	// or spread through the sweep.
	for _, w := range []struct {
		name     string
		from, to time.Duration
	}{{"10s", 0, 10 * time.Second}, {"60s", 10 * time.Second, time.Minute}, {"later", time.Minute, 24 * time.Hour}} {
		n := 0
		for _, d := range limitedAt {
			if d >= w.from && d < w.to {
				n++
			}
		}
		res.Values[k+"model_rate_limited_"+w.name] = float64(n)
	}
	// The slots in use once every claim that waited had begun to, until
	// the dependency was back.
	for dep, w := range map[string][2]time.Time{"model": {latest(modelSince).Add(10 * time.Second), stripeDown},
		"stripe": {latest(stripeSince).Add(10 * time.Second), stripeBack}} {
		m, x := slots.between(w[0], w[1])
		res.Values[k+dep+"_slots_used_mean"] = m
		res.Values[k+dep+"_slots_used_max"] = x
	}
	var ordered []string
	for _, dep := range []struct {
		name  string
		since map[string]time.Time
		back  map[string]time.Time
		from  time.Time
	}{{"model", modelSince, modelBack, stripeDown}, {"stripe", stripeSince, paidAt, stripeBack}} {
		apart, all, pairs, span := resumeOrder(dep.since, dep.back, dep.from)
		res.Values[k+dep.name+"_back_in_tick_s"] = dep.from.Sub(dep.from.Truncate(5 * time.Minute)).Seconds()
		res.Values[k+dep.name+"_order_apart"] = apart
		res.Values[k+dep.name+"_order_all"] = all
		res.Values[k+dep.name+"_resume_span_s"] = span.Seconds()
		ordered = append(ordered, fmt.Sprintf("%s (back %.0f s into a 5-minute tick): %.3f of %d pairs over 30 s apart in order (%.3f of all), all back within %.0f s",
			dep.name, res.Values[k+dep.name+"_back_in_tick_s"], apart, pairs, all, span.Seconds()))
	}
	fmt.Fprintf(os.Stderr, "  outage: %d claims %v in %s; waiting %d on the model, %d on Stripe; refused a claim: model %.1f (max %.0f), Stripe %.1f; model 429s %d (%.0f in the first 10 s back, %.0f in the next 50 s); activity slots in use while down: model %.1f (max %.0f), Stripe %.1f (max %.0f)\n    %s\n",
		o.claims, ended, last.Sub(modelDown).Round(time.Second), len(modelSince), len(stripeSince),
		res.Values[k+"model_refused_per_claim"], res.Values[k+"model_refused_max"], res.Values[k+"stripe_refused_per_claim"], len(limitedAt), res.Values[k+"model_rate_limited_10s"], res.Values[k+"model_rate_limited_60s"],
		res.Values[k+"model_slots_used_mean"], res.Values[k+"model_slots_used_max"], res.Values[k+"stripe_slots_used_mean"], res.Values[k+"stripe_slots_used_max"],
		strings.Join(ordered, "\n    "))
	switch {
	case ended[workflows.StatusPaid] != o.claims:
		return fmt.Errorf("outage: not every claim paid: %v", ended)
	case len(twice) > 0:
		return fmt.Errorf("outage: %d claims' assessment asked again: %s", len(twice), strings.Join(twice[:min(len(twice), 5)], "; "))
	case len(modelSince) < o.claims*9/10 || len(stripeSince) < o.claims*9/10:
		return fmt.Errorf("outage: only %d claims waited on the model and %d on Stripe, of %d", len(modelSince), len(stripeSince), o.claims)
	}
	return nil
}

// betweenSweeps is the first instant from t that is 150 s into a tick of
// the grid the claims' long waits share (workflows, outageWake: 5-minute
// ticks, each opening with a one-minute sweep), where a dependency's
// return finds the claims on the grid in the order they began waiting.
func betweenSweeps(t time.Time) time.Time {
	at := t.Truncate(5 * time.Minute).Add(150 * time.Second)
	if at.Before(t) {
		at = at.Add(5 * time.Minute)
	}
	return at
}

// latest is the latest of the times in m.
func latest(m map[string]time.Time) time.Time {
	var l time.Time
	for _, t := range m {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// untilBack waits out dep's outage, which began at down: until the first
// point between sweeps (betweenSweeps) -outage-down after it. A minute
// before that it asks every claim what it waits on (its status query) and
// returns when each waiting on dep began to, and what `claimsctl stuck`
// says of it.
func (o *outageWorkload) untilBack(ctx context.Context, e *env, ids []string, ctl string, ctlEnv []string, dep string, down time.Time) (map[string]time.Time, string, error) {
	back := betweenSweeps(down.Add(o.down))
	time.Sleep(time.Until(back.Add(-time.Minute)))
	var mu sync.Mutex
	since := map[string]time.Time{}
	if err := parallel(len(ids), 16, func(i int) error {
		v, err := e.client.QueryWorkflow(ctx, ids[i], "", workflows.QueryStatus)
		if err != nil {
			return fmt.Errorf("outage: status of %s: %w", ids[i], err)
		}
		var st workflows.Status
		if err := v.Get(&st); err != nil {
			return err
		}
		if st.WaitingOn == dep {
			mu.Lock()
			since[ids[i]] = st.WaitingSince
			mu.Unlock()
		}
		return nil
	}); err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, ctl, "stuck", "--factor", "0", "--floor", "1h", "--max", fmt.Sprint(len(ids)+100))
	cmd.Env = ctlEnv
	out, _ := cmd.CombinedOutput() // exits 3 when it finds any
	said := fmt.Sprintf("claimsctl stuck said nothing of them: %.300q", out)
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "waiting for "+dep) && !strings.Contains(l, "  running  ") {
			said = "claimsctl stuck: " + strings.TrimSpace(l)
		}
	}
	time.Sleep(time.Until(back))
	return since, said, nil
}

// resumeOrder compares when claims began waiting (since) with when they got
// through after from (back): the fraction of pairs that began waiting more
// than 30 s apart whose older one got through first, and of all pairs
// (ties count half); and from the first claim through to the last.
func resumeOrder(since, back map[string]time.Time, from time.Time) (apart, all float64, pairs int, span time.Duration) {
	type resumed struct{ since, back time.Time }
	var cs []resumed
	for id, s := range since {
		if b, ok := back[id]; ok && !b.Before(from) {
			cs = append(cs, resumed{s, b})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].since.Before(cs[j].since) })
	var inOrder, apartIn float64
	var total int
	for i := range cs {
		for j := i + 1; j < len(cs); j++ {
			v := 0.0
			switch {
			case cs[i].back.Before(cs[j].back):
				v = 1
			case cs[i].back.Equal(cs[j].back):
				v = 0.5
			}
			total++
			inOrder += v
			if cs[j].since.Sub(cs[i].since) > 30*time.Second {
				pairs++
				apartIn += v
			}
		}
	}
	if len(cs) > 0 {
		byBack := func(a, b resumed) int { return a.back.Compare(b.back) }
		span = slices.MaxFunc(cs, byBack).back.Sub(slices.MinFunc(cs, byBack).back)
	}
	if pairs > 0 {
		apart = apartIn / float64(pairs)
	}
	if total > 0 {
		all = inOrder / float64(total)
	}
	return apart, all, pairs, span
}

// slotSeries samples the workers' activity and local-activity slots in use
// every 2 s.
type slotSeries struct {
	mu      sync.Mutex
	samples []slotSample
}

type slotSample struct {
	at   time.Time
	used float64
}

func (s *slotSeries) run(ctx context.Context, workers []*proc) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		var used float64
		for _, w := range workers {
			got, err := promtext.Get(ctx, w.metrics+"/metrics", "temporal_worker_task_slots_used")
			if err != nil {
				continue
			}
			for _, sm := range got {
				if k := sm.Label("worker_type"); k == "ActivityWorker" || k == "LocalActivityWorker" {
					used += sm.Value
				}
			}
		}
		s.mu.Lock()
		s.samples = append(s.samples, slotSample{time.Now(), used})
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// between is the mean and the most of the slots in use sampled in [from, to).
func (s *slotSeries) between(from, to time.Time) (mean, most float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum float64
	var n int
	for _, sm := range s.samples {
		if !sm.at.Before(from) && sm.at.Before(to) {
			sum += sm.used
			most = max(most, sm.used)
			n++
		}
	}
	if n > 0 {
		mean = sum / float64(n)
	}
	return mean, most
}

func meanOver(m map[string]int, ids []string) float64 {
	var sum int
	for _, id := range ids {
		sum += m[id]
	}
	return float64(sum) / float64(len(ids))
}

func maxOf(m map[string]int) float64 {
	var x int
	for _, v := range m {
		x = max(x, v)
	}
	return float64(x)
}
