package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// closedEvenly describes every other claim as completed.
type closedEvenly struct{ client.Client }

func (closedEvenly) DescribeWorkflow(_ context.Context, id, _ string) (*client.WorkflowExecutionDescription, error) {
	status := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	var n int
	if _, err := fmt.Sscanf(id, "claim-%d", &n); err == nil && n%2 == 0 {
		status = enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED
	}
	return &client.WorkflowExecutionDescription{RawResponse: &workflowservice.DescribeWorkflowExecutionResponse{
		WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{Status: status}}}, nil
}

// The sweep drops the closed claims and keeps the running ones while its
// describers run at once (under -race, the map is never read while they
// write it: CI's soak once died of "concurrent map iteration and map write").
func TestSweepDropsTheClosedClaims(t *testing.T) {
	s := &soak{client: closedEvenly{}}
	pending := map[string]bool{}
	for i := range 200 {
		pending[fmt.Sprintf("claim-%d", i)] = true
	}
	s.sweep(context.Background(), pending)
	assert.Len(t, pending, 100)
	for id := range pending {
		var n int
		fmt.Sscanf(id, "claim-%d", &n)
		assert.Equal(t, 1, n%2, id)
	}
}
