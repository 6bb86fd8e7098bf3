package stripesim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// noKeepAlive makes every request use a fresh connection. Go's transport
// silently resends a request that carries an Idempotency-Key header when a
// reused connection dies before the response; on a fresh connection it never
// does, so a dropped connection reaches the caller deterministically.
func noKeepAlive() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
}

// payParams is a create request as the payment activity sends it: the
// claim as transfer_group and the key both as Idempotency-Key and metadata.
func payParams(group, key string) *stripe.TransferParams {
	p := transferParams(2500, group, key)
	p.AddMetadata("idempotency_key", key)
	return p
}

func byGroup(group string) *stripe.TransferListParams {
	return &stripe.TransferListParams{TransferGroup: stripe.String(group)}
}

// payLikeActivity mirrors activities.PayClaimant: look for a transfer in the
// group made under this key, and only if there is none create one with the
// key. by is "lookup", "stripe" (Idempotent-Replayed) or "" (created now).
func payLikeActivity(sc *client.API, group, key string) (tr *stripe.Transfer, by string, err error) {
	lp := byGroup(group)
	lp.Limit = stripe.Int64(100)
	it := sc.Transfers.List(lp)
	for it.Next() {
		if tr := it.Transfer(); tr.Metadata["idempotency_key"] == key {
			return tr, "lookup", nil
		}
	}
	if err := it.Err(); err != nil {
		return nil, "", err
	}
	tr, err = sc.Transfers.New(payParams(group, key))
	if err != nil {
		return nil, "", err
	}
	if replayed(tr) {
		by = "stripe"
	}
	return tr, by, nil
}

// networkErr asserts the call failed below the API: no Stripe error object.
func networkErr(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var se *stripe.Error
	require.False(t, errors.As(err, &se), "want a network error, got a Stripe error: %v", err)
}

func timeoutErr(t *testing.T, err error) {
	t.Helper()
	networkErr(t, err)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "want a timeout, got %T: %v", err, err)
}

func TestFaultsEndWithExactlyOneTransfer(t *testing.T) {
	cases := []struct {
		fault stripesim.Fault
		// committed: the failed attempt nonetheless created the transfer.
		committed bool
		check     func(t *testing.T, err error)
	}{
		{stripesim.FaultErrorAfterCommit, true, func(t *testing.T, err error) {
			stripeErr(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI)
		}},
		{stripesim.FaultDropAfterCommit, true, networkErr},
		{stripesim.FaultRateLimit, false, func(t *testing.T, err error) {
			se := stripeErr(t, err, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)
			assert.Equal(t, stripe.ErrorCodeRateLimit, se.Code)
			assert.Contains(t, se.Msg, "Too many requests")
		}},
		{stripesim.FaultKeyInUse, false, func(t *testing.T, err error) {
			se := stripeErr(t, err, http.StatusConflict, stripe.ErrorTypeInvalidRequest)
			assert.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)
		}},
		{stripesim.FaultErrorBeforeCommit, false, func(t *testing.T, err error) {
			stripeErr(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI)
		}},
	}
	for _, c := range cases {
		t.Run(string(c.fault), func(t *testing.T) {
			h := start(t, "", nil)
			sc := newClientWith(h.srv.URL, testKey, noKeepAlive())

			t.Run("retry with the same key", func(t *testing.T) {
				group, key := "claim_retry", "key-retry"
				h.sim.AddFault(stripesim.FaultRule{Fault: c.fault, TransferGroup: group})

				_, firstErr := sc.Transfers.New(payParams(group, key))
				c.check(t, firstErr)
				landed := h.listAll(byGroup(group))
				ks, stored := h.sim.KeyStats(key)
				if c.committed {
					require.Len(t, landed, 1, "the failed attempt committed")
					assert.Equal(t, "done", ks.Status)
					assert.Equal(t, landed[0].ID, ks.TransferID)
				} else {
					require.Empty(t, landed)
					assert.False(t, stored, "nothing stored against the key")
				}

				tr, err := sc.Transfers.New(payParams(group, key))
				require.NoError(t, err)
				assert.Equal(t, c.committed, replayed(tr))
				if c.committed {
					assert.Equal(t, landed[0].ID, tr.ID)
				}
				var se *stripe.Error
				if c.committed && errors.As(firstErr, &se) {
					assert.Equal(t, se.RequestID, tr.LastResponse.Header.Get("Original-Request"),
						"the replay is the response the fault withheld")
				}
				assert.Equal(t, []string{tr.ID}, ids(h.listAll(byGroup(group))))
			})

			t.Run("list then create like the payment activity", func(t *testing.T) {
				group, key := "claim_pay", "key-pay"
				h.sim.AddFault(stripesim.FaultRule{Fault: c.fault, TransferGroup: group}) // POST only: the list passes

				_, _, err := payLikeActivity(sc, group, key)
				c.check(t, err)
				tr, by, err := payLikeActivity(sc, group, key)
				require.NoError(t, err)
				if c.committed {
					assert.Equal(t, "lookup", by, "the retry found the committed transfer")
				} else {
					assert.Equal(t, "", by, "the retry created the transfer")
				}
				again, by, err := payLikeActivity(sc, group, key)
				require.NoError(t, err)
				assert.Equal(t, "lookup", by)
				assert.Equal(t, tr.ID, again.ID)
				assert.Equal(t, []string{tr.ID}, ids(h.listAll(byGroup(group))))
			})

			for _, f := range h.sim.Faults() {
				assert.Equal(t, 1, f.Fired, "rule %d", f.ID)
				assert.True(t, f.Retired, "rule %d", f.ID)
			}
		})
	}
}

