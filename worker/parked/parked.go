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
// is delivered, never what the workflow does.
//
// Once the server has accepted such a completion, the run's copy in the
// worker's cache is dead weight: its next task carries the whole history,
// and the SDK discards a cached run whose task starts at the first event
// and replays it (GetOrCreateWorkflowContext). Until newer runs push it
// out of the cache it holds its coroutines and state (~125 KiB a claim,
// docs/performance.md), and in a catastrophe week the cache is all parked
// claims while the claims being worked are the ones pushed out. The Go SDK
// drops one run from its cache only when the completion fails (1.51 has no
// other per-run eviction), so Interceptor answers the SDK ErrReleased for
// a parking completion the server accepted. The SDK then evicts the run
// and logs the error; Logger keeps that log at debug level.
package parked

import (
	"context"
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/log"
	"google.golang.org/grpc"
)

// ErrReleased is what Interceptor answers the SDK for the completion of a
// task that parked its run, once the server accepted it: the SDK drops a
// run from its cache when its completion fails. Nothing failed.
var ErrReleased = errors.New("parked: the server accepted the completion; the run leaves this worker's cache until its timer fires")

// DefaultAfter is STICKY_RELEASE_AFTER's default: a run that will sleep at
// least this long is parked. Shorter than the approval wait's first
// deadline in any policy (a reminder half way through an hour's TTL at
// the least), longer than the waits for model capacity a provider asks
// for (Retry-After of seconds), which end with the run back on the same
// worker.
const DefaultAfter = 30 * time.Second

// Interceptor is a gRPC client interceptor for the worker's connection to
// the frontend: completions of workflow tasks that park their run for at
// least after go without sticky attributes, and once accepted are answered
// ErrReleased so the SDK drops the run from its cache; unless the server
// handed back the run's next task in its answer (a signal came in
// meanwhile), which the SDK must go on to run. after ≤ 0 keeps every run
// sticky and cached (the SDK's behaviour).
//
// It must be the connection's outermost interceptor (grpc.WithUnaryInterceptor,
// not a chained one): it answers after the SDK's retries, and the SDK's
// metrics and error translation never see ErrReleased.
func Interceptor(after time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		r, ok := req.(*workflowservice.RespondWorkflowTaskCompletedRequest)
		// A page of a completion split in pages (over ~3.5 MiB) is not the
		// completion: an error on one would stop the SDK sending the rest.
		if !ok || after <= 0 || r.GetIntermediatePage() || r.GetPageNumber() > 0 || !Parks(r, after) {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		r.StickyAttributes = nil
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		if resp, ok := reply.(*workflowservice.RespondWorkflowTaskCompletedResponse); ok && resp.GetWorkflowTask() == nil {
			return ErrReleased
		}
		return nil
	}
}

// Logger passes l the SDK's logs, those that report ErrReleased at debug
// level: the SDK logs every failed completion, and a release is not one.
func Logger(l log.Logger) log.Logger { return quiet{l} }

type quiet struct{ log.Logger }

func (q quiet) Info(msg string, keyvals ...any)  { q.or(q.Logger.Info, keyvals)(msg, keyvals...) }
func (q quiet) Warn(msg string, keyvals ...any)  { q.or(q.Logger.Warn, keyvals)(msg, keyvals...) }
func (q quiet) Error(msg string, keyvals ...any) { q.or(q.Logger.Error, keyvals)(msg, keyvals...) }

// or is level, or Debug when the log reports ErrReleased.
func (q quiet) or(level func(string, ...any), keyvals []any) func(string, ...any) {
	for _, v := range keyvals {
		if err, ok := v.(error); ok && errors.Is(err, ErrReleased) {
			return q.Logger.Debug
		}
	}
	return level
}

// With keeps the filter on a logger with fields.
func (q quiet) With(keyvals ...any) log.Logger { return quiet{log.With(q.Logger, keyvals...)} }

// Parks says whether completing a workflow task with r leaves its run
// asleep for at least after: r starts a timer that long and nothing whose
// answer would wake the run sooner (an activity, a child workflow, a
// signal or cancellation sent to another run, a Nexus operation), does not
// end the run, and does not ask for another task at once.
//
// It sees one completion. A later task of the same wait that starts no
// timer (a signal refused, say, whose record is an activity) leaves the
// run sticky and cached again until the wait ends: correct, only not
// released.
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
			enumspb.COMMAND_TYPE_REQUEST_CANCEL_NEXUS_OPERATION,
			// The run ends: the SDK drops it from its cache itself, and
			// counts its end only when the completion succeeds.
			enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION,
			enumspb.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION:
			return false
		}
	}
	return long
}
