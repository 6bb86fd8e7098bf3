package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
)

// One suite, both backends: every test in it runs against a SQLite file
// and against a real PostgreSQL (Debian's package, started here as a
// throwaway cluster), each on a fresh database.

// backend opens fresh stores of one kind. open may be called more than
// once for the same database (two workers on different hosts).
type backend struct {
	name string
	// fresh makes an empty database and returns its DSN.
	fresh func(t *testing.T) string
}

var (
	pgOnce sync.Once
	pg     *pgserver.Server
	pgErr  error
	pgDBs  atomic.Int64
)

// backends are the stores the suite runs on: both (make test), or those
// STORE_SUITE_BACKENDS names (make unit, the quick loop, names sqlite: it
// starts no server).
func backends(t *testing.T) []backend {
	t.Helper()
	all := []backend{
		{name: "sqlite", fresh: func(t *testing.T) string { return filepath.Join(t.TempDir(), "claims.db") }},
		{name: "postgres", fresh: func(t *testing.T) string {
			pgOnce.Do(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				dir, err := mkTemp()
				if err != nil {
					pgErr = err
					return
				}
				pg, pgErr = pgserver.Start(ctx, dir, pgserver.Options{})
			})
			require.NoError(t, pgErr, "start PostgreSQL for the store suite (apt-get install -y postgresql)")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			url, err := pg.CreateDatabase(ctx, fmt.Sprintf("suite_%d", pgDBs.Add(1)))
			require.NoError(t, err)
			return url
		}},
	}
	names := os.Getenv("STORE_SUITE_BACKENDS")
	if names == "" {
		return all
	}
	var out []backend
	for _, b := range all {
		if slices.Contains(strings.Split(names, ","), b.name) {
			out = append(out, b)
		}
	}
	require.NotEmpty(t, out, "STORE_SUITE_BACKENDS=%q names no backend (sqlite, postgres)", names)
	return out
}

// eachBackend runs f against a fresh store of each backend.
func eachBackend(t *testing.T, f func(t *testing.T, s *Store, dsn string)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.fresh(t)
			s, err := Open(dsn)
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
			assert.Equal(t, b.name, s.Backend())
			f(t, s, dsn)
		})
	}
}

func testClaim(id string) claim.Claim {
	return claim.Claim{ID: id, PolicyID: "pol-1001", AmountMinor: 184000, Currency: "usd", Description: "A burst pipe",
		Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}}
}

func TestClaimsRegisterAmendWithdrawClose(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		_, err := s.GetClaim(ctx, "claim-1")
		assert.ErrorIs(t, err, ErrNotFound)

		rec, created, err := s.PutClaim(ctx, testClaim("claim-1"))
		require.NoError(t, err)
		assert.True(t, created)
		assert.Equal(t, StatusOpen, rec.Status)
		assert.EqualValues(t, 1, rec.Version)
		_, created, err = s.PutClaim(ctx, testClaim("claim-1"))
		require.NoError(t, err)
		assert.False(t, created, "the same claim again is a no-op")
		other := testClaim("claim-1")
		other.AmountMinor = 999900
		_, _, err = s.PutClaim(ctx, other)
		assert.ErrorIs(t, err, ErrConflict)

		rec, err = s.Amend(ctx, "claim-1", "adjuster-9", func(c *claim.Claim) error { c.AmountMinor = 150000; return nil })
		require.NoError(t, err)
		assert.EqualValues(t, 2, rec.Version)
		assert.EqualValues(t, 150000, rec.Claim.AmountMinor)
		rec, err = s.Amend(ctx, "claim-1", "adjuster-9", func(c *claim.Claim) error { c.Description = "A burst pipe, kitchen"; return nil })
		require.NoError(t, err)
		assert.Equal(t, []string{"adjuster-9"}, rec.AmendedBy, "each amender once")
		_, err = s.Amend(ctx, "claim-1", "", func(*claim.Claim) error { return nil })
		assert.Error(t, err, "who amends is required")
		_, err = s.Amend(ctx, "claim-1", "x", func(c *claim.Claim) error { c.AmountMinor = -1; return nil })
		assert.Error(t, err, "an amended claim must still be valid")

		replayed, at, err := s.CloseClaim(ctx, "claim-1", "claim-1:step8", StatusPaid, "tr_1", 150000)
		require.NoError(t, err)
		assert.False(t, replayed)
		replayed, again, err := s.CloseClaim(ctx, "claim-1", "claim-1:step8", StatusPaid, "tr_1", 150000)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.True(t, at.Equal(again), "a replay reports the original close time: %s vs %s", at, again)
		_, _, err = s.CloseClaim(ctx, "claim-1", "claim-1:step8-other", StatusPaid, "tr_2", 150000)
		assert.ErrorIs(t, err, ErrConflict)
		_, _, err = s.CloseClaim(ctx, "nobody", "nobody:step8", StatusPaid, "", 0)
		assert.ErrorIs(t, err, ErrNotFound)
		_, err = s.Amend(ctx, "claim-1", "adjuster-9", func(*claim.Claim) error { return nil })
		assert.ErrorIs(t, err, ErrClosed)
		rec, err = s.GetClaim(ctx, "claim-1")
		require.NoError(t, err)
		assert.Equal(t, StatusPaid, rec.Status)
		assert.Equal(t, "tr_1", rec.TransferID)
		assert.Equal(t, "claim-1:step8", rec.ClosedKey)

		_, _, err = s.PutClaim(ctx, testClaim("claim-2"))
		require.NoError(t, err)
		rec, err = s.Withdraw(ctx, "claim-2")
		require.NoError(t, err)
		assert.Equal(t, StatusWithdrawn, rec.Status)
		_, err = s.Withdraw(ctx, "claim-2")
		assert.ErrorIs(t, err, ErrClosed)
	})
}

