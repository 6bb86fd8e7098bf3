package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/worker/provenance"
	"github.com/durableclaims/durableclaims/workflows"
)

// provenanceGuard is the worker's half of worker/provenance: every
// workflow task completion it sends is signed, and a claim run that holds
// a completion nobody of this deployment signed is dead-lettered:
// terminated with the reason (claimsctl dlq lists it, redrive drops what
// the stranger wrote), the refusal recorded on the claim, counted and
// alerted. Two ways find such a run: a task of it fails replay here (the
// interceptor), or it closed while its claim stayed open in the store,
// bound to it (sweep: a stranger who ends the run in their answer leaves
// nothing to replay). Without payload keys (PAYLOAD_ENCRYPTION=off) there
// is nothing to sign with, and it says so.
type provenanceGuard struct {
	signer     *provenance.Signer
	st         *store.Store
	namespace  string
	deployment string
	counter    func()
	log        *slog.Logger
	c          client.Client // set once dialled (dialled): checks run only after tasks
}

// signingBuilds names, in the store's worker_builds, the builds that ran
// signing their completions: a deployment's builds are recorded under its
// name whether or not they sign (PAYLOAD_ENCRYPTION=off), and runs are
// judged from when the first signing one ran.
func signingBuilds(deployment string) string { return deployment + "#signed" }

func newProvenanceGuard(st *store.Store, d config.Deployment, counter func(), logger *slog.Logger) (*provenanceGuard, error) {
	kr, err := config.PayloadKeys()
	if err != nil {
		return nil, err
	}
	if kr == nil {
		logger.Warn("PAYLOAD_ENCRYPTION=off: workflow task completions are not signed, so a claim's task answered by a stranger is not told from this deployment's own")
		return nil, nil
	}
	s, err := provenance.NewSigner(kr)
	if err != nil {
		return nil, err
	}
	if err := st.RecordBuild(context.Background(), signingBuilds(d.Name), d.BuildID); err != nil {
		return nil, err
	}
	return &provenanceGuard{signer: s, st: st, namespace: config.Get("TEMPORAL_NAMESPACE", "default"), deployment: d.Name,
		counter: counter, log: logger}, nil
}

// dialOption is the signing interceptor for the worker's connection
// (none without a guard).
func (g *provenanceGuard) dialOption() grpc.DialOption {
	if g == nil {
		return grpc.EmptyDialOption{}
	}
	logf := func(format string, args ...any) { g.log.Info(fmt.Sprintf(format, args...)) }
	return grpc.WithChainUnaryInterceptor(g.signer.Interceptor(g.history, g.since, g.tampered, logf))
}

func (g *provenanceGuard) dialled(c client.Client) {
	if g != nil {
		g.c = c
	}
}

