package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
	"github.com/durableclaims/durableclaims/workflows"
)

// The scaling workload: the auto-approve claim workload of the claims
// measurement (same -n, -concurrency, -reps, same start and outcome check)
// with 1, 2 and 4 worker processes (-scaling-workers) sharing one
// PostgreSQL claims store and one Temporal server, and where the CPU goes
// while they run.
//
// Which server (-scaling-servers, default both, in this order): "dev", the
// bench's own dev server, the one the ceiling, baseline and claims
// workloads ran on a moment before, so claims/s per worker count sits
// beside the baseline of the same run, on the same server, at the same
// concurrency, which is the comparison the issue asks for; and "cluster", a
// real Temporal server on PostgreSQL (testbed/cluster), the production
// shape, because the dev server cannot show what more workers do to a
// server: it keeps every workflow on one history shard and writes through
// one SQLite connection, so it serialises before the cores run out. Each
// server serves all three worker counts. The cluster's PostgreSQL is its
// own, not the claims store's, so the CPU of Temporal's persistence and of
// the claims store are told apart (separate databases in production too).
// At the default -n and -reps the two take about 4 minutes on the 2-core
// machine (1½ and 2, the cluster's start included); -n and -reps scale
// them down, -scaling-servers dev drops the cluster.
//
// The scaling workers get their own task queue so the SQLite claims worker
// of the other workloads, which stays up, never takes one of their tasks.
const scalingQueue = "bench-scaling"

// scaleTarget is the Temporal server the worker counts run against.
type scaleTarget struct {
	key, label string
	address    string
	client     client.Client
	serverPID  func() int
	// serverPprof is the server's /debug/pprof base URL (cluster only:
	// the CLI's dev server serves none).
	serverPprof string
	// temporalPG is the server's own PostgreSQL (cluster only).
	temporalPG *pgserver.Server
	// auth is what a worker adds to its environment to reach the server
	// (the cluster's worker token).
	auth []string
}

// scalingWorkload is -only scaling: the workload above.
type scalingWorkload struct {
	workers []int    // -scaling-workers
	servers []string // -scaling-servers
}

func (*scalingWorkload) names() []string { return []string{"scaling"} }

func (s *scalingWorkload) flags(fs *flag.FlagSet) {
	s.workers, s.servers = []int{1, 2, 4}, []string{"dev", "cluster"}
	fs.Func("scaling-workers", "worker process counts the scaling workload runs, comma-separated (default 1,2,4)", func(v string) (err error) {
		s.workers, err = counts("scaling-workers", v)
		return err
	})
	fs.Func("scaling-servers", "Temporal servers the scaling workload runs against, comma-separated: dev (the bench's dev server), cluster (a real server on PostgreSQL, installed by make temporal-server); default dev,cluster", func(v string) error {
		s.servers = strings.Split(v, ",")
		for _, srv := range s.servers {
			if srv != "dev" && srv != "cluster" {
				return fmt.Errorf("bad -scaling-servers %q: dev, cluster", v)
			}
		}
		return nil
	})
}

// preflight fails when the real server the cluster target needs is not
// installed.
func (s *scalingWorkload) preflight() error {
	if slices.Contains(s.servers, "cluster") {
		if _, _, err := cluster.Binaries(); err != nil {
			return fmt.Errorf("%w (or -scaling-servers dev)", err)
		}
	}
	return nil
}

