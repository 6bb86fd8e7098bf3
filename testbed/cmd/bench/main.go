// Command bench measures durableclaims against bare Temporal in one run, on
// one dev server, with the same concurrency: the ceiling (an empty
// workflow), the naive baseline (nine no-op regular activities), the claim
// workflow's auto-approve path, the approval path, history per claim and,
// per path, its Temporal Cloud billable actions (costs.go), worker
// memory with claims parked, recovery after a worker is SIGKILLed, and
// claims/s as worker processes are added on a PostgreSQL claims store, with
// where the CPU goes (scaling.go).
//
//	bench [-n 200] [-concurrency 100] [-reps 3] [-parked 2000] [-inflight 1000] [-scaling-workers 1,2,4] [-scaling-servers dev,cluster] [-json var/bench/latest.json]
//	bench -plot var/bench/latest.json   # redraw a run's SVGs (plot.go), measuring nothing
//
// It starts everything it needs (dev server, stripesim, PostgreSQL,
// workers) and stops it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

type options struct {
	n, concurrency, reps         int
	approvals, parked            int
	surge, surgeBase             int
	pressureClaims               int
	pressureApprovals            int
	pressurePriority             int
	prioritySettings             []string
	priorityDefaults             bool
	timers                       int
	timersPace                   float64
	ratelimitTPM                 int
	ratelimitClaims              int
	ratelimitWorkers             int
	surgeMaxP95                  time.Duration
	surgeRest                    time.Duration
	inflight                     []int
	jsonOut, workerBin, temporal string
	only                         string
	serverArgs                   []string
	modelLatency                 modelsim.Latency
	latencyN                     int
	replayOpen, replayClosed     int
	replayConcurrency            []int
	scaleWorkers                 []int
	scaleServers                 []string
	peers                        peerOptions
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "noop-worker" {
		if err := runNoopWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "noop-worker:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.n, "n", 200, "workflows per throughput measurement")
	flag.IntVar(&o.concurrency, "concurrency", 100, "workflows in flight at once, for every throughput workload")
	flag.IntVar(&o.latencyN, "latency-n", 1000, "claims the real-model latency workload runs (-concurrency at a time); its claims/s is counted over the window in which every slot is busy, which needs several rounds of claims")
	flag.IntVar(&o.replayOpen, "replaycheck-open", 10000, "the replaycheck workload (-only replaycheck): claims parked, open runs for claimsctl replay-check")
	flag.IntVar(&o.replayClosed, "replaycheck-closed", 100, "the replaycheck workload: recently closed runs checked beside the open ones")
	flag.Func("replaycheck-concurrency", "the replaycheck workload: claimsctl replay-check --concurrency values, comma-separated (default 4,16)", func(v string) error {
		o.replayConcurrency = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q: want positive whole numbers", v)
			}
			o.replayConcurrency = append(o.replayConcurrency, n)
		}
		return nil
	})
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each throughput measurement")
	flag.IntVar(&o.approvals, "approvals", 50, "claims approved one at a time for the approve→transfer latency")
	flag.IntVar(&o.parked, "parked", 2000, "claims parked for approval when measuring worker memory")
	flag.IntVar(&o.surge, "surge", 20000, "the surge workload (-only surge): claims waiting for a decision at its last step")
	flag.IntVar(&o.surgeBase, "surge-base", 1000, "the surge workload: claims waiting at its first step, the yardstick of the last")
	flag.IntVar(&o.pressureClaims, "pressure-claims", 2000, "the priority workload (-only priority): new claims in flight while parked ones are approved")
	flag.IntVar(&o.pressureApprovals, "pressure-approvals", 50, "the priority workload: parked claims approved during the surge")
	o.prioritySettings = config.CatastropheSettings
	flag.Func("priority-settings", "the priority workload: its second run's worker settings, comma-separated KEY=value (default: the catastrophe week's, "+strings.Join(config.CatastropheSettings, ",")+")", func(v string) error {
		o.prioritySettings = nil
		for kv := range strings.SplitSeq(v, ",") {
			if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
				return fmt.Errorf("%q: want KEY=value", kv)
			}
			o.prioritySettings = append(o.prioritySettings, kv)
		}
		return nil
	})
	flag.BoolVar(&o.priorityDefaults, "priority-defaults", true, "the priority workload: run it first on the worker's defaults, the yardstick of the second run (false: the second run only)")
	flag.IntVar(&o.pressurePriority, "pressure-priority", 4, "the priority workload: the task priority the surge's new claims start at (starter --priority; 0: the default, 3)")
	flag.IntVar(&o.timers, "timers", 5000, "the timers workload (-only timers): claims whose escalations fall due together")
	flag.Float64Var(&o.timersPace, "timers-pace", 15, "the timers workload: claims started a second (at a pace the worker parks them, so that their deadlines stay together)")
	flag.IntVar(&o.ratelimitTPM, "ratelimit-tpm", 180000, "the ratelimit workload (-only ratelimit): modelsim's tokens per minute, and the workers' shared budget")
	flag.IntVar(&o.ratelimitClaims, "ratelimit-claims", 150, "the ratelimit workload: claims run at once on the auto path")
	flag.IntVar(&o.ratelimitWorkers, "ratelimit-workers", 3, "the ratelimit workload: workers sharing the budget")
	flag.DurationVar(&o.surgeRest, "surge-rest", 150*time.Second, "the surge workload: how long the worker rests, idle and again with the claims parked, before its memory is read a second time (the Go runtime collects garbage at least every two minutes and then returns it to the OS; 0: read once)")
	flag.DurationVar(&o.surgeMaxP95, "surge-max-p95", 0, "the surge workload fails when the inbox's first page p95 at its last step is above this (0: no check; CI sets it)")
	flag.Func("inflight", "claims in flight when the worker is SIGKILLed; a comma-separated list runs the kill once per value (default 1000,200)", func(v string) error {
		o.inflight = nil
		for _, f := range strings.Split(v, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
				return fmt.Errorf("bad -inflight %q", v)
			}
			o.inflight = append(o.inflight, n)
		}
		return nil
	})
	flag.StringVar(&o.jsonOut, "json", "var/bench/latest.json", "where to write the results as JSON")
	flag.StringVar(&o.workerBin, "worker", "bin/worker", "the claims worker binary")
	flag.StringVar(&o.temporal, "temporal", os.Getenv("TEMPORAL"), "the Temporal CLI (dev server)")
	flag.Func("server-arg", "extra argument for `temporal server start-dev` (repeatable)", func(v string) error {
		o.serverArgs = append(o.serverArgs, v)
		return nil
	})
	flag.Func("scaling-workers", "worker process counts the scaling workload runs, comma-separated (default 1,2,4)", func(v string) error {
		o.scaleWorkers = nil
		for _, f := range strings.Split(v, ",") {
			var n int
			if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
				return fmt.Errorf("bad -scaling-workers %q", v)
			}
			o.scaleWorkers = append(o.scaleWorkers, n)
		}
		return nil
	})
	flag.Func("scaling-servers", "Temporal servers the scaling workload runs against, comma-separated: dev (the bench's dev server), cluster (a real server on PostgreSQL, installed by make temporal-server); default dev,cluster", func(v string) error {
		o.scaleServers = strings.Split(v, ",")
		for _, s := range o.scaleServers {
			if s != "dev" && s != "cluster" {
				return fmt.Errorf("bad -scaling-servers %q: dev, cluster", v)
			}
		}
		return nil
	})
	flag.Func("model-latency", `how long modelsim takes to answer each call in the latency workload: "1.5s" or "1s-2s" (default 1s-2s)`, func(v string) error {
		l, err := modelsim.ParseLatency(v)
		o.modelLatency = l
		return err
	})
	flag.StringVar(&o.only, "only", "", "comma-separated workloads to run (ceiling,baseline,claims,scaling,approval,latency,history,parked,kill; anatomy, surge, replaycheck, priority, timers, ratelimit and peers run only when named); default all but anatomy")
	peerEngines := flag.String("peers", "dbos,restate,langgraph,durableclaims,durableclaims-pg", "the peers workload (-only peers): the engines, in order (durableclaims: the dev server; durableclaims-pg: a real Temporal server and the claims store on the peers' PostgreSQL)")
	flag.IntVar(&o.peers.claims, "peers-claims", 200, "the peers workload: claims on the auto-approve path, per engine")
	flag.IntVar(&o.peers.concurrency, "peers-concurrency", 20, "the peers workload: claims in flight on the auto-approve path")
	flag.IntVar(&o.peers.approvals, "peers-approvals", 20, "the peers workload: claims approved one at a time (approve → pay)")
	flag.IntVar(&o.peers.parked, "peers-parked", 2000, "the peers workload: claims parked for the memory measure")
	flag.IntVar(&o.peers.crashClaims, "peers-crash-claims", 100, "the peers workload: claims per kill point, each interrupted there by a SIGKILL of the engine's worker")
	flag.IntVar(&o.peers.crashConcurrency, "peers-crash-concurrency", 10, "the peers workload: claims in flight while the worker is killed")
	flag.BoolVar(&o.peers.waitSuspended, "peers-wait-suspended", false, "the peers workload: read Restate's worker RSS again once its server has suspended the parked claims (its inactivity timeout: about a minute more)")
	flag.IntVar(&o.peers.crashBatch, "peers-crash-batch", 10, "the peers workload: claims one SIGKILL interrupts, each held at the kill point until the batch is there (at most -peers-crash-concurrency)")
	flag.StringVar(&o.peers.dir, "peers-dir", "testbed/peers", "the peers workload: where `make peers` built the peers")
	replot := flag.String("plot", "", "draw the SVGs of an existing results JSON next to it (e.g. var/bench/latest.json) and exit, measuring nothing")
	parts := flag.String("plot-parts", "", "draw where a real-model claim's time goes, one bar per run given as label=results.json arguments, into this SVG and exit")
	flag.Parse()
	if *parts != "" {
		if err := drawParts(*parts, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "bench: drew %s\n", *parts)
		return
	}
	if *replot != "" {
		files, err := redraw(*replot)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "bench: drew %s\n", strings.Join(files, ", "))
		return
	}
	if o.inflight == nil {
		o.inflight = []int{1000, 200}
	}
	o.peers.engines = strings.Split(*peerEngines, ",")
	o.peers.modelLatencyMinMaxMs = [2]int{20, 40}
	if o.modelLatency.Max == 0 {
		o.modelLatency = modelsim.Latency{Min: time.Second, Max: 2 * time.Second}
	}
	if o.replayConcurrency == nil {
		o.replayConcurrency = []int{4, 16}
	}
	if o.scaleWorkers == nil {
		o.scaleWorkers = []int{1, 2, 4}
	}
	if o.scaleServers == nil {
		o.scaleServers = []string{"dev", "cluster"}
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func (o options) want(name string) bool {
	return o.only == "" || slices.Contains(strings.Split(o.only, ","), name)
}

// env is everything a run starts.
type env struct {
	dir    string
	server *testsuite.DevServer
	devPID int // the dev server's process, for its CPU time
	client client.Client
	// dc and fc encrypt payloads with the run's key (start).
	dc       converter.DataConverter
	fc       converter.FailureConverter
	sim      *stripesim.Server
	simURL   string
	commits  *commitLog
	o        options
	self     string
	children []*proc
	// store is the claims store the bench registers its claims in, as the
	// starter does; key signs the approvals adjuster-17 gives.
	store *store.Store
	key   authority.KeyFile
	// docs is the blob store the workers read claims' documents from.
	docs *blobs.Store
}

func run(o options) error {
	if o.temporal == "" {
		o.temporal = findTemporal()
	}
	// Fail now, not after the first workloads, when the real server the
	// scaling workload needs is not installed.
	if o.want("scaling") && slices.Contains(o.scaleServers, "cluster") {
		if _, _, err := cluster.Binaries(); err != nil {
			return fmt.Errorf("%w (or -scaling-servers dev)", err)
		}
	}
	dir, err := os.MkdirTemp("", "durableclaims-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := &env{dir: dir, o: o, commits: newCommitLog()}
	if e.self, err = os.Executable(); err != nil {
		return err
	}
	defer e.stopAll()
	res := &results{Date: time.Now().UTC().Format(time.RFC3339), Machine: machine(), Options: o, Values: map[string]float64{}, Flags: os.Args[1:]}
	recordSpeed(res, "start") // before the bench's own processes start
	if err := e.start(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: %s, dev server %s, %d workflows × %d reps at concurrency %d\n",
		res.Machine, e.server.FrontendHostPort(), o.n, o.reps, o.concurrency)

	noop, err := e.spawn("noop-worker", e.self, []string{"noop-worker"}, nil)
	if err != nil {
		return err
	}
	claims, err := e.spawnClaimsWorker("claims-worker")
	if err != nil {
		return err
	}
	ctx := context.Background()

	// Warm up every path once so no measurement pays for first use.
	lastRate := map[string]float64{}
	for _, w := range []workload{e.ceiling(), e.baseline(), e.autoClaims("warm")} {
		rate, err := e.throughput(ctx, w, 30)
		if err != nil {
			return fmt.Errorf("warm-up %s: %w", w.name, err)
		}
		lastRate[w.key] = rate
	}

	// What each workflow costs each process, from /proc: the yardsticks
	// run on the noop worker, the claims on the claims worker; the server
	// and the bench (client, stripesim) serve both.
	use := map[string]*cpuUsage{}
	for rep := 1; rep <= o.reps; rep++ {
		for _, w := range []workload{e.ceiling(), e.baseline(), e.autoClaims(fmt.Sprintf("r%d", rep))} {
			if !o.want(w.key) {
				continue
			}
			wp := noop
			if w.key == "claims" {
				wp = claims
			}
			groups := []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{wp.cmd.Process.Pid}},
				{name: "bench", pids: []int{os.Getpid()}}}
			// The claims worker's CPU profile over most of the last
			// repetition, kept as claims-worker-0.pprof beside the JSON.
			var prof *profileRun
			if w.key == "claims" && rep == o.reps {
				prof = e.startProfile(ctx, []*proc{claims}, "", "claims", o.n, lastRate["claims"])
			}
			if use[w.key] == nil {
				use[w.key] = &cpuUsage{}
			}
			rate, err := e.measure(ctx, w, o.n, groups, use[w.key])
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			res.add(w.key+"_per_s", rate)
			lastRate[w.key] = rate
			fmt.Fprintf(os.Stderr, "  rep %d %-32s %7.1f /s\n", rep, w.name, rate)
			if prof != nil {
				if err := prof.finish(res, "claims"); err != nil {
					fmt.Fprintf(os.Stderr, "  claims worker profile: %v\n", err)
				}
			}
		}
	}
	for key, u := range use {
		u.record(res, key, o.n*o.reps)
	}
	// Opt-in (-only anatomy): what each ingredient of a claim costs the server.
	if o.only != "" && o.want("anatomy") {
		if err := e.anatomy(ctx, res, noop); err != nil {
			return err
		}
	}
	// Right after the baseline and claims measurements, on the same server.
	if o.want("scaling") {
		if err := e.scaling(ctx, res); err != nil {
			return err
		}
	}
	if o.want("history") || o.want("claims") {
		if err := e.history(ctx, res, fmt.Sprintf("r%d", o.reps)); err != nil {
			return err
		}
		// One claim down each path: events, bytes and billable actions.
		if err := e.costs(ctx, res); err != nil {
			return err
		}
	}
	if o.want("approval") {
		if err := e.approvalLatency(ctx, res); err != nil {
			return err
		}
	}
	if o.want("latency") {
		if err := e.latency(ctx, res); err != nil {
			return fmt.Errorf("real model latency: %w", err)
		}
	}
	if o.want("kill") {
		for i, n := range o.inflight {
			claims.kill()
			if claims, err = e.spawnClaimsWorker(fmt.Sprintf("claims-worker-kill-%d", i)); err != nil {
				return err
			}
			if err := e.killRecovery(ctx, res, claims, n); err != nil {
				return err
			}
			// killRecovery leaves its replacement worker running; adopt it.
			claims = e.children[len(e.children)-1]
		}
	}
	// Opt-in (-only peers): the same claim on DBOS, Restate, LangGraph and
	// durableclaims, in one run (testbed/peers).
	if o.only != "" && o.want("peers") {
		if err := e.peers(ctx, res); err != nil {
			return fmt.Errorf("peers: %w", err)
		}
	}
	// Opt-in (-only surge): the catastrophe week's waiting room, first:
	// its checks count every claim waiting, and the others leave some.
	if o.only != "" && o.want("surge") {
		claims.stop()
		if claims, err = e.spawnClaimsWorker("claims-worker-surge"); err != nil {
			return err
		}
		if err := e.surge(ctx, res, claims); err != nil {
			return fmt.Errorf("surge: %w", err)
		}
	}
	// Opt-in (-only replaycheck): the deploy gate against thousands of open runs.
	if o.only != "" && o.want("replaycheck") {
		if err := e.replayCheck(ctx, res); err != nil {
			return fmt.Errorf("replaycheck: %w", err)
		}
	}
	// Opt-in (-only priority, -only ratelimit): the model under a surge.
	if o.only != "" && o.want("priority") {
		if err := e.priority(ctx, res); err != nil {
			return fmt.Errorf("priority: %w", err)
		}
	}
	if o.only != "" && o.want("timers") {
		if err := e.timers(ctx, res); err != nil {
			return fmt.Errorf("timers: %w", err)
		}
	}
	if o.only != "" && o.want("ratelimit") {
		if err := e.ratelimit(ctx, res); err != nil {
			return fmt.Errorf("ratelimit: %w", err)
		}
	}
	if o.want("parked") {
		claims.stop()
		if claims, err = e.spawnClaimsWorker("claims-worker-parked"); err != nil {
			return err
		}
		if err := e.parkedMemory(ctx, res, claims); err != nil {
			return err
		}
	}

	recordSpeed(res, "end")
	res.summarize()
	res.print(os.Stdout)
	if o.jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(o.jsonOut), 0o755); err != nil {
			return err
		}
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", o.jsonOut)
		// Drawn from the file just written, as -plot redraws it later.
		if files, err := redraw(o.jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, "bench: drawing:", err)
		} else {
			fmt.Fprintf(os.Stderr, "bench: drew %s\n", strings.Join(files, ", "))
		}
	}
	return nil
}

