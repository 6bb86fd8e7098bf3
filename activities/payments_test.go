package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// pay runs PayClaimant as the claim's own run would: the claim registered
// for the payee (for up to 5,000.00, under the auto-approve limit these
// tests set: they are about the provider, payout.go's tests about the
// authority) and bound to the run.
func pay(t *testing.T, a *Activities, in PayInput) (PayResult, error) {
	t.Helper()
	registerFor(t, a, in.ClaimID, 500000, testRun)
	a.Rules.AutoApproveLimit = "5000"
	a.callerFn = runOf(in.ClaimID, testRun, false)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	v, err := env.ExecuteActivity(a.PayClaimant, in)
	if err != nil {
		return PayResult{}, err
	}
	var r PayResult
	require.NoError(t, v.Get(&r))
	return r, nil
}

func transfers(t *testing.T, a *Activities, group string) []*stripe.Transfer {
	t.Helper()
	it := a.Stripe.Transfers.List(&stripe.TransferListParams{TransferGroup: stripe.String(group)})
	var out []*stripe.Transfer
	for it.Next() {
		out = append(out, it.Transfer())
	}
	require.NoError(t, it.Err())
	return out
}

func appErrType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

func nonRetryableErr(err error) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.NonRetryable()
}

func TestPayCreatesOneTransferCarryingItsKey(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	r, err := pay(t, a, payInput("claim-0042", 184000))
	require.NoError(t, err)
	assert.False(t, r.Replayed)

	trs := transfers(t, a, "claim-0042")
	require.Len(t, trs, 1)
	tr := trs[0]
	assert.Equal(t, r.TransferID, tr.ID)
	assert.Equal(t, int64(184000), tr.Amount)
	assert.Equal(t, "acct_1Ada", tr.Destination.ID)
	assert.Equal(t, map[string]string{"workflow_id": "claim-0042", "step": "6", "idempotency_key": "claim-0042:step6"}, tr.Metadata)
	require.Len(t, f.posts(), 1)
	assert.Equal(t, "claim-0042:step6", f.posts()[0].Key)
}

func TestRetryAfterCommitIsAReplayNotASecondTransfer(t *testing.T) {
	for name, fl := range map[string]fault{"500 after commit": failAfter, "connection dropped after commit": dropConnection} {
		t.Run(name, func(t *testing.T) {
			f := newFakeStripe(t)
			a := newActivities(t, f)
			f.failNext(fl)
			_, err := pay(t, a, payInput("claim-0043", 184000))
			// net/http itself resends a POST that carries an Idempotency-Key
			// when a reused connection dies before the answer, and Stripe
			// replays it; otherwise the activity fails, retryably.
			if err != nil {
				assert.False(t, nonRetryableErr(err), "a lost answer must be retried: %v", err)
			}

			r, err := pay(t, a, payInput("claim-0043", 184000)) // the retry
			require.NoError(t, err)
			assert.True(t, r.Replayed)
			assert.Equal(t, "lookup", r.ReplayedBy)
			assert.Len(t, transfers(t, a, "claim-0043"), 1)
			for _, p := range f.posts() {
				assert.Equal(t, "claim-0043:step6", p.Key)
			}
		})
	}
}

func TestStripeReplaysWhenTheLookupMisses(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	first, err := pay(t, a, payInput("claim-0044", 250000))
	require.NoError(t, err)
	f.hideList = true
	r, err := pay(t, a, payInput("claim-0044", 250000))
	require.NoError(t, err)
	assert.Equal(t, first.TransferID, r.TransferID)
	assert.True(t, r.Replayed)
	assert.Equal(t, "stripe", r.ReplayedBy, "Idempotent-Replayed: true")
	f.hideList = false
	assert.Len(t, transfers(t, a, "claim-0044"), 1)
	st, ok := f.sim.KeyStats("claim-0044:step6")
	require.True(t, ok)
	assert.Equal(t, 1, st.Replays)
}

