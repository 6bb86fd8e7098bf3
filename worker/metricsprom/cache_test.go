package metricsprom

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

func newTestHandler(t *testing.T) (*cached, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return newCached(temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter: provider.Meter("test"), UseMonotonicCounters: true,
	})), reader
}

// sums reads every int64 sum's data points as "name{attributes}" → value.
func sums(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					out[m.Name+dp.Attributes.Encoded(attribute.DefaultEncoder())] += dp.Value
				}
			}
		}
	}
	return out
}

// A handler derived twice for the same tags is the same handler, with the
// same instruments, and records under the attributes of every tag set
// that derived it, a later tag overriding an earlier one of its key.
func TestDerivedHandlersAreKeptAndRecordTheirTags(t *testing.T) {
	h, reader := newTestHandler(t)
	ns := h.WithTags(map[string]string{"namespace": "default"})
	pay := ns.WithTags(map[string]string{"task_queue": "claims", "activity_type": "PayClaimant"})
	again := h.WithTags(map[string]string{"namespace": "default"}).WithTags(map[string]string{"activity_type": "PayClaimant", "task_queue": "claims"})
	assert.Same(t, pay, again)
	pay.Counter("tasks")
	pay.Timer("latency")
	pay.Gauge("slots")
	room := h.shared.room.Load()
	again.Counter("tasks")
	again.Timer("latency")
	again.Gauge("slots")
	assert.Equal(t, room, h.shared.room.Load(), "the instruments are kept, not made again")
	for _, kept := range []*sync.Map{&pay.(*cached).counters, &pay.(*cached).timers, &pay.(*cached).gauges} {
		n := 0
		kept.Range(func(_, _ any) bool { n++; return true })
		assert.Equal(t, 1, n)
	}
	assert.Same(t, h, h.WithTags(nil))
	assert.NotSame(t, h.WithTags(map[string]string{"a": "x:1:b:1:y"}), h.WithTags(map[string]string{"a": "x", "b": "y"}),
		"a tag's value never reads as more tags")

	pay.Counter("tasks").Inc(2)
	again.Counter("tasks").Inc(3)
	ns.WithTags(map[string]string{"task_queue": "other"}).Counter("tasks").Inc(1)
	pay.WithTags(map[string]string{"task_queue": "sticky"}).Counter("tasks").Inc(7)
	pay.Timer("latency").Record(time.Millisecond)

	assert.Equal(t, map[string]int64{
		"tasks" + "activity_type=PayClaimant,namespace=default,task_queue=claims": 5,
		"tasks" + "namespace=default,task_queue=other":                            1,
		"tasks" + "activity_type=PayClaimant,namespace=default,task_queue=sticky": 7,
	}, sums(t, reader))

	otel := temporalotel.ExtractMetricsHandler(pay)
	require.NotNil(t, otel, "the OpenTelemetry handler is reachable underneath, for histograms")
	attrs := otel.GetAttributes()
	v, ok := attrs.Value("activity_type")
	assert.True(t, ok)
	assert.Equal(t, "PayClaimant", v.AsString())
}

// Past the bound nothing more is kept, and everything still records.
func TestDerivedHandlersAreBoundedAndStillRecord(t *testing.T) {
	h, reader := newTestHandler(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range maxCached {
				d := h.WithTags(map[string]string{"i": fmt.Sprint(i)})
				d.Counter("n").Inc(1)
				d.Counter(fmt.Sprintf("m%d", g%2)).Inc(1)
			}
		})
	}
	wg.Wait()
	kept := 0
	h.shared.derived.Range(func(_, v any) bool {
		kept++
		v.(*cached).counters.Range(func(_, _ any) bool { kept++; return true })
		return true
	})
	assert.LessOrEqual(t, kept, maxCached)
	assert.GreaterOrEqual(t, h.shared.room.Load(), int64(0))

	got := sums(t, reader)
	var n, m int64
	for k, v := range got {
		switch k[0] {
		case 'n':
			n += v
		case 'm':
			m += v
		}
	}
	assert.Equal(t, int64(4*maxCached), n)
	assert.Equal(t, int64(4*maxCached), m)
	assert.Equal(t, int64(4), got["ni=17"], "each tag set counted by the four")
}
