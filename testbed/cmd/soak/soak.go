package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
	"github.com/durableclaims/durableclaims/testbed/spoolwatch"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// soak is one run: what it started, and what it did to it.
type soak struct {
	o     options
	log   *slog.Logger
	runID string
	dir   string

	server temporalServer
	// pg is the PostgreSQL of the claims store (and of the Temporal server,
	// with -cluster); nil with the SQLite store.
	pg       *pgserver.Server
	claimsDB string
	sim      *stripesim.Server
	simHTTP  *http.Server
	simURL   string
	client   client.Client           // claimsctl's identity: reads, as the operator's tool does
	dc       converter.DataConverter // decodes what the workers wrote (their payload keys)
	starts   client.Client           // the starter's identity: starts claims
	store    *store.Store
	docs     *blobs.Store
	blobURL  string
	workers  []*supervisor
	chaos    chaos
	// rig is the -faults soak's toxiproxy, modelsim and versitygw.
	rig *faultRig
	// faultPlan is the -faults soak's schedule.
	faultPlan []plannedFault
	// spoolWatch counts the messages moved into the mail spool.
	spoolWatch *spoolwatch.Watch
	// key is the approver's signing key; its public half is in the
	// directory the workers read.
	key authority.KeyFile

	stopWorkersOnce sync.Once

	// mu guards workers and rollout while the -rollout soak adds to them.
	mu      sync.Mutex
	rollout rolloutReport
}

func newSoak(o options, log *slog.Logger) *soak {
	var b [3]byte
	_, _ = rand.Read(b[:])
	s := &soak{o: o, log: log, runID: hex.EncodeToString(b[:]), dir: o.Dir}
	if s.dir == "" {
		s.dir = filepath.Join("var", "soak", s.runID)
	}
	if s.o.Seed == 0 {
		var sb [8]byte
		_, _ = rand.Read(sb[:])
		s.o.Seed = binary.LittleEndian.Uint64(sb[:]) >> 1
	}
	return s
}

// prefix is what every workflow ID of this run starts with.
func (s *soak) prefix() string { return "soak-" + s.runID + "-" }

// expected is how long the run should take on a healthy system: the start
// window, the longest approval delay, and time for the last claims to
// finish through the kills. The server restart is placed within it.
func (s *soak) expected() time.Duration {
	start := time.Duration(float64(s.o.Claims) / s.o.Rate * float64(time.Second))
	return start + s.o.DecideWithin + 30*time.Second
}