func TestChangedParametersUnderTheSameKeyNeverPayTwice(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	_, err := pay(t, a, payInput("claim-0045", 184000))
	require.NoError(t, err)

	// Our own lookup catches it first...
	_, err = pay(t, a, payInput("claim-0045", 199900))
	require.Error(t, err)
	assert.Equal(t, ErrIdempotencyConflict, appErrType(err))
	assert.True(t, nonRetryableErr(err))

	// ...and when the lookup cannot (the payment provider lost track of
	// the group), the claim's payout reservation does.
	posts := len(f.posts())
	f.hideList = true
	_, err = pay(t, a, payInput("claim-0045", 199900))
	require.Error(t, err)
	assert.Equal(t, ErrIdempotencyConflict, appErrType(err))
	assert.Contains(t, err.Error(), "already reserved 1840.00 USD")
	f.hideList = false
	assert.Len(t, f.posts(), posts, "nothing sent to the provider")
	assert.Len(t, transfers(t, a, "claim-0045"), 1)
}

// A second attempt while the first holds the key at Stripe is a 409,
// retried. The first is parked in stripesim until released: released in
// t.Cleanup as well, which runs before the fake server's Close (registered
// earlier), so a failed assertion ends the test instead of leaving Close
// waiting on the parked request for the package's whole timeout.
func TestKeyInFlightIsRetryable(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	parked := make(chan struct{})
	release := sync.OnceFunc(func() { close(parked) })
	t.Cleanup(release)
	entered := make(chan struct{}, 1)
	f.sim.SetHooks(stripesimHooks(func() { entered <- struct{}{}; <-parked }))

	first := make(chan error, 1)
	go func() {
		_, err := pay(t, a, payInput("claim-0046", 184000))
		first <- err
	}()
	within(t, entered, "the first attempt reaches Stripe's commit")
	f.sim.SetHooks(stripesimHooks(nil))
	_, err := pay(t, a, payInput("claim-0046", 184000))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "idempotency_key_in_use")
	assert.False(t, nonRetryableErr(err), "409 must be retried")
	release()
	require.NoError(t, <-first)
	assert.Len(t, transfers(t, a, "claim-0046"), 1)
}

func TestRefusalsAreNotRetried(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	in := payInput("claim-0047", 184000)
	f.failNext(refuseRequest) // the provider knows no such destination
	_, err := pay(t, a, in)
	require.Error(t, err)
	assert.True(t, nonRetryableErr(err))
	assert.Equal(t, ErrPaymentRefused, appErrType(err))

	bad := *a
	bad.Stripe = NewStripeClient(StripeConfig{SecretKey: "sk_test_wrong", APIBase: f.srv.URL})
	_, err = pay(t, &bad, in)
	assert.Equal(t, ErrPaymentConfig, appErrType(err))

	in.Key = ""
	_, err = pay(t, a, in)
	assert.Equal(t, ErrInvalidInput, appErrType(err))
	assert.Empty(t, transfers(t, a, "claim-0047"))
}

// ownedByTestWorkflow registers claim id for the test workflow
// environment's run of it (its info is the caller, as on a real worker).
func ownedByTestWorkflow(t *testing.T, a *Activities, id string) {
	t.Helper()
	registerFor(t, a, id, 500000, "default-test-run-id")
	a.Rules.AutoApproveLimit = "5000"
}

// payWorkflow runs the real PayClaimant under the real retry policy of a
// workflow, so retries are Temporal's, not ours; a payment that hands back
// a wait for Stripe (DependencyDown) is run again after it, as the claim
// workflow does. downs counts those hand-backs.
func payWorkflow(ctx workflow.Context, in PayInput) (PayResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 10},
	})
	for range 10 {
		var r PayResult
		err := workflow.ExecuteActivity(ctx, (*Activities).PayClaimant, in).Get(ctx, &r)
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != ErrDependencyDown {
			return r, err
		}
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return r, err
		}
	}
	return PayResult{}, errors.New("stripe down for ten waits")
}

func TestEveryAttemptSendsTheSameIdempotencyKey(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	f.failNext(failBefore, failBefore, failAfter)
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.RegisterWorkflow(payWorkflow)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "claim-0048"})
	ownedByTestWorkflow(t, a, "claim-0048")
	env.ExecuteWorkflow(payWorkflow, payInput("claim-0048", 184000))
	require.NoError(t, env.GetWorkflowError())
	var r PayResult
	require.NoError(t, env.GetWorkflowResult(&r))

	posts := f.posts()
	require.Len(t, posts, 3, "two failures before commit, one commit whose answer was lost; then the lookup finds it")
	for i, p := range posts {
		assert.Equal(t, "claim-0048:step6", p.Key, "attempt %d", i+1)
	}
	assert.True(t, r.Replayed)
	assert.Len(t, transfers(t, a, "claim-0048"), 1)
}

