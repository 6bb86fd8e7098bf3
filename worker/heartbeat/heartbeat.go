// Package heartbeat heartbeats every activity that has a HeartbeatTimeout,
// from the worker, so activity code need not, and holds the activity to the
// lease those heartbeats keep.
//
// A worker that dies mid-activity stops heartbeating, and the server retries
// the step elsewhere after the heartbeat timeout (seconds) instead of the
// start-to-close timeout. A worker that is cut off from the frontend but
// alive is the harder case: the server gives its attempt to another worker
// all the same, and nothing tells the first one, which may still reach
// Stripe or the claims store and act after the step was done elsewhere.
// So each heartbeat here is sent and answered synchronously, and an attempt
// is a lease: when no heartbeat has been answered for the heartbeat timeout
// less a margin, the worker gives the attempt up itself, before the server
// can give it away, by cancelling the activity's context with ErrLeaseLost
// (every call the activity makes afterwards, to Stripe, the store or the
// mailer, fails at once). An answer that the attempt is no longer current
// (NotFound) cancels it with ErrTaskLost. What a cut-off worker had already
// put on the wire before its lease ran out is the receiver's to
// deduplicate: the Idempotency-Key, the outbox, the keyed writes.
//
// The heartbeats carry no details: an activity that records its own
// progress details should not rely on this interceptor.
package heartbeat

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
)

// The causes an attempt's context is cancelled with.
var (
	// ErrLeaseLost: no heartbeat was answered for the heartbeat timeout
	// less the margin; the server is about to give the attempt away.
	ErrLeaseLost = errors.New("heartbeat lease lost: the frontend answered no heartbeat in time, so the attempt is given up before the server gives it to another worker")
	// ErrTaskLost: the server says the attempt is no longer current.
	ErrTaskLost = errors.New("attempt lost: the server no longer knows it (timed out and given to another worker)")
)

// ErrorType is the application error type of an attempt given up.
const ErrorType = "LeaseLost"

// Heartbeater sends one heartbeat and returns the server's answer; a
// client.Client is one.
type Heartbeater interface {
	RecordActivityHeartbeat(ctx context.Context, taskToken []byte, details ...any) error
}

var _ Heartbeater = client.Client(nil)

// New returns the worker interceptor; c sends the heartbeats (the worker's
// client).
func New(c Heartbeater) interceptor.WorkerInterceptor { return &workerInterceptor{c: c} }

type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	c Heartbeater
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	i := &inbound{c: w.c}
	i.Next = next
	return i
}

type inbound struct {
	interceptor.ActivityInboundInterceptorBase
	c Heartbeater
}

func (i *inbound) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	info := activity.GetInfo(ctx)
	if info.HeartbeatTimeout <= 0 || info.IsLocalActivity {
		return i.Next.ExecuteActivity(ctx, in)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	release := hold(ctx, cancel, i.c, info)
	res, err := i.Next.ExecuteActivity(ctx, in)
	release()
	if cause := context.Cause(ctx); err != nil && (errors.Is(cause, ErrLeaseLost) || errors.Is(cause, ErrTaskLost)) {
		activity.GetLogger(ctx).Warn("attempt given up", "cause", cause.Error(), "error", err)
		return nil, temporal.NewApplicationErrorWithCause(cause.Error(), ErrorType, err)
	}
	return res, err
}

// Margin is how long before the server's heartbeat timeout the worker gives
// an attempt up: a sixth of the timeout (0.5 s of 3 s). Heartbeats go every
// third, so one lost heartbeat leaves the lease standing and two do not.
func Margin(timeout time.Duration) time.Duration { return timeout / 6 }

// hold keeps the lease on the attempt until release is called: a heartbeat
// every third of the timeout (or as soon as the last is answered, if that
// took longer), each awaited; the lease runs from when the
// last answered one was sent (the server's timer starts later, when it
// receives it), first from the attempt's start.
func hold(ctx context.Context, cancel context.CancelCauseFunc, c Heartbeater, info activity.Info) (release func()) {
	timeout := info.HeartbeatTimeout
	term := timeout - Margin(timeout)
	start := time.Now()
	if !info.StartedTime.IsZero() && info.StartedTime.Before(start) {
		start = info.StartedTime
	}
	expiry := time.AfterFunc(time.Until(start.Add(term)), func() { cancel(ErrLeaseLost) })
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(timeout / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			sent := time.Now()
			// A slow answer that comes in time still renews the lease;
			// one slower than half the timeout is given up on, and the
			// next heartbeat goes.
			hctx, hcancel := context.WithTimeout(ctx, timeout/2)
			err := c.RecordActivityHeartbeat(hctx, info.TaskToken)
			hcancel()
			if ctx.Err() != nil {
				return // released, or the lease ran out meanwhile: it stays out
			}
			var notFound *serviceerror.NotFound
			var canceled *temporal.CanceledError
			switch {
			case err == nil:
				expiry.Reset(time.Until(sent.Add(term)))
			case errors.As(err, &notFound):
				cancel(ErrTaskLost)
				return
			case errors.As(err, &canceled), errors.Is(err, activity.ErrActivityPaused), errors.Is(err, activity.ErrActivityReset):
				// The server asks the attempt to stop: the SDK's own
				// heartbeat hears the same answer and cancels the activity
				// as it should (cancelled, paused or reset).
				activity.RecordHeartbeat(ctx)
				expiry.Reset(time.Until(sent.Add(term)))
			}
			// Anything else (unreachable, too slow): the lease runs on.
		}
	}()
	return func() {
		expiry.Stop()
		close(done)
		<-stopped
	}
}