func (e *env) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	// The bench's client starts claims as the starter does: gRPC
	// compression as config.Dial chooses it for a loopback frontend.
	compression, err := config.GRPCCompression("127.0.0.1:7233")
	if err != nil {
		return err
	}
	// Payloads are encrypted, as by default everywhere: with a key made for
	// this run, which every process the bench starts inherits.
	keys := filepath.Join(e.dir, "codec-keys.json")
	kr, err := codec.CreateFile(keys, "bench")
	if err != nil {
		return err
	}
	if err := os.Setenv(codec.EnvKeysFile, keys); err != nil {
		return err
	}
	e.dc, e.fc = config.ConvertersFor(kr)
	e.server, err = testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath: e.o.temporal,
		ClientOptions: &client.Options{Namespace: "default", Logger: quiet, DataConverter: e.dc, FailureConverter: e.fc,
			ConnectionOptions: client.ConnectionOptions{GrpcCompression: compression}},
		LogLevel:  "error",
		Stdout:    io.Discard,
		Stderr:    io.Discard,
		ExtraArgs: append(serversettings.DevServerArgs(), e.o.serverArgs...),
	})
	if err != nil {
		return fmt.Errorf("dev server: %w", err)
	}
	e.client = e.server.Client()
	e.devPID = devServerPID()

	e.sim, err = stripesim.Open(stripesim.Config{DBPath: filepath.Join(e.dir, "stripesim.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	e.sim.SetHooks(stripesim.Hooks{BeforeCommit: func(_ *http.Request, key string) error {
		e.commits.record(key)
		return nil
	}})
	// Each claim's photo is stored under the claim's folder as it starts.
	if e.docs, err = blobs.Open(ctx, e.blobURL()); err != nil {
		return err
	}
	if e.store, err = store.Open(filepath.Join(e.dir, "claims.db")); err != nil {
		return err
	}
	if e.key, err = authority.GenerateKey("adjuster-17", false); err != nil {
		return err
	}
	if err := authority.AddKey(e.approversFile(), e.key); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.simURL = "http://" + ln.Addr().String()
	go http.Serve(ln, e.sim.Handler())
	return nil
}

