package e2e

import (
	"context"

	"github.com/stretchr/testify/require"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// thief is issue 42's attacker on a server that is not the insurer's own:
// a client of the frontend without payload keys, speaking the raw API,
// presenting the worker's deployment version as the server reports it.
type thief struct {
	w  *world
	c  client.Client
	as *deploymentpb.WorkerDeploymentOptions
}

func (w *world) thief(ctx context.Context) *thief {
	c, err := client.Dial(client.Options{HostPort: addr(w.env), Namespace: "default"})
	require.NoError(w.t, err)
	w.t.Cleanup(c.Close)
	dep, err := c.WorkflowService().DescribeWorkerDeployment(ctx, &workflowservice.DescribeWorkerDeploymentRequest{
		Namespace: "default", DeploymentName: config.DefaultDeploymentName})
	require.NoError(w.t, err)
	current := dep.GetWorkerDeploymentInfo().GetRoutingConfig().GetCurrentDeploymentVersion()
	require.NotEmpty(w.t, current.GetBuildId(), "the worker's build is current")
	return &thief{w: w, c: c, as: &deploymentpb.WorkerDeploymentOptions{DeploymentName: current.GetDeploymentName(),
		BuildId: current.GetBuildId(), WorkerVersioningMode: enumspb.WORKER_VERSIONING_MODE_VERSIONED}}
}

var claimsQueue = &taskqueuepb.TaskQueue{Name: workflows.TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}

// activityTask takes the next activity task of the claims' queue.
func (th *thief) activityTask(ctx context.Context) *workflowservice.PollActivityTaskQueueResponse {
	var task *workflowservice.PollActivityTaskQueueResponse
	for task.GetTaskToken() == nil && ctx.Err() == nil {
		var err error
		task, err = th.c.WorkflowService().PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{
			Namespace: "default", TaskQueue: claimsQueue, Identity: "thief", DeploymentOptions: th.as})
		require.NoError(th.w.t, err)
	}
	return task
}

// workflowTask takes the claims' workflow tasks until one of claim id's.
func (th *thief) workflowTask(ctx context.Context, id string) *workflowservice.PollWorkflowTaskQueueResponse {
	var task *workflowservice.PollWorkflowTaskQueueResponse
	for task.GetWorkflowExecution().GetWorkflowId() != id && ctx.Err() == nil {
		var err error
		task, err = th.c.WorkflowService().PollWorkflowTaskQueue(ctx, &workflowservice.PollWorkflowTaskQueueRequest{
			Namespace: "default", TaskQueue: claimsQueue, Identity: "thief", DeploymentOptions: th.as})
		require.NoError(th.w.t, err)
	}
	return task
}