func (g *provenanceGuard) history(ctx context.Context, id, runID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := g.c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// since is when this deployment's builds began signing (provenance.Check).
func (g *provenanceGuard) since(ctx context.Context) time.Time {
	t, err := g.st.FirstBuild(ctx, signingBuilds(g.deployment))
	if err != nil {
		g.log.Warn("first signing build unknown: runs are judged as if started before it", "error", err)
	}
	return t
}

// tampered dead-letters a run a stranger wrote part of: a running one is
// terminated; a closed one is reset to the stranger's answer (which drops
// it and all after) and the new run terminated, so either way the claim
// has a terminated run whose reason names the stranger and where to reset.
func (g *provenanceGuard) tampered(ctx context.Context, t provenance.Task, f provenance.Finding) {
	key := fmt.Sprintf("%s:%s:history:%d", t.WorkflowID, t.RunID, f.Foreign.GetEventId())
	if g.handled(ctx, t.WorkflowID, key) {
		return // another worker, or this one before a restart, dead-lettered it
	}
	g.counter()
	reason := f.Reason()
	g.log.Error("ALERT: a claim's history holds commands this deployment did not write: someone who reaches the Temporal frontend "+
		"answered its workflow task; the run is dead-lettered (claimsctl dlq)", "alert", "foreign_workflow_task",
		"workflow_id", t.WorkflowID, "run_id", t.RunID, "event", f.Foreign.GetEventId(), "reason", reason)
	_, err := g.st.RecordRefusal(ctx, store.Refusal{Key: key, ClaimID: t.WorkflowID, At: time.Now().UTC(), Channel: "workflow-task", Decision: "history", Code: "foreign-history", Reason: reason})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		g.log.Error("foreign history not recorded on the claim", "workflow_id", t.WorkflowID, "error", err)
	}
	run := t.RunID
	d, err := g.c.DescribeWorkflow(ctx, t.WorkflowID, t.RunID)
	if err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		var reset *workflowservice.ResetWorkflowExecutionResponse
		reset, err = g.c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{Namespace: g.namespace,
			WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: t.WorkflowID, RunId: t.RunID}, Reason: reason,
			WorkflowTaskFinishEventId: f.Foreign.GetEventId(), RequestId: uuid.NewString()})
		run = reset.GetRunId()
	}
	if err == nil {
		err = g.c.TerminateWorkflow(ctx, t.WorkflowID, run, reason)
	}
	var denied *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &denied):
		g.log.Error("this worker may not dead-letter the tampered run on this server: an operator must (temporal workflow terminate, or claimsctl dlq redrive)",
			"workflow_id", t.WorkflowID, "run_id", t.RunID)
	case err != nil:
		g.log.Error("tampered run not dead-lettered", "workflow_id", t.WorkflowID, "run_id", t.RunID, "error", err)
	}
}

// handled says whether the store already records this finding on the
// claim.
func (g *provenanceGuard) handled(ctx context.Context, claimID, key string) bool {
	rs, err := g.st.Refusals(ctx, claimID)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(rs, func(r store.Refusal) bool { return r.Key == key })
}

// sweep checks, every interval until ctx ends, the claim runs that closed
// since the last look while their claim stayed open in the store, bound
// to them: a run that closed of its own code closed its claim or wrote
// its dead letter; one a stranger ended did neither, and nothing replays
// it. Those not this deployment's are dead-lettered.
func (g *provenanceGuard) sweep(ctx context.Context, every time.Duration) {
	if g == nil || every <= 0 {
		return
	}
	from := time.Now().Add(-time.Hour)
	seen := map[string]bool{}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		began := time.Now()
		if err := g.sweepOnce(ctx, from, seen); err != nil && ctx.Err() == nil {
			g.log.Warn("closed claim runs not checked for foreign history", "error", err)
		} else {
			from = began.Add(-2 * every) // visibility lags; seen keeps each run checked once
		}
		if len(seen) > 100_000 {
			clear(seen)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (g *provenanceGuard) sweepOnce(ctx context.Context, from time.Time, seen map[string]bool) error {
	q := fmt.Sprintf("WorkflowType = %q AND ExecutionStatus != 'Running' AND CloseTime >= %q", workflows.WorkflowType, from.UTC().Format(time.RFC3339))
	var token []byte
	for {
		resp, err := g.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			return err
		}
		for _, e := range resp.GetExecutions() {
			id, run := e.GetExecution().GetWorkflowId(), e.GetExecution().GetRunId()
			if seen[run] {
				continue
			}
			rec, err := g.st.GetClaim(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				seen[run] = true
				continue
			}
			if err != nil {
				return err
			}
			seen[run] = true
			if rec.Closed() || rec.RunID != run {
				continue // closed by step 8, or another run's: its own code's doing
			}
			// Its own dead letter, or a stranger's ending: the history says.
			events, err := g.history(ctx, id, run)
			if err != nil {
				delete(seen, run)
				return err
			}
			task := provenance.Task{Namespace: g.namespace, WorkflowID: id, RunID: run}
			if f := g.signer.Check(events, g.namespace, id, run, g.since(ctx)); f.Foreign != nil {
				g.tampered(ctx, task, f)
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}
