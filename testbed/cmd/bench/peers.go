package main

// The peers workload (-only peers): the seed's claim on DBOS, Restate and
// LangGraph (testbed/peers, each built by `make peers`) beside durableclaims,
// against the same modelsim and stripesim and on the same PostgreSQL, in one
// run: claims/s on the auto-approve path at one concurrency, approve → pay,
// the durable state a claim leaves, the worker's memory with claims parked,
// and the seed's two crash points with real SIGKILLs of each engine's worker:
// transfers and model calls per claim, and the time from restart to done.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	workflowservice "go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
	"github.com/durableclaims/durableclaims/workflows"
)

// peerOptions size the workload (flags -peers-*).
type peerOptions struct {
	engines              []string
	claims, concurrency  int
	approvals, parked    int
	crashClaims          int
	crashConcurrency     int
	crashBatch           int
	waitSuspended        bool
	dir                  string // where `make peers` built them (default bin/peers)
	modelLatencyMinMaxMs [2]int
}

// batch is how many claims one kill interrupts at its point: the claims
// in flight, at most (a batch larger would wait out peerCrashWait each time).
func (o peerOptions) batch() int { return max(1, min(o.crashBatch, o.crashConcurrency, o.crashClaims)) }

// peerCrashWait is how long a kill point holds a batch not yet full (the
// last one) before it kills.
const peerCrashWait = 2 * time.Second

// peerEngine is one engine running the claim.
type peerEngine interface {
	name() string
	start(ctx context.Context, crash string) error // (re)start its worker with a kill point armed ("" none)
	submit(ctx context.Context, id string, amountMinor int64) error
	// decide makes an approver's decision to approve id and returns its
	// sending: what the approver read to decide (durableclaims: the
	// request's hash and audience, which its signed receipt names) is
	// read before, as a person reads a claim before approving it.
	decide(ctx context.Context, id string) (send func(context.Context) error, err error)
	status(ctx context.Context, id string) (string, error)
	workerPIDs() []int
	storageBytes(ctx context.Context) (int64, error)
	worker() *supervised
	stop()
}

// peerWorld is what every engine shares.
type peerWorld struct {
	e        *env
	o        peerOptions
	pg       *pgserver.Server
	sim      *modelsim.Server
	modelURL string
	dir      string
}

// peersWorkload is -only peers (opt-in): the same claim on DBOS,
// Restate, LangGraph and durableclaims, in one run (testbed/peers).
type peersWorkload struct {
	o       peerOptions
	engines string // -peers, comma-separated
}

func (*peersWorkload) names() []string { return []string{"peers"} }

func (p *peersWorkload) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.engines, "peers", strings.Join(peerEngines, ","), "the peers workload (-only peers): the engines, in order (temporal: the seed's steps alone on the dev server, the SDK's defaults; durableclaims: the product on the dev server; durableclaims-pg: a real Temporal server and the claims store on the peers' PostgreSQL)")
	fs.IntVar(&p.o.claims, "peers-claims", 200, "the peers workload: claims on the auto-approve path, per engine")
	fs.IntVar(&p.o.concurrency, "peers-concurrency", 20, "the peers workload: claims in flight on the auto-approve path")
	fs.IntVar(&p.o.approvals, "peers-approvals", 20, "the peers workload: claims approved one at a time (approve → pay)")
	fs.IntVar(&p.o.parked, "peers-parked", 2000, "the peers workload: claims parked for the memory measure")
	fs.IntVar(&p.o.crashClaims, "peers-crash-claims", 100, "the peers workload: claims per kill point, each interrupted there by a SIGKILL of the engine's worker")
	fs.IntVar(&p.o.crashConcurrency, "peers-crash-concurrency", 10, "the peers workload: claims in flight while the worker is killed")
	fs.BoolVar(&p.o.waitSuspended, "peers-wait-suspended", false, "the peers workload: read Restate's worker RSS again once its server has suspended the parked claims (its inactivity timeout: about a minute more)")
	fs.IntVar(&p.o.crashBatch, "peers-crash-batch", 10, "the peers workload: claims one SIGKILL interrupts, each held at the kill point until the batch is there (at most -peers-crash-concurrency)")
	fs.StringVar(&p.o.dir, "peers-dir", "testbed/peers", "the peers workload: where `make peers` built the peers")
}

// preflight refuses settings the workload cannot measure with, naming
// the flag: each of its rows needs at least one claim (a kill point with
// none has no recovery time to report).
func (p *peersWorkload) preflight() error {
	for _, f := range []struct {
		name     string
		v, least int
	}{
		{"-peers-claims", p.o.claims, 1}, {"-peers-concurrency", p.o.concurrency, 1},
		{"-peers-approvals", p.o.approvals, 1}, {"-peers-parked", p.o.parked, 1},
		{"-peers-crash-claims", p.o.crashClaims, 1}, {"-peers-crash-concurrency", p.o.crashConcurrency, 1},
		{"-peers-crash-batch", p.o.crashBatch, 1},
	} {
		if f.v < f.least {
			return fmt.Errorf("peers: %s must be at least %d, not %d", f.name, f.least, f.v)
		}
	}
	for _, name := range strings.Split(p.engines, ",") {
		if !slices.Contains(peerEngines, name) {
			return fmt.Errorf("peers: -peers names %q: the engines are %s", name, strings.Join(peerEngines, ", "))
		}
	}
	return nil
}

// peerEngines are the engines -peers may name.
var peerEngines = []string{"dbos", "restate", "langgraph", "temporal", "durableclaims", "durableclaims-pg"}