// With keep-alive, Go's transport may resend the dropped POST by itself (it
// carries an Idempotency-Key), in which case the resend is a replay. Either
// way there is one transfer.
func TestFaultDropAfterCommitOnReusedConnection(t *testing.T) {
	h := start(t, "", nil)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	sc := newClientWith(h.srv.URL, testKey, &http.Client{Transport: transport})
	it := sc.Transfers.List(byGroup("claim_drop")) // warm a keep-alive connection
	for it.Next() {
	}
	require.NoError(t, it.Err())

	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultDropAfterCommit})
	tr, err := sc.Transfers.New(payParams("claim_drop", "key-drop"))
	landed := h.listAll(byGroup("claim_drop"))
	require.Len(t, landed, 1)
	if err != nil {
		t.Log("the caller saw the dropped connection")
		networkErr(t, err)
	} else {
		t.Log("the transport resent the request on its own")
		assert.True(t, replayed(tr), "the transport's resend was answered from the saved response")
		assert.Equal(t, landed[0].ID, tr.ID)
	}
	retry, err := sc.Transfers.New(payParams("claim_drop", "key-drop"))
	require.NoError(t, err)
	assert.True(t, replayed(retry))
	assert.Equal(t, landed[0].ID, retry.ID)
	assert.Len(t, h.listAll(byGroup("claim_drop")), 1)
}

