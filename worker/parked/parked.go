// Package parked gives up a worker's claim on a workflow that has gone to
// sleep for a while.
//
// After every workflow task the SDK asks the server to send the run's next
// task to this worker's own sticky queue, where its cache holds the run:
// the worker carries on from memory instead of replaying the history. That
// pays when the next task comes soon, after an activity. It costs when it
// comes much later, after a claim has waited for an adjuster on a timer of
// minutes or days: by then the worker has usually dropped the run from its
// cache (128 runs by default, thousands parked), may have died, or may be
// one of the workers that must take a thousand such tasks in the same
// minute. The server holds the task on the sticky queue for the sticky
// schedule-to-start timeout (2 s here) before any other worker may take
// it, records the timeout and dispatches it a second time; measured in a
// burst of 5,000 escalations due together, 188 of 200 sampled claims paid
// that toll (docs/performance.md).
//
// Interceptor drops the sticky request from the completion of a task that
// parks the run: it starts a timer at least a given length and schedules
// no activity, child or other work whose result comes back soon. The
// server then sends the run's next task to the shared queue, with its full
// history, for whichever worker polls first. It changes only where a task
// is delivered, never what the workflow does: a worker that still holds
// the run in its cache replays it from the history the task carries.
package parked

import (
	"context"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// DefaultAfter is STICKY_RELEASE_AFTER's default: a run that will sleep at
// least this long is parked. Shorter than the approval wait's first
// deadline in any policy (a reminder half way through an hour's TTL at
// the least), longer than the waits for model capacity a provider asks
// for (Retry-After of seconds), which end with the run back on the same
// worker.
const DefaultAfter = 30 * time.Second

// Interceptor is a gRPC client interceptor for the worker's connection to
// the frontend: completions of workflow tasks that park their run for at
// least after go without sticky attributes. after ≤ 0 keeps every run
// sticky (the SDK's behaviour).
func Interceptor(after time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*workflowservice.RespondWorkflowTaskCompletedRequest); ok && after > 0 && Parks(r, after) {
			r.StickyAttributes = nil
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// Parks says whether completing a workflow task with r leaves its run
// asleep for at least after: r starts a timer that long and nothing whose
// answer would wake the run sooner (an activity, a child workflow, a
// signal or cancellation sent to another run, a Nexus operation), and does
// not ask for another task at once.
func Parks(r *workflowservice.RespondWorkflowTaskCompletedRequest, after time.Duration) bool {
	if r.GetForceCreateNewWorkflowTask() {
		return false
	}
	long := false
	for _, c := range r.GetCommands() {
		switch c.GetCommandType() {
		case enumspb.COMMAND_TYPE_START_TIMER:
			if c.GetStartTimerCommandAttributes().GetStartToFireTimeout().AsDuration() >= after {
				long = true
			}
		case enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK,
			enumspb.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_SCHEDULE_NEXUS_OPERATION,
			enumspb.COMMAND_TYPE_REQUEST_CANCEL_NEXUS_OPERATION:
			return false
		}
	}
	return long
}