func (p *peersWorkload) run(ctx context.Context, e *env, res *results) error {
	o := p.o
	o.engines = strings.Split(p.engines, ",")
	o.modelLatencyMinMaxMs = [2]int{20, 40}
	if err := e.peers(ctx, res, o); err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	return nil
}

func (e *env) peers(ctx context.Context, res *results, o peerOptions) error {
	dir := filepath.Join(e.dir, "peers")
	pg, err := pgserver.Start(ctx, filepath.Join(dir, "pg"), pgserver.Options{})
	if err != nil {
		return err
	}
	defer pg.Stop()
	sim := modelsim.New("")
	sim.Latency = modelsim.Latency{Min: time.Duration(o.modelLatencyMinMaxMs[0]) * time.Millisecond, Max: time.Duration(o.modelLatencyMinMaxMs[1]) * time.Millisecond}
	modelURL, stopSim, err := serveModelsim(sim)
	if err != nil {
		return err
	}
	defer stopSim()
	w := &peerWorld{e: e, o: o, pg: pg, sim: sim, modelURL: modelURL, dir: dir}
	for _, name := range o.engines {
		eng, err := w.engine(ctx, name)
		if err != nil {
			return fmt.Errorf("peer %s: %w", name, err)
		}
		t0 := time.Now()
		err = w.measure(ctx, res, eng)
		eng.stop()
		if err != nil {
			return fmt.Errorf("peer %s: %w", name, err)
		}
		res.Values["peers_"+name+"_wall_s"] = time.Since(t0).Seconds()
		fmt.Fprintf(os.Stderr, "  peers: %s measured in %s\n", name, time.Since(t0).Round(time.Second))
	}
	printPeers(os.Stderr, res, o.engines)
	return nil
}

// measure runs every measurement on one engine.
func (w *peerWorld) measure(ctx context.Context, res *results, eng peerEngine) error {
	o, key := w.o, "peers_"+eng.name()+"_"
	fmt.Fprintf(os.Stderr, "  peers: %s\n", eng.name())
	if err := eng.start(ctx, ""); err != nil {
		return err
	}
	// Throughput: the auto-approve path, o.concurrency claims in flight.
	tag := peerTag(eng.name())
	storage0, err := eng.storageBytes(ctx)
	if err != nil {
		return err
	}
	begin, busy0 := time.Now(), busyCPU()
	if err := parallel(o.claims, o.concurrency, func(i int) error {
		id := fmt.Sprintf("%sauto-%05d", tag, i)
		if err := eng.submit(ctx, id, 64000); err != nil {
			return err
		}
		return waitPeerStatus(ctx, eng, id, "paid", 5*time.Minute)
	}); err != nil {
		return err
	}
	rate := float64(o.claims) / time.Since(begin).Seconds()
	cpu := (busyCPU() - busy0).Seconds()
	res.Values[key+"claims_per_s"] = rate
	res.Values[key+"claims_per_cpu_s"] = float64(o.claims) / cpu
	time.Sleep(2 * time.Second) // let the last checkpoints land
	storage1, err := eng.storageBytes(ctx)
	if err != nil {
		return err
	}
	res.Values[key+"bytes_per_claim"] = float64(storage1-storage0) / float64(o.claims)
	fmt.Fprintf(os.Stderr, "    %d claims at %d in flight: %.1f claims/s, %.1f claims a CPU-second (the machine's, every process), %.0f bytes of durable state a claim\n",
		o.claims, o.concurrency, rate, res.Values[key+"claims_per_cpu_s"], res.Values[key+"bytes_per_claim"])
	if f, ok := eng.(floored); ok {
		if err := w.floor(ctx, res, f, key); err != nil {
			return fmt.Errorf("the floor: %w", err)
		}
	}

	// Approve → pay: one claim at a time, from the approval sent to the
	// transfer committed at stripesim. The approver's read of the request
	// before (decide) is timed on its own.
	var lat, read []float64
	for i := range o.approvals {
		id := fmt.Sprintf("%sapprove-%05d", tag, i)
		if err := eng.submit(ctx, id, 184000); err != nil {
			return err
		}
		if err := waitPeerStatus(ctx, eng, id, "waiting", 2*time.Minute); err != nil {
			return err
		}
		committed, at := w.e.commits.when(id + ":step6")
		r0 := time.Now()
		send, err := eng.decide(ctx, id)
		if err != nil {
			return err
		}
		t0 := time.Now()
		read = append(read, ms(t0.Sub(r0)))
		if err := send(ctx); err != nil {
			return err
		}
		select {
		case <-committed:
			lat = append(lat, ms(at().Sub(t0)))
		case <-time.After(time.Minute):
			return fmt.Errorf("%s: no transfer a minute after the approval", id)
		}
	}
	res.setSamples(key+"approve_pay_ms", lat)
	res.setSamples(key+"approve_read_ms", read)
	fmt.Fprintf(os.Stderr, "    approve → pay: p50 %.0f ms, p99 %.0f ms (%d claims); the approver's read of the request before: p50 %.1f ms\n",
		percentile(lat, 50), percentile(lat, 99), len(lat), percentile(read, 50))

	// Memory with claims parked: the worker's RSS idle against the same
	// worker with o.parked claims waiting for a human.
	time.Sleep(3 * time.Second)
	idle := rssOf(eng.workerPIDs())
	if err := parallel(o.parked, 16, func(i int) error {
		id := fmt.Sprintf("%spark-%05d", tag, i)
		if err := eng.submit(ctx, id, 184000); err != nil {
			return err
		}
		return waitPeerStatus(ctx, eng, id, "waiting", 5*time.Minute)
	}); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	parked := rssOf(eng.workerPIDs())
	res.Values[key+"rss_idle_mib"] = float64(idle) / (1 << 20)
	res.Values[key+"rss_parked_mib"] = float64(parked) / (1 << 20)
	fmt.Fprintf(os.Stderr, "    %d parked: worker RSS %.1f → %.1f MiB\n", o.parked, float64(idle)/(1<<20), float64(parked)/(1<<20))
	// Restate's server leaves a waiting invocation open on the worker
	// until its inactivity timeout (a minute by default), then suspends
	// it: with -peers-wait-suspended the worker's memory is read again once
	// it has suspended them (about a minute more).
	if s, ok := eng.(suspender); ok && o.waitSuspended {
		t0 := time.Now()
		n, err := waitSuspended(ctx, s, o.parked, 3*time.Minute)
		if err != nil {
			return err
		}
		time.Sleep(3 * time.Second)
		settled := rssOf(eng.workerPIDs())
		res.Values[key+"rss_parked_suspended_mib"] = float64(settled) / (1 << 20)
		res.Values[key+"parked_suspended_after_s"] = time.Since(t0).Seconds()
		fmt.Fprintf(os.Stderr, "    %d of them suspended by the server %.0f s later: worker RSS %.1f MiB\n", n, time.Since(t0).Seconds(), float64(settled)/(1<<20))
	}

	// The seed's crash points, o.crashClaims claims each.
	for _, point := range []string{"after-pay", "in-notify"} {
		if err := w.crash(ctx, res, eng, key, tag, point); err != nil {
			return fmt.Errorf("kill %s: %w", point, err)
		}
	}
	return nil
}