// run sets everything up, applies the chaos while the claims run, and
// verifies once they are all terminal.
func (s *soak) run(ctx context.Context) (*summary, error) {
	begin := time.Now()
	sum := newSummary()
	sum.RunID, sum.Seed, sum.Dir, sum.StartedAt, sum.Options = s.runID, s.o.Seed, s.dir, begin.UTC(), s.o
	if err := s.setUp(ctx); err != nil {
		return nil, err
	}
	// One photo on disk that every claim names by path: the soak's starter
	// stores it in the blob store for each claim, as bin/starter does, and
	// the claim carries the reference.
	photo := filepath.Join(s.dir, "photo.jpg")
	if err := os.WriteFile(photo, []byte("a soak photo"), 0o644); err != nil {
		return nil, err
	}
	plan, err := planClaims(s.runID, s.o.Claims, photo, mrand.New(mrand.NewPCG(s.o.Seed, 0)))
	if err != nil {
		return nil, err
	}
	sum.Claims.Total = len(plan)
	s.log.Info("soak starting", "run", s.runID, "seed", s.o.Seed, "claims", len(plan), "rate_per_s", s.o.Rate,
		"expected", s.expected().Round(time.Second), "server", s.server.hostPort(), "stripesim", s.simURL, "dir", s.dir)

	if s.o.Faults {
		names := make([]string, len(s.workers))
		for i, w := range s.workers {
			names[i] = w.name
		}
		span := time.Duration(float64(s.o.Claims) / s.o.Rate * float64(time.Second))
		s.faultPlan = planFaults(s.o.Seed, names, span, s.o.Partition)
		fmt.Printf("fault schedule (seed %d): %d faults, from the first claim's start\n", s.o.Seed, len(s.faultPlan))
		for _, p := range s.faultPlan {
			fmt.Println("  " + p.String())
		}
	}
	phase := s.chaosPhase
	if s.o.Rollout {
		phase = s.rolloutPhase
	}
	appr, st, notFinished, err := phase(ctx, begin, plan)
	if err != nil {
		return nil, err
	}
	s.stopWorkers()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if len(notFinished) > 0 {
		s.log.Warn("timed out waiting for claims", "not_finished", len(notFinished))
	}

	s.log.Info("verifying", "claims", len(plan))
	sum.Starts.Retries, sum.Starts.AlreadyStarted = st.retries.Load(), st.alreadyDone.Load()
	s.fillChaos(sum)
	book := appr.decisions()
	sum.countDecisions(book)
	vctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	v := &verifier{client: s.client, dc: s.dc, store: s.store, sim: s.sim, chaos: &s.chaos, plan: plan, decisions: book, workerOf: s.workerOf, spoolWatch: s.spoolWatch,
		stripe: activities.NewStripeClient(activities.StripeConfig{APIBase: s.simURL}), spool: filepath.Join(s.dir, "mail"), sum: sum}
	if err := v.run(vctx); err != nil {
		return nil, err
	}
	if s.o.Rollout {
		s.checkRollout(vctx, plan, book, sum)
		s.mu.Lock()
		sum.Rollout = &s.rollout
		s.mu.Unlock()
	}
	sum.WallSeconds = time.Since(begin).Seconds()
	sum.Passed = len(sum.Discrepancies) == 0
	return sum, nil
}

// chaosPhase starts the claims, the killer, the approver and the server
// restart, and returns once every claim is terminal (or the timeout passed:
// notFinished lists the claims still running).
func (s *soak) chaosPhase(ctx context.Context, begin time.Time, plan []plannedClaim) (*approver, *starter, []string, error) {
	runCtx, cancel := context.WithDeadline(ctx, begin.Add(s.o.Timeout))
	defer cancel()

	killCtx, stopKiller := context.WithCancel(runCtx)
	var killerDone sync.WaitGroup
	if !s.o.Faults { // the fault soak breaks the network instead
		killerDone.Go(func() { killer(killCtx, s.workers, s.o.KillMin, s.o.KillMax, &s.chaos, s.log) })
	}
	defer func() { stopKiller(); killerDone.Wait() }()

	cliAuth, _ := s.server.auth(temporalauth.RoleClaimsctl)
	appr := newApprover(s.client, s.o.Temporal, s.server.hostPort(), cliAuth, s.prefix(), plan, s.o.DecideWithin, s.key, s.store, s.log.With("component", "approver"))
	apprCtx, stopApprover := context.WithCancel(runCtx)
	var approverDone sync.WaitGroup
	approverDone.Go(func() { appr.watch(apprCtx) })
	defer func() { stopApprover(); approverDone.Wait() }()

	// The restart and the starter are waited for on the way out, so neither
	// outlives the phase: a restart cut short by Ctrl-C or the timeout must
	// not start a server after tearDown stopped it.
	var background sync.WaitGroup
	defer func() { cancel(); background.Wait() }()
	restarted := make(chan error, 1)
	background.Go(func() {
		// The server's restart and PostgreSQL's, each at its own moment.
		var both sync.WaitGroup
		var serverErr, pgErr error
		both.Go(func() { serverErr = s.restartServer(runCtx, begin) })
		both.Go(func() { pgErr = s.restartPostgres(runCtx, begin) })
		var faultErr error
		if s.o.Faults {
			first := time.Now() // the schedule counts from the first claim's start
			both.Go(func() { faultErr = s.runFaults(runCtx, first, s.faultPlan) })
		}
		both.Wait()
		restarted <- errors.Join(serverErr, pgErr, faultErr)
	})
	st := &starter{client: s.starts, store: s.store, docs: s.docs, rate: s.o.Rate}
	started := make(chan error, 1)
	background.Go(func() { started <- st.run(runCtx, plan) })

	progressCtx, stopProgress := context.WithCancel(runCtx)
	defer stopProgress()
	go s.progress(progressCtx, st, appr, len(plan))

	ids := make([]string, len(plan))
	for i, p := range plan {
		ids[i] = p.Claim.ID
	}
	// On timeout this returns the claims still running and no error:
	// verification reports them.
	notFinished, err := s.waitTerminal(runCtx, ids, started, restarted)
	return appr, st, notFinished, err
}