// payThroughRetries runs PayClaimant under a real workflow retry policy in
// the test environment and returns the result and every POST the provider saw.
func payThroughRetries(t *testing.T, a *Activities, f *fakeStripe, id string) PayResult {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterActivity(a)
	env.RegisterWorkflow(payWorkflow)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	ownedByTestWorkflow(t, a, id)
	env.ExecuteWorkflow(payWorkflow, payInput(id, 184000))
	require.NoError(t, env.GetWorkflowError())
	var r PayResult
	require.NoError(t, env.GetWorkflowResult(&r))
	return r
}

// Receiver faults, injected by stripesim itself: each ends in exactly one
// transfer, and every attempt carries the same key.
func TestReceiverFaultsEndInOneTransfer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault stripesim.FaultRule
	}{
		{"500 after commit", stripesim.FaultRule{Fault: stripesim.FaultErrorAfterCommit}},
		{"connection dropped after commit", stripesim.FaultRule{Fault: stripesim.FaultDropAfterCommit}},
		{"429 rate limited twice", stripesim.FaultRule{Fault: stripesim.FaultRateLimit, Times: 2}},
		{"409 key in use", stripesim.FaultRule{Fault: stripesim.FaultKeyInUse}},
		{"500 before commit", stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit}},
		{"slow past the client's timeout", stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: 1500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeStripe(t)
			a := newActivities(t, f)
			// A short client timeout stands in for the activity's: the
			// provider goes on and commits after the caller gave up.
			a.Stripe = NewStripeClient(StripeConfig{APIBase: f.srv.URL, Timeout: 500 * time.Millisecond})
			f.sim.AddFault(tc.fault)
			id := "claim-fault-" + strings.ReplaceAll(tc.name, " ", "-")
			r := payThroughRetries(t, a, f, id)
			if tc.fault.Fault == stripesim.FaultSlow {
				time.Sleep(1200 * time.Millisecond) // let the abandoned request land, then look again
			}
			trs := transfers(t, a, id)
			require.Len(t, trs, 1, "exactly one transfer")
			assert.Equal(t, trs[0].ID, r.TransferID)
			for _, p := range f.posts() {
				assert.Equal(t, id+":step6", p.Key)
			}
			fired := f.sim.Faults()
			require.Len(t, fired, 1)
			assert.Positive(t, fired[0].Fired, "the fault was injected")
		})
	}
}

// Stripe answering garbage after it committed (a body cut off, an error
// inside a 200, a proxy's HTML page): each is a clear error on that attempt,
// never taken for a transfer, and the retry finds the transfer Stripe made:
// one transfer, the claim paid with it.
func TestGarbageFromStripeIsAnErrorNeverASecondTransfer(t *testing.T) {
	for name, garbage := range map[string]fault{"truncated": truncatedAfter, "error in a 200": errorIn200, "html": htmlAfter} {
		t.Run(name, func(t *testing.T) {
			f := newFakeStripe(t)
			a := newActivities(t, f)
			f.failNext(garbage)
			id := "claim-garbage-" + strings.ReplaceAll(name, " ", "-")
			r := payThroughRetries(t, a, f, id)
			trs := transfers(t, a, id)
			require.Len(t, trs, 1, "exactly one transfer")
			assert.Equal(t, trs[0].ID, r.TransferID)
			assert.True(t, r.Replayed, "the retry found the transfer the garbled answer hid")
			assert.Len(t, f.posts(), 1, "found by lookup, not asked for again")
		})
	}
}