// floored is an engine on Temporal: its floor is measured beside it.
type floored interface {
	name() string
	// temporal is its client, and the environment a worker of the floor
	// needs on its server (nil: the bench's own yardsticks' worker serves).
	temporal() (client.Client, []string)
}

// floor runs Temporal alone for what one of the engine's auto-path claims
// recorded (floorShape of its history: its activities, its local-activity
// tasks, its upserts, 1 KB payloads) on the same server, as many at the
// same concurrency, counted the same way (the machine's CPU): the claim's
// figure as a multiple of its engine's floor. The yardsticks' worker runs
// it (on the real server, one started for the purpose).
func (w *peerWorld) floor(ctx context.Context, res *results, f floored, key string) error {
	o, e := w.o, w.e
	c, workerEnv := f.temporal()
	events, err := history(ctx, c, peerTag(f.name())+"auto-00000", "")
	if err != nil {
		return err
	}
	shape := floorShape(events)
	shape.PayloadBytes = 1000
	if shape.Signals > 0 || shape.Updates > 0 { // FloorWorkflow would wait for them
		return fmt.Errorf("the auto-path claim's history records %d signals and %d updates; the peers' floor sends none", shape.Signals, shape.Updates)
	}
	if workerEnv != nil { // the real server: a yardsticks' worker of its own
		p, err := e.spawn("noop-worker-"+f.name(), e.self, []string{"noop-worker"}, workerEnv)
		if err != nil {
			return err
		}
		defer p.stop()
	}
	opts := client.StartWorkflowOptions{TaskQueue: noopQueue,
		TypedSearchAttributes: temporal.NewSearchAttributes(workflows.ClaimStatusKey.ValueSet(workflows.StatusRunning))}
	run := func(n int) error {
		return parallel(n, o.concurrency, func(int) error {
			r, err := c.ExecuteWorkflow(ctx, opts, FloorWorkflow, shape)
			if err == nil {
				err = r.Get(ctx, nil)
			}
			return err
		})
	}
	if err := run(min(o.claims, 20)); err != nil { // warm: the worker polls, the queue exists
		return err
	}
	busy0 := busyCPU()
	if err := run(o.claims); err != nil {
		return err
	}
	perCPU := float64(o.claims) / (busyCPU() - busy0).Seconds()
	res.Values[key+"floor_per_cpu_s"] = perCPU
	res.Values[key+"claims_vs_floor"] = perCPU / res.Values[key+"claims_per_cpu_s"]
	fmt.Fprintf(os.Stderr, "    its floor (%s): %.1f a CPU-second; the claim costs %.2f× its floor\n",
		shape, perCPU, res.Values[key+"claims_vs_floor"])
	return nil
}