// run runs the workload against each server in s.servers.
func (s *scalingWorkload) run(ctx context.Context, e *env, res *results) error {
	res.scaleServers, res.scaleWorkers = s.servers, s.workers
	began := time.Now()
	pg, err := pgserver.Start(ctx, filepath.Join(e.dir, "scaling-claims-pg"), pgserver.Options{})
	if err != nil {
		return fmt.Errorf("scaling: claims store PostgreSQL: %w", err)
	}
	defer pg.Stop()
	url, err := pg.CreateDatabase(ctx, "claims")
	if err != nil {
		return err
	}
	// The bench registers each claim in the store before starting it, as
	// the starter does: on the same PostgreSQL the workers share.
	st, err := store.Open(url)
	if err != nil {
		return fmt.Errorf("scaling: claims store: %w", err)
	}
	defer st.Close()
	for _, srv := range s.servers {
		t, stop, err := e.scaleTarget(ctx, srv)
		if err != nil {
			return err
		}
		err = e.scaleOn(ctx, res, t, st, url, pg, s.workers)
		stop()
		if err != nil {
			return fmt.Errorf("scaling on the %s: %w", t.label, err)
		}
	}
	res.Values["scaling_seconds"] = time.Since(began).Seconds()
	fmt.Fprintf(os.Stderr, "  scaling took %s\n", time.Since(began).Round(time.Second))
	return nil
}

func (e *env) scaleTarget(ctx context.Context, srv string) (scaleTarget, func(), error) {
	switch srv {
	case "dev":
		return scaleTarget{key: "dev", label: "dev server", address: e.server.FrontendHostPort(), client: e.client,
			serverPID: func() int { return e.devPID }}, func() {}, nil
	case "cluster":
		t0 := time.Now()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		c, err := cluster.Start(sctx, filepath.Join(e.dir, "scaling-cluster"), cluster.Options{})
		if err != nil {
			return scaleTarget{}, nil, fmt.Errorf("scaling: cluster: %w", err)
		}
		o := c.ClientOptions(temporalauth.RoleStarter)
		o.DataConverter, o.FailureConverter = e.dc, e.fc
		cl, err := client.Dial(o)
		if err != nil {
			c.Stop()
			return scaleTarget{}, nil, err
		}
		fmt.Fprintf(os.Stderr, "  scaling: Temporal server %s on PostgreSQL started in %s at %s\n", cluster.ServerVersion,
			time.Since(t0).Round(time.Second), c.Address())
		return scaleTarget{key: "cluster", label: "Temporal cluster on PostgreSQL", address: c.Address(), client: cl,
				serverPID: c.PID, serverPprof: c.PprofURL(), temporalPG: c.Postgres(), auth: c.AuthEnv(temporalauth.RoleWorker)},
			func() { cl.Close(); c.Stop() }, nil
	}
	return scaleTarget{}, nil, fmt.Errorf("-scaling-servers: unknown server %q (dev, cluster)", srv)
}

func (e *env) scaleClaims(t scaleTarget, st *store.Store, tag string) flow {
	return flow{key: "scaling", name: "ClaimWorkflow, auto-approve, PostgreSQL store", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.startClaimOn(ctx, st, t.client, scalingQueue, fmt.Sprintf("bench-scale-%s-%05d-%d", tag, i, seq.Add(1)), "640.00", workflows.Options{})
	}, want: workflows.StatusPaid}
}

