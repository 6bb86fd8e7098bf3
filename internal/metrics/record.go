package metrics

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.temporal.io/sdk/activity"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/workflow"
)

// Activity counts one occurrence of name from an activity.
func Activity(ctx context.Context, name string, tags map[string]string) {
	if !activity.IsActivity(ctx) {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(tags).Counter(name).Inc(1)
}

// ActivityAdd adds n to a counter from an activity.
func ActivityAdd(ctx context.Context, name string, n int64, tags map[string]string) {
	if !activity.IsActivity(ctx) || n <= 0 {
		return
	}
	activity.GetMetricsHandler(ctx).WithTags(tags).Counter(name).Inc(n)
}

// Count counts one occurrence of name from workflow code (not on replay).
func Count(ctx workflow.Context, name string, tags map[string]string) {
	workflow.GetMetricsHandler(ctx).WithTags(tags).Counter(name).Inc(1)
}

// Buckets for the histograms of values.
var (
	bytesBuckets  = []float64{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 1 << 20}
	eventsBuckets = []float64{5, 10, 20, 30, 40, 60, 80, 120, 200, 400}
)

// Observe records a value (a history size) in a histogram from workflow
// code. The SDK handler has no value histograms, so this goes to the
// OpenTelemetry meter underneath it, and checks replay itself.
func Observe(ctx workflow.Context, name string, v int64, tags map[string]string) {
	if workflow.IsReplaying(ctx) {
		return
	}
	h := temporalotel.ExtractMetricsHandler(workflow.GetMetricsHandler(ctx))
	if h == nil {
		return // no OpenTelemetry handler: tests, or metrics off
	}
	unit, buckets := "By", bytesBuckets
	if name == ClaimHistoryEvents {
		unit, buckets = "{event}", eventsBuckets
	}
	hist, err := h.GetMeter().Int64Histogram(name, metric.WithUnit(unit), metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		return
	}
	base := h.GetAttributes()
	attrs := base.ToSlice()
	for k, v := range tags {
		attrs = append(attrs, attribute.String(k, v))
	}
	hist.Record(context.Background(), v, metric.WithAttributeSet(attribute.NewSet(attrs...)))
}