// crash runs o.crashClaims claims with the kill point armed: the worker
// SIGKILLs itself once per claim at the point, and is restarted at once.
func (w *peerWorld) crash(ctx context.Context, res *results, eng peerEngine, key, tag, point string) error {
	o := w.o
	if err := eng.start(ctx, point); err != nil {
		return err
	}
	sup := eng.worker()
	kills0 := sup.kills()
	ids := make([]string, o.crashClaims)
	done := make([]time.Time, o.crashClaims)
	if err := parallel(o.crashClaims, o.crashConcurrency, func(i int) error {
		ids[i] = fmt.Sprintf("%s%s-%05d", tag, point, i)
		if err := retry(ctx, time.Minute, func() error { return eng.submit(ctx, ids[i], 64000) }); err != nil {
			return err
		}
		if err := waitPeerStatus(ctx, eng, ids[i], "paid", 5*time.Minute); err != nil {
			return err
		}
		done[i] = time.Now()
		return nil
	}); err != nil {
		return err
	}
	fired, err := firedKills(sup.crashState)
	if err != nil {
		return err
	}
	// The i-th kill interrupted the claims of the i-th line; each claim's
	// recovery runs from the restart after that kill.
	restarts := sup.killRestartTimes()[kills0:]
	var recovery []float64
	interrupted := 0
	for i, batch := range fired {
		for _, id := range batch {
			j := slices.Index(ids, id)
			if j < 0 || i >= len(restarts) {
				continue
			}
			interrupted++
			recovery = append(recovery, ms(done[j].Sub(restarts[i])))
		}
	}
	maxTransfers, maxCalls, rep, err := w.effects(ctx, ids, sup.exitTimes()[kills0:])
	if err != nil {
		return err
	}
	k := key + "kill_" + strings.ReplaceAll(point, "-", "_") + "_"
	res.Values[k+"kills"] = float64(sup.kills() - kills0)
	res.Values[k+"claims_interrupted"] = float64(interrupted)
	res.Values[k+"transfers_max"] = float64(maxTransfers)
	res.Values[k+"model_calls_max"] = float64(maxCalls)
	res.Values[k+"model_calls_reasked"] = float64(rep.reasked)
	res.Values[k+"model_calls_unrecorded"] = float64(rep.unrecorded)
	res.Values[k+"model_calls_cut_off"] = float64(rep.cutOff)
	res.setSamples(k+"recovery_ms", recovery)
	if strings.HasPrefix(eng.name(), "durableclaims") && (maxTransfers > 1 || rep.reasked > 0) {
		return fmt.Errorf("%s at %s: %d transfers for one claim, %d model calls re-asked with no kill after their answer: durableclaims pays once and never asks again",
			eng.name(), point, maxTransfers, rep.reasked)
	}
	fmt.Fprintf(os.Stderr, "    kill %s: %d claims, %d interrupted at the point by %d SIGKILLs; transfers a claim max %d, model calls a claim max %d (asked again: %d cut off by a kill, %d answered less than 1 s before one, %d re-asked with no kill after the answer); restart → done p50 %.0f ms, p99 %.0f ms\n",
		point, len(ids), interrupted, sup.kills()-kills0, maxTransfers, maxCalls, rep.cutOff, rep.unrecorded, rep.reasked, percentile(recovery, 50), percentile(recovery, 99))
	return eng.start(ctx, "")
}

// effects counts, per claim, the transfers stripesim holds and the model
// calls modelsim answered: the most of each, and the calls asked again
// (same claim, kind and conversation), in three kinds by what the kills
// did to the first: cut off (the worker was killed while it was being
// answered: every engine asks such a call again), unrecorded (answered,
// and the worker killed within a second after, before the engine could
// have recorded it), and re-asked (no kill within a second of the answer:
// the engine had it and asked again).
func (w *peerWorld) effects(ctx context.Context, ids []string, kills []time.Time) (maxTransfers, maxCalls int, repeats repeatKinds, err error) {
	for _, id := range ids {
		n, err := w.e.transfersOf(ctx, id)
		if err != nil {
			return 0, 0, repeats, err
		}
		maxTransfers = max(maxTransfers, n)
	}
	calls := map[string]int{}
	first := map[string]modelsim.Call{}
	killedWithin := func(from, to time.Time) bool {
		return slices.ContainsFunc(kills, func(t time.Time) bool { return !t.Before(from) && !t.After(to) })
	}
	for _, c := range w.sim.Calls() {
		if !slices.Contains(ids, c.ClaimID) || c.Answered == "error" {
			continue
		}
		calls[c.ClaimID]++
		k := fmt.Sprintf("%s %s %d", c.ClaimID, c.Kind, c.Messages)
		f, seen := first[k]
		if !seen {
			first[k] = c
			continue
		}
		answered := f.At.Add(f.Waited)
		switch {
		case killedWithin(f.At, answered):
			repeats.cutOff++
		case killedWithin(answered, answered.Add(time.Second)):
			repeats.unrecorded++
		default:
			repeats.reasked++
		}
	}
	for _, n := range calls {
		maxCalls = max(maxCalls, n)
	}
	return maxTransfers, maxCalls, repeats, nil
}

// repeatKinds counts model calls asked again, by kind (effects).
type repeatKinds struct{ cutOff, unrecorded, reasked int }

// transfersOf counts the transfers stripesim holds for a claim.
func (e *env) transfersOf(ctx context.Context, id string) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.simURL+"/v1/transfers?limit=100&transfer_group="+id, nil)
	req.Header.Set("Authorization", "Bearer sk_test_local")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	return len(list.Data), nil
}

// firedKills reads a kill point's state file: a line a kill, the claims it
// interrupted at the point.
func firedKills(path string) ([][]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out [][]string
	for _, l := range strings.Split(string(b), "\n") {
		var batch []string
		for _, f := range strings.Fields(l) {
			id, _, _ := strings.Cut(f, ":") // durableclaims' worker writes CLAIM:STEP:PHASE
			batch = append(batch, id)
		}
		if len(batch) > 0 {
			out = append(out, batch)
		}
	}
	return out, err
}

