package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The shared model budget books tokens in order at the configured rate,
// refuses to book past the wait a caller may take, gives back what a call
// did not use, and holds every booking back after the provider's 429.
func TestModelBudgetBooksAtTheRate(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		// 6,000 tokens a minute (100 a second), a burst of 500 (5 s).
		b, err := s.ModelBudget(ctx, "test", 6000, 0)
		require.NoError(t, err)
		again, err := s.ModelBudget(ctx, "test", 6000, 0)
		require.NoError(t, err, "opening a budget twice keeps it")

		// The burst is served at once, then each 100 tokens waits a second more.
		wait, ok, err := b.Reserve(ctx, "", false, 500, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Zero(t, wait)
		wait, ok, err = again.Reserve(ctx, "", false, 100, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, time.Second, wait)
		wait, ok, err = b.Reserve(ctx, "", false, 200, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 3*time.Second, wait)

		// A caller that may wait only 2 s books nothing, and hears how long.
		wait, ok, err = b.Reserve(ctx, "", false, 100, 2*time.Second)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 4*time.Second, wait)
		wait, ok, err = b.Reserve(ctx, "", false, 100, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 4*time.Second, wait, "the refused booking took nothing")

		// A call that used 300 fewer tokens than booked gives them back.
		require.NoError(t, b.Settle(ctx, -300))
		wait, _, err = b.Reserve(ctx, "", false, 100, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, wait)

		// A minute later the bucket is full again, no fuller.
		now = now.Add(time.Minute)
		wait, _, err = b.Reserve(ctx, "", false, 500, 0)
		require.NoError(t, err)
		assert.Zero(t, wait)
		wait, _, err = b.Reserve(ctx, "", false, 100, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, time.Second, wait)

		// A call that used 400 more tokens than booked, answered once the
		// bucket had refilled, is charged them from full (as the provider
		// charges its answer): the burst after it waits 4 s.
		now = now.Add(time.Minute)
		wait, _, err = b.Reserve(ctx, "", false, 100, 0)
		require.NoError(t, err)
		assert.Zero(t, wait)
		now = now.Add(time.Minute)
		require.NoError(t, b.Settle(ctx, 400))
		wait, _, err = b.Reserve(ctx, "", false, 500, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 4*time.Second, wait, "a late charge is not lost to the full bucket")

		// The provider says 429, retry after 10 s: everyone waits that long first.
		now = now.Add(time.Minute)
		require.NoError(t, b.Hold(ctx, 10*time.Second))
		wait, _, err = again.Reserve(ctx, "", false, 100, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 11*time.Second, wait)

		_, err = s.ModelBudget(ctx, "bad", 0, 0)
		assert.ErrorContains(t, err, "want a positive number")
	})
}

// Bookings from many callers at once are each served exactly once: the
// waits they are given are all different and cover the tokens booked.
func TestModelBudgetConcurrentBookings(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		b, err := s.ModelBudget(ctx, "concurrent", 60_000, 1000) // 1,000 a second
		require.NoError(t, err)
		var mu sync.Mutex
		waits := map[time.Duration]int{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					wait, ok, err := b.Reserve(ctx, "", false, 1000, time.Hour)
					if !assert.NoError(t, err) || !assert.True(t, ok) {
						return
					}
					mu.Lock()
					waits[wait]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		require.Len(t, waits, 80, "every booking its own turn")
		for i := range 80 {
			assert.Equal(t, 1, waits[time.Duration(i)*time.Second], "a booking waits %ds", i)
		}
	})
}

// A booking larger than the burst is served once the bucket is full, and
// the debt it leaves is repaid before the next: it is never refused
// forever.
func TestModelBudgetServesABookingLargerThanTheBurst(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		b, err := s.ModelBudget(ctx, "large", 6000, 500) // 100 a second, a burst of 500
		require.NoError(t, err)
		wait, ok, err := b.Reserve(ctx, "", false, 3000, 0)
		require.NoError(t, err)
		assert.True(t, ok, "a full bucket serves it at once")
		assert.Zero(t, wait)
		wait, ok, err = b.Reserve(ctx, "", false, 3000, time.Second)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 30*time.Second, wait, "the next waits for the debt and a full bucket again")
		now = now.Add(30 * time.Second)
		wait, ok, err = b.Reserve(ctx, "", false, 3000, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Zero(t, wait)
	})
}

