package stripesim_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v76"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

func TestCreateAndGetTransfer(t *testing.T) {
	h := start(t, "", nil)
	p := transferParams(1234, "claim_42", "create-1")
	p.Description = stripe.String("claim payout")
	p.AddMetadata("claim_id", "42")

	tr, err := h.sc.Transfers.New(p)
	require.NoError(t, err)
	assert.Regexp(t, `^tr_[A-Za-z0-9]{24}$`, tr.ID)
	assert.Equal(t, "transfer", tr.Object)
	assert.Equal(t, int64(1234), tr.Amount)
	assert.Equal(t, stripe.CurrencyUSD, tr.Currency)
	assert.Equal(t, "acct_1Claimant", tr.Destination.ID)
	assert.Regexp(t, `^py_`, tr.DestinationPayment.ID)
	assert.Regexp(t, `^txn_`, tr.BalanceTransaction.ID)
	assert.Equal(t, "claim payout", tr.Description)
	assert.Equal(t, "claim_42", tr.TransferGroup)
	assert.Equal(t, map[string]string{"claim_id": "42"}, tr.Metadata)
	assert.Equal(t, h.clock.Now().Unix(), tr.Created)
	assert.Equal(t, stripe.TransferSourceTypeCard, tr.SourceType)
	assert.Equal(t, "/v1/transfers/"+tr.ID+"/reversals", tr.Reversals.URL)
	assert.False(t, tr.Livemode)
	assert.False(t, replayed(tr))
	assert.Regexp(t, `^req_`, tr.LastResponse.RequestID)
	assert.Equal(t, "create-1", tr.LastResponse.IdempotencyKey)

	got, err := h.sc.Transfers.Get(tr.ID, nil)
	require.NoError(t, err)
	assert.JSONEq(t, string(tr.LastResponse.RawJSON), string(got.LastResponse.RawJSON))

	_, err = h.sc.Transfers.Get("tr_missing", nil)
	se := stripeErr(t, err, http.StatusNotFound, stripe.ErrorTypeInvalidRequest)
	assert.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	assert.Equal(t, "id", se.Param)
	assert.Equal(t, "No such transfer: 'tr_missing'", se.Msg)
}

func TestTransferJSONShape(t *testing.T) {
	h := start(t, "", nil)
	resp, body := h.do(http.MethodPost, "/v1/transfers", "amount=500&currency=eur&destination=acct_9&expand[]=destination", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &obj))
	for _, nullField := range []string{"description", "transfer_group", "source_transaction"} {
		assert.Contains(t, obj, nullField)
		assert.Nil(t, obj[nullField], nullField)
	}
	assert.Equal(t, map[string]any{}, obj["metadata"])
	assert.Equal(t, float64(0), obj["amount_reversed"])
	assert.Equal(t, false, obj["reversed"])
	assert.Equal(t, "card", obj["source_type"])
	assert.Equal(t, map[string]any{
		"object": "list", "data": []any{}, "has_more": false, "total_count": float64(0),
		"url": "/v1/transfers/" + obj["id"].(string) + "/reversals",
	}, obj["reversals"])
}

func TestIdempotentReplay(t *testing.T) {
	h := start(t, "", nil)
	first := h.create(1000, "g", "replay-key")
	second := h.create(1000, "g", "replay-key")

	assert.Equal(t, first.ID, second.ID)
	assert.False(t, replayed(first))
	assert.True(t, replayed(second))
	assert.Equal(t, first.LastResponse.RequestID, second.LastResponse.Header.Get("Original-Request"))
	assert.NotEqual(t, first.LastResponse.RequestID, second.LastResponse.RequestID)
	assert.Equal(t, string(first.LastResponse.RawJSON), string(second.LastResponse.RawJSON), "replay is verbatim")
	assert.Len(t, h.listAll(nil), 1)
}

func TestIdempotencyKeyReusedWithDifferentParams(t *testing.T) {
	h := start(t, "", nil)
	h.create(1000, "g", "mismatch-key")

	_, err := h.sc.Transfers.New(transferParams(2000, "g", "mismatch-key"))
	se := stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency)
	var typed *stripe.IdempotencyError
	assert.True(t, errors.As(err, &typed))
	assert.Contains(t, se.Msg, "Try using a key other than 'mismatch-key'")
	assert.Len(t, h.listAll(nil), 1)
}

