package telemetry

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/durableclaims/durableclaims/testbed/otlpsink"
)

var otelVars = []string{CaptureContentVar, "TEMPORAL_ADDRESS", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"}

func unsetAll(t *testing.T) {
	for _, v := range otelVars {
		t.Setenv(v, "")
	}
}

func TestReadTheStandardVariables(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want Settings
		err  string
	}{
		{"unset is off", nil, Settings{}, ""},
		{"an endpoint turns it on, gRPC by default", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317"},
			Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://localhost:4317"}, ""},
		{"the traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, Settings{Enabled: true, Protocol: ProtocolHTTP, Endpoint: "http://b:4318/v1/traces"}, ""},
		{"the traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, Settings{Enabled: true, Protocol: ProtocolHTTP, Endpoint: "http://a:4318"}, ""},
		{"otlp without an endpoint: the exporter's default", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Settings{Enabled: true, Protocol: ProtocolGRPC}, ""},
		{"disabled beats an endpoint", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317"}, Settings{}, ""},
		{"none beats an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317"}, Settings{}, ""},
		{"a bad switch is refused", map[string]string{"OTEL_SDK_DISABLED": "yes please"}, Settings{}, "OTEL_SDK_DISABLED"},
		{"content on a dev server", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", CaptureContentVar: "true", "TEMPORAL_ADDRESS": "127.0.0.1:7233"},
			Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://a:4317", CaptureContent: true}, ""},
		{"content with the default frontend", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", CaptureContentVar: "true"},
			Settings{Enabled: true, Protocol: ProtocolGRPC, Endpoint: "http://a:4317", CaptureContent: true}, ""},
		{"content refused for a remote frontend", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", CaptureContentVar: "true",
			"TEMPORAL_ADDRESS": "temporal.prod:7233"}, Settings{}, "refused"},
		{"an exporter we lack is refused", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, Settings{}, "OTEL_TRACES_EXPORTER"},
		{"http/json is refused", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, Settings{}, "http/json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Read(func(k string) string { return c.env[k] })
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// Off costs nothing: no exporter, no goroutine, no connection, and the
// global provider stays the no-op one. The sink listening where a stray
// setting would send spans proves no dial happens; the last case, on,
// proves the same sink would have seen one.
func TestOffStartsNothingAndDialsNothing(t *testing.T) {
	sink, err := otlpsink.Start()
	require.NoError(t, err)
	defer sink.Close()
	for _, env := range []map[string]string{
		{},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.GRPCEndpoint()},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.GRPCEndpoint()},
	} {
		unsetAll(t)
		for k, v := range env {
			t.Setenv(k, v)
		}
		before := runtime.NumGoroutine()
		s, shutdown, err := Start(context.Background(), "test")
		require.NoError(t, err)
		assert.False(t, s.Enabled)
		assert.False(t, On(), "off, no Temporal interceptor is added")
		_, isSDK := otel.GetTracerProvider().(*sdktrace.TracerProvider)
		assert.False(t, isSDK, "the global tracer provider is still the no-op one")
		_, span := Tracer().Start(context.Background(), "nothing")
		assert.False(t, span.IsRecording())
		span.End()
		require.NoError(t, shutdown(context.Background()))
		assert.Equal(t, before, runtime.NumGoroutine(), "no goroutine started (%v)", env)
	}
	assert.Zero(t, sink.Connections(), "nothing dialled the receiver")

	for _, proto := range []struct{ name, endpoint string }{{ProtocolGRPC, sink.GRPCEndpoint()}, {ProtocolHTTP, sink.HTTPEndpoint()}} {
		unsetAll(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", proto.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", proto.name)
		t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
		s, shutdown, err := Start(context.Background(), "telemetry-test")
		require.NoError(t, err)
		assert.True(t, s.Enabled && On())
		_, span := Tracer().Start(context.Background(), "on-"+proto.name)
		span.End()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, shutdown(ctx), "shutdown flushes")
		cancel()
		assert.False(t, On(), "shut down, tracing is off: no store or blob span is started")
		var got *otlpsink.Span
		for _, sp := range sink.Spans() {
			if sp.Name == "on-"+proto.name {
				got = &sp
			}
		}
		require.NotNil(t, got, "the span reached the receiver by %s", proto.name)
		assert.Equal(t, "telemetry-test", got.Resource["service.name"])
		assert.Equal(t, "test", got.Resource["deployment.environment.name"])
		assert.Equal(t, ScopeName, got.Scope)
	}
	assert.Positive(t, sink.Connections())
}