// waitTerminal returns once every claim was started and is closed, and the
// server restart (if any) has happened; on timeout it returns the claims
// still running. Closed is judged by describing each claim, not by
// visibility, which may lag.
func (s *soak) waitTerminal(ctx context.Context, ids []string, started, restarted <-chan error) ([]string, error) {
	pending := map[string]bool{}
	for _, id := range ids {
		pending[id] = true
	}
	allStarted, restartDone := false, s.o.RestartAt == 0 && !s.o.Faults
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-started:
			started, allStarted = nil, err == nil
			if err != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("starting claims: %w", err)
			}
		case err := <-restarted:
			restarted, restartDone = nil, err == nil
			if err != nil && ctx.Err() == nil {
				return nil, fmt.Errorf("restarting a server or breaking the network: %w", err)
			}
		case <-tick.C:
		case <-ctx.Done():
			return keys(pending), nil
		}
		if allStarted {
			s.sweep(ctx, pending)
		}
		if allStarted && restartDone && len(pending) == 0 {
			return nil, nil
		}
	}
}

// sweep drops the claims whose workflows have closed from pending.
func (s *soak) sweep(ctx context.Context, pending map[string]bool) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, id := range keys(pending) { // a copy: the describers delete from pending
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			d, err := s.client.DescribeWorkflow(dctx, id, "")
			if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				mu.Lock()
				delete(pending, id)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// restartServer restarts the Temporal server at RestartAt of the expected
// duration, on the same ports and data. Workers and clients are not told:
// they reconnect on their own.
func (s *soak) restartServer(ctx context.Context, begin time.Time) error {
	if s.o.RestartAt == 0 {
		return nil
	}
	at := begin.Add(time.Duration(s.o.RestartAt * float64(s.expected())))
	if !sleep(ctx, time.Until(at)) {
		return nil
	}
	s.log.Info("restarting the "+s.server.name()+": SIGTERM, then start it on the same ports and data", "server", s.server.hostPort())
	r := serverRestart{Component: "temporal", StopAt: time.Now()}
	forced, err := s.server.restart(ctx)
	if err != nil {
		return err
	}
	r.Forced, r.ReadyAt = forced, time.Now()
	s.chaos.addRestart(r)
	s.log.Info(s.server.name()+" back", "down", r.ReadyAt.Sub(r.StopAt).Round(time.Millisecond), "sigkill_needed", r.Forced)
	return nil
}

// restartPostgres crashes PostgreSQL at PostgresRestartAt of the expected
// duration (immediate shutdown: no checkpoint, every connection cut,
// recovery from the WAL) and starts it again. The claims store and, with
// -cluster, the Temporal server lose their database while it is down.
func (s *soak) restartPostgres(ctx context.Context, begin time.Time) error {
	if s.pg == nil || s.o.PostgresRestartAt == 0 {
		return nil
	}
	at := begin.Add(time.Duration(s.o.PostgresRestartAt * float64(s.expected())))
	if !sleep(ctx, time.Until(at)) {
		return nil
	}
	s.log.Info("crashing PostgreSQL (immediate shutdown) and starting it again")
	r := serverRestart{Component: "postgres", StopAt: time.Now(), Forced: true}
	if err := s.pg.Kill(ctx); err != nil {
		return err
	}
	if err := s.pg.Restart(ctx); err != nil {
		return err
	}
	r.ReadyAt = time.Now()
	s.chaos.addRestart(r)
	s.log.Info("PostgreSQL back", "down", r.ReadyAt.Sub(r.StopAt).Round(time.Millisecond))
	return nil
}

// progress logs a line every 10 s so a long soak shows it is alive.
func (s *soak) progress(ctx context.Context, st *starter, appr *approver, total int) {
	begin := time.Now()
	for sleep(ctx, 10*time.Second) {
		kills, _ := s.chaos.snapshot()
		restarts := 0
		for _, w := range s.workers {
			restarts += w.restarts()
		}
		s.log.Info("progress", "elapsed", time.Since(begin).Round(time.Second), "started", fmt.Sprintf("%d/%d", st.started.Load(), total),
			"running", s.count(ctx, `ExecutionStatus = "Running"`), "waiting", s.count(ctx, `ClaimStatus = "waiting"`),
			"decided", len(appr.decisions()), "kills", len(kills), "worker_restarts", restarts)
	}
}

// count asks visibility how many of this run's claims match; "?" while the
// server is away.
func (s *soak) count(ctx context.Context, cond string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	resp, err := s.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
		Namespace: "default", Query: fmt.Sprintf(`WorkflowId STARTS_WITH %q AND %s`, s.prefix(), cond)})
	if err != nil {
		return "?"
	}
	return fmt.Sprint(resp.GetCount())
}

