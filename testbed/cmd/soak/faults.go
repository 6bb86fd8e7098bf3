package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/netfault"
	"github.com/durableclaims/durableclaims/testbed/promtext"
	"github.com/durableclaims/durableclaims/testbed/s3server"
)

// The -faults soak puts toxiproxy between every worker and everything it
// connects to, one proxy per worker and dependency, and breaks those links
// on a seeded schedule printed before the first claim starts. Nothing is
// killed and no server restarts: what goes wrong is the network's alone.

// The dependencies a worker connects to, each through a link of its own.
const (
	depFrontend = "frontend"
	depPostgres = "postgres"
	depStripe   = "stripe"
	depModel    = "model"
	depS3       = "s3"
)

var deps = []string{depFrontend, depPostgres, depStripe, depModel, depS3}

// stripeTimeout is the workers' STRIPE_TIMEOUT in the fault soak: an
// answer slower than this is one the worker gave up on, after Stripe acted.
const stripeTimeout = 4 * time.Second

// plannedFault is one entry of the schedule: at At after the run began, for
// For, Fault on the link from Worker to Dep.
type plannedFault struct {
	At     time.Duration  `json:"at_ns"`
	For    time.Duration  `json:"for_ns"`
	Worker string         `json:"worker"`
	Dep    string         `json:"dependency"`
	Fault  netfault.Fault `json:"fault"`
	// Why names the entries the soak always makes (the partitions and the
	// late Stripe answer); random ones have none.
	Why string `json:"why,omitempty"`
}

func (p plannedFault) String() string {
	s := fmt.Sprintf("+%-6s %-5s %s → %-8s %s", p.At.Round(100*time.Millisecond), p.For.Round(100*time.Millisecond), p.Worker, p.Dep, p.Fault)
	if p.Why != "" {
		s += "  (" + p.Why + ")"
	}
	return s
}

// faultWindow is a fault as it happened.
type faultWindow struct {
	plannedFault
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Held is what the worker held when a partition from the frontend
	// began: task slots in use by kind, from its metrics.
	Held map[string]int `json:"held_slots,omitempty"`
}

// planFaults draws the schedule from seed: the three fixed faults the
// issue names (a partition of one worker from the frontend while it holds
// tasks, one from PostgreSQL, Stripe answering after the client's
// timeout), then a random fault every 2–6 s over span on some link not
// already faulted: latency of 1–5 s with jitter, a bandwidth limit, a
// reset mid-request, or a half-open connection, each for 3–12 s.
func planFaults(seed uint64, workers []string, span, partition time.Duration) []plannedFault {
	rng := mrand.New(mrand.NewPCG(seed, 45))
	w := func(i int) string { return workers[i%len(workers)] }
	plan := []plannedFault{
		{At: span / 4, For: partition, Worker: w(0), Dep: depFrontend, Fault: netfault.Fault{Kind: netfault.Partition},
			Why: "cut off from the frontend while it holds tasks"},
		{At: span / 2, For: partition, Worker: w(1), Dep: depPostgres, Fault: netfault.Fault{Kind: netfault.Partition},
			Why: "cut off from PostgreSQL mid-step"},
		// Every answer 2–6 s late against a 4 s timeout: some payments'
		// check (the transfer list) is answered in time and their
		// transfer is answered after the worker gave up on it.
		{At: span / 8, For: 20 * time.Second, Worker: w(2), Dep: depStripe,
			Fault: netfault.Fault{Kind: netfault.SlowAnswer, Delay: stripeTimeout, Jitter: stripeTimeout / 2},
			Why:   "Stripe answers after the worker gave up"},
	}
	// Durations drawn to the millisecond, so the schedule prints as it runs.
	between := func(lo, hi time.Duration) time.Duration {
		return (lo + time.Duration(rng.Int64N(int64(hi-lo)+1))).Round(time.Millisecond)
	}
	busy := func(worker, dep string, from, to time.Duration) bool {
		for _, p := range plan {
			// A link carries one fault at a time, with 2 s clear between.
			if p.Worker == worker && p.Dep == dep && from < p.At+p.For+2*time.Second && p.At < to+2*time.Second {
				return true
			}
		}
		return false
	}
	kinds := []netfault.Kind{netfault.Latency, netfault.Bandwidth, netfault.Reset, netfault.HalfOpen}
	for at := 5 * time.Second; at < span; at += between(2*time.Second, 6*time.Second) {
		p := plannedFault{At: at, For: between(3*time.Second, 12*time.Second), Worker: w(rng.IntN(len(workers))), Dep: deps[rng.IntN(len(deps))]}
		if busy(p.Worker, p.Dep, p.At, p.At+p.For) {
			continue
		}
		switch kind := kinds[rng.IntN(len(kinds))]; kind {
		case netfault.Latency:
			p.Fault = netfault.Fault{Kind: kind, Delay: between(time.Second, 5*time.Second), Jitter: between(0, time.Second)}
		case netfault.Bandwidth:
			p.Fault = netfault.Fault{Kind: kind, RateKBps: 4 + rng.Int64N(29)} // 4–32 KB/s
		case netfault.Reset:
			p.Fault = netfault.Fault{Kind: kind, Delay: between(0, 300*time.Millisecond)}
		default:
			p.Fault = netfault.Fault{Kind: kind}
		}
		plan = append(plan, p)
	}
	slices.SortFunc(plan, func(a, b plannedFault) int { return int(a.At - b.At) })
	return plan
}