// scaleOn measures each worker count of counts against one server.
func (e *env) scaleOn(ctx context.Context, res *results, t scaleTarget, st *store.Store, url string, claimsPG *pgserver.Server, counts []int) error {
	largest := slices.Max(counts)
	var estimate float64 // claims/s expected, to size the profile
	for _, n := range counts {
		prefix := fmt.Sprintf("scaling_%s_%dw", t.key, n)
		workers := make([]*proc, n)
		for i := range workers {
			var err error
			workers[i], err = e.spawnClaimsWorker(fmt.Sprintf("scaling-%s-%dw-%d", t.key, n, i),
				append([]string{"CLAIMS_DB=" + url, "TEMPORAL_ADDRESS=" + t.address, "CLAIMS_TASK_QUEUE=" + scalingQueue}, t.auth...)...)
			if err != nil {
				stopAll(workers)
				return err
			}
		}
		pgl := pgLog(claimsPG)
		err := func() error {
			// Warm every new worker (connections, caches) before measuring.
			warm, err := e.throughput(ctx, e.scaleClaims(t, st, fmt.Sprintf("%s-%dw-warm", t.key, n)), min(20*n, max(e.o.n, 20)))
			if err != nil {
				return fmt.Errorf("warm-up: %w", err)
			}
			if estimate == 0 {
				estimate = warm
			}
			groups := []cpuGroup{
				{name: "workers", pids: pids(workers)},
				{name: "server", pids: []int{t.serverPID()}},
				{name: "pg_claims", pids: []int{postmasterPID(claimsPG)}, tree: true},
				{name: "bench", pids: []int{os.Getpid()}},
			}
			if t.temporalPG != nil {
				groups = append(groups, cpuGroup{name: "pg_temporal", pids: []int{postmasterPID(t.temporalPG)}, tree: true})
			}
			var use cpuUsage
			for rep := 1; rep <= e.o.reps; rep++ {
				var prof *profileRun
				if n == largest && rep == e.o.reps {
					prof = e.startProfile(ctx, workers, t.serverPprof, "scaling-"+t.key, e.o.n, estimate)
				}
				rate, err := e.measure(ctx, e.scaleClaims(t, st, fmt.Sprintf("%s-%dw-r%d", t.key, n, rep)), e.o.n, groups, &use)
				if err != nil {
					return err
				}
				res.add(prefix+"_per_s", rate)
				estimate = rate
				fmt.Fprintf(os.Stderr, "  rep %d %-32s %7.1f /s\n", rep, fmt.Sprintf("scaling, %s, %d worker(s)", t.key, n), rate)
				if prof != nil {
					if err := prof.finish(res, "scaling_"+t.key); err != nil {
						fmt.Fprintf(os.Stderr, "  scaling: worker profile: %v\n", err)
					}
				}
			}
			use.record(res, prefix, e.o.n*e.o.reps)
			var others []string
			for _, name := range use.topOthers(3) {
				others = append(others, fmt.Sprintf("%s %.2f", name, use.others[name]/clockTicks()/use.wall))
			}
			fmt.Fprintf(os.Stderr, "  %d worker(s): CPU in cores: workers %.2f, server %.2f, PostgreSQL (claims) %.2f, PostgreSQL (Temporal) %.2f, bench %.2f; machine busy %.2f of %d (irq+softirq %.2f), steal %.2f; busiest others: %s\n",
				n, use.cores("workers"), use.cores("server"), use.cores("pg_claims"), use.cores("pg_temporal"), use.cores("bench"),
				use.cores("machine_busy"), runtime.NumCPU(), use.cores("machine_irq"), use.cores("machine_steal"), strings.Join(others, ", "))
			return nil
		}()
		// Read the logs before the workers stop: what a drain logs ("worker
		// stopping") is not a problem of the measurement.
		logProblems(res, prefix, append(workerLogs(e.dir, workers), pgl))
		stopAll(workers)
		if err != nil {
			return fmt.Errorf("%d worker(s): %w", n, err)
		}
	}
	return nil
}

func pids(ps []*proc) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.cmd.Process.Pid
	}
	return out
}

// stopAll drains the workers at once (SIGTERM) and waits for all of them.
func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		if p != nil {
			wg.Go(p.stop)
		}
	}
	wg.Wait()
}

// logSource is a log to read for problems from offset on.
type logSource struct {
	name, path string
	offset     int64
	// severity is the part of a problem line that says it is one.
	severity []string
}

func workerLogs(dir string, ps []*proc) []logSource {
	var out []logSource
	for _, p := range ps {
		if p != nil {
			out = append(out, logSource{name: p.name, path: filepath.Join(dir, p.name+".log"), severity: []string{"level=ERROR", "level=WARN"}})
		}
	}
	return out
}

// pgLog is the claims store's PostgreSQL log from its present end: errors
// the server logged (deadlocks, serialisation failures, connection limits)
// that a retried activity would hide.
func pgLog(pg *pgserver.Server) logSource {
	path := filepath.Join(pg.Dir, "postgres.log")
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	return logSource{name: "postgres (claims store)", path: path, offset: size, severity: []string{"ERROR:", "FATAL:", "PANIC:", "WARNING:"}}
}