func TestFaultSlowRequestLandsAfterClientTimeout(t *testing.T) {
	const delay = 600 * time.Millisecond
	h := start(t, "", nil)
	impatient := newClientWith(h.srv.URL, testKey, &http.Client{Timeout: 100 * time.Millisecond})

	t.Run("retry after it landed", func(t *testing.T) {
		group, key := "claim_slow1", "key-slow1"
		h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: delay, TransferGroup: group})
		sent := time.Now()
		_, err := impatient.Transfers.New(payParams(group, key))
		timeoutErr(t, err)

		early := h.listAll(byGroup(group))
		if time.Since(sent) < delay { // the server cannot have committed yet
			assert.Empty(t, early, "the slow request waits before doing anything")
		}
		require.Eventually(t, func() bool { return len(h.listAll(byGroup(group))) == 1 },
			5*time.Second, 20*time.Millisecond, "the abandoned request completes server-side")
		landed := h.listAll(byGroup(group))[0]

		tr, by, err := payLikeActivity(h.sc, group, key)
		require.NoError(t, err)
		assert.Equal(t, "lookup", by)
		assert.Equal(t, landed.ID, tr.ID)

		tr, err = h.sc.Transfers.New(payParams(group, key))
		require.NoError(t, err)
		assert.True(t, replayed(tr))
		assert.Equal(t, landed.ID, tr.ID)
	})

	t.Run("retry while it is still delayed", func(t *testing.T) {
		group, key := "claim_slow2", "key-slow2"
		h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: delay, TransferGroup: group})
		_, err := impatient.Transfers.New(payParams(group, key))
		timeoutErr(t, err)

		// The delay comes before the key is reserved, so the retry (normally
		// still inside the delay) executes, and the late original replays.
		tr, err := h.sc.Transfers.New(payParams(group, key))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			ks, ok := h.sim.KeyStats(key)
			return ok && ks.Requests == 2
		}, 5*time.Second, 20*time.Millisecond, "the delayed request arrives")
		ks, _ := h.sim.KeyStats(key)
		assert.Equal(t, 1, ks.Replays, "whichever came second replayed")
		assert.Equal(t, tr.ID, ks.TransferID)
		assert.Equal(t, []string{tr.ID}, ids(h.listAll(byGroup(group))))
	})
}

// The 409 fault is indistinguishable from a real in-flight conflict.
func TestFaultKeyInUseMatchesRealConflict(t *testing.T) {
	h := start(t, "", nil)
	const body = "amount=700&currency=usd&destination=acct_1Claimant&transfer_group=g"
	key := http.Header{"Idempotency-Key": {"twin-key"}}

	entered, release := h.blockFirstCommit()
	done := make(chan error, 1)
	go func() {
		_, err := h.sc.Transfers.New(transferParams(700, "g", "twin-key"))
		done <- err
	}()
	entered()
	realResp, realBody := h.do(http.MethodPost, "/v1/transfers", body, key)
	release()
	require.NoError(t, <-done)

	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultKeyInUse})
	fakeResp, fakeBody := h.do(http.MethodPost, "/v1/transfers", body, key)
	assert.Equal(t, http.StatusConflict, realResp.StatusCode)
	assert.Equal(t, realResp.StatusCode, fakeResp.StatusCode)
	assert.Equal(t, realBody, fakeBody)
	for _, hdr := range []string{"Content-Type", "Idempotency-Key"} {
		assert.Equal(t, realResp.Header.Get(hdr), fakeResp.Header.Get(hdr), hdr)
	}
	assert.NotEmpty(t, fakeResp.Header.Get("Request-Id"))
}

func TestFaultMatching(t *testing.T) {
	h := start(t, "", nil)
	forever := func(r stripesim.FaultRule) int { r.Times = -1; return h.sim.AddFault(r) }
	byGroupID := forever(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, TransferGroup: "grp-a"})
	byPrefixID := forever(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, KeyPrefix: "kb-"})
	listID := forever(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, Method: "get", TransferGroup: "grp-list"})
	otherPathID := forever(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, Path: "/v1/transfers/tr_x"})

	create := func(group, key string) error {
		_, err := h.sc.Transfers.New(transferParams(100, group, key))
		return err
	}
	require.NoError(t, create("grp-b", "ka-1"), "matches nothing")
	stripeErr(t, create("grp-a", "ka-2"), http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)
	stripeErr(t, create("grp-a", "kb-3"), http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest) // first rule wins
	stripeErr(t, create("grp-b", "kb-4"), http.StatusInternalServerError, stripe.ErrorTypeAPI)

	resp, body := h.do(http.MethodPost, "/v1/transfers?transfer_group=grp-a", "amount=1&currency=usd&destination=acct_1", nil)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "transfer_group from the query string of a POST: %s", body)

	it := h.sc.Transfers.List(byGroup("grp-list"))
	assert.False(t, it.Next())
	stripeErr(t, it.Err(), http.StatusInternalServerError, stripe.ErrorTypeAPI)
	assert.Len(t, h.listAll(byGroup("grp-b")), 1, "list of another group passes")

	resp, _ = h.do(http.MethodGet, "/v1/transfers/tr_x", "", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "method must match too")
	resp, _ = h.do(http.MethodGet, "/_sim/health", "", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	fired := map[int]int{}
	for _, f := range h.sim.Faults() {
		fired[f.ID] = f.Fired
		assert.False(t, f.Retired)
	}
	assert.Equal(t, map[int]int{byGroupID: 3, byPrefixID: 1, listID: 1, otherPathID: 0}, fired)
	assert.Empty(t, h.listAll(byGroup("grp-a")))
}

