package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The trace page's refusals, before it asks Temporal whether the viewer
// may see the claim (the browser test in e2e/ draws a real claim's trace
// from a real Jaeger).
func TestTracePageRefusesWhatIsNotAClaimsTrace(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	jaeger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/traces/" + traceID: // a trace no Temporal span tags with a workflow
			_, _ = w.Write([]byte(`{"data":[{"traceID":"` + traceID + `","spans":[{"spanID":"00f067aa0ba902b7","operationName":"GET /","startTime":1,"duration":2,"processID":"p1"}],"processes":{"p1":{"serviceName":"inbox"}}}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(jaeger.Close)

	get := func(t *testing.T, queryURL, path string) (int, string) {
		ts, _ := testServer(t, sampleBook(t))
		srv := ts.Config.Handler.(*server)
		srv.traces, srv.http = queryURL, jaeger.Client()
		c := browser(t)
		devSignIn(t, c, ts.URL, "adjuster-17")
		res, err := c.Get(ts.URL + path)
		require.NoError(t, err)
		return res.StatusCode, body(t, res)
	}

	code, page := get(t, "", "/traces/"+traceID)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, page, "JAEGER_QUERY_URL")

	code, _ = get(t, jaeger.URL, "/traces/not-a-trace")
	assert.Equal(t, http.StatusBadRequest, code)

	code, page = get(t, jaeger.URL, "/traces/0af7651916cd43dd8448eb211c80319c")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, page, "no such trace")

	code, page = get(t, jaeger.URL, "/traces/"+traceID)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, page, "not a claim")
}