// logProblems counts the warnings and errors in the logs and keeps a few
// distinct ones: a store error under load fails an activity, the activity
// is retried and the claim still completes, so throughput alone would hide it.
func logProblems(res *results, prefix string, logs []logSource) {
	var count int
	seen := map[string]bool{}
	var examples []string
	for _, l := range logs {
		f, err := os.Open(l.path)
		if err != nil {
			continue
		}
		if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
			f.Close()
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			at := -1
			for _, sev := range l.severity {
				if i := strings.Index(line, sev); i >= 0 && (at < 0 || i < at) {
					at = i
				}
			}
			if at < 0 {
				continue
			}
			count++
			// One example per message: from the severity on, without the
			// times and IDs before it; the first 80 characters tell
			// messages apart.
			msg := line[at:]
			key := l.name + msg[:min(len(msg), 80)]
			if i := strings.Index(msg, " msg="); i >= 0 {
				key = l.name + msg[:min(len(msg), i+60)]
			}
			if !seen[key] && len(seen) < 5 {
				seen[key] = true
				if len(msg) > 400 {
					msg = msg[:400] + "…"
				}
				examples = append(examples, fmt.Sprintf("%s, %s: %s", prefix, l.name, msg))
			}
		}
		f.Close()
	}
	res.Values[prefix+"_log_problems"] = float64(count)
	res.Notes = append(res.Notes, examples...)
	if count > 0 {
		fmt.Fprintf(os.Stderr, "  %s: the workers and the claims store's PostgreSQL logged %d warnings or errors, e.g.:\n", prefix, count)
		for _, x := range examples {
			fmt.Fprintf(os.Stderr, "    %s\n", x)
		}
	}
}

// CPU accounting from /proc: utime+stime of each process, in clock ticks.

type cpuGroup struct {
	name string
	pids []int
	// tree counts every descendant too, and the ones already reaped
	// (PostgreSQL's backends are children of the postmaster).
	tree bool
}

type procStat struct {
	ppid           int
	comm           string
	start          float64 // since boot, in ticks: tells a reused pid
	self, children float64 // utime+stime; cutime+cstime
}

type cpuSnap struct {
	at     time.Time
	groups map[string]float64
	// procs is every process, counted is those in a group: the rest is
	// what else ran on the machine (other tenants, the bench's idle workers).
	procs   map[int]procStat
	counted map[int]bool
	// The machine's: busy (user, nice, system, irq, softirq), of which
	// irq and softirq (loopback networking is largely softirq, charged to
	// no process), and time the hypervisor gave to other guests.
	busy, irq, steal float64
}

func readProcs() (map[int]procStat, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	out := map[int]procStat{}
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if s, err := readProcStat(pid); err == nil {
			out[pid] = s
		}
	}
	return out, nil
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// pid (comm) state ppid … : comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no comm", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	num := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
	comm := ""
	if j := bytes.IndexByte(b, '('); j >= 0 && j < i {
		comm = string(b[j+1 : i])
	}
	if strings.HasPrefix(comm, "kworker/") {
		comm = "kworker" // the rest names the work queue of the moment
	}
	// After comm: state(0) ppid(1) … utime(11) stime(12) cutime(13)
	// cstime(14) … starttime(19).
	return procStat{ppid: int(num(1)), comm: comm, start: num(19), self: num(11) + num(12), children: num(13) + num(14)}, nil
}

// measure runs w as throughput does and adds the CPU each group used
// meanwhile to use.
func (e *env) measure(ctx context.Context, w flow, n int, groups []cpuGroup, use *cpuUsage) (float64, error) {
	before, err := snapshot(groups)
	if err != nil {
		return 0, err
	}
	rate, err := e.throughput(ctx, w, n)
	if err != nil {
		return 0, err
	}
	if w.settle != nil {
		w.settle(ctx)
	}
	after, err := snapshot(groups)
	if err != nil {
		return 0, err
	}
	use.add(before, after)
	return rate, nil
}