func TestFaultTimes(t *testing.T) {
	h := start(t, "", nil)
	create := func(key string) error {
		_, err := h.sc.Transfers.New(transferParams(100, "g", key))
		return err
	}

	twice := h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, KeyPrefix: "two-", Times: 2})
	once := h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, KeyPrefix: "one-"}) // 0 = once
	always := h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, KeyPrefix: "all-", Times: -1})

	stripeErr(t, create("two-1"), http.StatusInternalServerError, stripe.ErrorTypeAPI)
	stripeErr(t, create("two-1"), http.StatusInternalServerError, stripe.ErrorTypeAPI)
	require.NoError(t, create("two-1"), "retired after two firings")
	stripeErr(t, create("one-1"), http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)
	require.NoError(t, create("one-1"))
	for range 3 {
		stripeErr(t, create("all-1"), http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)
	}

	want := []stripesim.FaultRule{
		{ID: twice, Fault: stripesim.FaultErrorBeforeCommit, Method: "POST", Path: "/v1/transfers", KeyPrefix: "two-", Times: 2, Fired: 2, Retired: true},
		{ID: once, Fault: stripesim.FaultRateLimit, Method: "POST", Path: "/v1/transfers", KeyPrefix: "one-", Times: 1, Fired: 1, Retired: true},
		{ID: always, Fault: stripesim.FaultRateLimit, Method: "POST", Path: "/v1/transfers", KeyPrefix: "all-", Times: -1, Fired: 3},
	}
	assert.Equal(t, want, h.sim.Faults())

	// Counting is atomic: concurrent requests fire a Times: 3 rule exactly 3 times.
	h.sim.ClearFaults()
	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, KeyPrefix: "par-", Times: 3})
	var (
		wg      sync.WaitGroup
		limited atomic.Int64
	)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if create(fmt.Sprintf("par-%d", i)) != nil {
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(3), limited.Load())
	assert.Equal(t, 3, h.sim.Faults()[0].Fired)
}

