package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rowCount is a count the slow way: every open row under f's predicate.
func rowCount(t *testing.T, s *Store, f QueueFilter) int {
	t.Helper()
	where, args := f.where()
	var n int
	require.NoError(t, s.queryRow(context.Background(), `SELECT COUNT(*) FROM approval_queue q WHERE `+where, args...).Scan(&n))
	return n
}

// The band the database computes for a row is the band Go counts with,
// at every edge of a band and over the whole range of amounts.
func TestAmountBandsAgreeWithTheDatabase(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		amounts := []int64{-5, 0, 1, 9, 10, 99, 100, 101, 109, 110, 999, 1000, 1001, 1099, 1100, 9999, 10000, 184000, 189999, 190000,
			499999, 500000, 500001, 1e15, 1e18 - 1, 1e18, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64}
		rng := rand.New(rand.NewPCG(7, 2026))
		for range 200 {
			amounts = append(amounts, rng.Int64N(int64(math.Pow10(1+rng.IntN(18)))))
		}
		for i, a := range amounts {
			_, err := s.PutQueueEntry(ctx, QueueEntry{ClaimID: fmt.Sprintf("claim-%03d", i), RunID: "run", Rev: 1, Open: true, Stage: "waiting",
				Currency: "usd", AmountMinor: a, Quorum: 1, Summary: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}
		rows, err := s.query(ctx, `SELECT amount_minor, amount_band FROM approval_queue`)
		require.NoError(t, err)
		defer rows.Close()
		n := 0
		for rows.Next() {
			var a, band int64
			require.NoError(t, rows.Scan(&a, &band))
			start, next, ok := amountBand(a)
			assert.Equal(t, start, band, "the band of %d", a)
			assert.True(t, start <= a && (!ok || a < next), "%d in [%d, %d)", a, start, next)
			if ok {
				nextStart, _, _ := amountBand(next)
				assert.Equal(t, next, nextStart, "the band after %d's starts at %d", a, next)
			}
			n++
		}
		require.NoError(t, rows.Err())
		assert.Equal(t, len(amounts), n)
	})
}

