//go:build rehearsal

// This file is not built on its own: testbed/rollout.Build compiles it
// into the worker (package main) with go build -tags rehearsal -overlay,
// to play build v3 of a rehearsed deploy: a change to the claim
// workflow's command sequence made WITHOUT workflow.GetVersion, the
// mistake the replay check exists to stop. A new first step (a timer)
// runs before everything else, so no run recorded by another build
// replays on this one, and no run this one starts replays on another.

package main

import (
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

func init() { rehearsal = append(rehearsal, &newFirstStep{}) }

type newFirstStep struct {
	interceptor.WorkerInterceptorBase
}

func (*newFirstStep) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &newFirstStepInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type newFirstStepInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *newFirstStepInbound) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (interface{}, error) {
	if workflow.GetInfo(ctx).WorkflowType.Name == "ClaimWorkflow" {
		_ = workflow.Sleep(ctx, time.Millisecond)
	}
	return i.Next.ExecuteWorkflow(ctx, in)
}