func TestFaultAdminEndpoints(t *testing.T) {
	h := start(t, "", nil)
	noAuth := http.Header{"Authorization": {""}}
	post := func(body string) (*http.Response, string) {
		return h.do(http.MethodPost, "/_sim/faults", body, http.Header{"Authorization": {""}, "Content-Type": {"application/json"}})
	}

	resp, body := post(`{"fault":"slow","delay":"250ms","transfer_group":"g","times":-1}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"id":1}`, body)
	resp, body = post(`{"fault":"429","key_prefix":"k-"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"id":2}`, body)

	_, err := h.sc.Transfers.New(transferParams(100, "other", "k-1"))
	stripeErr(t, err, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)

	resp, body = h.do(http.MethodGet, "/_sim/faults", "", noAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `[
		{"id":1,"fault":"slow","method":"POST","path":"/v1/transfers","transfer_group":"g","times":-1,"delay":"250ms","fired":0,"retired":false},
		{"id":2,"fault":"429","method":"POST","path":"/v1/transfers","key_prefix":"k-","times":1,"fired":1,"retired":true}
	]`, body)
	var listed []stripesim.FaultRule
	require.NoError(t, json.Unmarshal([]byte(body), &listed))
	assert.Equal(t, h.sim.Faults(), listed, "listings decode back into the same rules")
	assert.Equal(t, 250*time.Millisecond, listed[0].Delay)

	for _, bad := range []struct{ body, msg string }{
		{`{"fault":"nope"}`, "unknown fault"},
		{`{"fault":"slow"}`, "needs a positive delay"},
		{`{"fault":"slow","delay":3}`, "Go duration string"},
		{`{"fault":"slow","delay":"3 sec"}`, "delay"},
		{`{"fault":"429","delay":"1s"}`, "only meaningful"},
		{`{"fault":"429","transfergroup":"g"}`, "unknown field"},
		{`{"fault":"429","times":-2}`, "times"},
		{`{"fault":"429","path":"v1/transfers"}`, "must start with /"},
		{`{"fault":"429","path":"/transfers"}`, `/transfers\" must start with /v1/`},
		{`{"fault":"429","path":"/_sim/faults"}`, "must start with /v1/"},
		{`{"fault":"429","method":"POST "}`, `POST \" must be an HTTP method`},
		{`{"fault":"429","method":"PO/ST"}`, `PO/ST\" must be an HTTP method`},
		{`[{"fault":"429"}]`, "Invalid fault rule"},
		{`not json`, "Invalid fault rule"},
	} {
		resp, body := post(bad.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, bad.body)
		assert.Contains(t, body, bad.msg, bad.body)
		assert.Contains(t, body, `"type": "invalid_request_error"`, bad.body)
	}
	assert.Len(t, h.sim.Faults(), 2, "rejected rules are not added")

	resp, body = h.do(http.MethodDelete, "/_sim/faults", "", noAuth)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"cleared":2}`, body)
	_, body = h.do(http.MethodGet, "/_sim/faults", "", noAuth)
	assert.JSONEq(t, `[]`, body)

	resp, body = post(`{"fault":"409"}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.JSONEq(t, `{"id":3}`, body, "ids are not reused after a clear")

	resp, _ = h.do(http.MethodPut, "/_sim/faults", "", noAuth)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Equal(t, "DELETE, GET, POST", resp.Header.Get("Allow"))
}

func TestFaultRuleJSON(t *testing.T) {
	r := stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: 1500 * time.Millisecond, Times: -1}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":0,"fault":"slow","times":-1,"delay":"1.5s","fired":0,"retired":false}`, string(b))
	var back stripesim.FaultRule
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, back)

	b, err = json.Marshal(stripesim.FaultRule{Fault: stripesim.FaultRateLimit})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "delay", "zero delay is omitted")
	require.NoError(t, json.Unmarshal([]byte(`{"fault":"429","delay":null}`), &back))
	assert.Zero(t, back.Delay)
}

// syncBuffer is a log sink safe for concurrent handler goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestConfigFaultsAppliedAtOpen(t *testing.T) {
	_, err := stripesim.Open(stripesim.Config{Faults: []stripesim.FaultRule{
		{Fault: stripesim.FaultRateLimit},
		{Fault: stripesim.FaultSlow},
	}})
	require.ErrorContains(t, err, "Faults[1]")

	var logs syncBuffer
	sim, err := stripesim.Open(stripesim.Config{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Faults: []stripesim.FaultRule{
			{Fault: stripesim.FaultRateLimit, KeyPrefix: "cfg-"},
			{Fault: stripesim.FaultErrorAfterCommit, TransferGroup: "claim_cfg", Times: 5, Fired: 9, ID: 42},
		},
	})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	defer func() { srv.Close(); require.NoError(t, sim.Close()) }()

	faults := sim.Faults()
	require.Len(t, faults, 2)
	assert.Equal(t, []int{1, 2}, []int{faults[0].ID, faults[1].ID})
	assert.Equal(t, 0, faults[1].Fired, "output-only fields are reset")

	sc := newClient(srv.URL, testKey)
	_, err = sc.Transfers.New(transferParams(100, "g", "cfg-1"))
	stripeErr(t, err, http.StatusTooManyRequests, stripe.ErrorTypeInvalidRequest)
	tr, err := sc.Transfers.New(transferParams(100, "g", "cfg-1"))
	require.NoError(t, err)
	assert.False(t, replayed(tr))

	out := logs.String()
	assert.Contains(t, out, `"msg":"fault injection active","rules":2`)
	assert.Contains(t, out, `"level":"WARN","msg":"fault injected","rule":{"id":1,"fault":"429","fired":1,"times":1,"delay":0}`)
	assert.Contains(t, out, `"idempotency_key":"cfg-1"`)
}

