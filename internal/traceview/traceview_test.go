package traceview

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const id = "4bf92f3577b34da6a3ce929d0e0e4736"

// The waterfall puts each span under its parent, siblings by start, and
// measures every offset from the trace's first span.
func TestParseLaysSpansOutUnderTheirParents(t *testing.T) {
	f, err := os.Open("testdata/trace.json")
	require.NoError(t, err)
	defer f.Close()
	tr, err := Parse(f, id)
	require.NoError(t, err)

	var names []string
	var depths []int
	for _, s := range tr.Spans {
		names = append(names, s.Name)
		depths = append(depths, s.Depth)
	}
	assert.Equal(t, []string{"StartWorkflow:ClaimWorkflow", "RunWorkflow:ClaimWorkflow", "RunActivity:LoadClaim", "RunActivity:PayClaimant",
		"HandleSignal:approve"}, names)
	assert.Equal(t, []int{0, 1, 2, 2, 0}, depths, "a FOLLOWS_FROM link is not a parent: the signal is a root of its own")
	assert.Equal(t, 10*time.Millisecond, tr.Duration)
	assert.Equal(t, time.UnixMicro(1764892800000000).UTC(), tr.Started)

	pay := tr.Spans[3]
	assert.Equal(t, "worker", pay.Service)
	assert.Equal(t, 8*time.Millisecond, pay.Start)
	assert.Equal(t, 2*time.Millisecond, pay.Duration)
	assert.True(t, pay.Error)
	assert.Equal(t, []Attribute{{"idempotency.key", "claim-0043:step6"}}, pay.Attributes, "only the listed attributes are shown")
	assert.False(t, tr.Spans[2].Error)
	assert.Equal(t, []string{"claim-0043"}, tr.WorkflowIDs())

	x, w := tr.Bar(pay, 1000)
	assert.Equal(t, 800, x)
	assert.Equal(t, 200, w)
	x, w = tr.Bar(tr.Spans[4], 1000)
	assert.Equal(t, 999, x, "a span at the trace's end still shows")
	assert.Equal(t, 1, w)
}

func TestParseRefusesAnotherTraceOrNone(t *testing.T) {
	f, err := os.Open("testdata/trace.json")
	require.NoError(t, err)
	defer f.Close()
	_, err = Parse(f, "0af7651916cd43dd8448eb211c80319c")
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestFetch(t *testing.T) {
	body, err := os.ReadFile("testdata/trace.json")
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/traces/"+id {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)

	tr, err := Fetch(context.Background(), srv.Client(), srv.URL, id)
	require.NoError(t, err)
	assert.Len(t, tr.Spans, 5)

	_, err = Fetch(context.Background(), srv.Client(), srv.URL, "0af7651916cd43dd8448eb211c80319c")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = Fetch(context.Background(), srv.Client(), srv.URL, "../../api/services")
	assert.ErrorContains(t, err, "not a trace ID", "nothing but a trace ID reaches the query service's path")
}

func TestValidID(t *testing.T) {
	assert.True(t, ValidID(id))
	for _, bad := range []string{"", "00000000000000000000000000000000", "4BF92F3577B34DA6A3CE929D0E0E4736", id[:31], id + "0", "4bf92f3577b34da6a3ce929d0e0e473z"} {
		assert.False(t, ValidID(bad), bad)
	}
}
