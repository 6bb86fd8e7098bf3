package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/durableclaims/durableclaims/workflows"
)

// historyWorkload is -only history (and claims): history per completed
// auto-approved claim, then one claim down each path, with its events,
// bytes and billable actions (costs.go).
type historyWorkload struct{}

func (*historyWorkload) names() []string { return []string{"history", "claims"} }

func (*historyWorkload) flags(*flag.FlagSet) {}

func (*historyWorkload) run(ctx context.Context, e *env, res *results) error {
	if err := e.history(ctx, res, fmt.Sprintf("r%d", e.o.reps)); err != nil {
		return err
	}
	return e.costs(ctx, res)
}

// history reads events and bytes per completed auto-approved claim.
func (e *env) history(ctx context.Context, res *results, tag string) error {
	resp, err := e.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		PageSize: 50, Query: fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Completed" AND WorkflowId STARTS_WITH "bench-%s-"`, workflows.WorkflowType, tag),
	})
	if err != nil {
		return err
	}
	for _, ex := range resp.GetExecutions() {
		d, err := e.client.DescribeWorkflow(ctx, ex.GetExecution().GetWorkflowId(), ex.GetExecution().GetRunId())
		if err != nil {
			return err
		}
		res.add("history_events", float64(d.RawResponse.GetWorkflowExecutionInfo().GetHistoryLength()))
		res.add("history_bytes", float64(d.RawResponse.GetWorkflowExecutionInfo().GetHistorySizeBytes()))
	}
	if len(resp.GetExecutions()) == 0 {
		return errors.New("history: no completed claims found")
	}
	return nil
}
