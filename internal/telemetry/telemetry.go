// Package telemetry turns on OpenTelemetry tracing from the standard OTEL_*
// variables, and only from them: every program calls Start first thing and
// the Shutdown it returns last, which flushes what is still buffered.
//
// Unset means off: with neither OTEL_EXPORTER_OTLP_ENDPOINT nor
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (nor OTEL_TRACES_EXPORTER=otlp) set, or
// with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, Start makes no
// exporter, starts no goroutine and dials nothing; the global tracer
// provider stays OpenTelemetry's no-op one, and On says false, so the
// programs add no Temporal tracing interceptor either.
//
// On, spans go by OTLP to the endpoint: gRPC unless
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL says
// http/protobuf. The exporters read the rest of their OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, certificates, compression) themselves, the
// SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default
// parentbased_always_on), OTEL_BSP_* and OTEL_SPAN_*_LIMIT, and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of this project's own spans.
const ScopeName = "github.com/durableclaims/durableclaims"

// The protocols OTEL_EXPORTER_OTLP_PROTOCOL may name.
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// Shutdown flushes the spans still buffered, stops the exporter and turns
// tracing off.
type Shutdown func(context.Context) error

var on atomic.Bool

// On says whether Start turned tracing on in this process.
func On() bool { return on.Load() }

// Tracer is the tracer this project's own spans come from: a no-op one
// while tracing is off.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// Settings is what Start reads from the environment.
type Settings struct {
	Enabled  bool
	Protocol string
	Endpoint string // as given, for the log line; the exporter reads it itself
	// CaptureContent records the model's prompts and answers on its spans
	// (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true): they hold
	// the claimant's words, so only against a Temporal frontend on this
	// machine (a development server), and refused otherwise.
	CaptureContent bool
}

// CaptureContentVar is the switch that records prompts and answers.
const CaptureContentVar = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

var capture atomic.Bool

// CaptureContent says whether model spans carry the prompts and answers.
func CaptureContent() bool { return capture.Load() }

// Read decides from getenv (os.Getenv in the programs) whether tracing is
// on and by which protocol.
func Read(getenv func(string) string) (Settings, error) {
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		disabled, err := strconv.ParseBool(v)
		if err != nil {
			return Settings{}, fmt.Errorf("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
		if disabled {
			return Settings{}, nil
		}
	}
	endpoint := first(getenv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Settings{}, nil
	case "":
		if endpoint == "" {
			return Settings{}, nil
		}
	case "otlp":
	default:
		return Settings{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", exp)
	}
	s := Settings{Enabled: true, Endpoint: endpoint, Protocol: first(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")}
	if v := strings.TrimSpace(getenv(CaptureContentVar)); v != "" {
		c, err := strconv.ParseBool(v)
		if err != nil {
			return Settings{}, fmt.Errorf("%s=%q: want true or false", CaptureContentVar, v)
		}
		addr := first(getenv, "TEMPORAL_ADDRESS")
		if c && !loopback(addr) {
			return Settings{}, fmt.Errorf("%s=true records claimants' words in traces: refused unless the Temporal frontend (TEMPORAL_ADDRESS=%q) is a development server on this machine",
				CaptureContentVar, addr)
		}
		s.CaptureContent = c
	}
	switch s.Protocol {
	case "":
		s.Protocol = ProtocolGRPC
	case ProtocolGRPC, ProtocolHTTP:
	default:
		return Settings{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", s.Protocol)
	}
	return s, nil
}

func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// Start turns tracing on when the environment asks for it, for the
// program service (the service.name unless OTEL_SERVICE_NAME says
// otherwise). Off, it returns a Shutdown that does nothing.
func Start(ctx context.Context, service string) (Settings, Shutdown, error) {
	s, err := Read(os.Getenv)
	if err != nil || !s.Enabled {
		return s, func(context.Context) error { return nil }, err
	}
	var exporter sdktrace.SpanExporter
	switch s.Protocol {
	case ProtocolHTTP:
		exporter, err = otlptracehttp.New(ctx)
	default:
		exporter, err = otlptracegrpc.New(ctx)
	}
	if err != nil {
		return Settings{}, nil, fmt.Errorf("tracing: OTLP exporter (%s): %w", s.Protocol, err)
	}
	// The program's name first, then what OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES say: the environment wins.
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(service)))
	if err == nil {
		var env *resource.Resource
		if env, err = resource.New(ctx, resource.WithFromEnv()); err == nil {
			res, err = resource.Merge(res, env)
		}
	}
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		_ = exporter.Shutdown(ctx)
		return Settings{}, nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	on.Store(true)
	capture.Store(s.CaptureContent)
	return s, func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// loopback says whether a Temporal address is on this machine; empty is
// the SDK's default, localhost:7233.
func loopback(addr string) bool {
	if addr == "" {
		return true
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || ip != nil && ip.IsLoopback()
}
