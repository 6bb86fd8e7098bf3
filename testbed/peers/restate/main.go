// Command restate-peer is the Restate peer of testbed/peers (see ../README.md for the
// contract): the nine-step claim as a Restate Workflow, served to a Restate server that
// the driver runs (server.sh), and the contract's control API, which talks to that
// server's ingress.
//
// Written the way Restate's documentation teaches (Go SDK v1.2.0, server 1.7.12):
//   - https://docs.restate.dev/develop/go/workflows: a Workflow, keyed by claim ID, whose
//     run handler runs once per key; shared handlers signal it (durable promise) and read
//     its K/V state.
//   - https://docs.restate.dev/develop/go/durable-steps (and .../journaling-results):
//     every I/O step in restate.Run, its result stored in the journal; failures retried
//     unless terminal.
//   - https://docs.restate.dev/develop/go/external-events: durable promises for the
//     human-in-the-loop approval; restate.WaitFirst races it with restate.After, a
//     durable timer (the SDK's own doc comment of WaitFirst shows the timeout idiom).
//   - https://docs.restate.dev/operate/registration and
//     https://docs.restate.dev/admin-api/deployment/register-deployment: the endpoint
//     registers itself with POST /deployments on the admin API.
//   - https://docs.restate.dev/services/configuration and
//     https://docs.restate.dev/guides/error-handling: the invocation retry policy
//     (WithInvocationRetryPolicy), which decides how soon a killed worker is retried.
//   - the SDK's examples/client/main.go: the ingress client (WorkflowSend, Workflow,
//     WorkflowHandle).
//   - https://docs.restate.dev/references/server_config: the server's settings as
//     environment variables (server.sh).
//
// restate.Run is at-least-once: if the process dies after the closure's effect but before
// the server has acknowledged the journal entry, the closure runs again on the retry.
// Hence the payment's Idempotency-Key (<claim>:step6) and the audit row's primary key.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	restate "github.com/restatedev/sdk-go"
	restateingress "github.com/restatedev/sdk-go/ingress"
	"github.com/restatedev/sdk-go/server"

	"durableclaims.local/peers/killpoint"
)

func main() {
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	peerAddr := envOr("PEER_ADDR", "127.0.0.1:8400")
	serviceAddr := os.Getenv("RESTATE_SERVICE_ADDR")
	if serviceAddr == "" {
		host, port, err := net.SplitHostPort(peerAddr)
		if err != nil {
			log.Fatalf("PEER_ADDR %q: %v", peerAddr, err)
		}
		p, _ := strconv.Atoi(port)
		serviceAddr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	limit, err := strconv.ParseInt(envOr("AUTO_APPROVE_LIMIT_MINOR", "100000"), 10, 64)
	if err != nil {
		log.Fatalf("AUTO_APPROVE_LIMIT_MINOR: %v", err)
	}
	timeout, err := time.ParseDuration(envOr("APPROVAL_TIMEOUT", "24h"))
	if err != nil {
		log.Fatalf("APPROVAL_TIMEOUT: %v", err)
	}
	kill, err := killpoint.FromEnv(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("PG_URL"))
	if err != nil {
		log.Fatalf("PG_URL: %v", err)
	}
	if _, err := db.Exec(ctx, schema); err != nil {
		log.Fatalf("schema: %v", err)
	}

	cfg := &config{
		modelBase:        os.Getenv("MODEL_BASE_URL"),
		modelKey:         os.Getenv("MODEL_API_KEY"),
		stripeBase:       os.Getenv("STRIPE_API_BASE"),
		stripeKey:        os.Getenv("STRIPE_SECRET_KEY"),
		mailSpool:        envOr("MAIL_SPOOL", "mail"),
		autoApproveLimit: limit,
		approvalTimeout:  timeout,
		kill:             kill,
		httpClient:       &http.Client{Timeout: 60 * time.Second},
		db:               db,
	}

	// The Restate service endpoint (HTTP/2 cleartext), which the server invokes.
	endpoint := server.NewRestate().
		WithLogger(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), true).
		Bind((&claims{cfg: cfg}).definition())
	go func() {
		if err := endpoint.Start(ctx, serviceAddr); err != nil {
			log.Fatalf("restate endpoint %s: %v", serviceAddr, err)
		}
	}()

	api := &controlAPI{
		ingress: restateingress.NewClient(envOr("RESTATE_INGRESS_URL", "http://127.0.0.1:8080")),
	}
	go func() {
		register(envOr("RESTATE_ADMIN_URL", "http://127.0.0.1:9070"), "http://"+serviceAddr)
		api.ready.Store(true)
		log.Printf("registered http://%s; control API on %s", serviceAddr, peerAddr)
	}()
	log.Fatal(http.ListenAndServe(peerAddr, api.routes()))
}