func TestKeyInUseWhileFirstRequestInFlight(t *testing.T) {
	h := start(t, "", nil)
	entered, release := h.blockFirstCommit()

	type result struct {
		tr  *stripe.Transfer
		err error
	}
	done := make(chan result, 1)
	go func() {
		tr, err := h.sc.Transfers.New(transferParams(700, "g", "busy-key"))
		done <- result{tr, err}
	}()
	entered()

	_, err := h.sc.Transfers.New(transferParams(700, "g", "busy-key"))
	se := stripeErr(t, err, http.StatusConflict, stripe.ErrorTypeInvalidRequest)
	assert.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)
	assert.Contains(t, se.Msg, "busy-key")

	// Different parameters are a permanent mismatch even while in flight.
	_, err = h.sc.Transfers.New(transferParams(701, "g", "busy-key"))
	stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency)

	release()
	first := <-done
	require.NoError(t, first.err)
	assert.False(t, replayed(first.tr))
	assert.Equal(t, []string{first.tr.ID}, ids(h.listAll(nil)))

	ks, ok := h.sim.KeyStats("busy-key")
	require.True(t, ok)
	assert.Equal(t, 3, ks.Requests)
	assert.Equal(t, 1, ks.InUse)
	assert.Equal(t, 1, ks.Conflicts)
}

func TestBeforeCommitErrorReleasesKey(t *testing.T) {
	h := start(t, "", nil)
	var once sync.Once
	h.sim.SetHooks(stripesim.Hooks{BeforeCommit: func(*http.Request, string) error {
		var err error
		once.Do(func() { err = errors.New("simulated outage") })
		return err
	}})

	_, err := h.sc.Transfers.New(transferParams(900, "g", "flaky-key"))
	se := stripeErr(t, err, http.StatusInternalServerError, stripe.ErrorTypeAPI)
	assert.Contains(t, se.Msg, "simulated outage")
	assert.Empty(t, h.listAll(nil), "nothing stored on failure")

	tr := h.create(900, "g", "flaky-key")
	assert.False(t, replayed(tr))
	assert.Equal(t, []string{tr.ID}, ids(h.listAll(nil)))
	assert.True(t, replayed(h.create(900, "g", "flaky-key")))

	ks, ok := h.sim.KeyStats("flaky-key")
	require.True(t, ok)
	assert.Equal(t, stripesim.KeyStats{
		Key: "flaky-key", Requests: 3, Replays: 1, FirstSeen: h.clock.Now(), TransferID: tr.ID, Status: "done",
	}, ks)
}

func TestKeyExpiresAfterTTL(t *testing.T) {
	h := start(t, "", nil)
	first := h.create(100, "g", "ttl-key")

	h.clock.Advance(23 * time.Hour)
	again := h.create(100, "g", "ttl-key")
	assert.True(t, replayed(again))
	assert.Equal(t, first.ID, again.ID)

	h.clock.Advance(time.Hour + time.Second) // 24h+1s after first use
	_, ok := h.sim.KeyStats("ttl-key")
	assert.False(t, ok, "expired keys are forgotten")
	fresh := h.create(100, "g", "ttl-key")
	assert.False(t, replayed(fresh))
	assert.NotEqual(t, first.ID, fresh.ID)
	assert.Len(t, h.listAll(nil), 2)
}

