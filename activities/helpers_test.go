package activities

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/stripesim"
)

// seen is one request as the Stripe-compatible server received it.
type seen struct {
	Method, Path, Key string
	Status            int
}

// fakeStripe is stripesim behind a recorder that can also fail requests the
// way networks and providers do.
type fakeStripe struct {
	sim *stripesim.Server
	srv *httptest.Server

	mu   sync.Mutex
	log  []seen
	plan []fault // consumed one per POST
	// hideList makes GET /v1/transfers answer an empty list, as a lookup
	// would after Stripe lost track of the group (or never indexed it).
	hideList bool
}

type fault int

const (
	pass           fault = iota
	failBefore           // 500 without reaching Stripe: nothing committed
	failAfter            // Stripe commits, the client sees a 500
	dropConnection       // Stripe commits, the connection dies before the answer
)

func newFakeStripe(t *testing.T) *fakeStripe {
	t.Helper()
	sim, err := stripesim.Open(stripesim.Config{DBPath: filepath.Join(t.TempDir(), "stripe.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	f := &fakeStripe{sim: sim}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { f.srv.Close(); sim.Close() })
	return f
}

func (f *fakeStripe) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	next := pass
	if r.Method == http.MethodPost && len(f.plan) > 0 {
		next, f.plan = f.plan[0], f.plan[1:]
	}
	hide := f.hideList && r.Method == http.MethodGet && r.URL.Path == "/v1/transfers"
	f.mu.Unlock()

	rec := httptest.NewRecorder()
	switch {
	case next == failBefore:
		rec.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: before commit"}}`)
	case hide:
		rec.Header().Set("Content-Type", "application/json")
		io.WriteString(rec, `{"object":"list","data":[],"has_more":false,"url":"/v1/transfers"}`)
	default:
		f.sim.Handler().ServeHTTP(rec, r)
	}
	if next == failAfter {
		rec = httptest.NewRecorder()
		rec.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: after commit"}}`)
	}
	f.mu.Lock()
	f.log = append(f.log, seen{Method: r.Method, Path: r.URL.Path, Key: r.Header.Get("Idempotency-Key"), Status: rec.Code})
	f.mu.Unlock()
	if next == dropConnection {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

func (f *fakeStripe) posts() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seen
	for _, s := range f.log {
		if s.Method == http.MethodPost {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeStripe) failNext(faults ...fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plan = append(f.plan, faults...)
}

// newActivities wires real dependencies in a temp dir.
func newActivities(t *testing.T, f *fakeStripe) *Activities {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	policies, err := LoadPolicies("")
	require.NoError(t, err)
	a := &Activities{Store: st, Model: RulesModel{}, Mailer: SpoolMailer{Dir: filepath.Join(t.TempDir(), "mail")},
		Policies: policies, From: "claims@test", Supervisors: "sup@test"}
	if f != nil {
		a.Stripe = NewStripeClient(StripeConfig{APIBase: f.srv.URL})
	}
	return a
}

func payInput(id string, minor int64) PayInput {
	return PayInput{Key: claim.StepKey(id, claim.StepPay), WorkflowID: id, ClaimID: id, AmountMinor: minor, Currency: "usd", Destination: "acct_1Ada"}
}

// stripesimHooks blocks (or not) every transfer before it commits.
func stripesimHooks(block func()) stripesim.Hooks {
	if block == nil {
		return stripesim.Hooks{}
	}
	return stripesim.Hooks{BeforeCommit: func(*http.Request, string) error { block(); return nil }}
}