// The client keeps to its rate limit: calls beyond it wait their turn, and
// the wait is not taken from the call's own timeout (a thousand claims an
// outage parked queue behind the limit, they do not time out behind it);
// a call slower than its timeout still fails.
func TestStripeCallsWaitTheirTurnOutsideTheirTimeout(t *testing.T) {
	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/tr_slow") {
			time.Sleep(time.Second)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"transfer","amount":100,"currency":"usd"}`, path.Base(r.URL.Path))
	}))
	defer srv.Close()
	c := NewStripeClient(StripeConfig{APIBase: srv.URL, Timeout: 300 * time.Millisecond, RequestsPerSecond: 2})
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Transfers.Get(fmt.Sprintf("tr_%d", i), nil)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "call %d waited past its 300 ms for its turn, and was still given its 300 ms", i)
	}
	mu.Lock()
	sort.Slice(arrived, func(i, j int) bool { return arrived[i].Before(arrived[j]) })
	spread := arrived[len(arrived)-1].Sub(arrived[0])
	mu.Unlock()
	assert.GreaterOrEqual(t, spread, 1800*time.Millisecond, "2 a second, a burst of 2: six calls over 2 s")

	_, err := c.Transfers.Get("tr_slow", nil)
	require.Error(t, err, "an answer slower than the timeout")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// While Stripe is down, a worker asks it once a probe, not once a call: the
// calls behind the breaker return at once, without a request and without
// waiting for a place in the rate limit (holding a worker slot to be
// refused). The first probe Stripe answers lets every call through again.
func TestStripeDownIsAskedOnceAProbeNotOnceACall(t *testing.T) {
	var asked atomic.Int64
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"type":"api_error","message":"down"}}`)
			return
		}
		fmt.Fprintf(w, `{"id":%q,"object":"transfer","amount":100,"currency":"usd"}`, path.Base(r.URL.Path))
	}))
	defer srv.Close()
	c := NewStripeClient(StripeConfig{APIBase: srv.URL, Timeout: time.Second, RequestsPerSecond: 4})

	calls := func(n int) []error {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { _, errs[i] = c.Transfers.Get(fmt.Sprintf("tr_%d", i), nil) })
		}
		wg.Wait()
		return errs
	}
	for i, err := range calls(60) {
		require.Error(t, err, "call %d while Stripe is down", i)
		assert.True(t, unavailable(DependencyStripe, classifyStripe(err)), "call %d: %v is Stripe unavailable, so a step waits it out", i, err)
	}
	assert.LessOrEqual(t, asked.Load(), int64(stripeTripAfter+1),
		"60 calls while Stripe is down: it is asked until the breaker trips, then not (without it, all 60 wait their turn at 4 a second to be refused)")

	up.Store(true)
	before := asked.Load()
	_, err := c.Transfers.Get("tr_early", nil)
	require.ErrorIs(t, err, errStripeCircuitOpen, "back, but no probe has found it yet")
	assert.Equal(t, before, asked.Load())

	time.Sleep(stripeProbeEvery + 100*time.Millisecond)
	_, err = c.Transfers.Get("tr_probe", nil)
	require.NoError(t, err, "the probe finds Stripe back")
	for i, err := range calls(8) {
		assert.NoError(t, err, "call %d after the probe", i)
	}
}

// A Stripe that answers reads and fails every create is down for payments:
// half its calls failing trips the breaker too.
func TestStripeFailingHalfItsCallsIsDown(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"type":"api_error","message":"down"}}`)
			return
		}
		fmt.Fprint(w, `{"object":"list","data":[],"has_more":false,"url":"/v1/transfers"}`)
	}))
	defer srv.Close()
	c := NewStripeClient(StripeConfig{APIBase: srv.URL, RequestsPerSecond: 1000})
	refused := 0
	for i := range 50 {
		it := c.Transfers.List(&stripe.TransferListParams{TransferGroup: stripe.String(fmt.Sprintf("claim-%d", i))})
		for it.Next() {
		}
		_, err := c.Transfers.New(&stripe.TransferParams{Amount: stripe.Int64(100), Currency: stripe.String("usd"), Destination: stripe.String("acct_1")})
		require.Error(t, err)
		if errors.Is(err, errStripeCircuitOpen) {
			refused++
		}
	}
	assert.LessOrEqual(t, asked.Load(), int64(4*stripeTripAfter+1), "a list answered and a create refused, 50 times: Stripe is asked until the breaker trips")
	assert.Positive(t, refused)
}
