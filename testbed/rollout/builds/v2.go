//go:build rehearsal

// This file is not built on its own: testbed/rollout.Build compiles it
// into the worker (package main) with go build -tags rehearsal -overlay,
// to play build v2 of a rehearsed deploy. Its change to the claim
// workflow's command sequence is behind workflow.GetVersion, as every
// change must be: a cooling-off timer before the payment. Runs recorded
// without it (v1's) replay as they ran and, when they reach the payment
// on v2, take the new path.

package main

import (
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

func init() { rehearsal = append(rehearsal, &coolingOff{}) }

type coolingOff struct {
	interceptor.WorkerInterceptorBase
}

func (*coolingOff) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &coolingOffInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type coolingOffInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *coolingOffInbound) Init(outbound interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&coolingOffOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: outbound}})
}

type coolingOffOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *coolingOffOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...interface{}) workflow.Future {
	if activityType == "PayClaimant" && workflow.GetVersion(ctx, "rehearsal-cooling-off", workflow.DefaultVersion, 1) == 1 {
		_ = workflow.Sleep(ctx, time.Second)
	}
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}