func snapshot(groups []cpuGroup) (cpuSnap, error) {
	s := cpuSnap{at: time.Now(), groups: map[string]float64{}, counted: map[int]bool{}}
	procs, err := readProcs()
	if err != nil {
		return s, err
	}
	s.procs = procs
	kids := map[int][]int{}
	for pid, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], pid)
	}
	for _, g := range groups {
		var sum float64
		for _, pid := range g.pids {
			p, ok := procs[pid]
			if !ok {
				continue
			}
			sum += p.self
			s.counted[pid] = true
			if !g.tree {
				continue
			}
			sum += p.children
			queue := slices.Clone(kids[pid])
			for len(queue) > 0 {
				c := queue[0]
				queue = queue[1:]
				sum += procs[c].self
				s.counted[c] = true
				queue = append(queue, kids[c]...)
			}
		}
		s.groups[g.name] = sum
	}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return s, fmt.Errorf("/proc/stat: unexpected %q", line)
	}
	field := func(k int) float64 { v, _ := strconv.ParseFloat(f[k], 64); return v }
	s.busy = field(1) + field(2) + field(3) + field(6) + field(7)
	s.irq = field(6) + field(7)
	s.steal = field(8)
	return s, nil
}

// cpuUsage adds up CPU time over the measured repetitions.
type cpuUsage struct {
	wall  float64
	ticks map[string]float64
	// others is CPU time of processes outside the groups, by name.
	others map[string]float64
}

func (u *cpuUsage) add(a, b cpuSnap) {
	if u.ticks == nil {
		u.ticks, u.others = map[string]float64{}, map[string]float64{}
	}
	u.wall += b.at.Sub(a.at).Seconds()
	for k, v := range b.groups {
		u.ticks[k] += v - a.groups[k]
	}
	u.ticks["machine_busy"] += b.busy - a.busy
	u.ticks["machine_irq"] += b.irq - a.irq
	u.ticks["machine_steal"] += b.steal - a.steal
	for pid, p := range b.procs {
		if b.counted[pid] || a.counted[pid] {
			continue
		}
		// A process that started in the window counts whole; one that
		// ended in it is lost (it is in "other" but not named).
		d := p.self - a.procs[pid].self
		if q, ok := a.procs[pid]; ok && q.start != p.start {
			d = p.self // the pid was reused
		}
		if d > 0 {
			u.others[p.comm] += d
		}
	}
}

// msPerClaim is group's CPU in u, in ms a claim of claims.
func msPerClaim(u *cpuUsage, group string, claims int) float64 {
	return 1000 * u.ticks[group] / clockTicks() / float64(claims)
}

// stackMS is the CPU of every group in u, in ms a claim of claims: the
// stack's own, what the machine would spend if it ran only these.
func (u *cpuUsage) stackMS(groups []cpuGroup, claims int) (ms float64) {
	for _, g := range groups {
		ms += msPerClaim(u, g.name, claims)
	}
	return ms
}

// merge adds what v measured to u.
func (u *cpuUsage) merge(v cpuUsage) {
	if u.ticks == nil {
		u.ticks, u.others = map[string]float64{}, map[string]float64{}
	}
	u.wall += v.wall
	for k, t := range v.ticks {
		u.ticks[k] += t
	}
	for k, t := range v.others {
		u.others[k] += t
	}
}

// topOthers are the busiest processes outside the groups, by name.
func (u cpuUsage) topOthers(k int) []string {
	names := make([]string, 0, len(u.others))
	for n := range u.others {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(u.others[b], u.others[a]) })
	return names[:min(k, len(names))]
}

// cores is the group's CPU time over the wall time: 1.0 is one core busy.
func (u cpuUsage) cores(name string) float64 {
	if u.wall == 0 {
		return 0
	}
	return u.ticks[name] / clockTicks() / u.wall
}

// record puts the cores each group used, and its CPU time per claim of the
// claims measured, in the results.
func (u cpuUsage) record(res *results, prefix string, claims int) {
	for name, t := range u.ticks {
		res.Values[prefix+"_cpu_"+name+"_cores"] = u.cores(name)
		res.Values[prefix+"_cpu_"+name+"_ms_per_claim"] = 1000 * t / clockTicks() / float64(claims)
	}
	for _, n := range u.topOthers(3) {
		if c := u.others[n] / clockTicks() / u.wall; c >= 0.01 {
			res.Values[prefix+"_cpu_other_process_"+n+"_cores"] = c
		}
	}
	res.Values[prefix+"_cpu_seconds_measured"] = u.wall
	res.Values["cpus"] = float64(runtime.NumCPU())
}

