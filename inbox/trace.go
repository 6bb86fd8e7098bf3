package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/durableclaims/durableclaims/internal/traceview"
)

// traceRow is one span of the trace page: its row in the waterfall and
// where its bar falls on the page's 1000-unit scale.
type traceRow struct {
	traceview.Span
	Indent, X, W int
}

// tracePage is a claim's trace as the page shows it.
type tracePage struct {
	ClaimID string
	Trace   traceview.Trace
	Rows    []traceRow
	// Height is the waterfall's height on the same scale.
	Height int
}

// rowHeight is one span's height on the waterfall's scale.
const rowHeight = 24

// trace draws a claim's OpenTelemetry trace from the Jaeger query service
// at JAEGER_QUERY_URL (TRACE_URL_TEMPLATE=INBOX_URL/traces/{trace_id}
// links here). It shows a trace only to someone who may see the claim it
// belongs to: the claim is the workflow its spans name.
func (s *server) trace(w http.ResponseWriter, r *http.Request, v viewer) {
	if s.traces == "" {
		s.fail(w, r, http.StatusNotFound, "no trace viewer here: the inbox has no JAEGER_QUERY_URL", nil)
		return
	}
	id := r.PathValue("trace")
	if !traceview.ValidID(id) {
		s.fail(w, r, http.StatusBadRequest, "not a trace ID: 32 lower-case hex digits", nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	t, err := traceview.Fetch(ctx, s.http, s.traces, id)
	if errors.Is(err, traceview.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, "the trace viewer holds no such trace (sampled out, not yet sent, or past its retention)", nil)
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusBadGateway, "the trace viewer cannot be read", err)
		return
	}
	claims := t.WorkflowIDs()
	if len(claims) == 0 {
		s.fail(w, r, http.StatusNotFound, "this trace is not a claim's", nil)
		return
	}
	// Every claim the trace names must be one this viewer may see.
	for _, c := range claims {
		if _, status, msg, err := s.load(ctx, c, v); err != nil || status != 0 {
			s.fail(w, r, status, msg, err)
			return
		}
	}
	p := tracePage{ClaimID: claims[0], Trace: t, Height: len(t.Spans) * rowHeight}
	for _, sp := range t.Spans {
		x, wd := t.Bar(sp, 1000)
		p.Rows = append(p.Rows, traceRow{Span: sp, Indent: sp.Depth, X: x, W: wd})
	}
	s.render(w, r, http.StatusOK, "trace", page{Title: fmt.Sprintf("Trace of %s", p.ClaimID), Viewer: &v, Data: p})
}