func (e *env) stopAll() {
	for _, p := range e.children {
		p.stop()
	}
	if e.sim != nil {
		e.sim.Close()
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.docs != nil {
		e.docs.Close()
	}
	if e.server != nil {
		e.server.Stop()
	}
}

// proc is a worker process.
type proc struct {
	name    string
	cmd     *exec.Cmd
	metrics string
	done    chan struct{}
}

func (e *env) spawn(name, bin string, args, extraEnv []string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default", "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, extraEnv...)
	logf, err := os.Create(filepath.Join(e.dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); logf.Close(); close(p.done) }()
	e.children = append(e.children, p)
	return p, nil
}

func (e *env) approversFile() string { return filepath.Join(e.dir, "approvers.json") }

// spawnClaimsWorker starts bin/worker on the bench's SQLite store and dev
// server; extraEnv (KEY=value) overrides any of that.
func (e *env) spawnClaimsWorker(name string, extraEnv ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := e.spawn(name, e.o.workerBin, nil, append([]string{
		"STRIPE_API_BASE=" + e.simURL, "STRIPE_SECRET_KEY=sk_test_local",
		"CLAIMS_DB=" + filepath.Join(e.dir, "claims.db"), "MAIL_SPOOL=" + filepath.Join(e.dir, "mail"),
		"METRICS_ADDR=" + addr, "BLOB_URL=" + e.blobURL(), "APPROVERS_FILE=" + e.approversFile(),
		// The bench measures the engine: claims under no jurisdiction's
		// rules, whose unanswered waits expire (docs/law.md).
		"JURISDICTION_RULES_FILE=none", "FINAL_OUTCOME=reject",
	}, extraEnv...))
	if err != nil {
		return nil, err
	}
	p.metrics = "http://" + addr
	for range 100 { // until it serves
		if _, err := p.vars(); err == nil {
			return p, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%s did not come up; see %s", name, filepath.Join(e.dir, name+".log"))
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

type workerVars struct {
	Goroutines int   `json:"goroutines"`
	RSSBytes   int64 `json:"rss_bytes"`
	// Mem is the Go runtime's view (expvar's memstats).
	Mem struct {
		HeapInuse, HeapIdle, HeapReleased, StackInuse, NextGC uint64
	} `json:"memstats"`
}

// memorySnapshot saves the worker's heap profile under the temporary
// directory as <name>-heap.pb.gz (for go tool pprof), and its memory map
// as <name>-smaps, saying where.
func (p *proc) memorySnapshot(name string) {
	resp, err := http.Get(p.metrics + "/debug/pprof/heap")
	if err != nil {
		fmt.Fprintln(os.Stderr, "  no heap profile:", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	path := filepath.Join(os.TempDir(), name+"-heap.pb.gz")
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "  no heap profile:", err)
		return
	}
	fmt.Fprintln(os.Stderr, "  the worker's heap profile:", path)
	// And its memory map: what of the RSS is the binary, the Go heap, the
	// rest (SQLite's page caches are C memory, outside Go's heap).
	if m, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", p.cmd.Process.Pid)); err == nil {
		if err := os.WriteFile(filepath.Join(os.TempDir(), name+"-smaps"), m, 0o600); err == nil {
			fmt.Fprintln(os.Stderr, "  its memory map:", filepath.Join(os.TempDir(), name+"-smaps"))
		}
	}
}

func (p *proc) vars() (workerVars, error) {
	var v workerVars
	resp, err := http.Get(p.metrics + "/debug/vars")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	return v, json.NewDecoder(resp.Body).Decode(&v)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func findTemporal() string {
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	out, _ := exec.Command("go", "env", "GOPATH").Output()
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "temporal")
}

// commitLog is when stripesim committed each idempotency key's transfer.
type commitLog struct {
	mu   sync.Mutex
	at   map[string]time.Time
	wait map[string]chan struct{}
}

func newCommitLog() *commitLog {
	return &commitLog{at: map[string]time.Time{}, wait: map[string]chan struct{}{}}
}

func (c *commitLog) record(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.at[key]; ok {
		return
	}
	c.at[key] = time.Now()
	if ch, ok := c.wait[key]; ok {
		close(ch)
	}
}

// when returns a channel closed once key is committed.
func (c *commitLog) when(key string) (<-chan struct{}, func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if _, ok := c.at[key]; ok {
		close(ch)
	} else {
		c.wait[key] = ch
	}
	return ch, func() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.at[key] }
}

func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d cores (%s), %s", runtime.NumCPU(), model, runtime.Version())
}

func (e *env) blobURL() string { return "file://" + filepath.Join(e.dir, "blobs") + "?create_dir=true" }