// waitPeerStatus waits until the engine says claim id is want, polling
// its status every 20 ms; an engine on Temporal waits for a claim's end
// as Temporal's clients do, on the run's result (one long poll, where a
// status poll would cost the server a request every 20 ms).
func waitPeerStatus(ctx context.Context, eng peerEngine, id, want string, within time.Duration) error {
	if f, ok := eng.(floored); ok && want != "waiting" {
		c, _ := f.temporal()
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		if err := c.GetWorkflow(wctx, id, "").Get(wctx, nil); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		s, err := eng.status(ctx, id)
		if err == nil && s != want {
			err = fmt.Errorf("%s: %s, not %s", id, s, want)
		}
		return err
	}
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		s, err := eng.status(ctx, id)
		if err == nil {
			if s == want {
				return nil
			}
			if s == "failed" || s == "rejected" || s == "expired" || (want == "waiting" && s == "paid") {
				return fmt.Errorf("%s: %s, not %s", id, s, want)
			}
			last = s
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s: still %q after %s, not %s", id, last, within, want)
}

func retry(ctx context.Context, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyCPU is the time the machine's CPUs have spent busy (all of them, not
// idle or waiting for I/O), from /proc/stat.
func busyCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 && i < 8 {
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// rssOf sums the resident memory of processes, from /proc.
func rssOf(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				total += kb << 10
			}
		}
	}
	return total
}

// supervised is an engine's worker process, restarted the moment it dies,
// as a process supervisor would: the kill points are SIGKILLs it deals
// itself, and the restarts are what recovery is measured from.
type supervised struct {
	name       string
	cmd        func() *exec.Cmd
	logPath    string
	crashState string

	mu       sync.Mutex
	cur      *exec.Cmd
	stopping bool
	nKills   int
	exits    []time.Time // when each run of it ended
	// killRestarts: the restart after each SIGKILL (an exit of another
	// kind, a crash at startup, is not a kill point's)
	killRestarts []time.Time
	done         chan struct{}
}

func (s *supervised) startLoop() error {
	s.done = make(chan struct{})
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	first := make(chan error, 1)
	go func() {
		defer close(s.done)
		defer logf.Close()
		killed := false
		for n := 0; ; n++ {
			cmd := s.cmd()
			cmd.Stdout, cmd.Stderr = logf, logf
			s.mu.Lock()
			if s.stopping {
				s.mu.Unlock()
				return
			}
			err := cmd.Start()
			s.cur = cmd
			if killed {
				s.killRestarts = append(s.killRestarts, time.Now())
			}
			s.mu.Unlock()
			if n == 0 {
				first <- err
			}
			if err != nil {
				return
			}
			_ = cmd.Wait()
			s.mu.Lock()
			s.exits = append(s.exits, time.Now())
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			killed = ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
			if killed {
				s.nKills++
			}
			stopping := s.stopping
			s.mu.Unlock()
			if stopping {
				return
			}
			time.Sleep(50 * time.Millisecond) // a program that cannot start does not spin
		}
	}()
	return <-first
}

func (s *supervised) stop() {
	if s == nil || s.done == nil {
		return
	}
	s.mu.Lock()
	s.stopping = true
	if s.cur != nil && s.cur.Process != nil {
		_ = s.cur.Process.Signal(syscall.SIGTERM)
	}
	cur := s.cur
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = cur.Process.Kill()
		<-s.done
	}
	s.mu.Lock()
	s.stopping = false
	s.mu.Unlock()
}

func (s *supervised) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.Process == nil {
		return 0
	}
	return s.cur.Process.Pid
}

func (s *supervised) kills() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nKills
}

func (s *supervised) exitTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.exits)
}

// killRestartTimes are the restarts after each SIGKILL, in order.
func (s *supervised) killRestartTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.killRestarts)
}

// httpPeer is a peer of testbed/peers: a program keeping the control API
// of testbed/peers/README.md.
type httpPeer struct {
	w       *peerWorld
	engine  string
	bin     string
	args    []string
	env     []string
	addr    string
	dataDir string // where its durable state is, when not in PostgreSQL
	db      string // its PostgreSQL database
	sup     *supervised
	extra   []*supervised // servers it needs (Restate's), not killed
}

func (p *httpPeer) name() string { return p.engine }

func (p *httpPeer) worker() *supervised { return p.sup }

func (p *httpPeer) start(ctx context.Context, crash string) error {
	p.sup.stop()
	state := filepath.Join(p.w.dir, p.engine+"-crash-"+cmp.Or(crash, "none"))
	env := append(slices.Clone(p.env), "PEER_CRASH="+crash, "PEER_CRASH_STATE="+state,
		"PEER_CRASH_BATCH="+strconv.Itoa(p.w.o.batch()), "PEER_CRASH_WAIT="+peerCrashWait.String())
	p.sup = &supervised{name: p.engine, logPath: filepath.Join(p.w.dir, p.engine+".log"), crashState: state,
		cmd: func() *exec.Cmd {
			cmd := exec.Command(p.bin, p.args...)
			cmd.Env = append(os.Environ(), env...)
			return cmd
		}}
	if err := p.sup.startLoop(); err != nil {
		return err
	}
	return retry(ctx, 2*time.Minute, func() error {
		_, err := p.call(ctx, http.MethodGet, "/healthz", nil)
		return err
	})
}

func (p *httpPeer) call(ctx context.Context, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+p.addr+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return out, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(out))
	}
	return out, nil
}

func (p *httpPeer) submit(ctx context.Context, id string, amountMinor int64) error {
	_, err := p.call(ctx, http.MethodPost, "/claims", map[string]any{"claim_id": id, "policy_id": "pol-1001",
		"claimant":     map[string]string{"name": "Ada Lovelace", "email": "ada@example.com", "stripe_account": "acct_1Ada"},
		"amount_minor": amountMinor, "currency": "usd", "description": "A burst pipe flooded the kitchen overnight"})
	return err
}