func (s *soak) fillChaos(sum *summary) {
	if s.o.Faults {
		log := s.chaos.faultLog()
		r := &faultReport{Injected: len(log), ByKind: map[string]int{}, ByDependency: map[string]int{}, Log: log}
		for _, links := range s.rig.links {
			r.Links += len(links)
		}
		for _, f := range log {
			r.ByKind[string(f.Fault.Kind)]++
			r.ByDependency[f.Dep]++
			if f.Held != nil {
				r.Held = append(r.Held, fmt.Sprintf("%s cut off from the %s for %s holding %d activity, %d workflow and %d local activity tasks, %d workflows cached",
					f.Worker, f.Dep, f.For, f.Held["ActivityWorker"], f.Held["WorkflowWorker"], f.Held["LocalActivityWorker"], f.Held["StickyCache"]))
			}
		}
		sum.Faults = r
	}
	kills, restarts := s.chaos.snapshot()
	c := &sum.Chaos
	sum.KillLog = kills
	c.Kills, c.Restarts, c.WorkerExits = len(kills), restarts, map[string]int{}
	for _, r := range restarts {
		c.ServerDowntimeSeconds += r.ReadyAt.Sub(r.StopAt).Seconds()
		if r.Component == "postgres" {
			c.PostgresRestarts++
			continue
		}
		c.ServerRestarts++
		c.ServerStopForced = c.ServerStopForced || r.Forced
	}
	for _, w := range s.workers {
		c.WorkerRestarts += w.restarts()
		for how, n := range w.exitCounts() {
			c.WorkerExits[how] += n
		}
	}
}