// A slow fault's sleep ends when the server closes: the request is answered
// 503 without being processed, and the HTTP server need not wait out the
// delay to shut down.
func TestFaultSlowEndsWhenServerCloses(t *testing.T) {
	h := start(t, "", nil)
	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: 30 * time.Second, TransferGroup: "claim_close"})
	done := make(chan error, 1)
	go func() {
		_, err := h.sc.Transfers.New(payParams("claim_close", "key-close"))
		done <- err
	}()
	require.Eventually(t, func() bool { return h.sim.Faults()[0].Fired == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // into the sleep

	start := time.Now()
	require.NoError(t, h.sim.Close())
	select {
	case err := <-done:
		assert.Less(t, time.Since(start), 2*time.Second)
		se := stripeErr(t, err, http.StatusServiceUnavailable, stripe.ErrorTypeAPI)
		assert.Contains(t, se.Msg, "shutting down")
		assert.Contains(t, se.Msg, "not processed")
	case <-time.After(5 * time.Second):
		t.Fatal("the slow request outlived Close")
	}
}

// BeginShutdown wakes sleeping slow faults (and refuses later ones at once)
// while everything else keeps working, so in-flight requests can finish
// before Close.
func TestFaultSlowEndsOnBeginShutdown(t *testing.T) {
	h := start(t, "", nil)
	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultSlow, Delay: 30 * time.Second, TransferGroup: "claim_sd", Times: -1})
	done := make(chan error, 1)
	go func() {
		_, err := h.sc.Transfers.New(payParams("claim_sd", "key-sd1"))
		done <- err
	}()
	require.Eventually(t, func() bool { return h.sim.Faults()[0].Fired == 1 }, 5*time.Second, 5*time.Millisecond)

	h.sim.BeginShutdown()
	h.sim.BeginShutdown() // idempotent
	select {
	case err := <-done:
		stripeErr(t, err, http.StatusServiceUnavailable, stripe.ErrorTypeAPI)
	case <-time.After(5 * time.Second):
		t.Fatal("the slow request outlived BeginShutdown")
	}
	_, err := h.sc.Transfers.New(payParams("claim_sd", "key-sd2"))
	stripeErr(t, err, http.StatusServiceUnavailable, stripe.ErrorTypeAPI)
	_, stored := h.sim.KeyStats("key-sd1")
	assert.False(t, stored, "an abandoned slow request reserves nothing")
	assert.Empty(t, h.listAll(byGroup("claim_sd")), "and creates nothing")

	tr := h.create(100, "claim_other", "key-other")
	assert.Equal(t, []string{tr.ID}, ids(h.listAll(byGroup("claim_other"))), "other requests still work")
}

// A stale list hides a transfer made: the same key then creates nothing
// new and Stripe's replay answers with the first transfer.
func TestFaultStaleListHidesATransferTheKeyReplays(t *testing.T) {
	h := start(t, "", nil)
	first, err := h.sc.Transfers.New(transferParams(700, "stale", "stale-key"))
	require.NoError(t, err)
	h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultStaleList, Method: "GET", TransferGroup: "stale"})
	assert.Empty(t, h.listAll(byGroup("stale")), "the list has not caught up")
	assert.Len(t, h.listAll(byGroup("stale")), 1, "once: the next list sees it")
	again, err := h.sc.Transfers.New(transferParams(700, "stale", "stale-key"))
	require.NoError(t, err)
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	assert.Error(t, stripesim.FaultRule{Fault: stripesim.FaultStaleList}.Validate(), "POST is no list")
}