func TestOutboxCheckThenAct(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		m := Message{Key: "claim-1:step7", ClaimID: "claim-1", Recipient: "ada@example.com", Subject: "Your claim", MessageID: "m1@x"}
		got, err := s.ReserveMessage(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, OutboxSending, got.Status)
		assert.Equal(t, 1, got.Attempts)
		first := got.CreatedAt
		assert.False(t, first.IsZero())
		got, err = s.ReserveMessage(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, 2, got.Attempts, "a retry before the send was recorded counts an attempt")
		assert.True(t, first.Equal(got.CreatedAt), "a repeat reads the first reservation's time: %v, then %v", first, got.CreatedAt)
		require.NoError(t, s.MarkSent(ctx, m.Key))
		got, err = s.ReserveMessage(ctx, m)
		require.NoError(t, err)
		assert.Equal(t, OutboxSent, got.Status, "after the send, a retry learns it was sent")
		assert.Equal(t, 2, got.Attempts)
		other := m
		other.Subject = "Something else"
		_, err = s.ReserveMessage(ctx, other)
		assert.ErrorIs(t, err, ErrConflict)
		list, err := s.Messages(ctx, "claim-1")
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, "m1@x", list[0].MessageID)
	})
}

func TestAuditModelCallsRefusalsFraudFlags(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		replayed, sum, err := s.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{"outcome":"paid"}`))
		require.NoError(t, err)
		assert.False(t, replayed)
		replayed, sum2, err := s.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{"outcome":"paid"}`))
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, sum, sum2)
		_, _, err = s.WriteAudit(ctx, "claim-1:step9", "claim-1", []byte(`{"outcome":"rejected"}`))
		assert.ErrorIs(t, err, ErrConflict)
		rec, err := s.Audit(ctx, "claim-1")
		require.NoError(t, err)
		assert.JSONEq(t, `{"outcome":"paid"}`, string(rec))
		_, err = s.Audit(ctx, "claim-2")
		assert.ErrorIs(t, err, ErrNotFound)

		call := ModelCall{CallID: "call-1", ClaimID: "claim-1", Key: "claim-1:step4", Provider: "rules/v1", Attempt: 1, TokensIn: 71, TokensOut: 40, OutputSHA256: "aa"}
		require.NoError(t, s.RecordModelCall(ctx, call))
		require.NoError(t, s.RecordModelCall(ctx, call), "the same call written again is one row")
		again := call
		again.CallID = "call-2"
		require.NoError(t, s.RecordModelCall(ctx, again), "a step run again (a lost workflow task) calls again under its key and attempt")
		second := call
		second.CallID, second.Attempt, second.OutputSHA256 = "call-3", 2, "bb"
		require.NoError(t, s.RecordModelCall(ctx, second))
		bad := call
		bad.OutputSHA256 = "cc"
		assert.ErrorIs(t, s.RecordModelCall(ctx, bad), ErrConflict, "another call under a call's ID")
		calls, err := s.ModelCalls(ctx, "claim-1")
		require.NoError(t, err)
		require.Len(t, calls, 3)
		assert.Equal(t, []string{"call-1", "call-2", "call-3"}, []string{calls[0].CallID, calls[1].CallID, calls[2].CallID})
		assert.WithinDuration(t, time.Now(), calls[0].At, time.Minute)

		at := time.Date(2026, 11, 30, 7, 0, 0, 123456000, time.UTC)
		ref := Refusal{Key: "claim-1:update:u1", ClaimID: "claim-1", At: at, Channel: "update", Approver: "mallory", Decision: "approve",
			Code: "unsigned", Reason: "unsigned"}
		_, err = s.RecordRefusal(ctx, ref)
		assert.ErrorIs(t, err, ErrNotFound, "a refusal for a claim the store does not hold is not kept")
		_, _, err = s.PutClaim(ctx, testClaim("claim-1"))
		require.NoError(t, err)
		for range 2 {
			kept, err := s.RecordRefusal(ctx, ref)
			require.NoError(t, err, "the same update refused twice is one row")
			assert.True(t, kept)
		}
		unkeyed := ref
		unkeyed.Key = ""
		for range 2 {
			_, err = s.RecordRefusal(ctx, unkeyed)
			require.NoError(t, err)
		}
		refs, err := s.Refusals(ctx, "claim-1")
		require.NoError(t, err)
		require.Len(t, refs, 3)
		assert.Equal(t, at, refs[0].At)
		assert.Equal(t, "claim-1:update:u1", refs[0].Key)
		// Bounded: past MaxRefusalsPerClaim a refusal is counted, not kept.
		for i := range 2 * MaxRefusalsPerClaim {
			flood := ref
			flood.Key = fmt.Sprintf("claim-1:update:flood-%d", i)
			_, err := s.RecordRefusal(ctx, flood)
			require.NoError(t, err)
		}
		refs, err = s.Refusals(ctx, "claim-1")
		require.NoError(t, err)
		assert.Len(t, refs, MaxRefusalsPerClaim)
		dropped, err := s.RefusalsDropped(ctx, "claim-1")
		require.NoError(t, err)
		assert.Equal(t, 3+2*MaxRefusalsPerClaim-MaxRefusalsPerClaim, dropped)

		flag := FraudFlag{Key: "claim-1:step2:flag:1", ClaimID: "claim-1", Signal: "duplicate-invoice", Note: "seen before"}
		replayed, err = s.FlagFraud(ctx, flag)
		require.NoError(t, err)
		assert.False(t, replayed)
		replayed, err = s.FlagFraud(ctx, flag)
		require.NoError(t, err)
		assert.True(t, replayed)
		flag.Note = "another note"
		_, err = s.FlagFraud(ctx, flag)
		assert.ErrorIs(t, err, ErrConflict)
		flags, err := s.FraudFlags(ctx, "claim-1")
		require.NoError(t, err)
		require.Len(t, flags, 1)
		assert.Equal(t, "seen before", flags[0].Note)
	})
}

