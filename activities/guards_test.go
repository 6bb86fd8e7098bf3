package activities

import (
	"context"
	"database/sql"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/store"
)

// faultyOutbox gives a its own SQLite store, and returns a connection to
// the same file for the test to break the outbox with a trigger.
func faultyOutbox(t *testing.T, a *Activities) *sql.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "claims.db")
	st, err := store.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a.Store = st
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func spooled(t *testing.T, a *Activities) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(a.Mailer.(SpoolMailer).Dir, "*.eml"))
	require.NoError(t, err)
	return files
}

// Check-then-act needs its check: when the outbox cannot reserve the
// message's key, nothing is sent and the step fails, to be retried
// (notify.go, reserve's error).
func TestNothingIsSentWithoutTheOutboxsReservation(t *testing.T) {
	a := newActivities(t, nil)
	db := faultyOutbox(t, a)
	registered(t, a, sampleClaim(t))
	paidOut(t, a, "claim-0042", 184000, "tr_1")
	_, err := db.Exec(`CREATE TRIGGER no_reserve BEFORE INSERT ON outbox BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
	require.NoError(t, err)
	in := NotifyInput{Key: "claim-0042:step7", ClaimID: "claim-0042", To: "ada@example.com", Name: "Ada",
		Outcome: "paid", PayoutMinor: 184000, Currency: "usd", TransferID: "tr_1"}
	_, err = run[NotifyResult](t, a, a.NotifyClaimant, in)
	require.Error(t, err)
	assert.False(t, nonRetryableErr(err), "retryable")
	assert.Empty(t, spooled(t, a), "no e-mail without its reservation")
}

// A message sent whose sending the outbox cannot record fails the step:
// the step is done only once the outbox knows (notify.go, MarkSent's
// error); the retry after the fault finds it and completes.
func TestASendTheOutboxCannotRecordFailsTheStep(t *testing.T) {
	a := newActivities(t, nil)
	db := faultyOutbox(t, a)
	registered(t, a, sampleClaim(t))
	paidOut(t, a, "claim-0042", 184000, "tr_1")
	_, err := db.Exec(`CREATE TRIGGER no_mark BEFORE UPDATE ON outbox BEGIN SELECT RAISE(ABORT, 'disk full'); END`)
	require.NoError(t, err)
	in := NotifyInput{Key: "claim-0042:step7", ClaimID: "claim-0042", To: "ada@example.com", Name: "Ada",
		Outcome: "paid", PayoutMinor: 184000, Currency: "usd", TransferID: "tr_1"}
	_, err = run[NotifyResult](t, a, a.NotifyClaimant, in)
	require.Error(t, err, "sent, not recorded: the step is not done")
	assert.False(t, nonRetryableErr(err), "retryable")
	_, err = db.Exec(`DROP TRIGGER no_mark`)
	require.NoError(t, err)
	_, err = run[NotifyResult](t, a, a.NotifyClaimant, in)
	require.NoError(t, err)
	msgs, err := a.Store.Messages(context.Background(), "claim-0042")
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, store.OutboxSent, msgs[0].Status)
}

// A payment needs a positive amount and a payee whatever claim it names:
// each alone is refused as invalid input before anything is asked of the
// provider (payments.go, PayClaimant's first check).
func TestAPaymentNeedsAnAmountAndAPayee(t *testing.T) {
	f := newFakeStripe(t)
	a := newActivities(t, f)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	for name, in := range map[string]PayInput{
		"no amount": payInput(c.ID, 0), "a negative amount": payInput(c.ID, -100), "no payee": func() PayInput { p := payInput(c.ID, 64000); p.Destination = ""; return p }(),
	} {
		_, err := as[PayResult](t, a, runOf(c.ID, testRun, false), a.PayClaimant, in)
		assert.Equal(t, ErrInvalidInput, appErrType(err), name)
	}
	assert.Empty(t, transfers(t, a, c.ID))
}

// An open claim is in flight only if all its transfers are recent: one
// made before the grace makes it an orphan however recent the others
// (reconcile.go, transfers newest first and the oldest judged).
func TestAnOldTransferIsNotInFlightBesideNewOnes(t *testing.T) {
	// Transfer IDs are random: make one recent transfer sort after the
	// old one, so an order by ID rather than by time would judge it. An
	// entry names at most maxTransfersPerEntry transfers, so the old one
	// is kept only where a few recent ones will do: its ID low in the
	// alphabet ("tr_" then 0-9, A-T), each new one then sorting after it
	// with odds over one half.
	var a *Activities
	var old string
	for i := 0; old == "" || old >= "tr_U"; i++ {
		require.Less(t, i, 50)
		var skew atomic.Int64
		a = newActivities(t, newSkewedStripe(t, &skew))
		r := recon{t, a}
		r.register("claim-o")
		skew.Store(int64(20 * time.Minute))
		old = r.pay("claim-o", 100)
		skew.Store(0)
	}
	r := recon{t, a}
	for i := 0; ; i++ {
		require.Less(t, i, maxTransfersPerEntry-1)
		if r.transfer("claim-o", 100, "") > old {
			break
		}
	}
	rep, _, _ := reconcile(t, a, window("old-new:reconcile"))
	assert.Empty(t, rep.InFlight)
	require.Len(t, rep.Entries, 1)
	assert.Equal(t, ReconcileOrphaned, rep.Entries[0].Category)
	ids := rep.Entries[0].TransferIDs
	assert.Equal(t, old, ids[len(ids)-1], "newest first")
}

// A report holding exactly MaxEntries claims in flight is whole.
func TestExactlyMaxEntriesInFlightIsWhole(t *testing.T) {
	a := newActivities(t, newFakeStripe(t))
	r := recon{t, a}
	r.register("claim-f")
	r.pay("claim-f", 100)
	in := window("inflight-max:reconcile")
	in.MaxEntries = 1
	rep, _, _ := reconcile(t, a, in)
	require.Len(t, rep.InFlight, 1)
	assert.False(t, rep.Truncated)
}
