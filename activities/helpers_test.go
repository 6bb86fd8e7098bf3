package activities

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
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
	// failList makes GET /v1/transfers fail with a 500.
	failList bool
}

type fault int

const (
	pass           fault = iota
	failBefore           // 500 without reaching Stripe: nothing committed
	failAfter            // Stripe commits, the client sees a 500
	dropConnection       // Stripe commits, the connection dies before the answer
	refuseRequest        // Stripe refuses the request: 400, nothing committed
	// Garbage after Stripe committed: the answer is not the transfer.
	truncatedAfter // the body cut off mid-JSON
	errorIn200     // a 200 whose body is an error, not a transfer
	htmlAfter      // a proxy's HTML error page with a 200
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
	broken := f.failList && r.Method == http.MethodGet && r.URL.Path == "/v1/transfers"
	f.mu.Unlock()

	rec := httptest.NewRecorder()
	switch {
	case broken:
		rec.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: list failed"}}`)
	case next == failBefore:
		rec.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: before commit"}}`)
	case next == refuseRequest:
		rec.Header().Set("Content-Type", "application/json")
		rec.WriteHeader(http.StatusBadRequest)
		io.WriteString(rec, `{"error":{"type":"invalid_request_error","code":"resource_missing","param":"destination","message":"No such destination: 'acct_1Ada'"}}`)
	case hide:
		rec.Header().Set("Content-Type", "application/json")
		io.WriteString(rec, `{"object":"list","data":[],"has_more":false,"url":"/v1/transfers"}`)
	default:
		f.sim.Handler().ServeHTTP(rec, r)
	}
	switch next {
	case failAfter:
		rec = httptest.NewRecorder()
		rec.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: after commit"}}`)
	case truncatedAfter:
		body := rec.Body.Bytes()
		rec = httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		rec.Write(body[:len(body)/2])
	case errorIn200:
		rec = httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		io.WriteString(rec, `{"error":{"type":"api_error","message":"injected: an error inside a 200"}}`)
	case htmlAfter:
		rec = httptest.NewRecorder()
		rec.Header().Set("Content-Type", "text/html")
		io.WriteString(rec, `<html><body><h1>502 Bad Gateway</h1></body></html>`)
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
		Policies: policies, From: "claims@test", Supervisors: "sup@test", Rules: insurer.Defaults()}
	if f != nil {
		a.Stripe = NewStripeClient(StripeConfig{APIBase: f.srv.URL})
	}
	server := &fakeRuns{runs: map[string]RunFacts{}}
	a.Runs = Runs{TaskQueue: "claims", ClaimWorkflow: "ClaimWorkflow", ReconcileWorkflow: "ReconcileWorkflow", Describe: server.describe}
	fakes.Store(a, server)
	return a
}

// fakeRuns is what the Temporal server knows of runs, for the tests.
type fakeRuns struct {
	mu   sync.Mutex
	runs map[string]RunFacts // by workflow ID and run ID
}

var fakes sync.Map // *Activities → *fakeRuns

func runs(a *Activities) *fakeRuns {
	f, _ := fakes.Load(a)
	return f.(*fakeRuns)
}

// start records a running workflow of type on the claims task queue, and
// returns the caller its regular activities see.
func (f *fakeRuns) start(id, runID, typ string) func(context.Context) (Caller, bool) {
	f.mu.Lock()
	f.runs[id+"/"+runID] = RunFacts{WorkflowType: typ, TaskQueue: "claims", Running: true}
	f.mu.Unlock()
	return func(ctx context.Context) (Caller, bool) {
		c, ok := runOf(id, runID, false)(ctx)
		c.WorkflowType = typ
		return c, ok
	}
}

func (f *fakeRuns) describe(_ context.Context, id, runID string) (RunFacts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[id+"/"+runID], nil
}

// testRun is the run ID the tests' claim workflows have.
const testRun = "run-test"