var clockTicks = sync.OnceValue(func() float64 {
	// AT_CLKTCK (17) from the auxiliary vector: what /proc counts in.
	if b, err := os.ReadFile("/proc/self/auxv"); err == nil {
		for i := 0; i+16 <= len(b); i += 16 {
			if binary.NativeEndian.Uint64(b[i:]) == 17 {
				if v := binary.NativeEndian.Uint64(b[i+8:]); v > 0 {
					return float64(v)
				}
			}
		}
	}
	return 100
})

// devServerPID is the dev server: the bench's child running start-dev.
func devServerPID() int {
	procs, _ := readProcs()
	for pid, p := range procs {
		if p.ppid != os.Getpid() {
			continue
		}
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && bytes.Contains(cmd, []byte("start-dev")) {
			return pid
		}
	}
	return 0
}

func postmasterPID(pg *pgserver.Server) int { return pgserver.PostmasterPID(pg.Dir) }

// The workers' profile: a CPU profile of every worker while the largest
// worker count runs, merged and read into where their time goes.

type profileRun struct {
	paths   []string // the workers'
	server  string   // the server's, when it serves /debug/pprof
	seconds int
	done    chan error
}

// startProfile asks each worker, and the server when serverPprof is set,
// for a CPU profile covering most of a run of n claims at rate claims/s;
// nil when the run is too short to profile.
func (e *env) startProfile(ctx context.Context, ws []*proc, serverPprof, name string, n int, rate float64) *profileRun {
	if rate <= 0 {
		return nil
	}
	expected := float64(n) / rate
	secs := int(0.7 * expected)
	if secs < 2 {
		return nil
	}
	dir := filepath.Dir(e.o.jsonOut)
	if e.o.jsonOut == "" {
		dir = e.dir
	}
	p := &profileRun{seconds: secs, done: make(chan error, len(ws)+1)}
	fetch := func(base, path string) {
		// Skip the ramp-up: the first claims start all at once.
		time.Sleep(time.Duration(0.1 * expected * float64(time.Second)))
		p.done <- fetchProfile(ctx, base, secs, path)
	}
	for i, w := range ws {
		path := filepath.Join(dir, fmt.Sprintf("%s-worker-%d.pprof", name, i))
		p.paths = append(p.paths, path)
		go fetch(w.metrics, path)
	}
	if serverPprof != "" {
		p.server = filepath.Join(dir, fmt.Sprintf("%s-server.pprof", name))
		go fetch(serverPprof, p.server)
	}
	return p
}

func fetchProfile(ctx context.Context, base string, secs int, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// profileCategories sort a sample by the frames of its stack, first match
// wins: GC first (an allocation's assist is the collector's time), the
// store and HTTP before gRPC (each is a different connection), then the
// SDK's workflow and activity machinery, this project's code, the runtime.
type profileCategory struct {
	key, label string
	frames     []string
}

var profileCategories = []profileCategory{
	{"gc", "garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain"}},
	{"store", "claims store (database/sql, pgx)", []string{"database/sql.", "github.com/jackc/pgx", "durableclaims/internal/store."}},
	{"http", "Stripe and other HTTP", []string{"github.com/stripe/stripe-go", "net/http."}},
	{"grpc", "gRPC with the Temporal server", []string{"google.golang.org/grpc"}},
	{"workflow", "workflow tasks (SDK, replay, workflow code)", []string{"go.temporal.io/sdk/internal.(*workflow", "go.temporal.io/sdk/internal.(*coroutineState)", "durableclaims/workflows"}},
	{"activity", "activities (this project's code, SDK)", []string{"durableclaims/", "go.temporal.io/sdk/internal.(*activityTaskHandlerImpl)"}},
	{"sdk", "other SDK", []string{"go.temporal.io/"}},
	{"runtime", "Go runtime (scheduler, syscalls)", []string{"runtime."}},
	{"other", "other", nil},
}