func TestReconciliationsAndPaidClaims(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		before := time.Now().Add(-time.Second)
		for _, id := range []string{"claim-1", "claim-2", "claim-3"} {
			_, _, err := s.PutClaim(ctx, testClaim(id))
			require.NoError(t, err)
		}
		_, _, err := s.CloseClaim(ctx, "claim-1", "claim-1:step8", StatusPaid, "tr_1", 184000)
		require.NoError(t, err)
		_, _, err = s.CloseClaim(ctx, "claim-2", "claim-2:step8", "rejected", "", 0)
		require.NoError(t, err)
		paid, err := s.PaidClaims(ctx, before, time.Now().Add(time.Second))
		require.NoError(t, err)
		require.Len(t, paid, 1)
		assert.Equal(t, "claim-1", paid[0].ID)
		assert.True(t, paid[0].Paid())
		assert.Equal(t, "usd", paid[0].Currency)
		assert.EqualValues(t, 184000, paid[0].PayoutMinor)
		none, err := s.PaidClaims(ctx, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
		require.NoError(t, err)
		assert.Empty(t, none)

		states, err := s.ClaimStates(ctx, []string{"claim-1", "claim-2", "claim-3", "nobody"})
		require.NoError(t, err)
		assert.Len(t, states, 3)
		assert.True(t, states["claim-2"].Closed())
		assert.False(t, states["claim-3"].Closed())

		r := Reconciliation{ID: "rec-1", Started: time.Now().UTC().Truncate(time.Microsecond), Since: before.UTC().Truncate(time.Microsecond),
			Until: time.Now().UTC().Truncate(time.Microsecond), Counts: json.RawMessage(`{"matched": 1}`), Report: json.RawMessage(`{"items": []}`)}
		stored, replayed, err := s.SaveReconciliation(ctx, r)
		require.NoError(t, err)
		assert.False(t, replayed)
		assert.Equal(t, `{"matched": 1}`, string(stored.Counts), "kept byte for byte")
		assert.True(t, r.Since.Equal(stored.Since))
		r2 := r
		r2.Counts = json.RawMessage(`{"matched": 2}`)
		stored, replayed, err = s.SaveReconciliation(ctx, r2)
		require.NoError(t, err)
		assert.True(t, replayed)
		assert.Equal(t, `{"matched": 1}`, string(stored.Counts), "the first report wins")
		list, err := s.Reconciliations(ctx, 10)
		require.NoError(t, err)
		assert.Len(t, list, 1)
		_, err = s.GetReconciliation(ctx, "rec-2")
		assert.ErrorIs(t, err, ErrNotFound)
	})
}

