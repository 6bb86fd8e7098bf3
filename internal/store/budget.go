package store

import (
	"context"
	"fmt"
	"time"
)

// ModelBudget is a token bucket in the store that every worker on it
// shares: the model provider's tokens per minute, refilled continuously,
// holding at most burst tokens. It is the generic cell rate algorithm on
// one row: tat is when every token booked so far will have been refilled;
// a booking of n tokens moves it on by n's share of a minute, and must
// wait until tat, less the burst, has come. One UPDATE books, atomically
// in both backends, so bookings from many workers are served in the order
// they reach the database. Workers' clocks are assumed to agree (NTP) to
// well within a second.
type ModelBudget struct {
	s         *Store
	name      string
	perMinute int64
	burst     time.Duration // the burst's share of a minute
}

// ModelBudget opens (creating if needed) the budget called name, at
// tokensPerMinute, holding at most burst tokens (default: five seconds'
// worth).
func (s *Store) ModelBudget(ctx context.Context, name string, tokensPerMinute, burst int64) (*ModelBudget, error) {
	if tokensPerMinute <= 0 {
		return nil, fmt.Errorf("store: model budget %q: %d tokens per minute: want a positive number", name, tokensPerMinute)
	}
	if burst <= 0 {
		burst = max(tokensPerMinute/12, 1)
	}
	b := &ModelBudget{s: s, name: name, perMinute: tokensPerMinute}
	b.burst = b.span(burst)
	if _, err := s.exec(ctx, `INSERT INTO model_budget (name, tat_us) VALUES (?, 0) ON CONFLICT (name) DO NOTHING`, name); err != nil {
		return nil, fmt.Errorf("store: model budget %q: %w", name, err)
	}
	return b, nil
}

// span is how long the bucket takes to refill n tokens.
func (b *ModelBudget) span(n int64) time.Duration {
	return time.Duration(n) * time.Minute / time.Duration(b.perMinute)
}

func (b *ModelBudget) nowUS() int64 { return b.s.now().UnixMicro() }

// Reserve books tokens if their turn comes within most, and says how long
// until it does; past most nothing is booked and the wait is what it
// would have been. A booking larger than the burst waits only for the
// bucket to be full, and leaves it in debt that the refill repays before
// the next (else it could never be served).
func (b *ModelBudget) Reserve(ctx context.Context, tokens int64, most time.Duration) (time.Duration, bool, error) {
	cost := b.span(tokens).Microseconds()
	need := min(cost, b.burst.Microseconds()) // what must have been refilled
	var wait time.Duration
	booked := false
	err := b.update(ctx, func(tat, now int64) int64 {
		from := max(tat, now)
		wait = max(time.Duration(from+need-now)*time.Microsecond-b.burst, 0)
		if wait > most {
			return tat
		}
		booked = true
		return from + cost
	})
	if err != nil {
		return 0, false, err
	}
	return wait, booked, nil
}

// Settle corrects a booking by delta tokens: more used than booked moves
// the bucket's time on, fewer moves it back. A bucket that has refilled
// since the booking is charged from full, as the provider charges an
// answer when it sends it: else an overrun settled late would be lost.
func (b *ModelBudget) Settle(ctx context.Context, delta int64) error {
	if delta == 0 {
		return nil
	}
	return b.update(ctx, func(tat, now int64) int64 { return max(tat, now) + b.span(delta).Microseconds() })
}

// Hold keeps every booking back for d: the bucket counts as empty until
// then.
func (b *ModelBudget) Hold(ctx context.Context, d time.Duration) error {
	return b.update(ctx, func(tat, now int64) int64 { return max(tat, now+(d+b.burst).Microseconds()) })
}

// update moves the bucket's time from tat to next(tat, now), reading now
// once the row is locked (on SQLite, once the transaction holds the
// database): a booking that waited for another writer is booked at the
// time it got in. Booked at the time it asked, into a bucket that was
// full then, its tokens were lost to a refill the wait had already
// capped (TestModelBudgetBooksWhenTheDatabaseLetsItIn).
func (b *ModelBudget) update(ctx context.Context, next func(tat, now int64) int64) error {
	t, err := b.s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	defer t.Rollback()
	var tat int64
	if err := t.lock(ctx, `SELECT tat_us FROM model_budget WHERE name = ?`, b.name).Scan(&tat); err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	if moved := next(tat, b.nowUS()); moved != tat {
		if _, err := t.exec(ctx, `UPDATE model_budget SET tat_us = ? WHERE name = ?`, moved, b.name); err != nil {
			return fmt.Errorf("store: model budget %q: %w", b.name, err)
		}
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	return nil
}
