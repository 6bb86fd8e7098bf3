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
		wait, ok, err := b.Reserve(ctx, 500, 0)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Zero(t, wait)
		wait, ok, err = again.Reserve(ctx, 100, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, time.Second, wait)
		wait, ok, err = b.Reserve(ctx, 200, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 3*time.Second, wait)

		// A caller that may wait only 2 s books nothing, and hears how long.
		wait, ok, err = b.Reserve(ctx, 100, 2*time.Second)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 4*time.Second, wait)
		wait, ok, err = b.Reserve(ctx, 100, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 4*time.Second, wait, "the refused booking took nothing")

		// A call that used 300 fewer tokens than booked gives them back.
		require.NoError(t, b.Settle(ctx, -300))
		wait, _, err = b.Reserve(ctx, 100, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 2*time.Second, wait)

		// A minute later the bucket is full again, no fuller.
		now = now.Add(time.Minute)
		wait, _, err = b.Reserve(ctx, 500, 0)
		require.NoError(t, err)
		assert.Zero(t, wait)
		wait, _, err = b.Reserve(ctx, 100, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, time.Second, wait)

		// A call that used 400 more tokens than booked, answered once the
		// bucket had refilled, is charged them from full (as the provider
		// charges its answer): the burst after it waits 4 s.
		now = now.Add(time.Minute)
		wait, _, err = b.Reserve(ctx, 100, 0)
		require.NoError(t, err)
		assert.Zero(t, wait)
		now = now.Add(time.Minute)
		require.NoError(t, b.Settle(ctx, 400))
		wait, _, err = b.Reserve(ctx, 500, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, 4*time.Second, wait, "a late charge is not lost to the full bucket")

		// The provider says 429, retry after 10 s: everyone waits that long first.
		now = now.Add(time.Minute)
		require.NoError(t, b.Hold(ctx, 10*time.Second))
		wait, _, err = again.Reserve(ctx, 100, time.Minute)
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
					wait, ok, err := b.Reserve(ctx, 1000, time.Hour)
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
		wait, ok, err := b.Reserve(ctx, 3000, 0)
		require.NoError(t, err)
		assert.True(t, ok, "a full bucket serves it at once")
		assert.Zero(t, wait)
		wait, ok, err = b.Reserve(ctx, 3000, time.Second)
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Equal(t, 30*time.Second, wait, "the next waits for the debt and a full bucket again")
		now = now.Add(30 * time.Second)
		wait, ok, err = b.Reserve(ctx, 3000, 0)
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
			wait, ok, err := b.Reserve(ctx, 500, 0)
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
		wait, ok, err := b.Reserve(ctx, 500, time.Minute)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, 5*time.Second, wait, "the booking was made when it got in")
	})
}
