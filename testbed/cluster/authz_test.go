package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
)

const (
	claimsQueue = "claims"
	deployment  = "durableclaims"
	build       = "build-1"
	rogueBuild  = "rogue-1"
)

// Pay stands in for the claim workflow's payment: an activity whose input
// is what a thief wants (the payee and the amount).
func Pay(ctx workflow.Context, payee string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3}})
	var paid string
	err := workflow.ExecuteActivity(ctx, "PayClaimant", payee).Get(ctx, &paid)
	return paid, err
}

func PayClaimant(_ context.Context, payee string) (string, error) { return "paid " + payee, nil }

// TestOnlyTheWorkerTakesTheClaimsTasks is issue 42's attack on a server of
// the insurer's own: a rogue client with another program's token, speaking
// the raw gRPC API, tries to take the claims' tasks as the worker's
// deployment version, to answer one by ID, to make its own build current,
// and to decide as the read-only role. Each is refused PermissionDenied and
// logged; the worker, with its own token, takes the same tasks.
func TestOnlyTheWorkerTakesTheClaimsTasks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, t.TempDir(), cluster.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })

	dial := func(role string) client.Client {
		t.Helper()
		o := c.ClientOptions(role)
		o.Logger = quiet()
		cl, err := client.Dial(o)
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	admin, operator := dial(temporalauth.RoleAdmin), dial(temporalauth.RoleOperator)

	// The worker, as a version of the deployment; the operator (not the
	// worker) makes it current.
	version := worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: build}
	startWorker := func() worker.Worker {
		w := worker.New(dial(temporalauth.RoleWorker), claimsQueue, worker.Options{
			DeploymentOptions: worker.DeploymentOptions{UseVersioning: true, Version: version,
				DefaultVersioningBehavior: workflow.VersioningBehaviorAutoUpgrade}})
		w.RegisterWorkflow(Pay)
		w.RegisterActivity(PayClaimant)
		require.NoError(t, w.Start())
		return w
	}
	w := startWorker()
	h := operator.WorkerDeploymentClient().GetHandle(deployment)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		_, err := h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: build})
		assert.NoError(ct, err)
	}, 30*time.Second, 200*time.Millisecond, "the operator makes the worker's build current")
	w.Stop() // the claims' tasks now wait for a poller

	run, err := admin.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "claim-0042", TaskQueue: claimsQueue}, Pay, "acct_1Ada")
	require.NoError(t, err)

	denied := func(what string, err error) {
		t.Helper()
		var pd *serviceerror.PermissionDenied
		require.ErrorAs(t, err, &pd, "%s: want PermissionDenied", what)
	}
	asWorker := &deploymentpb.WorkerDeploymentOptions{DeploymentName: deployment, BuildId: build,
		WorkerVersioningMode: enumspb.WORKER_VERSIONING_MODE_VERSIONED}
	queue := &taskqueuepb.TaskQueue{Name: claimsQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}

	// The starter's token polls the claims' queue as the worker's version.
	starter := dial(temporalauth.RoleStarter).WorkflowService()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = starter.PollWorkflowTaskQueue(pctx, &workflowservice.PollWorkflowTaskQueueRequest{Namespace: cluster.Namespace,
		TaskQueue: queue, Identity: "rogue", DeploymentOptions: asWorker})
	pcancel()
	denied("the starter polling the claims' workflow tasks", err)
	_, err = starter.PollActivityTaskQueue(ctx, &workflowservice.PollActivityTaskQueueRequest{Namespace: cluster.Namespace,
		TaskQueue: queue, Identity: "rogue", DeploymentOptions: asWorker})
	denied("the starter polling the claims' activity tasks", err)
	_, err = starter.RespondActivityTaskCompletedById(ctx, &workflowservice.RespondActivityTaskCompletedByIdRequest{
		Namespace: cluster.Namespace, WorkflowId: "claim-0042", RunId: run.GetRunID(), ActivityId: "5", Identity: "rogue"})
	denied("the starter answering a claim's activity by ID", err)

	// The inbox's token makes a build of its own current, or ramps it.
	inbox := dial(temporalauth.RoleInbox).WorkflowService()
	_, err = inbox.SetWorkerDeploymentCurrentVersion(ctx, &workflowservice.SetWorkerDeploymentCurrentVersionRequest{
		Namespace: cluster.Namespace, DeploymentName: deployment, BuildId: rogueBuild, IgnoreMissingTaskQueues: true, Identity: "rogue"})
	denied("the inbox setting the deployment's current version", err)
	_, err = inbox.SetWorkerDeploymentRampingVersion(ctx, &workflowservice.SetWorkerDeploymentRampingVersionRequest{
		Namespace: cluster.Namespace, DeploymentName: deployment, BuildId: rogueBuild, Percentage: 100, IgnoreMissingTaskQueues: true})
	denied("the inbox ramping a build", err)
	_, err = inbox.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{Namespace: cluster.Namespace})
	denied("the inbox resetting a run", err)

	// claimsctl's read-only role decides.
	reader := dial(temporalauth.RoleReader)
	_, err = reader.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: "claim-0042", UpdateName: "decide",
		Args: []any{"a receipt"}, WaitForStage: client.WorkflowUpdateStageCompleted})
	denied("the reader deciding", err)
	denied("the reader signalling approve", reader.SignalWorkflow(ctx, "claim-0042", "", "approve", "a receipt"))

	// Nothing moved: the routing is the operator's, and the claim's tasks
	// wait for the worker, which takes them.
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	require.NoError(t, err)
	require.Equal(t, build, desc.Info.RoutingConfig.CurrentVersion.BuildID)
	w = startWorker()
	defer w.Stop()
	var paid string
	require.NoError(t, run.Get(ctx, &paid))
	require.Equal(t, "paid acct_1Ada", paid)

	// Every refusal is in the server's log with who asked.
	logged, err := os.ReadFile(c.LogPath())
	require.NoError(t, err)
	for _, who := range []string{temporalauth.RoleStarter, temporalauth.RoleInbox, temporalauth.RoleReader} {
		assert.Contains(t, string(logged), `"subject":"`+temporalauth.Subject(who)+`"`, "%s's refusals are logged", who)
	}
	assert.GreaterOrEqual(t, strings.Count(string(logged), "durableclaims authz: call refused"), 8)
}