// The counts from the tally are the counts of the rows, for every kind of
// approver and filter, after every kind of write: the workflow's (new
// waits, votes, escalations, hand-offs, decisions, a claim restarted in a
// new run), the healer's (closing a row), an operator's by hand (rows
// deleted or changed with SQL), several writers at once; and a tally
// written apart from its rows is set right by RecountQueue.
func TestQueueCountsFromTheTallyAreTheRowsCounts(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(42, 2026))
		base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		people := []string{"ana", "ben", "cy", "dee"}
		// Amounts on band edges, about common limits, under 1.00, and spread.
		amount := func() int64 {
			switch rng.IntN(4) {
			case 0:
				return []int64{0, 50, 99, 100, 150000, 150001, 149999, 184000, 450000, 500000, 500001, 4500000}[rng.IntN(12)]
			case 1:
				return rng.Int64N(1000)
			default:
				return rng.Int64N(10_000_000)
			}
		}
		entry := func(i int, rev int64) QueueEntry {
			e := QueueEntry{ClaimID: fmt.Sprintf("claim-%03d", i), RunID: "run-1", Rev: rev, Open: rng.IntN(10) > 0,
				Stage: []string{"waiting", "waiting", "escalated"}[rng.IntN(3)], Deadline: base.Add(time.Duration(rng.IntN(9000)) * time.Minute),
				Currency: []string{"usd", "eur", "gbp"}[rng.IntN(3)], AmountMinor: amount(), Quorum: 1 + rng.IntN(2), Summary: json.RawMessage(`{}`)}
			if e.Quorum == 2 && rng.IntN(2) == 0 {
				e.Voters = []string{people[rng.IntN(len(people))]}
			}
			if rng.IntN(5) == 0 {
				e.AssignedTo = people[rng.IntN(len(people))]
			}
			return e
		}
		for i := range 300 {
			_, err := s.PutQueueEntry(ctx, entry(i, 1))
			require.NoError(t, err)
		}
		limit := func() int64 {
			if rng.IntN(2) == 0 {
				return []int64{0, 99, 100, 149999, 150000, 499999, 500000, 5000000, 1 << 40}[rng.IntN(9)]
			}
			return rng.Int64N(10_000_000)
		}
		check := func(step string) {
			t.Helper()
			for range 60 {
				f := QueueFilter{}
				if rng.IntN(6) > 0 {
					v := &QueueViewer{ID: people[rng.IntN(len(people))], Supervisor: rng.IntN(2) == 0, Limits: map[string]int64{}}
					for _, cur := range []string{"usd", "eur", "gbp", "jpy", ""} {
						if rng.IntN(3) > 0 {
							v.Limits[cur] = limit()
						}
					}
					f.Viewer = v
				}
				if rng.IntN(3) == 0 {
					f.Stage = []string{"waiting", "escalated"}[rng.IntN(2)]
				}
				if rng.IntN(3) == 0 {
					f.Currency = []string{"usd", "eur", "gbp", "jpy"}[rng.IntN(4)]
				}
				if rng.IntN(3) == 0 {
					f.MinMinor = limit()
				}
				if rng.IntN(3) == 0 {
					f.MaxMinor = limit()
				}
				if rng.IntN(8) == 0 {
					f.AssignedTo = people[rng.IntN(len(people))]
				}
				got, err := s.count(ctx, f)
				require.NoError(t, err)
				require.Equal(t, rowCount(t, s, f), got, "%s: %+v %+v", step, f, f.Viewer)
			}
		}
		check("registered")

		// The workflow's writes: newer revisions of waits, and restarts.
		for i := range 200 {
			e := entry(rng.IntN(300), 2+int64(i))
			if rng.IntN(5) == 0 {
				e.RunID = fmt.Sprintf("run-%d", 2+i)
			}
			_, err := s.PutQueueEntry(ctx, e)
			require.NoError(t, err)
		}
		check("rewritten")
		// The healer's: rows closed.
		open, err := s.OpenQueue(ctx)
		require.NoError(t, err)
		closed := 0
		for id, r := range open {
			if closed < 40 {
				require.NoError(t, s.CloseQueueEntry(ctx, id, r.RunID, r.Rev))
				closed++
			}
		}
		check("closed")
		// An operator's, by hand.
		_, err = s.exec(ctx, `DELETE FROM approval_queue WHERE claim_id IN (SELECT claim_id FROM approval_queue ORDER BY claim_id LIMIT 25)`)
		require.NoError(t, err)
		_, err = s.exec(ctx, `UPDATE approval_queue SET stage = 'escalated', amount_minor = amount_minor + 777 WHERE claim_id LIKE 'claim-1%'`)
		require.NoError(t, err)
		_, err = s.exec(ctx, `UPDATE approval_queue SET open = 1 - open WHERE claim_id LIKE 'claim-2%'`)
		require.NoError(t, err)
		if s.Backend() == "sqlite" {
			// A REPLACE deletes the row it replaces: the delete trigger fires
			// (recursive_triggers on the store's connections).
			_, err = s.exec(ctx, `REPLACE INTO approval_queue (`+queueColumns+`)
				SELECT claim_id, run_id, rev + 1, 1, 'escalated', deadline_ms, 'eur', amount_minor * 3, quorum, assigned_to, summary, updated_ms
				FROM approval_queue WHERE claim_id LIKE 'claim-0%'`)
			require.NoError(t, err)
		}
		check("by hand")
		// Several writers at once, in the same bands.
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := range 25 {
					_, err := s.PutQueueEntry(ctx, QueueEntry{ClaimID: fmt.Sprintf("claim-w%d-%02d", w, i), RunID: "run", Rev: 1, Open: true,
						Stage: "waiting", Deadline: base, Currency: "usd", AmountMinor: 184000 + int64(i), Quorum: 1, Summary: json.RawMessage(`{}`)})
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		check("concurrent")
		all, err := s.CountQueue(ctx, QueueFilter{})
		require.NoError(t, err)
		require.Equal(t, rowCount(t, s, QueueFilter{}), all.Total)

		// A tally written apart from its rows: counts are wrong until recounted.
		fixed, err := s.RecountQueue(ctx)
		require.NoError(t, err)
		assert.Zero(t, fixed, "the triggers kept the tally")
		_, err = s.exec(ctx, `UPDATE approval_queue_tally SET n = n + 7 WHERE currency = 'usd'`)
		require.NoError(t, err)
		_, err = s.exec(ctx, `DELETE FROM approval_queue_tally WHERE currency = 'eur'`)
		require.NoError(t, err)
		_, err = s.exec(ctx, `INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES ('waiting', 'chf', 100, 3)`)
		require.NoError(t, err)
		wrong, err := s.CountQueue(ctx, QueueFilter{})
		require.NoError(t, err)
		require.NotEqual(t, all.Total, wrong.Total)
		fixed, err = s.RecountQueue(ctx)
		require.NoError(t, err)
		assert.Greater(t, fixed, 3)
		check("recounted")
		fixed, err = s.RecountQueue(ctx)
		require.NoError(t, err)
		assert.Zero(t, fixed)
		if s.Backend() == "postgres" {
			// A TRUNCATE fires no row trigger; the tally goes with it.
			_, err = s.exec(ctx, `TRUNCATE approval_queue`)
			require.NoError(t, err)
			check("truncated")
		}
	})
}
