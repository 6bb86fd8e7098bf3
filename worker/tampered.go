package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/worker/provenance"
)

// signing is the worker's half of worker/provenance: every workflow task
// completion it sends is signed, and a run whose task fails replay is
// checked; one holding a completion nobody of this deployment signed is
// dead-lettered: terminated with the reason, the refusal recorded on the
// claim, counted and alerted. Without payload keys (PAYLOAD_ENCRYPTION=off)
// there is nothing to sign with, and it says so.
func signing(st *store.Store, deployment string, counter func(), logger *slog.Logger) (grpc.DialOption, func(client.Client), error) {
	kr, err := config.PayloadKeys()
	if err != nil {
		return nil, nil, err
	}
	if kr == nil {
		logger.Warn("PAYLOAD_ENCRYPTION=off: workflow task completions are not signed, so a claim's task answered by a stranger is not told from this deployment's own")
		return grpc.EmptyDialOption{}, func(client.Client) {}, nil
	}
	s, err := provenance.NewSigner(kr)
	if err != nil {
		return nil, nil, err
	}
	var c client.Client // set once dialled: checks run only after tasks
	history := func(ctx context.Context, id, runID string) ([]*historypb.HistoryEvent, error) {
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
	}
	since := func(ctx context.Context) time.Time {
		t, err := st.FirstBuild(ctx, deployment)
		if err != nil {
			logger.Warn("first signing build unknown: runs are judged as if started before it", "error", err)
		}
		return t
	}
	tampered := func(ctx context.Context, t provenance.Task, f provenance.Finding) {
		counter()
		reason := f.Reason()
		logger.Error("ALERT: a claim's history holds commands this deployment did not write: someone who reaches the Temporal frontend "+
			"answered its workflow task; the run is dead-lettered (claimsctl dlq)", "alert", "foreign_workflow_task",
			"workflow_id", t.WorkflowID, "run_id", t.RunID, "event", f.Foreign.GetEventId(), "reason", reason)
		_, err := st.RecordRefusal(ctx, store.Refusal{Key: fmt.Sprintf("%s:%s:history:%d", t.WorkflowID, t.RunID, f.Foreign.GetEventId()),
			ClaimID: t.WorkflowID, At: time.Now().UTC(), Channel: "workflow-task", Decision: "history", Code: "foreign-history", Reason: reason})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			logger.Error("foreign history not recorded on the claim", "workflow_id", t.WorkflowID, "error", err)
		}
		err = c.TerminateWorkflow(ctx, t.WorkflowID, t.RunID, reason)
		var denied *serviceerror.PermissionDenied
		switch {
		case errors.As(err, &denied):
			logger.Error("this worker may not terminate the tampered run on this server: an operator must (temporal workflow terminate, or claimsctl dlq redrive)",
				"workflow_id", t.WorkflowID, "run_id", t.RunID)
		case err != nil:
			logger.Error("tampered run not terminated", "workflow_id", t.WorkflowID, "run_id", t.RunID, "error", err)
		}
	}
	logf := func(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }
	return grpc.WithChainUnaryInterceptor(s.Interceptor(history, since, tampered, logf)), func(cl client.Client) { c = cl }, nil
}