// decide: the peers' approval names its approver and nothing else, so
// there is nothing to read first.
func (p *httpPeer) decide(_ context.Context, id string) (func(context.Context) error, error) {
	return func(ctx context.Context) error {
		_, err := p.call(ctx, http.MethodPost, "/claims/"+id+"/approve", map[string]string{"approver": "adjuster-17"})
		return err
	}, nil
}

func (p *httpPeer) status(ctx context.Context, id string) (string, error) {
	b, err := p.call(ctx, http.MethodGet, "/claims/"+id, nil)
	if err != nil {
		return "", err
	}
	var s struct {
		Status string `json:"status"`
	}
	return s.Status, json.Unmarshal(b, &s)
}

// workerPIDs is the engine's worker alone: a server it needs (Restate's)
// is counted no more than the Temporal server or PostgreSQL are.
func (p *httpPeer) workerPIDs() []int { return []int{p.sup.pid()} }

func (p *httpPeer) storageBytes(ctx context.Context) (int64, error) {
	n, err := databaseSize(ctx, p.w.pg.URL(p.db))
	if err != nil || p.dataDir == "" {
		return n, err
	}
	d, err := dirSize(p.dataDir)
	return n + d, err
}

func (p *httpPeer) stop() {
	p.sup.stop()
	for _, x := range p.extra {
		x.stop()
	}
}

func databaseSize(ctx context.Context, url string) (int64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&n)
	return n, err
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && !d.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n, err
}

// engine makes an engine by name: dbos, restate, langgraph (built by `make
// peers` into o.dir), durableclaims (this bench's worker on the dev server).
func (w *peerWorld) engine(ctx context.Context, name string) (peerEngine, error) {
	if name == "durableclaims" || name == "durableclaims-pg" {
		return w.durableclaims(ctx, name)
	}
	db := "peer_" + name
	url, err := w.pg.CreateDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	spool := filepath.Join(w.dir, name+"-mail")
	if err := os.MkdirAll(spool, 0o755); err != nil {
		return nil, err
	}
	p := &httpPeer{w: w, engine: name, addr: addr, db: db, sup: &supervised{}, env: []string{
		"PEER_ADDR=" + addr, "PG_URL=" + url, "MODEL_BASE_URL=" + w.modelURL, "MODEL_API_KEY=sk-sim",
		"STRIPE_API_BASE=" + w.e.simURL, "STRIPE_SECRET_KEY=sk_test_local", "MAIL_SPOOL=" + spool,
		"AUTO_APPROVE_LIMIT_MINOR=100000", "APPROVAL_TIMEOUT=24h"}}
	peersDir := w.o.dir
	switch name {
	case "dbos":
		p.bin = filepath.Join(peersDir, "dbos", "peer-dbos")
	case "langgraph":
		p.bin, p.args = "node", []string{filepath.Join(peersDir, "langgraph", "main.mjs")}
	case "restate":
		if err := w.restateServer(ctx, p, peersDir); err != nil {
			return nil, err
		}
		p.bin = filepath.Join(peersDir, "restate", "restate-peer")
	case "temporal":
		p.bin = filepath.Join(peersDir, "temporal", "peer-temporal")
		p.env = append(p.env, "TEMPORAL_ADDRESS="+w.e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default",
			"PEER_TASK_QUEUE="+seedQueue)
	default:
		return nil, fmt.Errorf("unknown engine %q (%s)", name, strings.Join(peerEngines, ", "))
	}
	if p.bin != "node" {
		if _, err := os.Stat(p.bin); err != nil {
			return nil, fmt.Errorf("%w: build the peers with `make peers`", err)
		}
	}
	switch name {
	case "restate":
		return restatePeer{httpPeer: p, admin: envOf(p.env, "RESTATE_ADMIN_URL")}, nil
	case "temporal":
		return seedPeer{p}, nil
	}
	return p, nil
}

// seedQueue is the task queue of the seed on Temporal.
const seedQueue = "seed-claims-peers"

// seedPeer is the seed's steps alone on Temporal (testbed/peers/temporal),
// on the bench's dev server: its durable state is its histories there and
// its own tables in PostgreSQL.
type seedPeer struct{ *httpPeer }

func (s seedPeer) temporal() (client.Client, []string) { return s.w.e.client, nil }

func (s seedPeer) storageBytes(ctx context.Context) (int64, error) {
	tables, err := s.httpPeer.storageBytes(ctx)
	if err != nil {
		return 0, err
	}
	h, err := historyBytes(ctx, s.w.e.client, seedQueue)
	return tables + h, err
}

// suspender is an engine whose server suspends a waiting claim some time
// after it parked (Restate).
type suspender interface {
	suspended(ctx context.Context) (int, error)
}

// waitSuspended waits until at least n claims are suspended, or for at
// most limit; it returns how many are.
func waitSuspended(ctx context.Context, s suspender, n int, limit time.Duration) (int, error) {
	var got int
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		var err error
		if got, err = s.suspended(ctx); err != nil {
			return 0, err
		}
		if got >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return got, nil
}

// envOf is name's value in an environment list.
func envOf(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}

// restatePeer is the Restate peer: its server can say which invocations
// it has suspended.
type restatePeer struct {
	*httpPeer
	admin string
}

