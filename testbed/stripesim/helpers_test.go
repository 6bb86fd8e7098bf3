package stripesim_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

const testKey = "sk_test_local"

// fakeClock is an injectable Config.Now that tests move forward by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness is a running simulator plus a real stripe-go client pointed at it.
type harness struct {
	t         *testing.T
	sim       *stripesim.Server
	srv       *httptest.Server
	sc        *client.API
	clock     *fakeClock
	listCalls atomic.Int64 // GET /v1/transfers requests, to count pages
}

// start opens a simulator on dbPath ("" = in-memory) with a fake clock.
func start(t *testing.T, dbPath string, clock *fakeClock) *harness {
	t.Helper()
	if clock == nil {
		clock = newFakeClock()
	}
	sim, err := stripesim.Open(stripesim.Config{
		DBPath: dbPath,
		Logger: slog.New(slog.DiscardHandler),
		Now:    clock.Now,
	})
	require.NoError(t, err)
	h := &harness{t: t, sim: sim, clock: clock}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/transfers" {
			h.listCalls.Add(1)
		}
		sim.Handler().ServeHTTP(w, r)
	}))
	h.sc = newClient(h.srv.URL, testKey)
	t.Cleanup(h.stop)
	return h
}

// stop shuts the HTTP server down before closing the database; it is safe to
// call twice (explicitly in restart tests, then from Cleanup).
func (h *harness) stop() {
	h.srv.Close()
	require.NoError(h.t, h.sim.Close())
}

func newClient(url, key string) *client.API { return newClientWith(url, key, nil) }

// newClientWith uses hc (nil = stripe-go's default) for the HTTP exchanges.
func newClientWith(url, key string, hc *http.Client) *client.API {
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(url),
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New(key, &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// transferParams builds a valid create request; key "" lets stripe-go pick a
// random idempotency key, as it does for every POST.
func transferParams(amount int64, group, key string) *stripe.TransferParams {
	p := &stripe.TransferParams{
		Amount:        stripe.Int64(amount),
		Currency:      stripe.String("usd"),
		Destination:   stripe.String("acct_1Claimant"),
		TransferGroup: stripe.String(group),
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

func (h *harness) create(amount int64, group, key string) *stripe.Transfer {
	h.t.Helper()
	tr, err := h.sc.Transfers.New(transferParams(amount, group, key))
	require.NoError(h.t, err)
	return tr
}

// listAll walks every page with stripe-go's auto-paginating iterator.
func (h *harness) listAll(p *stripe.TransferListParams) []*stripe.Transfer {
	h.t.Helper()
	if p == nil {
		p = &stripe.TransferListParams{}
	}
	it := h.sc.Transfers.List(p)
	var out []*stripe.Transfer
	for it.Next() {
		out = append(out, it.Transfer())
	}
	require.NoError(h.t, it.Err())
	return out
}

func ids(ts []*stripe.Transfer) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func replayed(tr *stripe.Transfer) bool {
	return tr.LastResponse.Header.Get("Idempotent-Replayed") == "true"
}

// stripeErr asserts err is a *stripe.Error with the given status and type.
func stripeErr(t *testing.T, err error, status int, typ stripe.ErrorType) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	require.True(t, errors.As(err, &se), "want *stripe.Error, got %T: %v", err, err)
	require.Equal(t, status, se.HTTPStatusCode, se.Msg)
	require.Equal(t, typ, se.Type, se.Msg)
	require.True(t, strings.HasPrefix(se.RequestID, "req_"), "request id %q", se.RequestID)
	return se
}

// do sends a raw request, for what stripe-go cannot express.
func (h *harness) do(method, path, body string, header http.Header) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+testKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp, string(b)
}

// blockFirstCommit installs a BeforeCommit hook that parks the first request
// to reach it (keeping its idempotency key in flight) until release is
// called, or the test ends: release runs in t.Cleanup too, before the
// server's stop (registered earlier), which would otherwise wait for the
// parked request for ever. entered waits for that request, and fails the
// test if none comes. Later requests pass straight through.
func (h *harness) blockFirstCommit() (entered, release func()) {
	in, parked := make(chan struct{}), make(chan struct{})
	release = sync.OnceFunc(func() { close(parked) })
	h.t.Cleanup(release)
	var taken atomic.Bool
	h.sim.SetHooks(stripesim.Hooks{BeforeCommit: func(*http.Request, string) error {
		if taken.CompareAndSwap(false, true) {
			close(in)
			<-parked
		}
		return nil
	}})
	entered = func() {
		h.t.Helper()
		select {
		case <-in:
		case <-time.After(10 * time.Second):
			h.t.Fatal("no request reached the commit within 10s")
		}
	}
	return entered, release
}
