package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/netfault"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// A worker cut off from the frontend while it holds a payment does not pay
// after the payment was given to another worker: its heartbeats fail, its
// lease on the attempt runs out before the server's heartbeat timeout, and
// it abandons the attempt (worker/heartbeat). Here its requests to Stripe
// are slow too, as they would be over a network that is failing: the first
// is on the wire when the cut comes. Every transfer list for the claim is
// stale (stripesim), so nothing but the cut-off worker's own restraint, or
// failing that the Idempotency-Key, stands between its late attempt and a
// second transfer; the test asks that it never even sends one.
func TestACutOffWorkerDoesNotPayAfterItsAttemptWasGivenAway(t *testing.T) {
	w := newWorld(t)
	proxy := testenv.Toxiproxy(t)
	frontend, err := proxy.Link("a-frontend", addr(w.env))
	require.NoError(t, err)
	stripe, err := proxy.Link("a-stripe", strings.TrimPrefix(envValue(w.env, "STRIPE_API_BASE"), "http://"))
	require.NoError(t, err)
	cutOff := testenv.Supervise(t, append(append([]string{}, w.env...),
		"TEMPORAL_ADDRESS="+frontend.Addr, "STRIPE_API_BASE=http://"+stripe.Addr), filepath.Join(w.bin, "worker"))

	const id = "claim-e2e-cutoff"
	key := string(claim.StepKey(id, claim.StepPay))
	w.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultStaleList, Method: http.MethodGet, TransferGroup: id, Times: -1})
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)

	// Every request from the cut-off worker to Stripe takes 3 s each way.
	healStripe, err := stripe.Apply(netfault.Fault{Kind: netfault.Latency, Delay: 3 * time.Second})
	require.NoError(t, err)
	w.approve(id, "adjuster-17")
	started := w.waitActivityStarted(id, "PayClaimant")
	healFrontend, err := frontend.Apply(netfault.Fault{Kind: netfault.Partition})
	require.NoError(t, err)
	t.Logf("payment attempt %d started by %s; its worker cut off from the frontend", started.GetAttempt(), started.GetLastWorkerIdentity())

	// Another worker takes the payment once the attempt's heartbeat
	// timeout passes, and pays.
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	res := w.result(id)
	require.Equal(t, workflows.StatusPaid, res.Status, "%+v", res)

	// The cut-off worker's list answer, had it waited for it, comes 6 s
	// after its attempt began and its transfer request 3 s after that:
	// wait past both before asking Stripe what it saw.
	time.Sleep(time.Until(started.GetLastStartedTime().AsTime().Add(12 * time.Second)))
	stats, ok := w.sim.KeyStats(key)
	require.True(t, ok, "stripesim never saw %s", key)
	w.sim.ClearFaults() // the test's own list is to be true
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n, "one transfer")
	assert.Equal(t, res.TransferID, stats.TransferID)
	assert.Equal(t, 1, stats.Requests, "only the worker that held the attempt asked for the transfer (%d replays)", stats.Replays)

	require.NoError(t, healFrontend())
	require.NoError(t, healStripe())
	assert.Eventually(t, func() bool { return strings.Contains(cutOff.Output(), "heartbeat lease lost") },
		10*time.Second, 100*time.Millisecond, "the cut-off worker says why it gave the attempt up")
}

// waitActivityStarted waits until the run has a pending activity of typ
// that a worker has started, and returns it.
func (w *world) waitActivityStarted(id, typ string) *workflowpb.PendingActivityInfo {
	w.t.Helper()
	var found *workflowpb.PendingActivityInfo
	require.Eventually(w.t, func() bool {
		d, err := w.client.DescribeWorkflow(context.Background(), id, "")
		if err != nil {
			return false
		}
		for _, a := range d.RawResponse.GetPendingActivities() {
			if a.GetActivityType().GetName() == typ && a.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
				found = a
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "%s never started %s", id, typ)
	return found
}

// Stripe down for over a minute under twenty claims: none dead-letters
// or burns its retries. Each payment hands its wait back after its first
// attempts and the claim waits on durable timers; claimsctl stuck says how
// many wait for Stripe and since when, the worker counts each wait
// (dependency_waits_total, the DependencyDown alert's metric); once Stripe
// answers again every claim is paid, once.
func TestClaimsWaitOutAStripeOutage(t *testing.T) {
	w := newWorld(t)
	metrics := freePort(t)
	testenv.Supervise(t, append(append([]string{}, w.env...), "METRICS_ADDR="+metrics), filepath.Join(w.bin, "worker"))
	w.sim.AddFault(stripesim.FaultRule{Fault: stripesim.FaultErrorBeforeCommit, Times: -1})
	down := time.Now()

	var files, ids []string
	dir := t.TempDir()
	for i := range 20 {
		// Twenty claimants: one claimant's twentieth claim would go to a
		// person (the prior-claims review rule) before any payment.
		id := fmt.Sprintf("claim-e2e-outage-%02d", i)
		ids = append(ids, id)
		path := filepath.Join(dir, id+".json")
		doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001","claimant":{"name":"Claimant %02d","email":"c%02d@example.com","stripe_account":"acct_1C%02d"},
			"amount":"640.00","currency":"usd","description":"A burst pipe flooded the kitchen overnight","documents":[]}`, id, i, i, i)
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
		files = append(files, path)
	}
	w.start(files...)
	var out string
	require.Eventually(t, func() bool {
		var err error
		out, err = w.ctl("stuck", "--factor", "0", "--floor", "1h")
		return exitCode(err) == 3 && strings.Contains(out, "20 waiting for stripe, the first since")
	}, 60*time.Second, time.Second, "claimsctl stuck never counted the twenty waiting for Stripe: %s", out)
	assert.Contains(t, out, "claim-e2e-outage-00  running  waiting for stripe since")
	m := scrape(t, metrics)
	assert.Equal(t, 20.0, value(m, "dependency_waits_total", `dependency="stripe"`), "one wait counted a claim")

	// Back after 70 s: between every claim's first wait (30 s ± 10 %) and
	// its second (60 s more), so each is paid on its second try.
	time.Sleep(time.Until(down.Add(70 * time.Second)))
	w.sim.ClearFaults()
	for _, id := range ids {
		r := w.result(id)
		require.Equal(t, workflows.StatusPaid, r.Status, "%s: %+v", id, r)
		n, _ := w.transfers(id)
		assert.Equal(t, 1, n, "%s: one transfer", id)
		assert.Less(t, r.StepsExecuted, 30, "%s: the outage burned no retry policy", id)
	}
	out, err := w.ctl("stuck", "--factor", "0", "--floor", "1h")
	require.NoError(t, err, out)
	assert.Contains(t, out, "no stuck claims")
}