// runOf is the caller an activity of run runID of claim id's workflow sees.
func runOf(id, runID string, local bool) func(context.Context) (Caller, bool) {
	return func(ctx context.Context) (Caller, bool) {
		c := Caller{Namespace: "default", WorkflowID: id, RunID: runID, WorkflowType: "ClaimWorkflow", Local: local}
		if activity.IsActivity(ctx) {
			info := activity.GetInfo(ctx)
			c.ActivityType, c.ActivityID = info.ActivityType.Name, info.ActivityID
		}
		return c, true
	}
}

// claimOf finds the claim an activity's input names.
func claimOf(t *testing.T, in any) string {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	var v struct {
		ClaimID string `json:"claim_id"`
		Claim   struct {
			ID string `json:"claim_id"`
		} `json:"claim"`
		Scope struct {
			ClaimID string `json:"claim_id"`
		} `json:"scope"`
	}
	require.NoError(t, json.Unmarshal(b, &v))
	for _, id := range []string{v.ClaimID, v.Claim.ID, v.Scope.ClaimID} {
		if id != "" {
			return id
		}
	}
	t.Fatalf("no claim in %s", b)
	return ""
}

func payInput(id string, minor int64) PayInput {
	return PayInput{Key: claim.StepKey(id, claim.StepPay), WorkflowID: id, ClaimID: id, AmountMinor: minor, Currency: "usd", Destination: "acct_1Ada"}
}

// within waits for ch, and fails the test if nothing comes in 10 s: a
// request that never reaches its hook fails the test, not the package's
// timeout.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not within 10s", what)
	}
}

// stripesimHooks blocks (or not) every transfer before it commits.
func stripesimHooks(block func()) stripesim.Hooks {
	if block == nil {
		return stripesim.Hooks{}
	}
	return stripesim.Hooks{BeforeCommit: func(*http.Request, string) error { block(); return nil }}
}

// registerFor registers claim id (once) for Ada's payout account, claiming
// minor on policy pol-1001, and binds it to runID.
func registerFor(t *testing.T, a *Activities, id string, minor int64, runID string) claim.Claim {
	t.Helper()
	c := claim.Claim{ID: id, PolicyID: "pol-1001", AmountMinor: minor, Currency: "usd", Description: "A burst pipe flooded the kitchen overnight",
		Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}}
	ctx := context.Background()
	if _, err := a.Store.GetClaim(ctx, id); err != nil {
		_, _, err := a.Store.PutClaim(ctx, c)
		require.NoError(t, err)
	}
	_, err := a.Store.TakeClaim(ctx, id, runID)
	require.NoError(t, err)
	return c
}

// closedAs closes a claim in the store with outcome, as step 8 would: an
// audit record is written only for the outcome the claim was closed with.
func closedAs(t *testing.T, a *Activities, id, outcome string) {
	t.Helper()
	_, _, err := a.Store.CloseClaim(context.Background(), id, claim.StepKey(id, claim.StepClose), outcome, "", 0)
	require.NoError(t, err)
}

// registered puts c in the system of record as it is, and returns it.
func registered(t *testing.T, a *Activities, c claim.Claim) claim.Claim {
	t.Helper()
	_, _, err := a.Store.PutClaim(context.Background(), c)
	require.NoError(t, err)
	return c
}

// paidOut records that claim id's payout was paid by transfer, as step 6
// records it.
func paidOut(t *testing.T, a *Activities, id string, minor int64, transfer string) {
	t.Helper()
	ctx := context.Background()
	key := claim.StepKey(id, claim.StepPay)
	_, err := a.Store.ReservePayout(ctx, store.Payout{ClaimID: id, Key: key, RunID: testRun, AmountMinor: minor, Currency: "usd", Destination: "acct_1Ada"})
	require.NoError(t, err)
	require.NoError(t, a.Store.MarkPaid(ctx, id, key, transfer))
}
