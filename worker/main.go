// Command worker runs the claims worker: it connects to Temporal from the
// environment, registers ClaimWorkflow and its activities on task queue
// "claims", and drains on SIGTERM or SIGINT.
//
//	worker [--crash-at claim-0042:7,claim-0043:6:after-effect] [--crash-state FILE]
//	worker replay-check [--closed 100] [--query Q] [--keep-going] [--json]
//
// worker replay-check replays the namespace's open runs and the most
// recently closed ones against this very binary's workflow code before it
// takes traffic, and exits 3 naming the first run that would break
// (docs/operations.md, "Deploying a build").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/smtp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"google.golang.org/grpc"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/statute"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/worker/crash"
	"github.com/durableclaims/durableclaims/worker/heartbeat"
	"github.com/durableclaims/durableclaims/worker/inflight"
	"github.com/durableclaims/durableclaims/worker/metricsprom"
	"github.com/durableclaims/durableclaims/worker/parked"
	"github.com/durableclaims/durableclaims/worker/queueheal"
	"github.com/durableclaims/durableclaims/worker/refusals"
	"github.com/durableclaims/durableclaims/worker/replaycheck"
	"github.com/durableclaims/durableclaims/workflows"
)

// rehearsal holds workflow interceptors that change what a claim does: a
// rehearsal of a deploy (testbed/rollout) compiles the worker with one
// more file (go build -overlay) that adds one, to play a build whose
// workflow code changed. The product build adds none.
var rehearsal []interceptor.WorkerInterceptor

func main() {
	if len(os.Args) > 1 && os.Args[1] == "replay-check" {
		os.Exit(replayCheck(os.Args[2:]))
	}
	crashAt := flag.String("crash-at", "", "kill this process with SIGKILL once at each point: CLAIM:STEP[/SUB][:before-effect|after-effect],… (SUB e.g. turn2 or turn1/lookup_policy)")
	crashState := flag.String("crash-state", "", "file that remembers fired crash points (default: next to CLAIMS_DB)")
	var batch crashBatch
	flag.IntVar(&batch.n, "crash-batch", 1, "with --crash-at: one kill interrupts up to this many claims, each held at its point until the batch is full")
	flag.DurationVar(&batch.wait, "crash-batch-wait", 2*time.Second, "with --crash-batch: kill a batch not yet full this long after its first point was reached")
	flag.Parse()
	config.OwnerOnly()
	logger := config.Logger("worker")
	stopTracing, err := telemetry.Main("worker")
	if err != nil {
		logger.Error("worker not started", "error", err)
		os.Exit(1)
	}
	err = run(logger, *crashAt, *crashState, batch)
	stopTracing()
	if err != nil {
		logger.Error("worker stopped", "error", err)
		os.Exit(1)
	}
}

// crashBatch is --crash-batch and --crash-batch-wait (crash.Injector.Batch).
type crashBatch struct {
	n    int
	wait time.Duration
}

