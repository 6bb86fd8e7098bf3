package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
)

// newSkewedStripe is newFakeStripe with a clock that can be set back, so a
// test can make transfers "created" before the reconciliation window.
func newSkewedStripe(t *testing.T, skew *atomic.Int64) *fakeStripe {
	t.Helper()
	sim, err := stripesim.Open(stripesim.Config{DBPath: filepath.Join(t.TempDir(), "stripe.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:    func() time.Time { return time.Now().Add(-time.Duration(skew.Load())) }})
	require.NoError(t, err)
	f := &fakeStripe{sim: sim}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() { f.srv.Close(); sim.Close() })
	return f
}

// recon is one scenario: the activities, and helpers that put a claim in
// each state directly, in the store and at the provider.
type recon struct {
	t *testing.T
	a *Activities
}

func (r recon) register(id string) {
	r.t.Helper()
	c := sampleClaim(r.t)
	c.ID = id
	_, _, err := r.a.Store.PutClaim(context.Background(), c)
	require.NoError(r.t, err)
}

// close records step 8's outcome, as the workflow would.
func (r recon) close(id, outcome, transferID string, payout int64) {
	r.t.Helper()
	_, _, err := r.a.Store.CloseClaim(context.Background(), id, claim.StepKey(id, claim.StepClose), outcome, transferID, payout)
	require.NoError(r.t, err)
}

// pay makes a transfer for id (registered or not) as step 6 makes it: its
// group, key and metadata.
func (r recon) pay(id string, minor int64) string {
	r.t.Helper()
	key := string(claim.StepKey(id, claim.StepPay))
	p := &stripe.TransferParams{Amount: stripe.Int64(minor), Currency: stripe.String("usd"), Destination: stripe.String("acct_1Ada"),
		TransferGroup: stripe.String(id)}
	p.SetIdempotencyKey(key)
	p.AddMetadata("workflow_id", id)
	p.AddMetadata("step", "6")
	p.AddMetadata("idempotency_key", key)
	tr, err := r.a.Stripe.Transfers.New(p)
	require.NoError(r.t, err)
	return tr.ID
}

// paid is a claim that went through steps 6 and 8 normally.
func (r recon) paid(id string, minor int64) string {
	r.t.Helper()
	r.register(id)
	tr := r.pay(id, minor)
	r.close(id, store.StatusPaid, tr, minor)
	return tr
}

// transfer makes a transfer directly through stripe-go: what a person at
// the dashboard, a bug or a lost step log leaves behind.
func (r recon) transfer(group string, minor int64, key string) string {
	r.t.Helper()
	p := &stripe.TransferParams{Amount: stripe.Int64(minor), Currency: stripe.String("usd"), Destination: stripe.String("acct_1Ada")}
	if group != "" {
		p.TransferGroup = stripe.String(group)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	tr, err := r.a.Stripe.Transfers.New(p)
	require.NoError(r.t, err)
	return tr.ID
}

// captured is a metrics handler that keeps what it is given.
type captured struct {
	mu     sync.Mutex
	tags   map[string]string
	values map[string]float64
	root   *captured
}

func newCaptured() *captured {
	c := &captured{values: map[string]float64{}}
	c.root = c
	return c
}

func (c *captured) name(n string) string {
	if v, ok := c.tags["category"]; ok {
		return n + "{category=" + v + "}"
	}
	return n
}

func (c *captured) WithTags(tags map[string]string) client.MetricsHandler {
	merged := map[string]string{}
	for k, v := range c.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return &captured{tags: merged, root: c.root}
}

func (c *captured) Counter(n string) client.MetricsCounter {
	return counterFunc(func(d int64) { c.root.add(c.name(n), float64(d), false) })
}

func (c *captured) Gauge(n string) client.MetricsGauge {
	return gaugeFunc(func(v float64) { c.root.add(c.name(n), v, true) })
}

func (c *captured) Timer(string) client.MetricsTimer { return timerFunc(func(time.Duration) {}) }

func (c *captured) add(n string, v float64, set bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if set {
		c.values[n] = v
	} else {
		c.values[n] += v
	}
}

func (c *captured) get(n string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.values[n]
	return v, ok
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// reconcile runs ReconcilePayments in a real activity context, with its
// metrics and heartbeats captured.
func reconcile(t *testing.T, a *Activities, in ReconcilePaymentsInput) (ReconcileReport, *captured, []ReconcileProgress) {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	m := newCaptured()
	ts.SetMetricsHandler(m)
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	a.callerFn = runs(a).start(in.WorkflowID, "run-reconcile", "ReconcileWorkflow")
	var mu sync.Mutex
	var beats []ReconcileProgress
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var p ReconcileProgress
		if details.HasValues() && details.Get(&p) == nil {
			mu.Lock()
			beats = append(beats, p)
			mu.Unlock()
		}
	})
	v, err := env.ExecuteActivity(a.ReconcilePayments, in)
	require.NoError(t, err)
	var rep ReconcileReport
	require.NoError(t, v.Get(&rep))
	mu.Lock()
	defer mu.Unlock()
	return rep, m, beats
}

func window(key string) ReconcilePaymentsInput {
	now := time.Now().UTC()
	return ReconcilePaymentsInput{Key: claim.IdempotencyKey(key), WorkflowID: "reconcile-test", Started: now,
		Since: now.Add(-time.Hour), Until: now.Add(time.Minute)}
}

func byClaim(entries []ReconcileEntry) map[string]ReconcileEntry {
	out := map[string]ReconcileEntry{}
	for _, e := range entries {
		out[e.ClaimID] = e
	}
	return out
}

// Every category, each discrepancy made directly in stripesim and the store.
func TestReconcileClassifiesEveryCategory(t *testing.T) {
	var skew atomic.Int64
	f := newSkewedStripe(t, &skew)
	a := newActivities(t, f)
	r := recon{t, a}

	r.paid("claim-m", 64000)
	// Paid now, but its transfer was made three hours ago (before the
	// window): fetched by ID, not called missing.
	r.register("claim-old")
	skew.Store(int64(3 * time.Hour))
	oldTr := r.pay("claim-old", 32000)
	// An orphan outside the window is not this run's business.
	r.pay("claim-old-orphan", 9900)
	skew.Store(0)
	r.close("claim-old", store.StatusPaid, oldTr, 32000)

	orphan := r.pay("claim-o", 12000)     // never registered, never closed
	r.register("claim-r")                 // rejected, yet money moved
	r.close("claim-r", "rejected", "", 0) // step 8 of a rejected claim
	rejectedTr := r.transfer("claim-r", 5000, "")
	claimless := r.transfer("", 777, "") // names no claim at all

	dup1 := r.paid("claim-d", 40000)
	dup2 := r.transfer("claim-d", 40000, "claim-d:manual")

	r.register("claim-x")
	r.close("claim-x", store.StatusPaid, "tr_missing", 30000)

	r.register("claim-a")
	mismatchTr := r.pay("claim-a", 50000)
	r.close("claim-a", store.StatusPaid, mismatchTr, 45000)

	r.register("claim-f") // paid by step 6 a moment ago, step 8 not yet run
	inFlightTr := r.pay("claim-f", 20000)

	rep, m, beats := reconcile(t, a, window("run-1:reconcile"))

	assert.Equal(t, map[string]int{"matched": 2, "orphaned": 3, "duplicate": 1, "missing": 1, "amount_mismatch": 1}, rep.Counts)
	assert.Equal(t, 6, rep.Unmatched)
	assert.False(t, rep.Truncated)
	assert.False(t, rep.Replayed)
	assert.Equal(t, 8, rep.TransfersScanned, "every transfer made in the window, and only those")
	assert.Equal(t, "run-1:reconcile", rep.ID)

	var order []string
	for _, e := range rep.Entries {
		order = append(order, e.Category+" "+e.ClaimID)
	}
	assert.Equal(t, []string{"orphaned ", "orphaned claim-o", "orphaned claim-r", "duplicate claim-d", "missing claim-x", "amount_mismatch claim-a"},
		order, "the most urgent category first, then by claim; never the matched")

	es := byClaim(rep.Entries)
	assert.Equal(t, []string{orphan}, es["claim-o"].TransferIDs)
	assert.Equal(t, []int64{12000}, es["claim-o"].AmountsMinor)
	assert.Equal(t, "", es["claim-o"].ClaimStatus)
	assert.Contains(t, es["claim-o"].Detail, "not in the claims store")
	assert.Equal(t, []string{rejectedTr}, es["claim-r"].TransferIDs)
	assert.Contains(t, es["claim-r"].Detail, "closed rejected")
	assert.Equal(t, []string{claimless}, es[""].TransferIDs)
	assert.Contains(t, es[""].Detail, "names no claim")

	assert.ElementsMatch(t, []string{dup1, dup2}, es["claim-d"].TransferIDs)
	assert.Equal(t, []int64{40000, 40000}, es["claim-d"].AmountsMinor)
	assert.Equal(t, dup1, es["claim-d"].LoggedTransferID)
	assert.Contains(t, es["claim-d"].Detail, "800.00 usd in all")
	assert.Contains(t, es["claim-d"].Detail, "extra: "+dup2)

	assert.Empty(t, es["claim-x"].TransferIDs)
	assert.Equal(t, "tr_missing", es["claim-x"].LoggedTransferID)
	assert.Contains(t, es["claim-x"].Detail, "tr_missing, which the provider does not have")

	assert.Equal(t, []string{mismatchTr}, es["claim-a"].TransferIDs)
	assert.Equal(t, int64(45000), es["claim-a"].PayoutMinor)
	assert.Contains(t, es["claim-a"].Detail, "pays 500.00 usd, the step log's payout is 450.00 usd")

	for _, id := range []string{"claim-m", "claim-old", "claim-old-orphan", "claim-f"} {
		assert.NotContains(t, es, id)
	}
	require.Len(t, rep.InFlight, 1, "open claim, transfer seconds old: judged by the next run")
	assert.Equal(t, "claim-f", rep.InFlight[0].ClaimID)
	assert.Equal(t, []string{inFlightTr}, rep.InFlight[0].TransferIDs)

	// Metrics: discrepancies by category (zeros included), and the gauge.
	for cat, want := range map[string]float64{"orphaned": 3, "duplicate": 1, "missing": 1, "amount_mismatch": 1} {
		v, ok := m.get(metrics.ReconciliationDiscrepancies + "{category=" + cat + "}")
		assert.True(t, ok, cat)
		assert.Equal(t, want, v, cat)
	}
	_, ok := m.get(metrics.ReconciliationDiscrepancies + "{category=matched}")
	assert.False(t, ok, "matched is not a discrepancy")
	g, _ := m.get(metrics.ReconciliationLastRunUnmatched)
	assert.Equal(t, 6.0, g)
	require.NotEmpty(t, beats, "the activity heartbeats its progress")
	assert.Equal(t, 8, beats[0].Transfers, "%+v", beats)

	// Stored once under the key, with its window and counts.
	stored, err := a.Store.GetReconciliation(context.Background(), "run-1:reconcile")
	require.NoError(t, err)
	var counts map[string]int
	require.NoError(t, json.Unmarshal(stored.Counts, &counts))
	assert.Equal(t, rep.Counts, counts)
	assert.True(t, stored.Since.Equal(rep.Since) && stored.Until.Equal(rep.Until))
	var storedRep ReconcileReport
	require.NoError(t, json.Unmarshal(stored.Report, &storedRep))
	assert.Equal(t, rep, storedRep)

	// A retried attempt (same key) returns the stored report even though
	// the world moved on, and counts nothing again.
	r.pay("claim-later", 1000)
	again, m2, _ := reconcile(t, a, window("run-1:reconcile"))
	assert.True(t, again.Replayed)
	again.Replayed = false
	assert.Equal(t, rep, again)
	_, counted := m2.get(metrics.ReconciliationDiscrepancies + "{category=orphaned}")
	assert.False(t, counted, "a replayed report was counted by the attempt that stored it")
	g, _ = m2.get(metrics.ReconciliationLastRunUnmatched)
	assert.Equal(t, 6.0, g)

	// A new run sees the new orphan; without a grace the in-flight claim is
	// an orphan too; entries are bounded.
	in := window("run-2:reconcile")
	in.InFlightGrace = -1
	in.MaxEntries = 3
	next, _, _ := reconcile(t, a, in)
	assert.Equal(t, 5, next.Counts["orphaned"])
	assert.Equal(t, 8, next.Unmatched)
	assert.Empty(t, next.InFlight)
	assert.True(t, next.Truncated)
	assert.Len(t, next.Entries, 3)
	list, err := a.Store.Reconciliations(context.Background(), 10)
	require.NoError(t, err)
	assert.Len(t, list, 2)
}

// A clean window, paged through: more transfers than one list page, all
// matched.
func TestReconcilePagesThroughManyTransfers(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	r := recon{t, a}
	const n = 230
	for i := range n {
		r.paid(fmt.Sprintf("claim-%04d", i), int64(1000+i))
	}
	rep, m, beats := reconcile(t, a, window("pages:reconcile"))
	assert.Equal(t, n, rep.Counts[ReconcileMatched])
	assert.Zero(t, rep.Unmatched)
	assert.Empty(t, rep.Entries)
	assert.Equal(t, n, rep.TransfersScanned)
	assert.Equal(t, n, rep.ClaimsChecked)
	g, ok := m.get(metrics.ReconciliationLastRunUnmatched)
	assert.True(t, ok)
	assert.Zero(t, g)
	var paged bool
	for _, b := range beats {
		paged = paged || (b.Phase == "transfers" && b.Transfers == 100)
	}
	// (The SDK throttles heartbeats: the listener sees the first at once,
	// later ones batched at the heartbeat interval.)
	assert.True(t, paged, "a heartbeat every 100 transfers, while listing: %+v", beats)
}

func TestReconcileRefusesAnEmptyWindowOrNoKey(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	in := window("bad:reconcile")
	in.Since = in.Until
	_, err := a.ReconcilePayments(context.Background(), in)
	assert.Equal(t, ErrInvalidInput, appErrType(err))
	assert.True(t, nonRetryableErr(err))
	in = window("")
	_, err = a.ReconcilePayments(context.Background(), in)
	assert.Equal(t, ErrInvalidInput, appErrType(err))
}

// A run that took a forged payment result records a transfer no payment
// made: the claim is not paid in the store and no transfer names it, yet
// its record (the dead letter's) names one. Reconciliation finds it
// missing; a record naming the claim's real transfer is no discrepancy.
func TestReconcileFlagsARecordOfAPaymentNeverMade(t *testing.T) {
	var skew atomic.Int64
	a := newActivities(t, newSkewedStripe(t, &skew))
	r := recon{t, a}
	ctx := context.Background()
	r.register("claim-forged")
	_, _, err := a.Store.WriteAudit(ctx, "claim-forged:step9:dead-letter:run-1", "claim-forged",
		[]byte(`{"claim_id":"claim-forged","outcome":"dead-lettered","transfer_id":"tr_forged"}`))
	require.NoError(t, err)
	real := r.paid("claim-real", 30000)
	_, _, err = a.Store.WriteAudit(ctx, "claim-real:step9", "claim-real", []byte(`{"claim_id":"claim-real","outcome":"paid","transfer_id":"`+real+`"}`))
	require.NoError(t, err)

	rep, _, _ := reconcile(t, a, window("run-forged:reconcile"))
	assert.Equal(t, map[string]int{"matched": 1, "orphaned": 0, "duplicate": 0, "missing": 1, "amount_mismatch": 0}, rep.Counts)
	es := byClaim(rep.Entries)
	require.Contains(t, es, "claim-forged")
	assert.Equal(t, "tr_forged", es["claim-forged"].LoggedTransferID)
	assert.Equal(t, "open", es["claim-forged"].ClaimStatus)
	assert.Contains(t, es["claim-forged"].Detail, "tr_forged, which the provider does not have: its run took a payment result no payment made")
	assert.NotContains(t, es, "claim-real")
}