// A booking that waits for the database (another writer holds it) is
// booked at the time it gets in, not at the time it asked: booked at the
// earlier time, into a bucket that was full then, its tokens were lost to
// the refill the wait had already capped.
func TestModelBudgetBooksWhenTheDatabaseLetsItIn(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		var mu sync.Mutex
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		b, err := s.ModelBudget(ctx, "contended", 6000, 500) // 100 a second, a burst of 500
		require.NoError(t, err)

		// Another writer holds the budget's row (and, on SQLite, the database).
		holder, err := s.begin(ctx)
		require.NoError(t, err)
		var tat int64
		require.NoError(t, holder.lock(ctx, `SELECT tat_us FROM model_budget WHERE name = ?`, "contended").Scan(&tat))
		_, err = holder.exec(ctx, `UPDATE model_budget SET tat_us = ? WHERE name = ?`, tat, "contended")
		require.NoError(t, err)

		booked := make(chan error, 1)
		go func() {
			wait, ok, err := b.Reserve(ctx, "", false, 500, 0)
			if err == nil && (!ok || wait != 0) {
				err = fmt.Errorf("a full bucket: want booked at once, got %v, %v", wait, ok)
			}
			booked <- err
		}()
		time.Sleep(300 * time.Millisecond) // the booking is waiting for the writer
		mu.Lock()
		now = now.Add(10 * time.Second)
		mu.Unlock()
		require.NoError(t, holder.Commit())
		require.NoError(t, <-booked)

		// It took the whole burst at 9:00:10, so the next waits 5 s.
		wait, ok, err := b.Reserve(ctx, "", false, 500, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 5*time.Second, wait, "the booking was made when it got in")
	})
}

// Calls refused together come back in the order they were refused: each
// is given the turn it will have if those ahead of it book at the budget's
// pace, and a caller who comes later queues behind them all. Back under
// its key, a call books against the bucket alone, so those ahead of it in
// the room are served at their turns, not pushed back by later callers.
// (Before the waiting room every refused call was told the same wait: the
// claims handed back together came back together and the first to ask
// got the turn.)
func TestModelBudgetWaitingRoomKeepsTheOrderOfRefusal(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		// 6,000 tokens a minute (100 a second), a burst of 500 (5 s); two
		// workers, and every call may hold its worker half a second.
		b, err := s.ModelBudget(ctx, "room", 6000, 0)
		require.NoError(t, err)
		other, err := s.ModelBudget(ctx, "room", 6000, 0)
		require.NoError(t, err)
		const most = 500 * time.Millisecond
		reserve := func(b *ModelBudget, key string) (time.Duration, bool) {
			t.Helper()
			wait, ok, err := b.Reserve(ctx, key, false, 100, most)
			require.NoError(t, err)
			return wait, ok
		}
		places := func() (n int) {
			t.Helper()
			require.NoError(t, s.queryRow(ctx, `SELECT count(*) FROM model_budget_room WHERE name = 'room'`).Scan(&n))
			return n
		}
		_, ok, err := b.Reserve(ctx, "claim-1:step2:turn1", false, 500, 0)
		require.NoError(t, err)
		require.True(t, ok, "the burst is served at once")

		// Four calls are refused, each with its own turn, 1 s apart.
		var waits []time.Duration
		for i, key := range []string{"claim-2:step2:turn1", "claim-3:step2:turn1", "claim-4:step4", "claim-5:step2:turn2"} {
			wait, ok := reserve([]*ModelBudget{b, other}[i%2], key)
			require.False(t, ok, key)
			waits = append(waits, wait)
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, waits,
			"each refused call its own turn, in the order refused")
		wait, ok := reserve(b, "")
		assert.False(t, ok)
		assert.Equal(t, 5*time.Second, wait, "a caller with no key is told the wait behind the room")
		assert.Equal(t, 4, places(), "and keeps no place")

		// Back at their turns, claim-2's and claim-3's calls are served.
		// claim-5's, back before its turn, is not served ahead of
		// claim-4's and keeps its place.
		now = now.Add(time.Second)
		wait, ok = reserve(other, "claim-2:step2:turn1")
		assert.True(t, ok, "back at its turn")
		assert.Zero(t, wait)
		wait, ok = reserve(b, "claim-5:step2:turn2")
		assert.False(t, ok, "back before its turn")
		assert.Equal(t, 3*time.Second, wait, "told to come back at its turn, 4 s from the start")
		now = now.Add(time.Second)
		_, ok = reserve(b, "claim-3:step2:turn1")
		assert.True(t, ok)
		now = now.Add(time.Second)
		_, ok = reserve(other, "claim-4:step4")
		assert.True(t, ok)
		assert.Equal(t, 1, places(), "a served call gives up its place")
		now = now.Add(time.Second)
		_, ok = reserve(b, "claim-5:step2:turn2")
		assert.True(t, ok)
		assert.Zero(t, places())

		// A place not taken up within an hour of its turn is forgotten
		// when the next call joins the room.
		_, ok = reserve(b, "claim-6:step2:turn1")
		require.False(t, ok)
		now = now.Add(2 * time.Hour)
		require.NoError(t, b.Hold(ctx, time.Minute))
		_, ok = reserve(b, "claim-7:step2:turn1")
		require.False(t, ok)
		assert.Equal(t, 1, places(), "claim-6's place is forgotten, claim-7's kept")
	})
}

