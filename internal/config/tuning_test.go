package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

func TestTuneDefaultsToAutoscalingPollers(t *testing.T) {
	t.Setenv("WORKER_POLLERS", "")
	t.Setenv("WORKFLOW_CACHE_SIZE", "")
	var opts worker.Options
	require.NoError(t, Tune(&opts))
	want := worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: 2, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: DefaultMaxPollers})
	assert.Equal(t, want, opts.WorkflowTaskPollerBehavior)
	assert.Equal(t, want, opts.ActivityTaskPollerBehavior)

	t.Setenv("WORKER_POLLERS", "auto:40")
	require.NoError(t, Tune(&opts))
	assert.Equal(t, worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
		InitialNumberOfPollers: 2, MinimumNumberOfPollers: 1, MaximumNumberOfPollers: 40}), opts.WorkflowTaskPollerBehavior)
}

func TestTuneWorkflowTaskSlots(t *testing.T) {
	t.Setenv("WORKFLOW_TASK_SLOTS", "")
	var opts worker.Options
	require.NoError(t, Tune(&opts))
	assert.Zero(t, opts.MaxConcurrentWorkflowTaskExecutionSize, "unset: the SDK's bound")

	t.Setenv("WORKFLOW_TASK_SLOTS", "128")
	require.NoError(t, Tune(&opts))
	assert.Equal(t, 128, opts.MaxConcurrentWorkflowTaskExecutionSize)
}

func TestTuneFixedPollers(t *testing.T) {
	t.Setenv("WORKER_POLLERS", "4")
	var opts worker.Options
	require.NoError(t, Tune(&opts))
	want := worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: 4})
	assert.Equal(t, want, opts.WorkflowTaskPollerBehavior)
	assert.Equal(t, want, opts.ActivityTaskPollerBehavior)
}

func TestTuneRefusesBadValues(t *testing.T) {
	for name, env := range map[string][2]string{
		"pollers zero":   {"WORKER_POLLERS", "0"},
		"pollers word":   {"WORKER_POLLERS", "many"},
		"pollers auto:0": {"WORKER_POLLERS", "auto:0"},
		"pollers auto:x": {"WORKER_POLLERS", "auto:x"},
		"cache negative": {"WORKFLOW_CACHE_SIZE", "-1"},
		"cache word":     {"WORKFLOW_CACHE_SIZE", "big"},
		"slots one":      {"WORKFLOW_TASK_SLOTS", "1"},
		"slots negative": {"WORKFLOW_TASK_SLOTS", "-5"},
		"slots word":     {"WORKFLOW_TASK_SLOTS", "few"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			var opts worker.Options
			err := Tune(&opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), env[0])
		})
	}
}

func TestGRPCCompressionIsOffOnLoopbackOnly(t *testing.T) {
	t.Setenv("TEMPORAL_GRPC_COMPRESSION", "")
	for addr, want := range map[string]client.GrpcCompression{
		"localhost:7233":           &client.GrpcCompressionNone{},
		"127.0.0.1:7233":           &client.GrpcCompressionNone{},
		"[::1]:7233":               &client.GrpcCompressionNone{},
		"temporal.internal:7233":   &client.GrpcCompressionGzip{},
		"ns.acct.tmprl.cloud:7233": &client.GrpcCompressionGzip{},
		"10.0.0.5:7233":            &client.GrpcCompressionGzip{},
	} {
		got, err := GRPCCompression(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, want, got, addr)
	}
	t.Setenv("TEMPORAL_GRPC_COMPRESSION", "gzip")
	got, err := GRPCCompression("localhost:7233")
	require.NoError(t, err)
	assert.Equal(t, &client.GrpcCompressionGzip{}, got)
	t.Setenv("TEMPORAL_GRPC_COMPRESSION", "none")
	got, err = GRPCCompression("temporal.internal:7233")
	require.NoError(t, err)
	assert.Equal(t, &client.GrpcCompressionNone{}, got)
	t.Setenv("TEMPORAL_GRPC_COMPRESSION", "zstd")
	_, err = GRPCCompression("localhost:7233")
	assert.ErrorContains(t, err, `TEMPORAL_GRPC_COMPRESSION="zstd"`)
}
