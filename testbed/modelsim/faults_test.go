package modelsim_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

// chatBody is a triage request as the OpenAI provider writes it; pad adds
// that many bytes of filler to the system message.
func chatBody(t *testing.T, pad int) string {
	t.Helper()
	c, err := json.Marshal(map[string]any{"claim_id": "claim-sim-1", "policy_id": "pol-1001", "claimant": "Ada Lovelace",
		"amount_minor": 64000, "currency": "usd", "description": "A burst pipe flooded the kitchen", "documents": []string{"a.jpg"}})
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{"model": "sim-1", "messages": []map[string]string{
		{"role": "system", "content": "Triage the claim." + strings.Repeat(" ", pad)},
		{"role": "user", "content": "Claim:\n" + string(c)},
	}})
	require.NoError(t, err)
	return string(b)
}

func post(t *testing.T, ctx context.Context, url, body string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// apiErr decodes an OpenAI error object.
func apiErr(t *testing.T, body string) (typ, msg string) {
	t.Helper()
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Type, e.Error.Message
}

func TestBodiesAreBounded(t *testing.T) {
	sim := modelsim.New("")
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ctx := context.Background()

	resp, body, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 8<<20))
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	typ, msg := apiErr(t, body)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Contains(t, msg, "8388608 bytes")
	calls := sim.Calls()
	require.Len(t, calls, 1, "a refused request is still counted")
	assert.Equal(t, "error", calls[0].Answered)

	resp, body, err = post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 8<<20-1024))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a body under the limit is answered: %.200s", body)

	many := "[" + strings.Repeat(`"500",`, 12<<10) + `"500"]` // > 64 KiB of valid faults
	resp, body, err = post(t, ctx, srv.URL+"/_sim/faults", many)
	require.NoError(t, err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%.200s", body)
	typ, msg = apiErr(t, body)
	assert.Equal(t, "invalid_request_error", typ)
	assert.Contains(t, msg, "65536 bytes")

	resp, body, err = post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "nothing was queued by the oversized list: %s", body)
}

