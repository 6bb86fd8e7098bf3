// Package traceview reads one trace from a Jaeger query service and lays
// it out as a waterfall: a row per span, under its parent, with where it
// starts and how long it takes, for the inbox's trace page and claimsctl.
//
// It reads Jaeger's HTTP query API (GET /api/traces/{trace-id}), which
// Jaeger all-in-one serves beside its UI and which every Jaeger since 1.0
// answers in the same shape.
package traceview

import (
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ErrNotFound means the query service holds no span of the trace (not yet
// exported, sampled out, or past its storage's retention).
var ErrNotFound = errors.New("trace not found")

// Span is one row of the waterfall.
type Span struct {
	SpanID, ParentID string
	Name, Service    string
	// Depth is how many ancestors the span has in this trace; a span whose
	// parent is not in the trace (a link, or lost) is a root.
	Depth int
	// Start is from the trace's first span; Duration the span's own.
	Start, Duration time.Duration
	Error           bool
	// Attributes are the span's attributes worth a line in the waterfall
	// (Shown), in their order there.
	Attributes []Attribute
}

// Attribute is one key and its value as text.
type Attribute struct{ Key, Value string }

// Trace is a trace laid out: its spans depth first, each parent before its
// children, siblings by start.
type Trace struct {
	ID       string
	Spans    []Span
	Duration time.Duration
	Started  time.Time
}

// Shown are the attribute keys (or key prefixes, ending in ".") a row
// shows: what a payments or model-risk engineer reads a claim's trace for.
var Shown = []string{
	"claim.", "temporalWorkflowID", "temporalActivityID",
	"gen_ai.", "idempotency.", "stripe.", "payment.", "decision.",
	"http.request.method", "http.response.status_code", "error.type", "messaging.", "db.operation.name",
}

// ValidID says whether id is a trace ID as OpenTelemetry writes one: 32
// lower-case hex digits, not all zero.
func ValidID(id string) bool {
	_, err := hex.DecodeString(id)
	return err == nil && len(id) == 32 && strings.ToLower(id) == id && strings.Trim(id, "0") != ""
}

// Fetch reads trace id from the Jaeger query service at base (such as
// http://localhost:16686).
func Fetch(ctx context.Context, hc *http.Client, base, id string) (Trace, error) {
	if !ValidID(id) {
		return Trace{}, fmt.Errorf("traceview: %q is not a trace ID", id)
	}
	u, err := url.JoinPath(base, "api", "traces", id)
	if err != nil {
		return Trace{}, fmt.Errorf("traceview: query service %q: %w", base, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return Trace{}, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return Trace{}, fmt.Errorf("traceview: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return Trace{}, fmt.Errorf("traceview: %s: %w", id, ErrNotFound)
	}
	if res.StatusCode != http.StatusOK {
		return Trace{}, fmt.Errorf("traceview: %s answered %s", u, res.Status)
	}
	return Parse(io.LimitReader(res.Body, 32<<20), id)
}

// The query API's answer, as much of it as the waterfall needs.
type apiAnswer struct {
	Data []struct {
		TraceID string    `json:"traceID"`
		Spans   []apiSpan `json:"spans"`
		// Processes name each span's service by processID.
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
}

type apiSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64 `json:"startTime"` // microseconds since the epoch
	Duration  int64 `json:"duration"`  // microseconds
	Tags      []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

// Parse lays out the query API's answer r for trace id.
func Parse(r io.Reader, id string) (Trace, error) {
	var a apiAnswer
	if err := json.NewDecoder(r).Decode(&a); err != nil {
		return Trace{}, fmt.Errorf("traceview: the query service's answer: %w", err)
	}
	var spans []apiSpan
	services := map[string]string{}
	for _, d := range a.Data {
		if !strings.EqualFold(strings.TrimLeft(d.TraceID, "0"), strings.TrimLeft(id, "0")) {
			continue
		}
		spans = append(spans, d.Spans...)
		for pid, p := range d.Processes {
			services[pid] = p.ServiceName
		}
	}
	if len(spans) == 0 {
		return Trace{}, fmt.Errorf("traceview: %s: %w", id, ErrNotFound)
	}
	return layout(id, spans, services), nil
}

// layout orders spans depth first under their parents.
func layout(id string, spans []apiSpan, services map[string]string) Trace {
	byID := make(map[string]apiSpan, len(spans))
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	parent := func(s apiSpan) string {
		for _, ref := range s.References {
			if ref.RefType == "CHILD_OF" {
				if _, ok := byID[ref.SpanID]; ok {
					return ref.SpanID
				}
			}
		}
		return ""
	}
	children := map[string][]apiSpan{}
	first, last := spans[0].StartTime, spans[0].StartTime+spans[0].Duration
	for _, s := range spans {
		children[parent(s)] = append(children[parent(s)], s)
		first = min(first, s.StartTime)
		last = max(last, s.StartTime+s.Duration)
	}
	for _, c := range children {
		slices.SortStableFunc(c, func(x, y apiSpan) int {
			return cmp.Or(cmp.Compare(x.StartTime, y.StartTime), cmp.Compare(x.SpanID, y.SpanID))
		})
	}
	t := Trace{ID: id, Started: time.UnixMicro(first).UTC(), Duration: time.Duration(last-first) * time.Microsecond}
	seen := map[string]bool{}
	var walk func(s apiSpan, depth int)
	walk = func(s apiSpan, depth int) {
		if seen[s.SpanID] {
			return
		}
		seen[s.SpanID] = true
		t.Spans = append(t.Spans, row(s, parent(s), depth, first, services))
		for _, c := range children[s.SpanID] {
			walk(c, depth+1)
		}
	}
	for _, root := range children[""] {
		walk(root, 0)
	}
	return t
}

func row(s apiSpan, parentID string, depth int, first int64, services map[string]string) Span {
	r := Span{SpanID: s.SpanID, ParentID: parentID, Name: s.OperationName, Service: services[s.ProcessID], Depth: depth,
		Start: time.Duration(s.StartTime-first) * time.Microsecond, Duration: time.Duration(s.Duration) * time.Microsecond}
	for _, tag := range s.Tags {
		if tag.Key == "error" && tag.Value == true || tag.Key == "otel.status_code" && tag.Value == "ERROR" {
			r.Error = true
		}
		if shown(tag.Key) {
			r.Attributes = append(r.Attributes, Attribute{Key: tag.Key, Value: fmt.Sprint(tag.Value)})
		}
	}
	return r
}

func shown(key string) bool {
	return slices.ContainsFunc(Shown, func(p string) bool {
		return key == p || strings.HasSuffix(p, ".") && strings.HasPrefix(key, p)
	})
}

// Bar is where a span's bar falls on a waterfall width wide: its left edge
// and its width, at least one unit so an instant still shows.
func (t Trace) Bar(s Span, width int) (x, w int) {
	if t.Duration <= 0 {
		return 0, width
	}
	x = int(int64(width) * int64(s.Start) / int64(t.Duration))
	w = max(1, int(int64(width)*int64(s.Duration)/int64(t.Duration)))
	return min(x, width-1), min(w, width-min(x, width-1))
}

// WorkflowIDs are the Temporal workflow IDs the trace's spans name
// (Temporal's interceptor tags its spans with temporalWorkflowID), in
// order of first appearance: a claim's trace names its claim.
func (t Trace) WorkflowIDs() []string {
	var out []string
	for _, s := range t.Spans {
		for _, a := range s.Attributes {
			if a.Key == "temporalWorkflowID" && a.Value != "" && !slices.Contains(out, a.Value) {
				out = append(out, a.Value)
			}
		}
	}
	return out
}
