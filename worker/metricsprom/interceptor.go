package metricsprom

import (
	"context"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/metrics"
)

// Interceptor counts resumes: an activity attempt after the first (the
// server retried a step whose worker died or failed), and a workflow
// rebuilt from its history on this worker (after a worker change, or after
// it left the workflow cache).
func (p *Prometheus) Interceptor() interceptor.WorkerInterceptor { return &resumes{p: p} }

type resumes struct {
	interceptor.WorkerInterceptorBase
	p *Prometheus
}

func (r *resumes) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &activityResumes{}
	i.Next = next
	return i
}

type activityResumes struct {
	interceptor.ActivityInboundInterceptorBase
}

func (a *activityResumes) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if activity.GetInfo(ctx).Attempt > 1 {
		metrics.Activity(ctx, metrics.ClaimResumes, map[string]string{"kind": "activity"})
	}
	return a.Next.ExecuteActivity(ctx, in)
}

func (r *resumes) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &workflowResumes{p: r.p}
	i.Next = next
	return i
}

type workflowResumes struct {
	interceptor.WorkflowInboundInterceptorBase
	p *Prometheus
}

// ExecuteWorkflow starts the workflow function; it replays when this worker
// rebuilds a run that began elsewhere or earlier. The workflow's own handler
// is silent during replay, so this counts with the worker's.
func (w *workflowResumes) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	if workflow.IsReplaying(ctx) {
		w.p.Handler.WithTags(map[string]string{"kind": "replay", "workflow_type": workflow.GetInfo(ctx).WorkflowType.Name}).
			Counter(metrics.ClaimResumes).Inc(1)
	}
	return w.Next.ExecuteWorkflow(ctx, in)
}
