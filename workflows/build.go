package workflows

import (
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// The build that decides. A decision names the build of the worker whose
// workflow task took it (Decided.BuildID, approvals.Decision.BuildID), and
// a replay must name the same one. On replay the SDK's
// workflow.GetInfo(ctx).GetCurrentBuildID() is the build the history
// records for the task. For a task run for the first time it is not
// always this worker's: after a worker replays a run it did not have in
// its cache, GetCurrentBuildID still names the build of the last task it
// replayed (SDK 1.51, internal_task_handlers.go sets it from the history
// and resets it only when a task starts). Measured: a claim parked under
// build-1 and approved on build-2 named build-1 (e2e/deployment_test.go).
// So a task run for the first time names the build the worker was
// started as, which the worker hands workflow code through WorkerBuild.

type buildKey struct{}

// WorkerBuild is the worker interceptor that tells workflow code which
// build this worker is (the Worker Deployment Version's build ID).
func WorkerBuild(buildID string) interceptor.WorkerInterceptor {
	return &workerBuild{buildID: buildID}
}

type workerBuild struct {
	interceptor.WorkerInterceptorBase
	buildID string
}

func (b *workerBuild) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workerBuildInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, buildID: b.buildID}
}

type workerBuildInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	buildID string
}

func (i *workerBuildInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	return i.Next.ExecuteWorkflow(workflow.WithValue(ctx, buildKey{}, i.buildID), in)
}

// workerBuildOf is the build WorkerBuild put on the workflow's context,
// "" without it (a replayer, the test environment). Read it once, in the
// workflow function: the contexts the SDK gives signal and update
// handlers derive from the workflow's root context, not from the one the
// interceptor handed the workflow function.
func workerBuildOf(ctx workflow.Context) string {
	b, _ := ctx.Value(buildKey{}).(string)
	return b
}

// currentBuild names the build running the current workflow task: the
// history's on replay, this worker's (workerBuild, from workerBuildOf)
// otherwise. A cached run stays on the worker that has it, so the build
// read when the run was loaded is the build running each task after.
func currentBuild(ctx workflow.Context, workerBuild string) string {
	if workerBuild != "" && !workflow.IsReplaying(ctx) {
		return workerBuild
	}
	return workflow.GetInfo(ctx).GetCurrentBuildID()
}