func run(logger *slog.Logger, crashAt, crashState string, batch crashBatch) error {
	acts, closeActs, err := newActivities(logger)
	if err != nil {
		return err
	}
	defer closeActs()
	crashes, err := armCrashes(acts, crashAt, crashState, batch, logger)
	if err != nil {
		return err
	}
	prometheus, err := metricsprom.New()
	if err != nil {
		return err
	}
	defer prometheus.Close()
	stopDebug, err := serveMetrics(prometheus, logger)
	if err != nil {
		return err
	}
	defer stopDebug()
	// Every worker is a Worker Deployment Version (WORKER_DEPLOYMENT,
	// WORKER_BUILD_ID): a new build takes claims only when it is made
	// current or ramping (docs/operations.md, "Deploying a build").
	deployment, err := config.WorkerDeployment()
	if err != nil {
		return err
	}
	journal, err := openJournal(logger)
	if err != nil {
		return err
	}
	defer journal.Close()
	c, guard, err := dial(acts.Store, deployment, prometheus, journal, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	handBack(journal, c, logger)
	stopSweep, err := sweepForeignEnds(guard)
	if err != nil {
		return err
	}
	defer stopSweep()
	recorder := refusals.New(acts.Store, logger)
	defer recorder.Close()
	// CLAIMS_TASK_QUEUE isolates a worker (the crash tests run one per case);
	// everything else uses the contract's queue.
	queue := config.Get("CLAIMS_TASK_QUEUE", workflows.TaskQueue)
	stopCheckpoints, err := bindActivities(acts, c, queue, deployment, logger)
	if err != nil {
		return err
	}
	defer stopCheckpoints()
	w, err := newWorker(c, queue, acts, deployment, recorder, prometheus, crashes)
	if err != nil {
		return err
	}
	if err := ensureReconcileSchedule(c, logger); err != nil {
		return err
	}
	stopGauges := watchApprovals(c, prometheus.Handler, logger)
	defer stopGauges()
	stopHeal, err := healQueue(c, acts.Store, logger)
	if err != nil {
		return err
	}
	defer stopHeal()
	logger.Info("worker starting", "task_queue", queue, "claims_db", store.Redact(config.ClaimsDB()), "model", acts.Model.Name(),
		"prompt_version", acts.Model.PromptVersion(), "deployment", deployment.Name, "build_id", deployment.BuildID, "versioning", deployment.Versioning)
	if err := serve(w, c, deployment, acts.Store, prometheus, logger); err != nil {
		return err
	}
	logger.Info("worker drained and stopped")
	return nil
}

// armCrashes arms crash injection (--crash-at): worker plumbing around the
// activities, an activity interceptor and a Mailer that crashes between
// sending and recording the message sent. Without the flag, neither is
// there and it returns nil.
func armCrashes(acts *activities.Activities, crashAt, crashState string, batch crashBatch, logger *slog.Logger) (*crash.Injector, error) {
	if crashAt == "" {
		return nil, nil
	}
	points, err := crash.Parse(crashAt)
	if err != nil {
		return nil, err
	}
	if crashState == "" && store.IsPostgres(config.ClaimsDB()) {
		return nil, errors.New("--crash-at with a PostgreSQL claims store needs --crash-state FILE (shared by the workers it should fire once across)")
	}
	if crashState == "" {
		crashState = filepath.Join(filepath.Dir(config.ClaimsDB()), "crash-fired")
	}
	if batch.wait <= 0 {
		return nil, errors.New("--crash-batch-wait: want a positive duration")
	}
	crashes := crash.New(points, crashState, logger).Batch(batch.n, batch.wait).
		BeforeKill(func() { telemetry.Flush(2 * time.Second) })
	acts.Mailer = crashes.Mailer(acts.Mailer)
	logger.Warn("crash injection armed", "points", crashAt, "state", crashState, "batch", batch.n)
	return crashes, nil
}

// serveMetrics serves the metrics (and, with DEBUG_ENDPOINTS, the debug
// endpoints) on METRICS_ADDR when it is set.
func serveMetrics(prometheus *metricsprom.Prometheus, logger *slog.Logger) (stop func(), err error) {
	addr := config.Get("METRICS_ADDR", "")
	if addr == "" {
		return func() {}, nil
	}
	debug, err := config.Bool("DEBUG_ENDPOINTS", false)
	if err != nil {
		return nil, err
	}
	return serveDebug(addr, debug, prometheus.HTTPHandler(), logger)
}

// dial connects to Temporal as a claims worker does: a claim parked on a
// long timer gives up this worker's sticky queue and its cache, so that
// when the timer fires any worker takes it at once (worker/parked, whose
// interceptor must be the outermost), and the worker's workflow task
// completions are signed, a claim's history that fails replay checked for
// completions a stranger wrote (worker/provenance, tampered.go).
func dial(st *store.Store, deployment config.Deployment, prometheus *metricsprom.Prometheus, journal *inflight.Journal, logger *slog.Logger) (client.Client, *provenanceGuard, error) {
	release, err := config.Duration("STICKY_RELEASE_AFTER", parked.DefaultAfter)
	if err != nil {
		return nil, nil, err
	}
	foreign := prometheus.Handler.Counter(metrics.ForeignWorkflowTasks)
	guard, err := newProvenanceGuard(st, deployment, func() { foreign.Inc(1) }, logger)
	if err != nil {
		return nil, nil, err
	}
	c, err := config.Dial(context.Background(), logger, config.WithMetrics(prometheus.Handler),
		config.WithDialOptions(grpc.WithUnaryInterceptor(parked.Interceptor(release)), guard.dialOption(), journalOption(journal)),
		func(o *client.Options) { o.Logger = parked.Logger(o.Logger) })
	if err != nil {
		return nil, nil, err
	}
	guard.dialled(c)
	return c, guard, nil
}

// openJournal opens the worker's task journal (worker/inflight) in
// TASK_JOURNAL_DIR, a directory of this worker's own that outlives its
// process (a pod's emptyDir, a supervisor's state directory); unset, there
// is none and a killed worker's tasks wait out their timeouts.
func openJournal(logger *slog.Logger) (*inflight.Journal, error) {
	dir := config.Get("TASK_JOURNAL_DIR", "")
	if dir == "" {
		return nil, nil
	}
	return inflight.Open(dir, logger)
}

func journalOption(j *inflight.Journal) grpc.DialOption {
	if j == nil {
		return grpc.EmptyDialOption{}
	}
	return grpc.WithChainUnaryInterceptor(j.Interceptor()) // innermost: it sees what the server said
}

// handBack hands the server back, before this worker polls, the tasks its
// killed predecessor held (worker/inflight), so that they are retried now
// rather than after their timeouts.
func handBack(j *inflight.Journal, c client.Client, logger *slog.Logger) {
	if j == nil {
		return
	}
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep := j.HandBack(ctx, c.WorkflowService(), config.Get("TEMPORAL_NAMESPACE", "default"), fmt.Sprintf("%d@%s@", os.Getpid(), host))
	if rep.StickyQueue == "" && rep.WorkflowTasks+rep.ActivityTasks+rep.Gone+rep.Errors == 0 {
		return
	}
	logger.Warn("handed back what the killed worker before this one held", "sticky_queue", rep.StickyQueue, "sticky_shutdown_error", rep.StickyShutdownError,
		"workflow_tasks", rep.WorkflowTasks, "activity_attempts", rep.ActivityTasks, "gone", rep.Gone, "errors", rep.Errors, "took", rep.Took)
}

// sweepForeignEnds looks, every FOREIGN_SWEEP_EVERY (default 1m; "0" turns
// it off), for claim runs a stranger ended outright: closed with the claim
// still open in the store.
func sweepForeignEnds(guard *provenanceGuard) (stop func(), err error) {
	every, err := config.Duration("FOREIGN_SWEEP_EVERY", time.Minute)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	go guard.sweep(ctx, every)
	return cancel, nil
}

// bindActivities gives the activities what only a connected worker knows:
// the runs they act for (the server says which are this worker's own,
// activities/authority.go), the histories step 9 writes each closed
// claim's file from (docs/records.md), and the build every model answer
// and decision names (workflows.WorkerBuild; the server records the same
// ID with each task it completes). The ledger key signs the claim-file
// log's checkpoints until stop.
func bindActivities(acts *activities.Activities, c client.Client, queue string, deployment config.Deployment, logger *slog.Logger) (stop func(), err error) {
	acts.Runs = activities.Runs{TaskQueue: queue, ClaimWorkflow: workflows.WorkflowType, ReconcileWorkflow: workflows.ReconcileWorkflowType,
		Describe: describer(c)}
	if acts.ClaimFiles, err = claimFiles(c); err != nil {
		return nil, err
	}
	acts.BuildID = deployment.BuildID
	return publishCheckpoints(acts, logger)
}

// newWorker makes the worker on the task queue with the claims' workflows
// and activities registered, and records that this build ran here:
// routing to one that never did is an alert (watchDeployment).
func newWorker(c client.Client, queue string, acts *activities.Activities, deployment config.Deployment,
	recorder *refusals.Recorder, prometheus *metricsprom.Prometheus, crashes *crash.Injector) (worker.Worker, error) {
	interceptors := append(rehearsal[:len(rehearsal):len(rehearsal)], workflows.WorkerBuild(deployment.BuildID),
		heartbeat.New(c), recorder, prometheus.Interceptor())
	if crashes != nil {
		// Last, so innermost: it fires right around the activity itself.
		interceptors = append(interceptors, crashes.Interceptor())
	}
	opts := worker.Options{
		Interceptors: interceptors,
		// On SIGTERM, let running activities finish their step (within the
		// heartbeat-bounded budget) before exiting; anything longer is retried
		// elsewhere with the same idempotency key.
		WorkerStopTimeout: 20 * time.Second,
		// A workflow task sent to a dead worker's sticky queue moves to the
		// shared queue after this long (default 5 s): part of the recovery
		// time after a kill.
		StickyScheduleToStartTimeout: 2 * time.Second,
	}
	// The workflow cache, the workflow task slots and the pollers
	// (WORKFLOW_CACHE_SIZE, WORKFLOW_TASK_SLOTS, WORKER_POLLERS): sized for
	// claims in flight and claims parked alike (docs/performance.md), and
	// set otherwise for a catastrophe week (docs/operations.md).
	if err := config.Tune(&opts); err != nil {
		return nil, err
	}
	opts.DeploymentOptions = deploymentOptions(deployment)
	if err := acts.Store.RecordBuild(context.Background(), deployment.Name, deployment.BuildID); err != nil {
		return nil, err
	}
	w := worker.New(c, queue, opts)
	workflows.Register(w)
	w.RegisterActivity(acts) // ReconcilePayments included: a method of acts
	return w, nil
}

// ensureReconcileSchedule brings the reconciliation schedule to
// RECONCILE_EVERY when it is set ("0" removes it); otherwise it creates an
// hourly one if missing, and leaves an existing one as an operator set it
// (claimsctl schedule), so a restart does not undo it. A failure is
// logged, not fatal: claims do not wait on it.
func ensureReconcileSchedule(c client.Client, logger *slog.Logger) error {
	every, err := config.Duration("RECONCILE_EVERY", workflows.DefaultReconcileEvery)
	if err != nil {
		return err
	}
	ensure := workflows.CreateReconcileSchedule
	if config.Get("RECONCILE_EVERY", "") != "" {
		ensure = workflows.EnsureReconcileSchedule
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if did, err := ensure(ctx, c, every); err != nil {
		logger.Error("reconcile schedule not set", "schedule", workflows.ReconcileScheduleID, "every", every, "error", err)
	} else {
		logger.Info("reconcile schedule", "schedule", workflows.ReconcileScheduleID, "every", every, "result", did)
	}
	return nil
}

// healQueue mends what the workflows could not write of the approval queue
// the inbox lists (worker/queueheal): QUEUE_HEAL_EVERY (default 1m; "0"
// turns it off) is the cheap count check; every 15th is a full pass.
func healQueue(c client.Client, st *store.Store, logger *slog.Logger) (stop func(), err error) {
	every, err := config.Duration("QUEUE_HEAL_EVERY", time.Minute)
	if err != nil {
		return nil, err
	}
	if every <= 0 {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &queueheal.Healer{Temporal: c, Namespace: config.Get("TEMPORAL_NAMESPACE", "default"), Store: st, Log: logger}
	go h.Run(ctx, every, 15)
	return cancel, nil
}

// serve runs the worker until SIGTERM or SIGINT, and drains it. The
// version exists on the server once the worker has polled: the watcher
// reads it from then on, and makes it current when the deployment has
// none (worker/deployment.go).
func serve(w worker.Worker, c client.Client, deployment config.Deployment, st *store.Store, prometheus *metricsprom.Prometheus, logger *slog.Logger) error {
	ctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	unknownBuilds := prometheus.Handler.Gauge(metrics.DeploymentUnknownBuilds)
	go func() {
		defer close(watched)
		watchDeployment(ctx, c, deployment, st, func(n int) { unknownBuilds.Update(float64(n)) }, logger)
	}()
	err := w.Run(worker.InterruptCh())
	stopWatch()
	<-watched
	return err
}

// replayCheck is `worker replay-check`: this binary's workflow code, and
// the workflow interceptors its worker runs, against the live runs.
func replayCheck(args []string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	dial := func(ctx context.Context) (client.Client, error) {
		return config.Dial(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	code, err := replaycheck.Command(ctx, args, os.Stdout, dial, rehearsal)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker replay-check:", err)
		return 1
	}
	return code
}

// claimFiles reads a run's history for its claim file, decoding payloads
// as the worker's client does; CLAIM_FILE_RETENTION (default ten years) is
// how long each file is kept.
func claimFiles(c client.Client) (activities.ClaimFiles, error) {
	dc, err := config.DataConverter()
	if err != nil {
		return activities.ClaimFiles{}, err
	}
	retention, err := config.Duration("CLAIM_FILE_RETENTION", activities.DefaultClaimFileRetention)
	if err != nil {
		return activities.ClaimFiles{}, err
	}
	return activities.ClaimFiles{DataConverter: dc, Retention: retention,
		History: func(ctx context.Context, id, runID string) ([]*historypb.HistoryEvent, error) {
			var events []*historypb.HistoryEvent
			it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return nil, err
				}
				events = append(events, e)
			}
			return events, nil
		}}, nil
}

// publishCheckpoints signs and publishes the claim-file log's checkpoint
// every CHECKPOINT_EVERY (default 1m) when LEDGER_KEY names the ledger key;
// without one, claim files are written and logged but no checkpoint is
// signed until claimsctl checkpoint runs where the key is.
func publishCheckpoints(acts *activities.Activities, logger *slog.Logger) (func(), error) {
	path := config.LedgerKey()
	if path == "" {
		logger.Warn("no LEDGER_KEY: claim files are written, but this worker signs no checkpoint of their log; " +
			"make a key with claimsctl keygen --ledger NAME --out FILE and set LEDGER_KEY=FILE (or --out " + config.LocalLedgerKey + ")")
		return func() {}, nil
	}
	key, err := claimfile.ReadLedgerKey(path)
	if err != nil {
		return nil, err
	}
	every, err := config.Duration("CHECKPOINT_EVERY", time.Minute)
	if err != nil {
		return nil, err
	}
	ns := config.Get("TEMPORAL_NAMESPACE", "default")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			cp, published, err := claimfile.Publish(ctx, acts.Store, acts.Blobs, key, ns, time.Now().Add(acts.ClaimFiles.Retention))
			switch {
			case err != nil && ctx.Err() == nil:
				logger.Error("claim-file checkpoint not published", "error", err)
			case published:
				logger.Info("claim-file checkpoint published", "size", cp.Size, "key", claimfile.CheckpointKey(cp.Size))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	logger.Info("claim-file checkpoints", "every", every, "origin", claimfile.Origin(ns))
	return func() { cancel(); <-done }, nil
}

// describer asks the Temporal server what a run is: a client names a
// workflow's ID and type, the server alone knows its task queue and state.
func describer(c client.Client) func(ctx context.Context, id, runID string) (activities.RunFacts, error) {
	return func(ctx context.Context, id, runID string) (activities.RunFacts, error) {
		d, err := c.DescribeWorkflow(ctx, id, runID)
		var notFound *serviceerror.NotFound
		if errors.As(err, &notFound) {
			return activities.RunFacts{}, nil
		}
		if err != nil {
			return activities.RunFacts{}, err
		}
		info := d.RawResponse.GetWorkflowExecutionInfo()
		return activities.RunFacts{WorkflowType: info.GetType().GetName(), TaskQueue: info.GetTaskQueue(),
			Running: info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}, nil
	}
}

// newModel is the model behind steps 2 and 4: MODEL_PROVIDER=rules (the
// offline default) or openai (any Chat Completions endpoint: MODEL_BASE_URL,
// MODEL_NAME, MODEL_API_KEY, MODEL_TIMEOUT, MODEL_MAX_INVALID_ANSWERS), with
// MODEL_TOKENS_PER_MINUTE the rate every worker on the claims store shares
// (MODEL_BUDGET names it, MODEL_MAX_WAIT bounds a wait in one call) and
// MODEL_PROMPTS_FILE its system prompts (model.LoadPrompts; the compiled-in
// ones without it).
func newModel(st *store.Store) (model.Model, error) {
	promptsFile := config.Get("MODEL_PROMPTS_FILE", "")
	switch p := config.Get("MODEL_PROVIDER", "rules"); p {
	case "rules":
		if promptsFile != "" {
			// Refused, not ignored: a candidate prompt the worker never sent
			// must not look tried.
			return nil, errors.New("MODEL_PROMPTS_FILE needs MODEL_PROVIDER=openai: the rules model has no prompt")
		}
		return model.RulesModel{}, nil
	case "openai":
		return openAIModel(st, "MODEL_", promptsFile)
	default:
		return nil, fmt.Errorf("MODEL_PROVIDER=%q: want rules or openai", p)
	}
}

// newFallback is the model a step fails over to, where the insurer allows
// it: MODEL_FALLBACK_PROVIDER (unset: no failover), rules or openai with
// MODEL_FALLBACK_BASE_URL, MODEL_FALLBACK_NAME, MODEL_FALLBACK_API_KEY,
// MODEL_FALLBACK_TOKENS_PER_MINUTE and MODEL_FALLBACK_BUDGET as the
// primary's; the timeout, the answers asked again, the wait and the prompts
// are the primary's. after is MODEL_FALLBACK_AFTER, the attempts the
// primary fails first (activities.DefaultFallbackAfter).
func newFallback(st *store.Store, primary model.Model) (fallback model.Model, after int, err error) {
	p := config.Get("MODEL_FALLBACK_PROVIDER", "")
	if p == "" {
		for _, name := range []string{"MODEL_FALLBACK_NAME", "MODEL_FALLBACK_BASE_URL", "MODEL_FALLBACK_AFTER"} {
			if config.Get(name, "") != "" {
				// Refused, not ignored: an insurer who set up a fallback
				// must not believe it is on.
				return nil, 0, fmt.Errorf("%s is set but MODEL_FALLBACK_PROVIDER is not: set it to rules or openai for failover, or unset %s", name, name)
			}
		}
		return nil, 0, nil
	}
	after, err = config.Int("MODEL_FALLBACK_AFTER", activities.DefaultFallbackAfter)
	if err != nil || after < 1 {
		return nil, 0, fmt.Errorf("MODEL_FALLBACK_AFTER must be a whole number of attempts, at least 1, not %q", config.Get("MODEL_FALLBACK_AFTER", ""))
	}
	switch p {
	case "rules":
		fallback = model.RulesModel{}
	case "openai":
		if fallback, err = openAIModel(st, "MODEL_FALLBACK_", config.Get("MODEL_PROMPTS_FILE", "")); err != nil {
			return nil, 0, err
		}
	default:
		return nil, 0, fmt.Errorf("MODEL_FALLBACK_PROVIDER=%q: want rules or openai, or unset for no failover", p)
	}
	if fallback.Name() == primary.Name() {
		return nil, 0, fmt.Errorf("the fallback model is the primary's (%s): the claim file could not say which one answered; name another model", primary.Name())
	}
	return fallback, after, nil
}

// openAIModel is an OpenAI-compatible model set by the variables that
// begin with env (MODEL_ or MODEL_FALLBACK_): BASE_URL, NAME, API_KEY,
// TOKENS_PER_MINUTE and BUDGET; the tuning (MODEL_TIMEOUT,
// MODEL_MAX_INVALID_ANSWERS, MODEL_MAX_WAIT) is the same for both.
func openAIModel(st *store.Store, env, promptsFile string) (*model.OpenAIModel, error) {
	timeout, err := config.Duration("MODEL_TIMEOUT", time.Minute)
	if err != nil {
		return nil, err
	}
	invalid, err := config.Int("MODEL_MAX_INVALID_ANSWERS", 2)
	if err != nil || invalid < 1 {
		return nil, fmt.Errorf("MODEL_MAX_INVALID_ANSWERS must be a whole number of at least 1, not %q", config.Get("MODEL_MAX_INVALID_ANSWERS", ""))
	}
	cfg := model.OpenAIConfig{BaseURL: config.Get(env+"BASE_URL", ""), Model: config.Get(env+"NAME", ""),
		APIKey: config.Get(env+"API_KEY", ""), Timeout: timeout, MaxInvalidAnswers: invalid, Env: env,
		OnWait: func(ctx context.Context, why string, d time.Duration) {
			metrics.Activity(ctx, metrics.ModelWaits, map[string]string{"reason": why})
		}}
	if cfg.MaxWait, err = config.Duration("MODEL_MAX_WAIT", model.DefaultMaxWait); err != nil {
		return nil, err
	}
	if promptsFile != "" {
		prompts, err := model.LoadPrompts(promptsFile)
		if err != nil {
			return nil, fmt.Errorf("MODEL_PROMPTS_FILE: %w", err)
		}
		cfg.Prompts = &prompts
	}
	tpm, err := config.Int(env+"TOKENS_PER_MINUTE", 0)
	if err != nil || tpm < 0 {
		return nil, fmt.Errorf("%sTOKENS_PER_MINUTE must be a whole number of tokens, 0 for no shared budget, not %q", env, config.Get(env+"TOKENS_PER_MINUTE", ""))
	}
	if tpm > 0 {
		name := config.Get(env+"BUDGET", cfg.Model)
		b, err := st.ModelBudget(context.Background(), name, int64(tpm), 0)
		if err != nil {
			return nil, err
		}
		cfg.Budget = b
	}
	return model.NewOpenAIModel(cfg)
}

// newActivities wires the activities' dependencies from the environment.
// On an error, whatever it opened is closed again.
func newActivities(logger *slog.Logger) (_ *activities.Activities, _ func(), err error) {
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	st, err := store.Open(config.ClaimsDB())
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, st.Close)
	policies, err := activities.LoadPolicies(config.Get("POLICIES_FILE", ""))
	if err != nil {
		return nil, nil, err
	}
	provider, err := newModel(st)
	if err != nil {
		return nil, nil, err
	}
	fallback, fallbackAfter, err := newFallback(st, provider)
	if err != nil {
		return nil, nil, err
	}
	if fallback != nil {
		logger.Info("model failover allowed", "primary", provider.Name(), "fallback", fallback.Name(), "after_attempts", fallbackAfter)
	}
	stripeTimeout, err := config.Duration("STRIPE_TIMEOUT", 0)
	if err != nil {
		return nil, nil, err
	}
	stripeRPS, err := config.Int("STRIPE_REQUESTS_PER_SECOND", activities.DefaultStripeRequestsPerSecond)
	if err != nil {
		return nil, nil, err
	}
	if stripeRPS < 1 {
		return nil, nil, fmt.Errorf("STRIPE_REQUESTS_PER_SECOND=%d: want at least 1 (Stripe's own limit is 25 a second in test mode, 100 live)", stripeRPS)
	}
	stripeCfg := activities.StripeConfig{SecretKey: config.Get("STRIPE_SECRET_KEY", ""), APIBase: config.Get("STRIPE_API_BASE", ""),
		Timeout: stripeTimeout, RequestsPerSecond: stripeRPS}.Resolve()
	logger.Info("payments", "stripe_api", stripeCfg.APIBase, "timeout", stripeCfg.Timeout, "requests_per_second", stripeCfg.RequestsPerSecond)
	docs, err := blobs.Open(context.Background(), config.Get("BLOB_URL", ""))
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, docs.Close)
	if docs.LockMode, err = blobs.ParseLockMode(config.Get("CLAIM_FILE_LOCK", "")); err != nil {
		return nil, nil, err
	}
	if docs.LockMode != "" && !strings.HasPrefix(config.Get("BLOB_URL", ""), "s3://") {
		// Refuse to start rather than fail every claim's last step.
		return nil, nil, fmt.Errorf("CLAIM_FILE_LOCK=%s needs BLOB_URL to be an S3 bucket with Object Lock (s3://…)", docs.LockMode)
	}
	approversFile := config.ApproversFile()
	rules, law, err := loadPolicy(approversFile, policies, logger)
	if err != nil {
		return nil, nil, err
	}
	return &activities.Activities{
		Store:         st,
		Stripe:        activities.NewStripeClient(stripeCfg),
		Model:         provider,
		Fallback:      fallback,
		FallbackAfter: fallbackAfter,
		Mailer:        newMailer(),
		Policies:      policies,
		Blobs:         docs,
		ApproversFile: approversFile,
		Rules:         rules,
		Law:           law,
		From:          config.Get("MAIL_FROM", "claims@durableclaims.local"),
		Adjusters:     config.Get("ADJUSTERS_EMAIL", "claims-adjusters@durableclaims.local"),
		Supervisors:   config.Get("SUPERVISOR_EMAIL", "claims-supervisors@durableclaims.local"),
		InboxURL:      config.Get("INBOX_URL", ""),
	}, closeAll, nil
}

// newMailer is how claimants and adjusters are told: by SMTP_ADDR (with
// SMTP_USERNAME and SMTP_PASSWORD), or into the MAIL_SPOOL directory.
func newMailer() activities.Mailer {
	addr := config.Get("SMTP_ADDR", "")
	if addr == "" {
		return activities.SpoolMailer{Dir: config.MailSpool()}
	}
	var auth smtp.Auth
	if u := config.Get("SMTP_USERNAME", ""); u != "" {
		host, _, _ := net.SplitHostPort(addr)
		auth = smtp.PlainAuth("", u, config.Get("SMTP_PASSWORD", ""), host)
	}
	return activities.SMTPMailer{Addr: addr, Auth: auth}
}

// loadPolicy reads the rules the worker acts by: the approver directory
// (APPROVERS_FILE), the insurer's policy (POLICY_FILE) and the
// jurisdictions' rules (loadLaw). The worker refuses to start on a broken
// one, or on rules that do not fit the policies.
func loadPolicy(approversFile string, policies map[string]claim.Policy, logger *slog.Logger) (insurer.Rules, statute.Rules, error) {
	book, err := authority.Load(approversFile)
	if err != nil {
		return insurer.Rules{}, statute.Rules{}, err
	}
	rules, err := insurer.Load(config.Get("POLICY_FILE", ""), os.Getenv)
	if err != nil {
		return insurer.Rules{}, statute.Rules{}, err
	}
	law, err := loadLaw(config.Get("JURISDICTION_RULES_FILE", ""), rules, policies)
	if err != nil {
		return insurer.Rules{}, statute.Rules{}, err
	}
	logger.Info("jurisdiction rules", "rule_set", law.Version, "default", law.Default, "jurisdictions", len(law.Jurisdictions))
	keys := len(book.Services)
	for _, a := range book.Approvers {
		keys += len(a.Keys)
	}
	logger.Info("insurer policy", "auto_approve_limit", rules.AutoApproveLimit, "four_eyes_above", rules.FourEyesAbove,
		"approval_ttl", rules.ApprovalTTL, "escalation_ttl", rules.EscalationTTL, "final_outcome", rules.FinalOutcome,
		"deployment", rules.Deployment, "approvers", len(book.Approvers), "signing_keys", keys)
	if keys == 0 {
		logger.Warn("the approver directory lists no signing keys: no decision can be proven, so claims above the limit wait until they expire; "+
			"set APPROVERS_FILE to a directory with keys (claimsctl keygen --directory FILE)", "APPROVERS_FILE", approversFile)
	}
	if rules.AllowUnsignedDecisions {
		logger.Warn("DEVELOPMENT SWITCH ON: ALLOW_UNSIGNED_DECISIONS accepts decisions without a signed receipt; anyone who can reach the Temporal frontend can approve payments. The audit marks each such decision unauthenticated. Never run this in production.")
	}
	return rules, law, nil
}

// loadLaw reads the jurisdictions' rules (JURISDICTION_RULES_FILE: the
// shipped rule sets when unset, none when "none") and refuses a policy
// that does not fit them: a final outcome that denies by silence, a policy
// whose jurisdiction has no rules, an age cap that would stop a claim held
// for a person before its decision is due.
func loadLaw(path string, rules insurer.Rules, policies map[string]claim.Policy) (statute.Rules, error) {
	if path == "none" {
		return statute.Rules{}, nil
	}
	law, err := statute.Load(path)
	if err != nil {
		return statute.Rules{}, fmt.Errorf("JURISDICTION_RULES_FILE: %w", err)
	}
	if err := rules.CheckLaw(); err != nil {
		return statute.Rules{}, err
	}
	codes := map[string]bool{law.Default: true}
	for _, id := range slices.Sorted(maps.Keys(policies)) {
		code := policies[id].Jurisdiction
		if _, err := law.Record(code); err != nil {
			return statute.Rules{}, fmt.Errorf("POLICIES_FILE: policy %s: %w", id, err)
		}
		codes[code] = code != ""
	}
	from := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	for _, code := range slices.Sorted(maps.Keys(codes)) {
		if !codes[code] {
			continue
		}
		rec, err := law.Record(code)
		if err != nil {
			return statute.Rules{}, fmt.Errorf("JURISDICTION_RULES_FILE: default %w", err)
		}
		l, err := rec.Law()
		if err != nil {
			return statute.Rules{}, fmt.Errorf("JURISDICTION_RULES_FILE: %s: %w", code, err)
		}
		j := l.Jurisdiction()
		longest := l.Due(j.Decide, from)
		if j.Extension != nil {
			if ext := l.Due(*j.Extension, from); ext.After(longest) {
				longest = ext
			}
		}
		if window := longest.Sub(from); time.Duration(rules.MaxAge) < window {
			return statute.Rules{}, fmt.Errorf("policy: max_age %s is shorter than %s's decision clock (%d %s, up to %s): "+
				"a claim held for a person would stop before its decision is due", time.Duration(rules.MaxAge), code,
				j.Decide.Days, j.Decide.Unit, window.Round(time.Hour))
		}
	}
	return law, nil
}