func TestValidationErrorsAreNotStored(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*stripe.TransferParams)
		status int
		code   stripe.ErrorCode
		param  string
	}{
		{"bad destination", func(p *stripe.TransferParams) { p.Destination = stripe.String("bogus") },
			400, stripe.ErrorCodeResourceMissing, "destination"},
		{"empty destination", func(p *stripe.TransferParams) { p.Destination = stripe.String("") },
			400, stripe.ErrorCodeParameterInvalidEmpty, "destination"},
		{"missing amount", func(p *stripe.TransferParams) { p.Amount = nil },
			400, stripe.ErrorCodeParameterMissing, "amount"},
		{"zero amount", func(p *stripe.TransferParams) { p.Amount = stripe.Int64(0) },
			400, stripe.ErrorCodeParameterInvalidInteger, "amount"},
		{"missing currency", func(p *stripe.TransferParams) { p.Currency = nil },
			400, stripe.ErrorCodeParameterMissing, "currency"},
		{"unknown currency", func(p *stripe.TransferParams) { p.Currency = stripe.String("xyz") },
			400, "", "currency"},
		{"unknown param", func(p *stripe.TransferParams) { p.AddExtra("foo", "bar") },
			400, stripe.ErrorCodeParameterUnknown, "foo"},
		{"source_transaction", func(p *stripe.TransferParams) { p.SourceTransaction = stripe.String("ch_1") },
			400, stripe.ErrorCodeResourceMissing, "source_transaction"},
		{"metadata key too long", func(p *stripe.TransferParams) { p.AddMetadata(strings.Repeat("k", 41), "v") },
			400, "", "metadata[" + strings.Repeat("k", 41) + "]"},
		{"metadata value too long", func(p *stripe.TransferParams) { p.AddMetadata("k", strings.Repeat("v", 501)) },
			400, "", "metadata[k]"},
		{"too many metadata keys", func(p *stripe.TransferParams) {
			for i := range 51 {
				p.AddMetadata(fmt.Sprintf("k%d", i), "v")
			}
		}, 400, "", "metadata"},
	}
	h := start(t, "", nil)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("validation-%d", i)
			p := transferParams(100, "g", key)
			tc.mutate(p)
			_, err := h.sc.Transfers.New(p)
			se := stripeErr(t, err, tc.status, stripe.ErrorTypeInvalidRequest)
			assert.Equal(t, tc.code, se.Code, se.Msg)
			assert.Equal(t, tc.param, se.Param, se.Msg)

			_, stored := h.sim.KeyStats(key)
			assert.False(t, stored, "validation failures are not stored against the key")
			tr := h.create(100, "g", key)
			assert.False(t, replayed(tr), "corrected retry with the same key executes")
		})
	}
	assert.Len(t, h.listAll(nil), len(tests))
}

func TestAuthentication(t *testing.T) {
	h := start(t, "", nil)
	_, err := newClient(h.srv.URL, "sk_test_wrongkey1234").Transfers.New(transferParams(1, "g", ""))
	se := stripeErr(t, err, http.StatusUnauthorized, stripe.ErrorTypeInvalidRequest)
	assert.Equal(t, "Invalid API Key provided: sk_test_****1234", se.Msg)

	resp, body := h.do(http.MethodGet, "/v1/transfers", "", http.Header{"Authorization": {""}})
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, body, "You did not provide an API key")

	req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/transfers", nil)
	require.NoError(t, err)
	req.SetBasicAuth(testKey, "")
	basic, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	basic.Body.Close()
	assert.Equal(t, http.StatusOK, basic.StatusCode, "HTTP Basic with the key as username")

	resp, _ = h.do(http.MethodGet, "/_sim/health", "", http.Header{"Authorization": {""}})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "ops endpoints need no key")
}

func TestListPaginatesByTransferGroup(t *testing.T) {
	h := start(t, "", nil)
	var want []string
	for i := range 5 {
		want = append([]string{h.create(int64(100+i), "claim_7", "").ID}, want...) // newest first
		if i%2 == 1 {
			h.clock.Advance(time.Second) // mix same-second and later transfers
		}
	}
	h.create(999, "other", "")

	h.listCalls.Store(0)
	got := h.listAll(&stripe.TransferListParams{
		ListParams:    stripe.ListParams{Limit: stripe.Int64(2)},
		TransferGroup: stripe.String("claim_7"),
	})
	assert.Equal(t, want, ids(got))
	assert.Equal(t, int64(3), h.listCalls.Load(), "pages of 2, 2 and 1")

	// Walking backwards from the oldest yields oldest-to-newest.
	backwards := h.listAll(&stripe.TransferListParams{
		ListParams:    stripe.ListParams{Limit: stripe.Int64(2), EndingBefore: stripe.String(want[4])},
		TransferGroup: stripe.String("claim_7"),
	})
	assert.Equal(t, []string{want[3], want[2], want[1], want[0]}, ids(backwards))

	page := h.sc.Transfers.List(&stripe.TransferListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(3), Single: true}})
	require.True(t, page.Next())
	assert.True(t, page.TransferList().HasMore)
	assert.Equal(t, "/v1/transfers", page.TransferList().URL)

	bad := h.sc.Transfers.List(&stripe.TransferListParams{
		ListParams: stripe.ListParams{StartingAfter: stripe.String("tr_nope")},
	})
	assert.False(t, bad.Next())
	se := stripeErr(t, bad.Err(), http.StatusBadRequest, stripe.ErrorTypeInvalidRequest)
	assert.Equal(t, "starting_after", se.Param)
}