// suspended counts the suspended invocations, by the admin API's SQL
// introspection (docs.restate.dev/operate/introspection).
func (r restatePeer) suspended(ctx context.Context) (int, error) {
	body, _ := json.Marshal(map[string]string{"query": "SELECT count(*) AS n FROM sys_invocation WHERE status = 'suspended'"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.admin+"/query", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return 0, fmt.Errorf("restate admin /query: %s: %s", resp.Status, bytes.TrimSpace(b))
	}
	var out struct {
		Rows []struct {
			N int `json:"n"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Rows) != 1 {
		return 0, fmt.Errorf("restate admin /query: %.200s", b)
	}
	return out.Rows[0].N, nil
}

// restateServer starts the Restate server the Restate peer's worker
// registers with; its journal is in its own data directory.
func (w *peerWorld) restateServer(ctx context.Context, p *httpPeer, peersDir string) error {
	ingress, err := freeAddr()
	if err != nil {
		return err
	}
	admin, err := freeAddr()
	if err != nil {
		return err
	}
	node, err := freeAddr()
	if err != nil {
		return err
	}
	service, err := freeAddr()
	if err != nil {
		return err
	}
	port := func(addr string) string { _, p, _ := strings.Cut(addr, ":"); return p }
	p.dataDir = filepath.Join(w.dir, "restate-data")
	srv := &supervised{name: "restate-server", logPath: filepath.Join(w.dir, "restate-server.log"), cmd: func() *exec.Cmd {
		cmd := exec.Command("bash", filepath.Join(peersDir, "restate", "server.sh"))
		cmd.Env = append(os.Environ(), "RESTATE_DATA_DIR="+p.dataDir, "RESTATE_INGRESS_PORT="+port(ingress), "RESTATE_ADMIN_PORT="+port(admin),
			"RESTATE_NODE_PORT="+port(node))
		return cmd
	}}
	if err := srv.startLoop(); err != nil {
		return err
	}
	p.extra = append(p.extra, srv)
	p.env = append(p.env, "RESTATE_INGRESS_URL=http://"+ingress, "RESTATE_ADMIN_URL=http://"+admin, "RESTATE_SERVICE_ADDR="+service)
	return retry(ctx, time.Minute, func() error {
		resp, err := http.Get("http://" + admin + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				err = errors.New(resp.Status)
			}
		}
		return err
	})
}

// dcEngine is durableclaims itself: this bench's worker with the model
// behind modelsim as the peers have it, on the dev server and its SQLite
// claims store ("durableclaims"), or on a real Temporal server and a claims
// store both on the peers' PostgreSQL ("durableclaims-pg").
type dcEngine struct {
	w        *peerWorld
	label    string
	sup      *supervised
	queue    string
	client   client.Client
	env      []string // the worker's Temporal address, namespace, token
	st       *store.Store
	claimsDB string
	close    func()
}

func (w *peerWorld) durableclaims(ctx context.Context, name string) (peerEngine, error) {
	e := w.e
	d := &dcEngine{w: w, label: name, sup: &supervised{}, queue: "claims-peers", close: func() {}}
	if name == "durableclaims" {
		d.client, d.st, d.claimsDB = e.client, e.store, filepath.Join(e.dir, "claims.db")
		d.env = []string{"TEMPORAL_ADDRESS=" + e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default"}
		return d, nil
	}
	c, err := cluster.Start(ctx, filepath.Join(w.dir, "cluster"), cluster.Options{Postgres: w.pg})
	if err != nil {
		return nil, err
	}
	o := c.ClientOptions(temporalauth.RoleAdmin)
	o.DataConverter, o.FailureConverter = e.dc, e.fc
	if d.client, err = client.Dial(o); err != nil {
		c.Stop()
		return nil, err
	}
	if d.claimsDB, err = w.pg.CreateDatabase(ctx, "peer_durableclaims"); err == nil {
		d.st, err = store.Open(d.claimsDB)
	}
	if err != nil {
		d.client.Close()
		c.Stop()
		return nil, err
	}
	d.env = c.Env(temporalauth.RoleWorker)
	d.close = func() { d.st.Close(); d.client.Close(); c.Stop() }
	return d, nil
}

func (d *dcEngine) name() string        { return d.label }
func (d *dcEngine) worker() *supervised { return d.sup }
func (d *dcEngine) workerPIDs() []int   { return []int{d.sup.pid()} }
func (d *dcEngine) stop()               { d.sup.stop(); d.close() }

// temporal: on the dev server the bench's yardsticks' worker serves the
// floor; on the real server one is started with the worker's credentials.
func (d *dcEngine) temporal() (client.Client, []string) {
	if d.label == "durableclaims" {
		return d.client, nil
	}
	return d.client, d.env
}

func (d *dcEngine) start(ctx context.Context, crash string) error {
	d.sup.stop()
	e := d.w.e
	state := filepath.Join(d.w.dir, d.label+"-crash-"+cmp.Or(crash, "none"))
	args := []string{"--crash-state", state}
	if crash != "" {
		// The points are named per claim; the workload's claims are named
		// in advance (<tag><point>-<i>), so the worker gets them all.
		var points []string
		for i := range d.w.o.crashClaims {
			id := fmt.Sprintf("%s%s-%05d", peerTag(d.name()), crash, i)
			switch crash {
			case "after-pay":
				points = append(points, id+":6:after-effect")
			case "in-notify":
				points = append(points, id+":7")
			}
		}
		args = append(args, "--crash-at", strings.Join(points, ","),
			"--crash-batch", strconv.Itoa(d.w.o.batch()), "--crash-batch-wait", peerCrashWait.String())
	}
	d.sup = &supervised{name: d.label, logPath: filepath.Join(d.w.dir, d.label+".log"), crashState: state,
		cmd: func() *exec.Cmd {
			cmd := exec.Command(e.o.workerBin, args...)
			cmd.Env = append(append(os.Environ(), d.env...), "LOG_LEVEL=warn",
				"STRIPE_API_BASE="+e.simURL, "STRIPE_SECRET_KEY=sk_test_local", stripesimRate,
				"CLAIMS_DB="+d.claimsDB, "MAIL_SPOOL="+filepath.Join(d.w.dir, d.label+"-mail"),
				// Restarted where it ran, it hands back what it held (worker/inflight).
				"TASK_JOURNAL_DIR="+filepath.Join(d.w.dir, d.label+"-journal"),
				"BLOB_URL="+e.blobURL(), "APPROVERS_FILE="+e.approversFile(), "CLAIMS_TASK_QUEUE="+d.queue,
				// The same claim as the peers': no jurisdiction's letters.
				"JURISDICTION_RULES_FILE=none", "FINAL_OUTCOME=reject",
				"MODEL_PROVIDER=openai", "MODEL_BASE_URL="+d.w.modelURL, "MODEL_NAME=sim", "MODEL_API_KEY=sk-sim")
			return cmd
		}}
	if err := d.sup.startLoop(); err != nil {
		return err
	}
	// Ready once it polls the queue.
	return retry(ctx, time.Minute, func() error {
		resp, err := d.client.DescribeTaskQueue(ctx, d.queue, enumspb.TASK_QUEUE_TYPE_WORKFLOW)
		if err == nil && len(resp.GetPollers()) == 0 {
			err = errors.New("no poller yet")
		}
		return err
	})
}

// peerTag is the prefix of an engine's claims in a run.
func peerTag(engine string) string { return "peer-" + engine + "-" }

func (d *dcEngine) submit(ctx context.Context, id string, amountMinor int64) error {
	_, err := d.w.e.startClaimOn(ctx, d.st, d.client, d.queue, id, claim.FormatAmount(amountMinor, "usd"), workflows.Options{})
	return err
}

// decide: the receipt names the request's hash and the claim's audience,
// read from the claim's status (a query the worker answers), and is signed
// before it is sent, as the inbox's page shows the request before an
// adjuster approves it.
func (d *dcEngine) decide(ctx context.Context, id string) (func(context.Context) error, error) {
	in, err := d.w.e.decisionOn(ctx, d.client, id, approvals.Approve)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error { return d.client.SignalWorkflow(ctx, id, "", "approve", in) }, nil
}

// status is read from the server alone, as the peers' control APIs read
// theirs from their own stores: the run's state and its ClaimStatus
// search attribute. (A query would be answered by the worker, replaying a
// closed claim's whole history, and the driver polls every 20 ms.) A
// claim is paid, rejected or expired once its run has completed.
func (d *dcEngine) status(ctx context.Context, id string) (string, error) {
	desc, err := d.client.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return "", err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	var published string
	if p := info.GetSearchAttributes().GetIndexedFields()[workflows.ClaimStatusKey.GetName()]; p != nil {
		if err := converter.GetDefaultDataConverter().FromPayload(p, &published); err != nil {
			return "", err
		}
	}
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if published == workflows.StatusWaiting {
			return published, nil
		}
		return workflows.StatusRunning, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return published, nil
	default:
		return "failed", nil
	}
}

// storageBytes is the history the claims left on the server.
func (d *dcEngine) storageBytes(ctx context.Context) (int64, error) {
	return historyBytes(ctx, d.client, d.queue)
}

// historyBytes is the history the workflows of a task queue left.
func historyBytes(ctx context.Context, c client.Client, queue string) (int64, error) {
	var total int64
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1000, NextPageToken: token,
			Query: fmt.Sprintf(`TaskQueue = %q`, queue)})
		if err != nil {
			return 0, err
		}
		for _, ex := range resp.GetExecutions() {
			total += ex.GetHistorySizeBytes()
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return total, nil
		}
	}
}

// printPeers prints the table: one row per engine.
func printPeers(w io.Writer, res *results, engines []string) {
	fmt.Fprintf(w, "\n%-16s %9s %9s %18s %10s %14s %26s %26s\n", "engine", "claims/s", "/CPU-s", "approve→pay p50/p99", "bytes/claim", "parked RSS Δ",
		"after-pay: xfers/calls/p99", "in-notify: xfers/calls/p99")
	for _, name := range engines {
		k := "peers_" + name + "_"
		v := res.Values
		lat := res.Samples[k+"approve_pay_ms"]
		kill := func(point string) string {
			kk := k + "kill_" + point + "_"
			return fmt.Sprintf("%.0f / %.0f (%.0f re) / %.1f s", v[kk+"transfers_max"], v[kk+"model_calls_max"], v[kk+"model_calls_reasked"],
				percentile(res.Samples[kk+"recovery_ms"], 99)/1000)
		}
		fmt.Fprintf(w, "%-16s %9.1f %9.1f %8.0f / %5.0f ms %10.0f %10.1f MiB %26s %26s\n", name, v[k+"claims_per_s"], v[k+"claims_per_cpu_s"], percentile(lat, 50), percentile(lat, 99),
			v[k+"bytes_per_claim"], v[k+"rss_parked_mib"]-v[k+"rss_idle_mib"], kill("after_pay"), kill("in_notify"))
	}
	for _, name := range engines {
		k := "peers_" + name + "_"
		if f, ok := res.Values[k+"floor_per_cpu_s"]; ok {
			fmt.Fprintf(w, "%-16s %9s %9.1f   the engine alone for what its claim records: the claim costs %.2f× that\n",
				name+" floor", "", f, res.Values[k+"claims_vs_floor"])
		}
	}
}