func TestFaultsEndpointValidates(t *testing.T) {
	sim := modelsim.New("")
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ctx := context.Background()

	for _, bad := range []struct{ body, msg string }{
		{`["500","nope"]`, `faults[1]: unknown fault "nope"`},
		{`["429:0"]`, `"429:0"`},
		{`["429:1.5"]`, `"429:1.5"`},
		{`["slow:1h"]`, "at most 10m0s"},
		{`["slow:-1s"]`, `"slow:-1s"`},
		{`["slow:soon"]`, `"slow:soon"`},
		{`["600"]`, `unknown fault "600"`},
		{`["399"]`, `unknown fault "399"`},
		{`[""]`, `unknown fault ""`},
		{`[" 500"]`, `unknown fault " 500"`},
		{`"500"`, "JSON array"},
		{`[500]`, "JSON array"},
	} {
		resp, body, err := post(t, ctx, srv.URL+"/_sim/faults", bad.body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, bad.body)
		typ, msg := apiErr(t, body)
		assert.Equal(t, "invalid_request_error", typ, bad.body)
		assert.Contains(t, msg, bad.msg, bad.body)
	}
	_, body, err := post(t, ctx, srv.URL+"/_sim/faults", `["nope"]`)
	require.NoError(t, err)
	_, msg := apiErr(t, body)
	assert.Contains(t, msg, "context-length", "the message lists the valid faults")

	resp, body, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "no fault was queued by a refused list: %s", body)

	resp, body, err = post(t, ctx, srv.URL+"/_sim/faults", `["503","429:3","slow:1ms","invalid","context-length"]`)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"queued":5}`, body)
	resp, _, err = post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	resp, _, err = post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "3", resp.Header.Get("Retry-After"))
}

func TestInjectRefusesUnknownFaults(t *testing.T) {
	sim := modelsim.New("")
	assert.PanicsWithValue(t, `modelsim: Inject: unknown fault "nope" (valid: 429, 429:<seconds>, 500, malformed, invalid, `+
		`slow:<duration>, 400, 401, 404, context-length, or a 4xx or 5xx status code)`, func() { sim.Inject(modelsim.ServerError, "nope") })
	assert.NotPanics(t, func() { sim.Inject("429:1", modelsim.ServerError, "503", "slow:2s", modelsim.Invalid) })
}

// A slow answer stops waiting as soon as its request's context ends: when
// the caller hangs up, or when the serving http.Server's base context is
// cancelled (as the command does on a signal), so it never holds up
// shutdown. It then answers 503 and is not processed.
func TestSlowEndsWithTheRequestContext(t *testing.T) {
	base, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	sim := modelsim.New("")
	srv := httptest.NewUnstartedServer(sim)
	srv.Config.BaseContext = func(net.Listener) context.Context { return base }
	srv.Start()
	defer srv.Close()
	inFlight := func(n int) func() bool {
		return func() bool { return len(sim.Calls()) == n }
	}

	t.Run("client hangs up", func(t *testing.T) {
		sim.Inject("slow:30s")
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, _, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0)); errc <- err }()
		require.Eventually(t, inFlight(1), 5*time.Second, 5*time.Millisecond)
		cancel()
		assert.ErrorIs(t, <-errc, context.Canceled)
		require.Eventually(t, func() bool { return sim.Calls()[0].Answered != "" }, 2*time.Second, 5*time.Millisecond)
		call := sim.Calls()[0]
		assert.Equal(t, "error", call.Answered, "the abandoned call is not answered")
		assert.Equal(t, modelsim.Fault("slow:30s"), call.Fault)
	})

	t.Run("server shuts down", func(t *testing.T) {
		sim.Inject("slow:30s")
		type result struct {
			status int
			body   string
			err    error
		}
		done := make(chan result, 1)
		go func() {
			resp, body, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", chatBody(t, 0))
			r := result{body: body, err: err}
			if resp != nil {
				r.status = resp.StatusCode
			}
			done <- r
		}()
		require.Eventually(t, inFlight(2), 5*time.Second, 5*time.Millisecond)
		start := time.Now()
		shutdown()
		select {
		case r := <-done:
			require.NoError(t, r.err)
			assert.Less(t, time.Since(start), 2*time.Second)
			assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
			typ, _ := apiErr(t, r.body)
			assert.Equal(t, "server_error", typ)
		case <-time.After(5 * time.Second):
			t.Fatal("the slow call outlived the server's context")
		}
		assert.Equal(t, "error", sim.Calls()[1].Answered)
	})
}

func TestParseFault(t *testing.T) {
	for _, ok := range []string{"429", "429:1", "429:120", "500", "malformed", "invalid", "slow:1ms", "slow:2s", "slow:10m",
		"400", "401", "404", "context-length", "403", "422", "502", "503", "599"} {
		f, err := modelsim.ParseFault(ok)
		assert.NoError(t, err, ok)
		assert.Equal(t, modelsim.Fault(ok), f)
	}
	for _, bad := range []struct{ in, msg string }{
		{"", `unknown fault ""`},
		{"nope", `unknown fault "nope" (valid: 429, 429:<seconds>, 500, malformed, invalid, slow:<duration>, 400, 401, 404, context-length, or a 4xx or 5xx status code)`},
		{"Malformed", "unknown fault"},
		{" 500", "unknown fault"},
		{"200", "unknown fault"},
		{"399", "unknown fault"},
		{"600", "unknown fault"},
		{"1000", "unknown fault"},
		{"0500", "unknown fault"},
		{"+500", "unknown fault"},
		{"429:", "Retry-After must be a positive whole number"},
		{"429:0", "Retry-After"},
		{"429:-1", "Retry-After"},
		{"429:01", "Retry-After"},
		{"429:1s", "Retry-After"},
		{"slow", "unknown fault"},
		{"slow:", "positive Go duration"},
		{"slow:2", "positive Go duration"},
		{"slow:0s", "positive Go duration"},
		{"slow:-1s", "positive Go duration"},
		{"slow:10m1s", `fault "slow:10m1s": the delay must be a positive Go duration of at most 10m0s`},
	} {
		f, err := modelsim.ParseFault(bad.in)
		assert.ErrorContains(t, err, bad.msg, bad.in)
		assert.Empty(t, f, bad.in)
	}
}

// A request whose body never arrives whole (its client killed while
// sending it) or is not JSON is refused and marked Unread: it names no
// claim and is not charged. An answered request is not marked.
func TestARequestCutOffMidBodyIsRecordedUnread(t *testing.T) {
	sim := modelsim.New("")
	srv := httptest.NewServer(sim)
	defer srv.Close()

	body := chatBody(t, 0)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body[:len(body)/2])
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	require.Eventually(t, func() bool { return len(sim.Calls()) == 1 && sim.Calls()[0].Answered != "" }, 5*time.Second, 10*time.Millisecond)

	resp, out, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", `{"model": "sim-1", "messages": [`)
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
	resp, out, err = post(t, context.Background(), srv.URL+"/v1/chat/completions", body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, out)

	calls := sim.Calls()
	require.Len(t, calls, 3)
	for i, what := range []string{"cut off", "not JSON"} {
		c := calls[i]
		assert.True(t, c.Unread, "%s: marked unread", what)
		assert.Equal(t, "error", c.Answered, what)
		assert.Empty(t, c.ClaimID, what)
		assert.Zero(t, c.Tokens, what)
	}
	assert.False(t, calls[2].Unread, "answered")
	assert.Equal(t, "claim-sim-1", calls[2].ClaimID)
}

// A provider down answers every call 503, records it against its claim,
// charges nothing and keeps the queued faults for when it is back.
func TestAProviderDownAnswers503UntilItIsBack(t *testing.T) {
	sim := modelsim.New("")
	sim.TokensPerMinute = 1200 // a bucket of 100 tokens: a down call must not drain it
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ctx := context.Background()
	sim.Inject(modelsim.Malformed)
	sim.SetDown(true)
	for range 3 {
		resp, body, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)
		typ, _ := apiErr(t, body)
		assert.Equal(t, "server_error", typ)
	}
	sim.SetDown(false)
	resp, body, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "back, and admitted by a bucket the calls refused while down left full: %s", body)
	calls := sim.Calls()
	require.Len(t, calls, 4)
	for _, c := range calls[:3] {
		assert.Equal(t, modelsim.Outage, c.Fault)
		assert.Equal(t, "claim-sim-1", c.ClaimID)
		assert.Equal(t, "error", c.Answered)
		assert.Zero(t, c.Tokens)
	}
	assert.Equal(t, modelsim.Malformed, calls[3].Fault, "the queued fault is served once it is back")
	assert.False(t, calls[3].RateLimited)
}