// The room's line survives the provider's 429 and the calls that ask
// again. A hold moves every turn on by as much as it moved the bucket, so
// the calls in the room come back one by one after it, not all at once.
// A step that has had its turn and asks again (an invalid answer asked
// again, a 429, a failed attempt) books against the bucket alone, and,
// refused, takes a place at the bucket's turn, not at the end of the
// line. A caller that finds the line not yet drained joins it, however
// short its wait: booked behind the line, it would move the bucket past
// the turns of those still to come back.
func TestModelBudgetWaitingRoomAcrossAHoldAndCallsAgain(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		s.now = func() time.Time { return now }
		b, err := s.ModelBudget(ctx, "hold", 6000, 0) // 100 tokens a second, a burst of 500
		require.NoError(t, err)
		const most = 500 * time.Millisecond
		reserve := func(key string, again bool) (time.Duration, bool) {
			t.Helper()
			wait, ok, err := b.Reserve(ctx, key, again, 100, most)
			require.NoError(t, err)
			return wait, ok
		}
		_, ok, err := b.Reserve(ctx, "first", false, 500, 0)
		require.NoError(t, err)
		require.True(t, ok)
		for i, key := range []string{"a", "b", "c", "d"} {
			wait, ok := reserve(key, false)
			require.False(t, ok)
			require.Equal(t, time.Duration(i+1)*time.Second, wait)
		}

		// A step asking again books at the bucket's turn, ahead of the line.
		wait, ok := reserve("again-1", true)
		assert.False(t, ok, "the bucket's next turn is 1 s away")
		assert.Equal(t, time.Second, wait, "at the bucket's turn, not behind the line's 4 s")

		// The provider says 429, retry after 10 s, and the bucket moves
		// 10.5 s on: so does every turn in the room.
		now = now.Add(500 * time.Millisecond)
		require.NoError(t, b.Hold(ctx, 10*time.Second))
		at := func(d time.Duration) time.Time { return time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Add(d) }
		var back []time.Duration
		for i, key := range []string{"a", "b", "c", "d"} {
			now = at(time.Duration(i+1) * time.Second) // each back at its first turn
			wait, ok := reserve(key, false)
			require.False(t, ok, key)
			back = append(back, time.Duration(i+1)*time.Second+wait)
		}
		assert.Equal(t, []time.Duration{11500 * time.Millisecond, 12500 * time.Millisecond, 13500 * time.Millisecond, 14500 * time.Millisecond}, back,
			"each comes back at its turn moved on by the hold, one by one")

		// A step that had its turn and was held by the 429 takes a place
		// at the bucket's turn, not at the end of the line (19.5 s): back
		// under its key it books before a, b, c and d.
		now = at(500 * time.Millisecond)
		wait, ok = reserve("x", true)
		require.False(t, ok)
		assert.Equal(t, 11*time.Second, wait)
		now = at(11500 * time.Millisecond)
		_, ok = reserve("x", false)
		assert.True(t, ok, "its place kept across the hand-back")

		// A caller that comes while the line has not drained joins it,
		// though the bucket alone would have served it within its wait.
		now = at(12500 * time.Millisecond)
		_, ok = reserve("a", false)
		require.True(t, ok, "a, back at its moved turn")
		wait, ok = reserve("late", false)
		assert.False(t, ok, "behind b, c and d, who are still to come back")
		assert.Equal(t, 3*time.Second, wait, "at the line's end, moved on by the hold")
	})
}
