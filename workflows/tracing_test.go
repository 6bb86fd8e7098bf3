package workflows

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// The tracing interceptor the worker runs when OTEL_* turns tracing on
// adds no command: every recorded history replays with it, and a replay
// exports no span of an activity, signal or update it only re-reads, so a
// claim resumed on another worker is not traced twice; only the segment
// (RunWorkflow) of the worker that took it up.
func TestRecordedHistoriesReplayWithTracingOn(t *testing.T) {
	for _, f := range histories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			ti, err := telemetry.TemporalInterceptor(tp)
			require.NoError(t, err)
			require.NoError(t, replay(t, ClaimWorkflow, f, ti))
			require.NoError(t, tp.ForceFlush(context.Background()))
			for _, s := range exp.GetSpans() {
				assert.True(t, strings.HasPrefix(s.Name, "RunWorkflow:"), "a replay exported %s", s.Name)
			}
		})
	}
}