// TestMigrationsRunOnceWhenWorkersStartTogether: ten processes' worth of
// stores open a fresh database at once; the migrations run once (a
// PostgreSQL advisory lock, a file lock for SQLite) and every one opens.
func TestMigrationsRunOnceWhenWorkersStartTogether(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			dsn := b.fresh(t)
			var wg sync.WaitGroup
			errs := make([]error, 10)
			stores := make([]*Store, 10)
			for i := range stores {
				wg.Go(func() { stores[i], errs[i] = Open(dsn) })
			}
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "store %d", i)
				defer stores[i].Close()
			}
			var applied, distinct int
			require.NoError(t, stores[0].db.QueryRow(`SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).
				Scan(&applied, &distinct))
			assert.Equal(t, distinct, applied, "each migration recorded once")
			assert.Positive(t, applied)
		})
	}
}

// TestKeyedWritesRaceAcrossWorkers: two stores on the same database (two
// workers on two hosts), eight writers each, race on the same key for
// every keyed write. One row per key, one first write, the rest replays.
func TestKeyedWritesRaceAcrossWorkers(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, dsn string) {
		ctx := context.Background()
		other, err := Open(dsn)
		require.NoError(t, err)
		defer other.Close()
		workers := []*Store{s, other}
		const writers = 16
		race := func(name string, write func(w *Store, i int) (first bool, err error)) {
			t.Helper()
			var firsts atomic.Int32
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			start := make(chan struct{})
			for i := range writers {
				wg.Go(func() {
					<-start
					first, err := write(workers[i%2], i)
					if err != nil {
						errs <- fmt.Errorf("%s writer %d: %w", name, i, err)
					}
					if first {
						firsts.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			assert.EqualValues(t, 1, firsts.Load(), "%s: exactly one first write", name)
		}
		count := func(q string, args ...any) int {
			var n int
			require.NoError(t, s.queryRow(ctx, q, args...).Scan(&n))
			return n
		}

		race("register", func(w *Store, _ int) (bool, error) {
			_, created, err := w.PutClaim(ctx, testClaim("claim-race"))
			return created, err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM claims WHERE id = ?`, "claim-race"))

		race("outbox", func(w *Store, _ int) (bool, error) {
			m, err := w.ReserveMessage(ctx, Message{Key: "claim-race:step7", ClaimID: "claim-race", Recipient: "ada@example.com",
				Subject: "Your claim", MessageID: "m@x"})
			return m.Attempts == 1, err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM outbox WHERE key = ?`, "claim-race:step7"))
		assert.Equal(t, writers, count(`SELECT attempts FROM outbox WHERE key = ?`, "claim-race:step7"), "every reservation counted once")

		race("audit", func(w *Store, _ int) (bool, error) {
			replayed, _, err := w.WriteAudit(ctx, "claim-race:step9", "claim-race", []byte(`{"outcome":"paid"}`))
			return !replayed, err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM audit WHERE key = ?`, "claim-race:step9"))

		race("fraud flag", func(w *Store, _ int) (bool, error) {
			replayed, err := w.FlagFraud(ctx, FraudFlag{Key: "claim-race:step2:flag:1", ClaimID: "claim-race", Signal: "s"})
			return !replayed, err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM fraud_flags WHERE key = ?`, "claim-race:step2:flag:1"))

		var ledgered atomic.Bool
		race("model ledger", func(w *Store, _ int) (bool, error) {
			err := w.RecordModelCall(ctx, ModelCall{CallID: "call-race", ClaimID: "claim-race", Key: "claim-race:step4", Provider: "p", Attempt: 1, OutputSHA256: "aa"})
			return err == nil && ledgered.CompareAndSwap(false, true), err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM model_calls WHERE key = ?`, "claim-race:step4"))

		var refused atomic.Bool
		race("refusal", func(w *Store, _ int) (bool, error) {
			_, err := w.RecordRefusal(ctx, Refusal{Key: "claim-race:update:u1", ClaimID: "claim-race", At: time.Now(), Channel: "update",
				Approver: "mallory", Decision: "approve", Reason: "unsigned"})
			return err == nil && refused.CompareAndSwap(false, true), err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM refusals WHERE key = ?`, "claim-race:update:u1"))
		race("refusals past the bound", func(w *Store, i int) (bool, error) {
			_, err := w.RecordRefusal(ctx, Refusal{Key: fmt.Sprintf("claim-race:update:flood-%d", i), ClaimID: "claim-race", At: time.Now(),
				Channel: "update", Reason: "unsigned"})
			return i == 0, err
		})
		for i := range 3 * MaxRefusalsPerClaim {
			_, err := s.RecordRefusal(ctx, Refusal{Key: fmt.Sprintf("claim-race:update:more-%d", i), ClaimID: "claim-race", At: time.Now(), Reason: "x"})
			require.NoError(t, err)
		}
		assert.Equal(t, MaxRefusalsPerClaim, count(`SELECT count(*) FROM refusals WHERE claim_id = ?`, "claim-race"), "bounded across workers")
		dropped, err := s.RefusalsDropped(ctx, "claim-race")
		require.NoError(t, err)
		assert.Equal(t, 1+writers+3*MaxRefusalsPerClaim-MaxRefusalsPerClaim, dropped, "every refusal kept or counted")

		var reserved atomic.Int32
		race("payout", func(w *Store, i int) (bool, error) {
			p, err := w.ReservePayout(ctx, Payout{ClaimID: "claim-race", Key: "claim-race:step6", RunID: fmt.Sprintf("run-%d", i),
				AmountMinor: 184000, Currency: "usd", Destination: "acct_1Ada"})
			return err == nil && p.RunID == fmt.Sprintf("run-%d", i) && reserved.Add(1) == 1, err
		})
		assert.Equal(t, 1, count(`SELECT count(*) FROM payouts WHERE claim_id = ?`, "claim-race"))

		var closedAt sync.Map
		race("close", func(w *Store, i int) (bool, error) {
			replayed, at, err := w.CloseClaim(ctx, "claim-race", "claim-race:step8", StatusPaid, "tr_1", 184000)
			closedAt.Store(i, at)
			return !replayed, err
		})
		var times []time.Time
		closedAt.Range(func(_, v any) bool { times = append(times, v.(time.Time)); return true })
		for _, at := range times {
			assert.True(t, at.Equal(times[0]), "every close reports the one close time")
		}
		rec, err := s.GetClaim(ctx, "claim-race")
		require.NoError(t, err)
		assert.EqualValues(t, 2, rec.Version, "closed once")

		// Conflicts race too: different content under one key, one wins.
		_, _, err = s.PutClaim(ctx, testClaim("claim-race-2"))
		require.NoError(t, err)
		var wins, conflicts atomic.Int32
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				_, _, err := workers[i%2].CloseClaim(ctx, "claim-race-2", claim.IdempotencyKey(fmt.Sprintf("claim-race-2:close-%d", i)), StatusPaid, "tr", 1)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, ErrConflict):
					conflicts.Add(1)
				default:
					t.Error(err)
				}
			})
		}
		wg.Wait()
		assert.EqualValues(t, 1, wins.Load())
		assert.EqualValues(t, writers-1, conflicts.Load())
	})
}

// A claim belongs to the run that took it: intake binds it, a closed claim
// is never taken again, a reset run takes it over only from the run it was
// bound to. Its payout is reserved once: the same payout again is the one
// held, any other is a conflict, and the transfer is recorded once.
func TestClaimsBelongToOneRunAndArePaidOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		_, err := s.TakeClaim(ctx, "claim-9", "run-1")
		assert.ErrorIs(t, err, ErrNotFound)
		_, _, err = s.PutClaim(ctx, testClaim("claim-9"))
		require.NoError(t, err)
		rec, err := s.TakeClaim(ctx, "claim-9", "run-1")
		require.NoError(t, err)
		assert.Equal(t, "run-1", rec.RunID)
		assert.WithinDuration(t, time.Now(), rec.CreatedAt, time.Minute)
		moved, err := s.HandOver(ctx, "claim-9", "run-0", "run-2")
		require.NoError(t, err)
		assert.False(t, moved, "only from the run it is bound to")
		moved, err = s.HandOver(ctx, "claim-9", "run-1", "run-2")
		require.NoError(t, err)
		assert.True(t, moved)
		rec, err = s.TakeClaim(ctx, "claim-9", "run-3")
		require.NoError(t, err, "an open claim passes to the run whose intake reads it")
		assert.Equal(t, "run-3", rec.RunID)

		p := Payout{ClaimID: "claim-9", Key: "claim-9:step6", RunID: "run-3", AmountMinor: 184000, Currency: "usd", Destination: "acct_1Ada"}
		held, err := s.ReservePayout(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, PayoutReserved, held.Status)
		again := p
		again.RunID = "run-4"
		held, err = s.ReservePayout(ctx, again)
		require.NoError(t, err, "the same payout from a run that took over")
		assert.Equal(t, "run-3", held.RunID)
		for _, other := range []Payout{{Key: "claim-9:step6-b", AmountMinor: 184000}, {Key: "claim-9:step6", AmountMinor: 184001}} {
			q := p
			q.Key, q.AmountMinor = other.Key, other.AmountMinor
			_, err = s.ReservePayout(ctx, q)
			assert.ErrorIs(t, err, ErrConflict, "a claim is paid once")
		}
		require.NoError(t, s.MarkPaid(ctx, "claim-9", "claim-9:step6", "tr_1"))
		require.NoError(t, s.MarkPaid(ctx, "claim-9", "claim-9:step6", "tr_1"), "the same transfer again")
		assert.ErrorIs(t, s.MarkPaid(ctx, "claim-9", "claim-9:step6", "tr_2"), ErrConflict)
		got, err := s.Payout(ctx, "claim-9")
		require.NoError(t, err)
		assert.Equal(t, PayoutPaid, got.Status)
		assert.Equal(t, "tr_1", got.TransferID)

		_, _, err = s.CloseClaim(ctx, "claim-9", "claim-9:step8", "paid", "tr_1", 184000)
		require.NoError(t, err)
		rec, err = s.TakeClaim(ctx, "claim-9", "run-5")
		assert.ErrorIs(t, err, ErrClosed, "a closed claim is never taken again")
		assert.Equal(t, "run-3", rec.RunID)
		// The run that closed it, read again (a workflow task lost after
		// the close ran, its local activities run again), finds it as it
		// left it: it goes on to the same keyed steps, not to a dead letter.
		rec, err = s.TakeClaim(ctx, "claim-9", "run-3")
		require.NoError(t, err, "the closing run reads its claim again")
		assert.Equal(t, "paid", rec.Status)
		assert.Equal(t, "claim-9:step8", rec.ClosedKey)
		moved, err = s.HandOver(ctx, "claim-9", "run-3", "run-5")
		require.NoError(t, err)
		assert.False(t, moved)
	})
}

// A SQLite store made before migrations were versioned (no goose table,
// columns added later missing) opens and gains them.
func TestAnUnversionedSQLiteStoreIsUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "claims.db")
	db, err := sql.Open("sqlite", "file:"+path)
	require.NoError(t, err)
	_, err = db.Exec(`CREATE TABLE claims (id TEXT PRIMARY KEY, body TEXT NOT NULL, status TEXT NOT NULL, version INTEGER NOT NULL,
		created_at TEXT NOT NULL, updated_at TEXT NOT NULL, closed_key TEXT, transfer_id TEXT, payout_minor INTEGER);
		CREATE TABLE refusals (id INTEGER PRIMARY KEY AUTOINCREMENT, claim_id TEXT NOT NULL, at TEXT NOT NULL, channel TEXT NOT NULL,
		approver TEXT NOT NULL, decision TEXT NOT NULL, payload_sha256 TEXT NOT NULL, reason TEXT NOT NULL);
		INSERT INTO claims VALUES ('old-1', '{"claim_id":"old-1"}', 'open', 1, '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', NULL, NULL, NULL)`)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	rec, err := s.GetClaim(ctx, "old-1")
	require.NoError(t, err)
	assert.Empty(t, rec.AmendedBy)
	_, err = s.RecordRefusal(ctx, Refusal{Key: "old-1:update:u", ClaimID: "old-1", At: time.Now(), Code: "unsigned", KeyID: "k"})
	require.NoError(t, err)
	refs, err := s.Refusals(ctx, "old-1")
	require.NoError(t, err)
	assert.Equal(t, "k", refs[0].KeyID)
}

func TestPostgresPasswordsStayOutOfErrors(t *testing.T) {
	_, err := Open("postgres://claims:s3cret-pass@127.0.0.1:1/claims?sslmode=disable&connect_timeout=2")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret-pass")
}

func mkTemp() (string, error) { return os.MkdirTemp("", "store-suite-pg-") }

// TestMain stops the suite's PostgreSQL and removes its files.
func TestMain(m *testing.M) {
	if path := os.Getenv("STORE_READONLY_WRITER_DB"); path != "" {
		if err := writerProcess(path, os.Getenv("STORE_READONLY_WRITER_STOP")); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if pg != nil {
		_ = pg.Stop()
		_ = os.RemoveAll(pg.Dir)
	}
	os.Exit(code)
}

// The claim-file log: one file per claim ever, leaves numbered 0, 1, 2, …
// without a gap or a repeat, however many workers append at once.
func TestClaimFilesAppendOncePerClaimInOrder(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		retain := time.Date(2036, 12, 1, 0, 0, 0, 0, time.UTC)
		file := func(id, sha string) ClaimFile {
			return ClaimFile{ClaimID: id, RunID: "run-" + id, Key: claim.StepKey(id, claim.StepAudit).Sub("claim-file"), URI: "file:///f/" + sha,
				SHA256: sha, Size: 10, LeafHash: sha, Outcome: "paid", RetainUntil: retain}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		for i := range 20 {
			for range 2 { // each claim appended twice at once: one file
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, err := s.AppendClaimFile(ctx, file(fmt.Sprintf("claim-%02d", i), fmt.Sprintf("%064d", i)))
					errs <- err
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		files, err := s.ClaimFiles(ctx)
		require.NoError(t, err)
		require.Len(t, files, 20)
		for i, f := range files {
			assert.Equal(t, uint64(i), f.LogIndex)
		}
		held, existed, err := s.AppendClaimFile(ctx, file("claim-03", "another"))
		require.NoError(t, err)
		assert.True(t, existed, "a run's file is written once")
		assert.Equal(t, fmt.Sprintf("%064d", 3), held.SHA256)
		redriven := file("claim-03", "redriven")
		redriven.RunID = "run-claim-03-redriven"
		held, existed, err = s.AppendClaimFile(ctx, redriven)
		require.NoError(t, err)
		assert.False(t, existed, "the run that ends a redriven claim writes its own")
		assert.Equal(t, uint64(20), held.LogIndex)
		latest, err := s.ClaimFile(ctx, "claim-03")
		require.NoError(t, err)
		assert.Equal(t, "redriven", latest.SHA256, "the claim's latest file is the last run's")
		got, err := s.ClaimFile(ctx, "claim-03")
		require.NoError(t, err)
		assert.Equal(t, retain, got.RetainUntil)
		_, err = s.ClaimFile(ctx, "claim-99")
		assert.ErrorIs(t, err, ErrNotFound)
	})
}
