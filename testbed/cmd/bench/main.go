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
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// options are the flags every workload shares; a workload's own flags are
// its own (workload.go).
type options struct {
	n, concurrency, reps         int
	jsonOut, workerBin, temporal string
	docs                         string
	only                         string
	serverArgs                   []string
	// modelLatency is modelsim's answer time where a workload puts a
	// real-model worker under load (latency, priority).
	modelLatency modelsim.Latency
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
	flag.IntVar(&o.reps, "reps", 3, "repetitions of each throughput measurement")
	flag.StringVar(&o.jsonOut, "json", "var/bench/latest.json", "where to write the results as JSON")
	flag.StringVar(&o.docs, "docs", "", "a Markdown file (docs/performance.md) whose bench sections, between <!-- bench:NAME --> and <!-- /bench:NAME -->, this run rewrites with what it measured (NAME floor: the floor workload's tables)")
	flag.StringVar(&o.workerBin, "worker", "bin/worker", "the claims worker binary")
	flag.StringVar(&o.temporal, "temporal", os.Getenv("TEMPORAL"), "the Temporal CLI (dev server)")
	flag.Func("server-arg", "extra argument for `temporal server start-dev` (repeatable)", func(v string) error {
		o.serverArgs = append(o.serverArgs, v)
		return nil
	})
	flag.Func("model-latency", `how long modelsim takes to answer each call in the latency workload: "1.5s" or "1s-2s" (default 1s-2s)`, func(v string) error {
		l, err := modelsim.ParseLatency(v)
		o.modelLatency = l
		return err
	})
	flag.StringVar(&o.only, "only", "", "comma-separated workloads to run (ceiling,baseline,claims,floor,scaling,approval,latency,history,parked,kill,tracing; anatomy, surge, replaycheck, priority, timers, ratelimit and peers run only when named); default all but anatomy")
	all := workloads()
	for _, w := range all {
		w.flags(flag.CommandLine)
	}
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
	if o.modelLatency.Max == 0 {
		o.modelLatency = modelsim.Latency{Min: time.Second, Max: 2 * time.Second}
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if err := run(o, selected(all, o.only)); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// check refuses counts no measurement can be made with, naming the flag.
func (o options) check() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"-n", o.n}, {"-reps", o.reps}, {"-concurrency", o.concurrency}} {
		if f.v < 1 {
			return fmt.Errorf("%s must be at least 1, not %d", f.name, f.v)
		}
	}
	return nil
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
	// noop serves the yardsticks (noop.go); claims is the claims worker
	// the workloads share, which a workload that kills or restarts it
	// replaces.
	noop, claims *proc
	// lastRate is the latest rate of each throughput flow (by key), from
	// the warm-up on.
	lastRate map[string]float64
}

// run starts the bench's dev server, stripesim and workers, warms every
// path up, runs the workloads in order and writes the results.
func run(o options, ws []workload) error {
	if o.temporal == "" {
		o.temporal = findTemporal()
	}
	for _, w := range ws {
		if p, ok := w.(preflighter); ok {
			if err := p.preflight(); err != nil {
				return err
			}
		}
	}
	dir, err := os.MkdirTemp("", "durableclaims-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	e := &env{dir: dir, o: o, commits: newCommitLog(), lastRate: map[string]float64{}}
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
	if e.noop, err = e.spawn("noop-worker", e.self, []string{"noop-worker"}, nil); err != nil {
		return err
	}
	if e.claims, err = e.spawnClaimsWorker("claims-worker"); err != nil {
		return err
	}
	ctx := context.Background()
	if err := e.warmUp(ctx); err != nil {
		return err
	}
	for _, w := range ws {
		if err := w.run(ctx, e, res); err != nil {
			return err
		}
	}
	recordSpeed(res, "end")
	res.summarize()
	res.print(os.Stdout)
	if o.docs != "" {
		if err := res.writeDocs(o.docs); err != nil {
			return err
		}
	}
	return writeResults(res, o.jsonOut)
}

// warmUp runs every throughput path once so no measurement pays for
// first use.
func (e *env) warmUp(ctx context.Context) error {
	for _, w := range []flow{e.ceiling(), e.baseline(), e.autoClaims("warm")} {
		rate, err := e.throughput(ctx, w, 30)
		if err != nil {
			return fmt.Errorf("warm-up %s: %w", w.name, err)
		}
		e.lastRate[w.key] = rate
	}
	return nil
}

// writeResults writes the results as JSON to path (none if ""), and draws
// their SVGs from the file just written, as -plot redraws them later.
func writeResults(res *results, path string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: wrote %s\n", path)
	if files, err := redraw(path); err != nil {
		fmt.Fprintln(os.Stderr, "bench: drawing:", err)
	} else {
		fmt.Fprintf(os.Stderr, "bench: drew %s\n", strings.Join(files, ", "))
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

// stripesimRate lifts the workers' Stripe rate limit (25 a second, Stripe's
// test mode) for stripesim, which has none: the bench measures the engine,
// and a claim's two calls at 25 a second would cap a worker at 12.5 claims a
// second, near what it does. The outage workload puts the limit back.
const stripesimRate = "STRIPE_REQUESTS_PER_SECOND=10000"

// spawnClaimsWorker starts bin/worker on the bench's SQLite store and dev
// server; extraEnv (KEY=value) overrides any of that.
func (e *env) spawnClaimsWorker(name string, extraEnv ...string) (*proc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := e.spawn(name, e.o.workerBin, nil, append([]string{
		"STRIPE_API_BASE=" + e.simURL, "STRIPE_SECRET_KEY=sk_test_local", stripesimRate,
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

// committed says when key was committed, if it was.
func (c *commitLog) committed(key string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[key]
	return at, ok
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
