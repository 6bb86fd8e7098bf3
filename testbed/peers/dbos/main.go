// Command dbos is the DBOS Transact Go peer of durableclaims: the nine-step
// insurance claim of testbed/peers/README.md written the way DBOS documents
// it. The claim is one DBOS workflow (workflow ID = claim ID); every step
// that does I/O runs through dbos.RunAsStep; the human approval is a durable
// dbos.Recv with APPROVAL_TIMEOUT, fed by dbos.Send from the control API; the
// status the control API reports is a DBOS event ("status") plus the
// workflow's own status. DBOS keeps its system tables (schema "dbos") in
// PG_URL; the close and audit steps write this peer's own tables there too.
//
// Documentation followed (DBOS v1 renamed DBOSContext/NewDBOSContext to
// Context/NewContext; the pages still show the old names):
//
//	https://docs.dbos.dev/golang/programming-guide
//	https://docs.dbos.dev/golang/tutorials/workflow-tutorial      (workflow IDs and idempotency)
//	https://docs.dbos.dev/golang/tutorials/step-tutorial          (RunAsStep, retries)
//	https://docs.dbos.dev/golang/tutorials/workflow-communication (Send/Recv, SetEvent/GetEvent)
//	https://docs.dbos.dev/golang/reference/methods                (GetEvent, SetEvent, Send, Recv)
//	https://docs.dbos.dev/golang/reference/dbos-context           (Config, Launch, application version)
//	https://docs.dbos.dev/self-hosting                            (recovery by executor ID and version)
//	https://docs.stripe.com/idempotency                           (the Idempotency-Key header)
//
// and the v1.8.0 sources themselves (dbos/dbos.go: Launch recovers the
// PENDING workflows of this executor ID and application version).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"durableclaims.local/peers/killpoint"
	"durableclaims.local/peers/seed"
)

const (
	appName = "durableclaims-peer"
	// Recovery after a crash only takes up workflows of the same executor ID
	// and application version. DBOS's default version is a hash of the
	// binary, so a rebuilt binary would leave the claims in flight PENDING
	// for ever: pin both (DBOS__APPVERSION and DBOS__VMID still override).
	appVersion = "peer-1"
	executorID = "peer"
)

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("peer stopped", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	cfg, err := seed.FromEnv()
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

	dctx, err := dbos.NewContext(context.Background(), dbos.Config{
		AppName:            appName,
		DatabaseURL:        cfg.PGURL,
		ApplicationVersion: appVersion,
		ExecutorID:         executorID,
		Logger:             log,
	})
	if err != nil {
		return err
	}
	kill, err := killpoint.FromEnv(log)
	if err != nil {
		return err
	}
	p := &peer{cfg: cfg, db: pool, world: &seed.World{Config: cfg, HTTP: &http.Client{Timeout: 60 * time.Second}}, log: log, kill: kill}
	dbos.RegisterWorkflow(dctx, p.claimWorkflow, dbos.WithWorkflowName("claim"))

	// Serve /healthz (503) at once; claims are accepted once Launch is done.
	var launched atomic.Bool
	srv := &http.Server{Addr: cfg.Addr, Handler: p.routes(dctx, &launched), ReadHeaderTimeout: 10 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.ListenAndServe() }()

	// Launch recovers this executor's PENDING workflows (re-enqueued on the
	// internal queue that the queue runner started next takes up).
	if err := dbos.Launch(dctx); err != nil {
		return fmt.Errorf("dbos launch: %w", err)
	}
	launched.Store(true)
	log.Info("peer ready", "addr", cfg.Addr, "crash", os.Getenv("PEER_CRASH"))

	select {
	case <-ctx.Done():
	case err = <-srvErr:
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutCtx)
	if serr := dbos.Shutdown(dctx, 10*time.Second); serr != nil {
		log.Warn("dbos shutdown", "error", serr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// The control API of testbed/peers/README.md.
func (p *peer) routes(dctx dbos.Context, launched *atomic.Bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !launched.Load() {
			http.Error(w, "launching", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	ready := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !launched.Load() {
				writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "launching"})
				return
			}
			h(w, r)
		}
	}

	mux.HandleFunc("POST /claims", ready(func(w http.ResponseWriter, r *http.Request) {
		var c seed.Claim
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&c); err != nil || c.ClaimID == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want a JSON claim with a claim_id"})
			return
		}
		// The claim ID is the workflow ID: starting a claim that exists
		// returns the existing workflow's handle and runs nothing.
		if _, err := dbos.RunWorkflow(dctx, p.claimWorkflow, c, dbos.WithWorkflowID(c.ClaimID)); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": c.ClaimID})
	}))

	mux.HandleFunc("POST /claims/{id}/approve", ready(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		var a seed.Approval
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&a); err != nil || a.Approver == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": `want {"approver":"..."}`})
			return
		}
		if _, ok, err := workflowStatus(dctx, id); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		} else if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such claim"})
			return
		}
		// The key makes a repeated approve one message: the claim gets it once.
		if err := dbos.Send(dctx, id, a, approvalTopic, dbos.WithIdempotencyKey("approve")); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": id})
	}))

	mux.HandleFunc("GET /claims/{id}", ready(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		st, ok, err := workflowStatus(dctx, id)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such claim"})
			return
		}
		v := seed.View{ClaimID: id, Status: seed.StatusRunning}
		switch st {
		case dbos.WorkflowStatusError, dbos.WorkflowStatusCancelled, dbos.WorkflowStatusMaxRecoveryAttemptsExceeded:
			v.Status = seed.StatusFailed
		default:
			// The workflow publishes its status as an event: running at
			// once, waiting while parked in Recv, the outcome at the end.
			ev, err := dbos.GetEvent[seed.View](dctx, id, statusEvent, 0)
			if err == nil && ev.Status != "" {
				v = ev
			} else if err != nil && !errors.Is(err, dbos.ErrTimeout) {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
		}
		v.ClaimID = id
		writeJSON(w, http.StatusOK, v)
	}))
	return mux
}

// workflowStatus is the DBOS status of the claim's workflow; ok is false when
// there is none.
func workflowStatus(dctx dbos.Context, id string) (dbos.WorkflowStatusType, bool, error) {
	ws, err := dbos.ListWorkflows(dctx, dbos.WithFilterWorkflowIDs(id),
		dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
	if err != nil || len(ws) == 0 {
		return "", false, err
	}
	return ws[0].Status, true, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