func TestListFilters(t *testing.T) {
	h := start(t, "", nil)
	t0 := h.clock.Now().Unix()
	var created []*stripe.Transfer
	for i := range 4 { // at t0, t0+60, t0+120, t0+180
		created = append(created, h.create(int64(i+1), "g", ""))
		h.clock.Advance(time.Minute)
	}
	p := transferParams(5, "g", "")
	p.Destination = stripe.String("acct_2Other")
	other, err := h.sc.Transfers.New(p)
	require.NoError(t, err)

	ranged := h.listAll(&stripe.TransferListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: t0 + 60, LesserThan: t0 + 180,
	}})
	assert.Equal(t, []string{created[2].ID, created[1].ID}, ids(ranged))

	open := h.listAll(&stripe.TransferListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThan: t0 + 60, LesserThanOrEqual: t0 + 180,
	}})
	assert.Equal(t, []string{created[3].ID, created[2].ID}, ids(open))

	exact := h.listAll(&stripe.TransferListParams{Created: stripe.Int64(t0 + 120)})
	assert.Equal(t, []string{created[2].ID}, ids(exact))

	byDest := h.listAll(&stripe.TransferListParams{Destination: stripe.String("acct_2Other")})
	assert.Equal(t, []string{other.ID}, ids(byDest))

	resp, body := h.do(http.MethodGet, "/v1/transfers?limit=101", "", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
	resp, body = h.do(http.MethodGet, "/v1/transfers?created[between]=1", "", nil)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, "parameter_unknown")
}

func TestPersistsAcrossRestart(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "sim.db")
	clock := newFakeClock()
	h := start(t, dbPath, clock)
	first := h.create(100, "g", "persist-key")
	second := h.create(200, "g", "")
	h.stop()

	h2 := start(t, dbPath, clock)
	assert.Equal(t, []string{second.ID, first.ID}, ids(h2.listAll(nil)))

	again := h2.create(100, "g", "persist-key")
	assert.True(t, replayed(again))
	assert.Equal(t, first.ID, again.ID)

	got, err := h2.sc.Transfers.Get(first.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(100), got.Amount)
}

func TestKeyStats(t *testing.T) {
	h := start(t, "", nil)
	firstSeen := h.clock.Now()
	tr := h.create(100, "g", "stats-key")
	h.clock.Advance(time.Second)
	h.create(100, "g", "stats-key")
	h.create(100, "g", "stats-key")
	_, err := h.sc.Transfers.New(transferParams(101, "g", "stats-key"))
	stripeErr(t, err, http.StatusBadRequest, stripe.ErrorTypeIdempotency)

	want := stripesim.KeyStats{
		Key: "stats-key", Requests: 4, Replays: 2, Conflicts: 1,
		FirstSeen: firstSeen, TransferID: tr.ID, Status: "done",
	}
	ks, ok := h.sim.KeyStats("stats-key")
	require.True(t, ok)
	assert.Equal(t, want, ks)

	_, ok = h.sim.KeyStats("never-used")
	assert.False(t, ok)

	all, err := h.sim.AllKeyStats()
	require.NoError(t, err)
	assert.Equal(t, []stripesim.KeyStats{want}, all)

	resp, body := h.do(http.MethodGet, "/_sim/idempotency", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var served []stripesim.KeyStats
	require.NoError(t, json.Unmarshal([]byte(body), &served))
	assert.Equal(t, all, served)
}

func TestConcurrentRequestsWithSameKeyCreateOneTransfer(t *testing.T) {
	h := start(t, filepath.Join(t.TempDir(), "sim.db"), nil)
	const n = 16
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created = map[string]bool{}
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := h.sc.Transfers.New(transferParams(100, "g", "race-key"))
			if err != nil {
				var se *stripe.Error
				if assert.True(t, errors.As(err, &se)) {
					assert.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)
				}
				return
			}
			mu.Lock()
			created[tr.ID] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Len(t, created, 1, "every success saw the same transfer")
	assert.Len(t, h.listAll(nil), 1)

	ks, ok := h.sim.KeyStats("race-key")
	require.True(t, ok)
	assert.Equal(t, n, ks.Requests)
	assert.Equal(t, n-1, ks.Replays+ks.InUse)
}

func TestAbandonedInFlightKeyIsTakenOver(t *testing.T) {
	h := start(t, "", nil)
	entered, release := h.blockFirstCommit()
	errc := make(chan error, 1)
	go func() {
		_, err := h.sc.Transfers.New(transferParams(100, "g", "stuck-key"))
		errc <- err
	}()
	entered()

	h.clock.Advance(stripesim.DefaultInFlightTimeout + time.Second)
	tr := h.create(100, "g", "stuck-key")
	assert.False(t, replayed(tr))

	release()
	se := stripeErr(t, <-errc, http.StatusConflict, stripe.ErrorTypeInvalidRequest)
	assert.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code, "the stale owner must not commit")
	assert.Equal(t, []string{tr.ID}, ids(h.listAll(nil)))
}

