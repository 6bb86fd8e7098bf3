// Package heartbeat heartbeats every activity that has a HeartbeatTimeout,
// from the worker, so activity code need not. A worker that dies mid-activity
// stops heartbeating, and the server retries the step elsewhere after the
// heartbeat timeout (seconds) instead of the start-to-close timeout.
//
// The heartbeats carry no details: an activity that records its own
// progress details should not rely on this interceptor.
package heartbeat

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
)

// New returns the worker interceptor.
func New() interceptor.WorkerInterceptor { return &workerInterceptor{} }

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &inbound{}
	i.Next = next
	return i
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
}

func (i *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if timeout := activity.GetInfo(ctx).HeartbeatTimeout; timeout > 0 {
		done := make(chan struct{})
		defer close(done)
		go beat(ctx, timeout/3, done)
	}
	return i.Next.ExecuteActivity(ctx, in)
}

func beat(ctx context.Context, every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			activity.RecordHeartbeat(ctx)
		}
	}
}
