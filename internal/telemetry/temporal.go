package telemetry

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// HeaderKey is the Temporal header every SDK carries the trace context in
// (the W3C traceparent, as JSON): the workflow's start event keeps the
// starter's, so the claim's trace is in its history for good.
const HeaderKey = "_tracer-data"

// Main starts tracing for a program (Start, with the process's context)
// and returns the stop its main calls last: it flushes what is buffered,
// waiting at most five seconds for the receiver. A setting it cannot use
// is an error the program refuses to start on.
func Main(service string) (stop func(), err error) {
	_, shutdown, err := Start(context.Background(), service)
	if err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "%s: tracing: spans not flushed: %v\n", service, err)
		}
	}, nil
}

// Flush exports the spans buffered so far, waiting at most timeout: the
// crash injector's last act before it kills the worker, so the trace
// shows what the killed worker did. Off, it does nothing.
func Flush(timeout time.Duration) {
	tp, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = tp.ForceFlush(ctx)
}

// TemporalInterceptor is the SDK's OpenTelemetry tracing interceptor on tp
// (the global provider in the programs), for
// client options (a worker made from the client runs it too, outermost):
// it carries the trace across start, signal, update and every activity in
// Temporal headers, and starts workflow spans only when the code is not
// replaying, so it adds no command and a replay exports nothing twice.
// Queries are not traced: a status read changes nothing of the claim, and
// the inbox and claimsctl read it often.
//
// A workflow's RunWorkflow span is a segment: one worker holding the
// claim, from when it took the claim up (not the claim's start, which the
// SDK would put on every segment) until the claim closed or left its cache
// (a parked claim does, after STICKY_RELEASE_AFTER). A claim waiting days
// holds no span open; the next segment continues the same trace, from the
// start event's header. An error is recorded by its type, never its
// message (scrubbed).
func TemporalInterceptor(tp trace.TracerProvider) (interceptor.Interceptor, error) {
	ti, err := opentelemetry.NewTracingInterceptor(opentelemetry.TracerOptions{
		Tracer:              tp.Tracer("temporal-sdk-go"),
		DisableQueryTracing: true,
		SpanStarter: func(ctx context.Context, t trace.Tracer, name string, opts ...trace.SpanStartOption) trace.Span {
			if strings.HasPrefix(name, "RunWorkflow:") {
				opts = append(opts, trace.WithTimestamp(time.Now()))
			}
			_, span := t.Start(ctx, name, opts...)
			return scrubbed{span}
		},
	})
	if err != nil {
		return nil, err
	}
	return replaySafe{ti}, nil
}

// replaySafe is the SDK's tracing interceptor with its update handler's
// span started only when the update is not being replayed, as its signal
// and activity spans are (the SDK, v1.51, starts a HandleUpdate span on
// every replay of a decided claim).
type replaySafe struct{ interceptor.Interceptor }

func (r replaySafe) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &replaySafeInbound{WorkflowInboundInterceptor: r.Interceptor.InterceptWorkflow(ctx, next), untraced: next}
}

// InterceptActivity adds, inside the SDK's RunActivity span, the attempt
// it is: a step retried after a crash reads as its attempt 2.
func (r replaySafe) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return r.Interceptor.InterceptActivity(ctx, &attemptTagger{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}})
}

type attemptTagger struct {
	interceptor.ActivityInboundInterceptorBase
}

// AttrAttempt is the attempt of an activity's RunActivity span.
const AttrAttempt = "temporal.activity.attempt"

func (a *attemptTagger) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64(AttrAttempt, int64(activity.GetInfo(ctx).Attempt)))
	return a.Next.ExecuteActivity(ctx, in)
}

type replaySafeInbound struct {
	interceptor.WorkflowInboundInterceptor
	untraced interceptor.WorkflowInboundInterceptor
}

func (i *replaySafeInbound) ExecuteUpdate(ctx workflow.Context, in *interceptor.UpdateInput) (any, error) {
	if workflow.IsReplaying(ctx) {
		return i.untraced.ExecuteUpdate(ctx, in)
	}
	return i.WorkflowInboundInterceptor.ExecuteUpdate(ctx, in)
}

// TraceID is the trace a Temporal header carries ("" when none): the
// claim's, read from its start event.
func TraceID(header *commonpb.Header) string {
	sc, err := SpanContext(header)
	if err != nil || !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// SpanContext is the span context a Temporal header carries; invalid when
// it carries none.
func SpanContext(header *commonpb.Header) (trace.SpanContext, error) {
	p := header.GetFields()[HeaderKey]
	if p == nil {
		return trace.SpanContext{}, nil
	}
	var m map[string]string
	if err := json.Unmarshal(p.GetData(), &m); err != nil {
		return trace.SpanContext{}, fmt.Errorf("trace header: %w", err)
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(m))
	return trace.SpanContextFromContext(ctx), nil
}

// TraceURL is the link to a trace from TRACE_URL_TEMPLATE ("{trace_id}" is
// replaced), "" when either is empty.
func TraceURL(template, traceID string) string {
	if template == "" || traceID == "" {
		return ""
	}
	return strings.ReplaceAll(template, "{trace_id}", traceID)
}

// Attribute keys of this project's own spans.
const (
	AttrClaimID  = "claim.id"
	AttrApprover = "claim.approver"
	AttrVerdict  = "claim.verdict"
	AttrChannel  = "claim.decision.channel"
)

// ClaimSpanContext is the span context a claim's run started with (its
// start event's header), for a link from work done for the claim outside
// its trace; invalid when the claim has none or its history is not
// readable.
func ClaimSpanContext(ctx context.Context, c client.Client, id string) trace.SpanContext {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return trace.SpanContext{}
	}
	e, err := it.Next()
	if err != nil {
		return trace.SpanContext{}
	}
	sc, _ := SpanContext(e.GetWorkflowExecutionStartedEventAttributes().GetHeader())
	return sc
}

// StartDecision starts the span of a decision sent to claim id by approver
// through channel (inbox, claimsctl), in the caller's own trace and linked
// to the claim's: a decision days after intake joins the claim's trace by
// that link, and no span of the claim's stays open while it waits. The
// caller sets AttrVerdict and ends it. Off, it reads nothing and returns a
// span that records nothing.
func StartDecision(ctx context.Context, c client.Client, id, approver, channel string) (context.Context, trace.Span) {
	if !On() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{trace.WithAttributes(attribute.String(AttrClaimID, id),
		attribute.String(AttrApprover, approver), attribute.String(AttrChannel, channel))}
	if sc := ClaimSpanContext(ctx, c, id); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("link.kind", "claim")}}))
	}
	return Tracer().Start(ctx, "claim.decide", opts...)
}
