// Command temporal is the seed's nine-step claim of testbed/peers/README.md
// on Temporal alone, written the way the Go SDK's documentation teaches: a
// workflow whose ID is the claim ID, every step that does I/O an activity
// with a timeout and a retry policy, the approval a signal raced against a
// durable timer, the status a memo the server returns with the workflow's
// description. None of durableclaims is here (no authority checks, signed
// receipts, claim file, payload encryption, task journal, the SDK's
// defaults for the worker): beside durableclaims on the same server it is
// the "seed-only" row of `make peers`, what the engine costs for the seed's
// steps apart from what the product adds.
//
// Documentation followed:
//
//	https://docs.temporal.io/develop/go/core-application          (workflows, activities, workers)
//	https://docs.temporal.io/develop/go/failure-detection         (start-to-close timeouts, retry policies)
//	https://docs.temporal.io/develop/go/message-passing           (signals, selectors)
//	https://docs.temporal.io/develop/go/timers                    (durable timers)
//	https://docs.temporal.io/develop/go/observability#visibility  (memos)
//	https://docs.temporal.io/workflow-execution/workflowid-runid  (workflow ID conflict policy)
//	https://docs.stripe.com/idempotency                           (the Idempotency-Key header)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"durableclaims.local/peers/killpoint"
	"durableclaims.local/peers/seed"
)

// config is the contract's environment and Temporal's.
type config struct {
	seed.Config
	temporal, namespace, queue string
}

func loadConfig() (config, error) {
	sc, err := seed.FromEnv("TEMPORAL_ADDRESS")
	return config{Config: sc, temporal: os.Getenv("TEMPORAL_ADDRESS"), namespace: seed.Getenv("TEMPORAL_NAMESPACE", "default"),
		queue: seed.Getenv("PEER_TASK_QUEUE", "seed-claims")}, err
}

func main() {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(logger); err != nil {
		logger.Error("peer stopped", "error", err)
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	pool, err := seed.OpenDB(ctx, cfg.PGURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	kill, err := killpoint.FromEnv(logger)
	if err != nil {
		return err
	}

	c, err := client.Dial(client.Options{HostPort: cfg.temporal, Namespace: cfg.namespace,
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return err
	}
	defer c.Close()
	w := worker.New(c, cfg.queue, worker.Options{})
	w.RegisterWorkflowWithOptions(ClaimWorkflow, workflow.RegisterOptions{Name: workflowName})
	w.RegisterActivity(&Activities{world: &seed.World{Config: cfg.Config, HTTP: &http.Client{Timeout: time.Minute}}, db: pool, kill: kill})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	srv := &http.Server{Addr: cfg.Addr, Handler: (&controlAPI{c: c, cfg: cfg}).routes(), ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.ListenAndServe() }()
	logger.Info("peer ready", "addr", cfg.Addr, "temporal", cfg.temporal, "queue", cfg.queue, "crash", os.Getenv("PEER_CRASH"))

	select {
	case <-ctx.Done():
	case err = <-srvErr:
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// controlAPI is the contract's control API over a Temporal client.
type controlAPI struct {
	c   client.Client
	cfg config
}

func (a *controlAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// Ready once the frontend answers: the worker polls from the start.
		if _, err := a.c.CheckHealth(r.Context(), &client.CheckHealthRequest{}); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("POST /claims", a.submit)
	mux.HandleFunc("POST /claims/{id}/approve", a.approve)
	mux.HandleFunc("GET /claims/{id}", a.get)
	return mux
}

// submit starts the claim's workflow. The claim ID is the workflow ID: a
// start while it runs returns that run, and one after it closed is
// refused by the reuse policy, so a claim runs once.
func (a *controlAPI) submit(w http.ResponseWriter, r *http.Request) {
	var c seed.Claim
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&c); err != nil || c.ClaimID == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a JSON claim with a claim_id"})
		return
	}
	_, err := a.c.ExecuteWorkflow(r.Context(), client.StartWorkflowOptions{
		ID:                       c.ClaimID,
		TaskQueue:                a.cfg.queue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, workflowName, Input{Claim: c, LimitMinor: a.cfg.LimitMinor, ApprovalTimeout: a.cfg.ApprovalTimeout})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": c.ClaimID})
}

// approve signals the claim. A second approve is a second signal the
// workflow never reads: it takes the first.
func (a *controlAPI) approve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var ap seed.Approval
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&ap); err != nil || ap.Approver == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"approver":"..."}`})
		return
	}
	err := a.c.SignalWorkflow(r.Context(), id, "", approveSig, ap)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such claim, or it is closed"})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	default:
		writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": id})
	}
}

// get reads the claim's status from the server alone (no worker answers
// it): the memo while it runs, the result once it completed.
func (a *controlAPI) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := a.c.DescribeWorkflow(r.Context(), id, "")
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such claim"})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
		return
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	v := seed.View{ClaimID: id, Status: seed.StatusRunning}
	switch info.GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if p := info.GetMemo().GetFields()[statusMemo]; p != nil {
			if err := converter.GetDefaultDataConverter().FromPayload(p, &v.Status); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if err := a.c.GetWorkflow(r.Context(), id, info.GetExecution().GetRunId()).Get(r.Context(), &v); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
	default: // failed, timed out, terminated, cancelled
		v.Status = seed.StatusFailed
	}
	writeJSON(w, http.StatusOK, v)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
