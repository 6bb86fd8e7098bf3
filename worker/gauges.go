package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/workflows"
)

// watchApprovals keeps approvals_waiting{stage} current from visibility:
// a count of parked claims is a property of the namespace, not of any one
// workflow, so the worker asks the server every 30 s.
func watchApprovals(c client.Client, h client.MetricsHandler, logger *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			for _, stage := range []string{workflows.StatusWaiting, workflows.StatusEscalated} {
				resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{
					Query: fmt.Sprintf("%s = %q AND ExecutionStatus = 'Running'", workflows.ClaimStatusKey.GetName(), stage),
				})
				if err != nil {
					if ctx.Err() == nil {
						logger.Debug("approvals gauge not updated", "error", err)
					}
					continue
				}
				h.WithTags(map[string]string{"stage": stage}).Gauge(metrics.ApprovalsWaiting).Update(float64(resp.GetCount()))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return cancel
}