// setUp starts stripesim, the dev server and the workers, and connects.
func (s *soak) setUp(ctx context.Context) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	if err := s.startStripe(); err != nil {
		return err
	}
	var err error
	s.claimsDB = filepath.Join(s.dir, "claims.db")
	if s.o.Store == "postgres" {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		s.pg, err = pgserver.Start(pctx, filepath.Join(s.dir, "postgres"), pgserver.Options{})
		cancel()
		if err != nil {
			return err
		}
	}
	if s.o.Cluster {
		if s.server, err = startCluster(ctx, s.dir, s.pg, s.log); err != nil {
			return err
		}
	} else {
		dev, err := newDevServer(s.o.Temporal, s.dir)
		if err != nil {
			return err
		}
		s.server = dev
		if err := dev.start(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	if s.pg != nil {
		if s.claimsDB, err = s.pg.CreateDatabase(ctx, "claims"); err != nil {
			return err
		}
	}
	if err := s.dial(ctx); err != nil {
		return err
	}
	if s.store, err = store.Open(s.claimsDB); err != nil {
		return err
	}
	if s.o.Faults {
		if err := s.startFaultRig(ctx); err != nil {
			return err
		}
	} else {
		abs, err := filepath.Abs(filepath.Join(s.dir, "blobs"))
		if err != nil {
			return err
		}
		s.blobURL = "file://" + abs + "?create_dir=true"
	}
	if s.spoolWatch, err = spoolwatch.Start(filepath.Join(s.dir, "mail")); err != nil {
		return err
	}
	if s.docs, err = blobs.Open(ctx, s.blobURL); err != nil {
		return err
	}
	if s.key, err = authority.GenerateKey(approverID, false); err != nil {
		return err
	}
	if err := authority.AddKey(s.approversFile(), s.key); err != nil {
		return err
	}
	if !s.o.Rollout { // the rollout starts its builds' workers itself
		return s.startWorkers()
	}
	return nil
}

func (s *soak) startStripe() error {
	var err error
	s.sim, err = stripesim.Open(stripesim.Config{DBPath: filepath.Join(s.dir, "stripesim.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.simURL = "http://" + ln.Addr().String()
	s.simHTTP = &http.Server{Handler: s.sim.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.simHTTP.Serve(ln)
	return nil
}

// dial connects the soak's own client; its SDK log goes to a file, since
// every call during the server restart logs a retry. Payloads are
// encrypted, as by default everywhere: with a key made for this run, which
// the workers and the CLI calls inherit (CODEC_KEYS_FILE).
func (s *soak) dial(ctx context.Context) error {
	f, err := os.OpenFile(filepath.Join(s.dir, "client.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	keys := filepath.Join(s.dir, "codec-keys.json")
	kr, err := codec.CreateFile(keys, "soak")
	if err != nil {
		return err
	}
	if err := os.Setenv(codec.EnvKeysFile, keys); err != nil {
		return err
	}
	dc, fc := config.ConvertersFor(kr)
	s.dc = dc
	logger := sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn})))
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	as := func(role string) (client.Client, error) {
		_, creds := s.server.auth(role)
		return client.DialContext(dctx, client.Options{HostPort: s.server.hostPort(), Namespace: "default", Logger: logger, Credentials: creds,
			DataConverter: dc, FailureConverter: fc,
			ConnectionOptions: client.ConnectionOptions{TLSDisabled: true}}) // both servers are plaintext on loopback
	}
	if s.client, err = as(temporalauth.RoleClaimsctl); err != nil {
		return err
	}
	s.starts, err = as(temporalauth.RoleStarter)
	return err
}

// workerOf names the supervisor that started pid, or "".
func (s *soak) workerOf(pid int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.workers {
		if w.ran(pid) {
			return w.name
		}
	}
	return ""
}

func (s *soak) approversFile() string { return filepath.Join(s.dir, "approvers.json") }

func (s *soak) startWorkers() error {
	for i := 1; i <= s.o.Workers; i++ {
		name := fmt.Sprintf("worker-%d", i)
		env := s.workerEnv()
		if s.o.Faults {
			var err error
			if env, err = s.faultEnv(name); err != nil {
				return err
			}
		}
		w := newSupervisor(name, s.o.WorkerBin, s.dir, env, s.log)
		s.workers = append(s.workers, w)
		go w.run()
	}
	return nil
}

// stopWorkers drains the workers (SIGTERM, as a deploy would; SIGKILL after
// 25 s, past the worker's own 20 s drain budget).
func (s *soak) stopWorkers() {
	s.stopWorkersOnce.Do(func() {
		var wg sync.WaitGroup
		s.mu.Lock()
		workers := s.workers
		s.mu.Unlock()
		for _, w := range workers {
			wg.Go(func() { w.stop(25 * time.Second) })
		}
		wg.Wait()
	})
}

// tearDown stops everything the soak started, in dependency order:
// workers, then the server they talk to, then stripesim and the databases.
// It runs on every path out of run, errors and Ctrl-C included.
func (s *soak) tearDown() {
	s.stopWorkers()
	for _, c := range []client.Client{s.client, s.starts} {
		if c != nil {
			c.Close()
		}
	}
	if s.server != nil {
		s.server.stop(10 * time.Second)
	}
	if s.simHTTP != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = s.simHTTP.Shutdown(ctx)
		cancel()
	}
	if s.sim != nil {
		s.sim.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.docs != nil {
		s.docs.Close()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	s.rig.stop()
	s.spoolWatch.Close()
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