const schema = `
CREATE TABLE IF NOT EXISTS claims (
	claim_id     text PRIMARY KEY,
	status       text NOT NULL,
	payout_minor bigint NOT NULL,
	transfer_id  text NOT NULL,
	closed_at    timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
	claim_id     text PRIMARY KEY,
	outcome      text NOT NULL,
	payout_minor bigint NOT NULL,
	transfer_id  text NOT NULL,
	reason       text NOT NULL,
	triage       jsonb,
	assessment   jsonb,
	at           timestamptz NOT NULL DEFAULT now()
);`

// register adds the endpoint as a deployment (admin API POST /deployments), retrying
// until the admin API and the endpoint are both up. force stays false: re-registering
// the same URI with the same services answers 200 and changes nothing, so invocations
// in flight keep their deployment; force would overwrite it.
func register(admin, uri string) {
	body, _ := json.Marshal(map[string]any{"uri": uri, "force": false})
	for {
		resp, err := http.Post(strings.TrimSuffix(admin, "/")+"/deployments", "application/json", bytes.NewReader(body))
		if err == nil {
			var msg bytes.Buffer
			_, _ = msg.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
			log.Printf("register %s: HTTP %d: %.300s", uri, resp.StatusCode, msg.String())
		} else {
			log.Printf("register %s: %v", uri, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type controlAPI struct {
	ingress *restateingress.Client
	ready   atomic.Bool
}

func (a *controlAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if !a.ready.Load() {
			http.Error(w, "registering", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("POST /claims", a.submit)
	mux.HandleFunc("POST /claims/{id}/approve", a.approve)
	mux.HandleFunc("GET /claims/{id}", a.get)
	return mux
}

// submit sends the claim to the workflow's run handler, keyed by claim ID. A workflow
// runs once per key: a second submit is answered "PreviouslyAccepted" by the ingress.
func (a *controlAPI) submit(w http.ResponseWriter, r *http.Request) {
	var cl Claim
	if err := json.NewDecoder(r.Body).Decode(&cl); err != nil || cl.ClaimID == "" {
		http.Error(w, "want a claim with a claim_id", http.StatusBadRequest)
		return
	}
	res, err := restateingress.WorkflowSend[Claim](a.ingress, workflowName, cl.ClaimID, "run").Send(r.Context(), cl)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": cl.ClaimID, "invocation_id": res.Id(), "restate_status": res.Status()})
}

func (a *controlAPI) approve(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var ap Approval
	_ = json.NewDecoder(r.Body).Decode(&ap)
	if _, code := a.lookup(r.Context(), id); code != http.StatusOK {
		http.Error(w, http.StatusText(code), code)
		return
	}
	if _, err := restateingress.Workflow[Approval, restate.Void](a.ingress, workflowName, id, "approve").Request(r.Context(), ap); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"claim_id": id})
}

func (a *controlAPI) get(w http.ResponseWriter, r *http.Request) {
	st, code := a.lookup(r.Context(), r.PathValue("id"))
	if code != http.StatusOK {
		http.Error(w, http.StatusText(code), code)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// lookup asks the workflow's status handler; before the run handler has written its
// state, the workflow's output endpoint tells a submitted claim (not ready: running)
// from an unknown one (404).
func (a *controlAPI) lookup(ctx context.Context, id string) (Status, int) {
	st, err := restateingress.Workflow[restate.Void, Status](a.ingress, workflowName, id, "status").Request(ctx, restate.Void{})
	if err != nil {
		log.Printf("status %s: %v", id, err)
		return st, http.StatusBadGateway
	}
	if st.Status != "" {
		return st, http.StatusOK
	}
	_, err = restateingress.WorkflowHandle[Status](a.ingress, workflowName, id).Output(ctx)
	var notReady *restateingress.InvocationNotReadyError
	var notFound *restateingress.InvocationNotFoundError
	switch {
	case errors.As(err, &notReady):
		return Status{ClaimID: id, Status: "running"}, http.StatusOK
	case errors.As(err, &notFound):
		return st, http.StatusNotFound
	default:
		log.Printf("output %s: %v", id, err)
		return st, http.StatusBadGateway
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