// faultRig is what the fault soak runs beside the cluster: toxiproxy with
// a link per worker and dependency, modelsim as the model provider and
// versitygw as the blob store.
type faultRig struct {
	proxy   *netfault.Server
	links   map[string]map[string]*netfault.Link // worker → dependency → link
	model   *modelsim.Server
	modelLn net.Listener
	s3      *s3server.Server
	bucket  string            // the blob store's bucket
	metrics map[string]string // worker → its METRICS_ADDR
}

// startFaultRig starts toxiproxy, modelsim and versitygw and makes the
// links; upstreams maps each dependency to the address it forwards to.
func (s *soak) startFaultRig(ctx context.Context) error {
	r := &faultRig{links: map[string]map[string]*netfault.Link{}, metrics: map[string]string{}, bucket: "claim-files"}
	s.rig = r
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin, err := netfault.Bin(root)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if r.proxy, err = netfault.Start(sctx, bin, filepath.Join(s.dir, "toxiproxy.log"), int64(s.o.Seed)); err != nil {
		return err
	}
	r.model = modelsim.New("")
	if r.modelLn, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	go (&http.Server{Handler: r.model, ReadHeaderTimeout: 10 * time.Second}).Serve(r.modelLn)
	logf, err := os.Create(filepath.Join(s.dir, "versitygw.log"))
	if err != nil {
		return err
	}
	if r.s3, err = s3server.Start(sctx, filepath.Join(s.dir, "s3"), logf); err != nil {
		return err
	}
	// The soak's own blob store (the starter's documents, the verifier's
	// reads) talks to versitygw directly; the AWS SDK reads the
	// credentials from the environment, which the workers inherit too.
	for _, kv := range r.s3.Env {
		k, v, _ := strings.Cut(kv, "=")
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}
	if s.blobURL, err = r.s3.Bucket(sctx, r.bucket, false, r.s3.Endpoint); err != nil {
		return err
	}
	pgURL, err := url.Parse(s.claimsDB)
	if err != nil {
		return err
	}
	upstream := map[string]string{
		depFrontend: s.server.hostPort(),
		depPostgres: pgURL.Host,
		depStripe:   strings.TrimPrefix(s.simURL, "http://"),
		depModel:    r.modelLn.Addr().String(),
		depS3:       strings.TrimPrefix(r.s3.Endpoint, "http://"),
	}
	ports, err := freePorts(s.o.Workers)
	if err != nil {
		return err
	}
	for i := 1; i <= s.o.Workers; i++ {
		name := fmt.Sprintf("worker-%d", i)
		r.links[name] = map[string]*netfault.Link{}
		r.metrics[name] = fmt.Sprintf("127.0.0.1:%d", ports[i-1])
		for _, d := range deps {
			l, err := r.proxy.Link(name+"-"+d, upstream[d])
			if err != nil {
				return err
			}
			r.links[name][d] = l
		}
	}
	return nil
}

