// Package otlpsink is an OTLP trace receiver for tests: a gRPC
// TraceService and the OTLP/HTTP /v1/traces endpoint, built on the
// official proto types (go.opentelemetry.io/proto/otlp), keeping every
// export it is sent. Tests point the programs' OTEL_EXPORTER_OTLP_ENDPOINT
// at it and read back exactly what a collector or Jaeger would have got.
package otlpsink

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Sink receives OTLP trace exports on a gRPC and an HTTP listener.
type Sink struct {
	collectortrace.UnimplementedTraceServiceServer
	grpc     *grpc.Server
	http     *http.Server
	grpcAddr string
	httpAddr string

	mu      sync.Mutex
	exports [][]byte // each request as received, for searching raw bytes
	spans   []Span
	conns   int
}

// Span is one exported span, flattened with its resource and scope.
type Span struct {
	Name, Kind     string
	TraceID        string
	SpanID         string
	ParentID       string
	Start, End     time.Time
	Attrs          map[string]any
	Resource       map[string]any
	Scope          string
	StatusCode     string
	StatusMessage  string
	Events         []Event
	LinkedTraceIDs []string
}

// Event is a span event with its attributes.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Start listens on two free loopback ports; Close stops both.
func Start() (*Sink, error) {
	s := &Sink{}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	hl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		gl.Close()
		return nil, err
	}
	s.grpcAddr, s.httpAddr = gl.Addr().String(), hl.Addr().String()
	s.grpc = grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(s.grpc, s)
	go s.grpc.Serve(counted{gl, s})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", s.serveHTTP)
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go s.http.Serve(counted{hl, s})
	return s, nil
}

// GRPCEndpoint is the OTEL_EXPORTER_OTLP_ENDPOINT for OTLP/gRPC.
func (s *Sink) GRPCEndpoint() string { return "http://" + s.grpcAddr }

// HTTPEndpoint is the OTEL_EXPORTER_OTLP_ENDPOINT for OTLP/HTTP.
func (s *Sink) HTTPEndpoint() string { return "http://" + s.httpAddr }

// Close stops the listeners.
func (s *Sink) Close() {
	s.grpc.Stop()
	_ = s.http.Close()
}

// Connections is how many connections the sink accepted.
func (s *Sink) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns
}

// Export is the TraceService's one method.
func (s *Sink) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	raw, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	s.keep(raw, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (s *Sink) serveHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.keep(raw, &req)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *Sink) keep(raw []byte, req *collectortrace.ExportTraceServiceRequest) {
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, flatten(sp, res, ss.GetScope().GetName()))
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports = append(s.exports, raw)
	s.spans = append(s.spans, spans...)
}

func flatten(sp *tracepb.Span, res map[string]any, scope string) Span {
	out := Span{Name: sp.GetName(), Kind: sp.GetKind().String(), TraceID: hex.EncodeToString(sp.GetTraceId()),
		SpanID: hex.EncodeToString(sp.GetSpanId()), ParentID: hex.EncodeToString(sp.GetParentSpanId()),
		Start: time.Unix(0, int64(sp.GetStartTimeUnixNano())), End: time.Unix(0, int64(sp.GetEndTimeUnixNano())),
		Attrs: attrs(sp.GetAttributes()), Resource: res, Scope: scope,
		StatusCode: sp.GetStatus().GetCode().String(), StatusMessage: sp.GetStatus().GetMessage()}
	for _, e := range sp.GetEvents() {
		out.Events = append(out.Events, Event{Name: e.GetName(), Attrs: attrs(e.GetAttributes())})
	}
	for _, l := range sp.GetLinks() {
		out.LinkedTraceIDs = append(out.LinkedTraceIDs, hex.EncodeToString(l.GetTraceId()))
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) any {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return x.IntValue
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue
	case *commonpb.AnyValue_DoubleValue:
		return x.DoubleValue
	case *commonpb.AnyValue_ArrayValue:
		var out []any
		for _, e := range x.ArrayValue.GetValues() {
			out = append(out, value(e))
		}
		return out
	case *commonpb.AnyValue_BytesValue:
		return x.BytesValue
	}
	return nil
}

// Spans is every span received so far, oldest start first.
func (s *Sink) Spans() []Span {
	s.mu.Lock()
	out := append([]Span(nil), s.spans...)
	s.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Contains says whether any export received holds b anywhere in its bytes:
// a name, an attribute, an event, a resource, a status message.
func (s *Sink) Contains(b []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, raw := range s.exports {
		if bytes.Contains(raw, b) {
			return true
		}
	}
	return false
}

type counted struct {
	net.Listener
	s *Sink
}

func (l counted) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.s.mu.Lock()
		l.s.conns++
		l.s.mu.Unlock()
	}
	return c, err
}