// finish waits for the profiles and summarises them, merged, with `go tool
// pprof -traces` (the module requires no pprof parser).
func (p *profileRun) finish(res *results, key string) error { // key: the results' prefix, e.g. scaling_dev
	if err := p.wait(); err != nil {
		return err
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("summarising the worker profiles needs the go command on PATH: %w", err)
	}
	cores, parts, err := summarise(goBin, p.paths, profileCategories, res, key+"_profile_", p.seconds)
	if err != nil {
		return err
	}
	res.Values[key+"_profile_seconds"] = float64(p.seconds)
	res.Values[key+"_profile_workers"] = float64(len(p.paths))
	res.Values[key+"_profile_worker_cores"] = cores
	fmt.Fprintf(os.Stderr, "  the %d workers' profile (%s…, %d s): %.2f cores; %s\n", len(p.paths), p.paths[0], p.seconds, cores, parts)
	if p.server == "" {
		return nil
	}
	cores, parts, err = summarise(goBin, []string{p.server}, serverProfileCategories, res, key+"_server_profile_", p.seconds)
	if err != nil {
		return err
	}
	res.Values[key+"_server_profile_cores"] = cores
	fmt.Fprintf(os.Stderr, "  the server's profile (%s, %d s): %.2f cores; %s\n", p.server, p.seconds, cores, parts)
	return nil
}

// wait waits for every profile; the first error is returned.
func (p *profileRun) wait() error {
	n := len(p.paths)
	if p.server != "" {
		n++
	}
	var first error
	for range n {
		if err := <-p.done; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// summarise merges CPU profiles with `go tool pprof -traces`, records each
// category's share under prefix and returns the cores they used over secs
// and the shares as text.
func summarise(goBin string, paths []string, cats []profileCategory, res *results, prefix string, secs int) (float64, string, error) {
	out, err := exec.Command(goBin, append([]string{"tool", "pprof", "-traces"}, paths...)...).Output()
	if err != nil {
		return 0, "", fmt.Errorf("go tool pprof -traces %s: %w", strings.Join(paths, " "), err)
	}
	byCat, total := classifyTraces(out, cats)
	var parts []string
	for _, c := range cats {
		if total > 0 {
			pct := 100 * byCat[c.key].Seconds() / total.Seconds()
			res.Values[prefix+c.key+"_pct"] = pct
			parts = append(parts, fmt.Sprintf("%s %.0f %%", c.label, pct))
		}
	}
	return total.Seconds() / float64(secs), strings.Join(parts, ", "), nil
}

// serverProfileCategories sort the Temporal server's samples the same
// way: persistence (its SQL on PostgreSQL) before the service that called
// it, the services before the gRPC transport that delivered their calls.
var serverProfileCategories = []profileCategory{
	{"gc", "garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain"}},
	{"persistence", "persistence (SQL on PostgreSQL)", []string{"go.temporal.io/server/common/persistence", "github.com/jackc/pgx", "database/sql.", "github.com/lib/pq"}},
	{"history", "history service", []string{"go.temporal.io/server/service/history"}},
	{"matching", "matching service", []string{"go.temporal.io/server/service/matching"}},
	{"frontend", "frontend service", []string{"go.temporal.io/server/service/frontend"}},
	{"grpc", "gRPC transport", []string{"google.golang.org/grpc"}},
	{"server", "other server code", []string{"go.temporal.io/server/"}},
	{"runtime", "Go runtime (scheduler, syscalls)", []string{"runtime."}},
	{"other", "other", nil},
}

// classifyTraces sorts the traces of a `go tool pprof -traces` listing
// into categories: first match wins.
func classifyTraces(out []byte, categories []profileCategory) (map[string]time.Duration, time.Duration) {
	byCat := map[string]time.Duration{}
	var total time.Duration
	for _, t := range parseTraces(out) {
		total += t.value
		byCat[firstMatch(t.frames, categories)] += t.value
	}
	return byCat, total
}