// faultEnv is worker's environment in the fault soak: every address it
// dials is its own link's.
func (s *soak) faultEnv(worker string) ([]string, error) {
	r := s.rig
	l := r.links[worker]
	pg, err := url.Parse(s.claimsDB)
	if err != nil {
		return nil, err
	}
	pg.Host = l[depPostgres].Addr
	return append(s.workerEnv(),
		"TEMPORAL_ADDRESS="+l[depFrontend].Addr,
		"CLAIMS_DB="+pg.String(),
		"STRIPE_API_BASE=http://"+l[depStripe].Addr,
		"STRIPE_TIMEOUT="+stripeTimeout.String(),
		"MODEL_PROVIDER=openai", "MODEL_BASE_URL=http://"+l[depModel].Addr+"/v1", "MODEL_NAME=sim",
		"BLOB_URL="+s3server.URL(r.bucket, "http://"+l[depS3].Addr),
		"METRICS_ADDR="+r.metrics[worker],
	), nil
}

func (r *faultRig) stop() {
	if r == nil {
		return
	}
	r.proxy.Stop()
	if r.modelLn != nil {
		r.modelLn.Close()
	}
	if r.s3 != nil {
		r.s3.Stop()
	}
}

// runFaults applies the schedule from begin until it is done or ctx ends,
// recording each window in the chaos record. A fault the rig cannot apply
// or heal ends the soak with an error: the run would not be what it says.
func (s *soak) runFaults(ctx context.Context, begin time.Time, plan []plannedFault) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(plan))
	for _, p := range plan {
		wg.Go(func() {
			if !sleep(ctx, time.Until(begin.Add(p.At))) {
				return
			}
			win := faultWindow{plannedFault: p}
			if p.Dep == depFrontend && p.Fault.Kind == netfault.Partition {
				win.Held = s.waitHolding(ctx, p.Worker)
			}
			link := s.rig.links[p.Worker][p.Dep]
			heal, err := link.Apply(p.Fault)
			if err != nil {
				errs <- err
				return
			}
			win.From = time.Now()
			s.log.Debug("fault on", "worker", p.Worker, "dependency", p.Dep, "fault", p.Fault.String(), "for", p.For)
			sleep(context.WithoutCancel(ctx), p.For) // heal even when the soak is stopping
			if err := heal(); err != nil {
				errs <- err
			}
			win.To = time.Now()
			s.chaos.addFault(win)
		})
	}
	wg.Wait()
	close(errs)
	var all []string
	for err := range errs {
		all = append(all, err.Error())
	}
	if len(all) > 0 {
		return fmt.Errorf("injecting faults: %s", strings.Join(all, "; "))
	}
	return nil
}

// waitHolding waits up to 10 s for worker to hold an activity task, so the
// partition cuts it off with work in hand, and returns the slots it held.
func (s *soak) waitHolding(ctx context.Context, worker string) map[string]int {
	deadline := time.Now().Add(10 * time.Second)
	var held map[string]int
	for {
		held = slotsUsed(ctx, s.rig.metrics[worker])
		if held["ActivityWorker"] > 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return held
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slotsUsed reads a worker's task slots in use by worker type, and its
// sticky cache's size (StickyCache), from its Prometheus endpoint.
func slotsUsed(ctx context.Context, addr string) map[string]int {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	samples, err := promtext.Get(ctx, "http://"+addr+"/metrics", "temporal_worker_task_slots_used", "temporal_sticky_cache_size")
	if err != nil {
		return nil
	}
	out := map[string]int{}
	for _, s := range samples {
		kind := s.Label("worker_type")
		if s.Name == "temporal_sticky_cache_size" {
			kind = "StickyCache"
		}
		if kind != "" {
			out[kind] += int(s.Value)
		}
	}
	return out
}
