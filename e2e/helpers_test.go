package e2e

import (
	"context"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/api/workflowservice/v1"
)

func transferGroup(id string) *stripe.TransferListParams {
	return &stripe.TransferListParams{TransferGroup: stripe.String(id)}
}

const (
	testTimeout = time.Minute
	pollEvery   = 100 * time.Millisecond
)

func (w *world) describe(id string) *workflowservice.DescribeWorkflowExecutionResponse {
	d, err := w.client.DescribeWorkflow(context.Background(), id, "")
	require.NoError(w.t, err)
	return d.RawResponse
}