func TestHTTPEdges(t *testing.T) {
	h := start(t, "", nil)
	tests := []struct {
		name, method, path, body string
		header                   http.Header
		status                   int
		contains                 string
	}{
		{"unknown route", "GET", "/v1/charges", "", nil, 404, "Unrecognized request URL (GET: /v1/charges)"},
		{"unknown root route", "GET", "/nope", "", nil, 404, "Unrecognized request URL"},
		{"wrong method", "DELETE", "/v1/transfers", "", nil, 405, `"type": "invalid_request_error"`},
		{"wrong method on object", "POST", "/v1/transfers/tr_1", "", nil, 405, "not allowed"},
		{"health", "GET", "/_sim/health", "", nil, 200, "ok"},
		{"key too long", "POST", "/v1/transfers", "amount=1&currency=usd&destination=acct_1",
			http.Header{"Idempotency-Key": {strings.Repeat("k", 256)}}, 400, "up to 255 characters"},
		{"json body", "POST", "/v1/transfers", `{"amount":1}`,
			http.Header{"Content-Type": {"application/json"}}, 400, "unsupported Content-Type"},
		{"unknown query param on get", "GET", "/v1/transfers/tr_1?foo=1", "", nil, 400, "parameter_unknown"},
		{"uppercase currency accepted", "POST", "/v1/transfers", "amount=1&currency=USD&destination=acct_1",
			nil, 200, `"currency": "usd"`},
		{"no idempotency key", "POST", "/v1/transfers", "amount=1&currency=usd&destination=acct_1",
			nil, 200, `"object": "transfer"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := h.do(tc.method, tc.path, tc.body, tc.header)
			assert.Equal(t, tc.status, resp.StatusCode, body)
			assert.Contains(t, body, tc.contains)
			assert.Regexp(t, `^req_[A-Za-z0-9]{14}$`, resp.Header.Get("Request-Id"))
		})
	}
	resp, _ := h.do("DELETE", "/v1/transfers", "", nil)
	assert.Equal(t, "GET, POST", resp.Header.Get("Allow"))
}

// A body over the limit is refused with 413 as a whole, never truncated, and
// before any fault rule looks at it.
func TestOversizedBodiesAreRefused(t *testing.T) {
	h := start(t, "", nil)
	const limit = 1 << 20
	form := "amount=100&currency=usd&destination=acct_1Claimant&transfer_group=big&description="
	oversized := form + strings.Repeat("x", limit-len(form)+1)
	key := func(k string) http.Header { return http.Header{"Idempotency-Key": {k}} }

	resp, body := h.do(http.MethodPost, "/v1/transfers", oversized, key("big-1"))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%.300s", body)
	assert.Contains(t, body, `"type": "invalid_request_error"`)
	assert.Contains(t, body, "1048576 bytes")
	_, stored := h.sim.KeyStats("big-1")
	assert.False(t, stored, "nothing is stored against the key")

	rule := h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, TransferGroup: "big", Times: -1})
	resp, body = h.do(http.MethodPost, "/v1/transfers", oversized, key("big-2"))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "the body is refused, not truncated and matched: %.300s", body)
	assert.Equal(t, 0, h.sim.Faults()[0].Fired, "rule %d must not fire on an oversized request", rule)

	resp, body = h.do(http.MethodPost, "/v1/transfers", oversized[:limit], key("big-3"))
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a body at the limit is read whole and matched: %.300s", body)
	h.sim.ClearFaults()
	resp, body = h.do(http.MethodPost, "/v1/transfers", oversized[:limit], key("big-4"))
	assert.NotEqual(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "a body at the limit is not too large: %.300s", body)

	rule = h.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultRateLimit, KeyPrefix: "x-"})
	padded := `{"fault":"429","key_prefix":"x-"` + strings.Repeat(" ", 64<<10) + `}`
	resp, body = h.do(http.MethodPost, "/_sim/faults", padded, http.Header{"Authorization": {""}, "Content-Type": {"application/json"}})
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%.300s", body)
	assert.Contains(t, body, "65536 bytes")
	assert.Len(t, h.sim.Faults(), 1, "rule %d stays the only one", rule)
}
