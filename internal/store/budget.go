package store

import (
	"context"
	"database/sql"
	"errors"
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
//
// key names the call (its step's idempotency key) for the waiting room.
// A call refused under a key takes a place at the end of the room's line,
// and its wait is when its turn comes if everyone ahead of it books at the
// budget's pace; back under the same key, it books against the bucket
// alone, ahead of any caller not in the room, who queues behind the
// room's line (and joins it, however short the wait: a caller that booked
// behind the line would move the bucket past the turns of those still to
// come back). So calls refused together come back in the order they were
// refused, not all together to race for the turns. A call again (its step
// has had a turn already) books against the bucket alone too, and a call
// refused with no key is told the wait behind the line and keeps no place.
func (b *ModelBudget) Reserve(ctx context.Context, key string, again bool, tokens int64, most time.Duration) (time.Duration, bool, error) {
	cost := b.span(tokens).Microseconds()
	need := min(cost, b.burst.Microseconds()) // what must have been refilled
	t, err := b.s.begin(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	defer t.Rollback()
	fail := func(err error) (time.Duration, bool, error) {
		return 0, false, fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	var tat, room int64
	if err := t.lock(ctx, `SELECT tat_us, room_us FROM model_budget WHERE name = ?`, b.name).Scan(&tat, &room); err != nil {
		return fail(err)
	}
	now := b.nowUS()
	var turn int64
	inRoom := false
	if key != "" {
		switch err := t.queryRow(ctx, `SELECT turn_us FROM model_budget_room WHERE name = ? AND call_key = ?`, b.name, key).Scan(&turn); {
		case err == nil:
			inRoom = true
		case !errors.Is(err, sql.ErrNoRows):
			return fail(err)
		}
	}
	waitFrom := func(from int64) time.Duration {
		return max(time.Duration(from+need-now)*time.Microsecond-b.burst, 0)
	}
	from := max(tat, now)
	behind := !inRoom && !again && room > from // the line has not drained
	if behind {
		from = room
	}
	wait := waitFrom(from)
	booked := wait <= most && !behind
	switch {
	case booked:
		if _, err := t.exec(ctx, `UPDATE model_budget SET tat_us = ? WHERE name = ?`, from+cost, b.name); err != nil {
			return fail(err)
		}
		if inRoom {
			if _, err := t.exec(ctx, `DELETE FROM model_budget_room WHERE name = ? AND call_key = ?`, b.name, key); err != nil {
				return fail(err)
			}
		}
	case inRoom:
		// Back before its turn (a hold moved the line on, or its wait was
		// capped): it comes back at its turn, not with everyone the hold
		// refused at once.
		wait = max(wait, waitFrom(turn))
	case key != "":
		// A place: at the end of the line, or, for a call again, at the
		// bucket's turn, ahead of it. Places long past are of calls that
		// never came back (a claim ended meanwhile).
		if _, err := t.exec(ctx, `DELETE FROM model_budget_room WHERE name = ? AND turn_us < ?`, b.name, now-roomForgets.Microseconds()); err != nil {
			return fail(err)
		}
		if _, err := t.exec(ctx, `INSERT INTO model_budget_room (name, call_key, turn_us) VALUES (?, ?, ?)`, b.name, key, from); err != nil {
			return fail(err)
		}
		if !again {
			if _, err := t.exec(ctx, `UPDATE model_budget SET room_us = ? WHERE name = ?`, from+cost, b.name); err != nil {
				return fail(err)
			}
		}
	}
	if err := t.Commit(); err != nil {
		return fail(err)
	}
	return wait, booked, nil
}

// roomForgets is how long past its turn a place in the waiting room is
// kept for a call that has not come back.
const roomForgets = time.Hour

// Settle corrects a booking by delta tokens: more used than booked moves
// the bucket's time on, fewer moves it back. A bucket that has refilled
// since the booking is charged from full, as the provider charges an
// answer when it sends it: else an overrun settled late would be lost.
// The waiting room's line moves with it, so that those who join it next
// are given turns the budget will have.
func (b *ModelBudget) Settle(ctx context.Context, delta int64) error {
	if delta == 0 {
		return nil
	}
	d := b.span(delta).Microseconds()
	return b.update(ctx, func(tat, room, now int64) (int64, int64, int64) {
		if room > now {
			room = max(room+d, now)
		}
		return max(tat, now) + d, room, 0
	})
}

// Hold keeps every booking back for d: the bucket counts as empty until
// then, and the waiting room's turns move on by as much as the bucket did,
// so that those in it come back one by one after the hold as before it.
func (b *ModelBudget) Hold(ctx context.Context, d time.Duration) error {
	return b.update(ctx, func(tat, room, now int64) (int64, int64, int64) {
		held := max(tat, now+(d+b.burst).Microseconds())
		moved := held - max(tat, now)
		if moved <= 0 {
			return tat, room, 0
		}
		if room > now {
			room += moved
		}
		return held, room, moved
	})
}

// update moves the bucket's time from tat to next's, the waiting room's
// line from room, and every turn in it by next's shift, reading now once
// the row is locked (on SQLite, once the transaction holds the database):
// a change that waited for another writer is made at the time it got in.
// Booked at the time it asked, into a bucket that was full then, its
// tokens were lost to a refill the wait had already capped
// (TestModelBudgetBooksWhenTheDatabaseLetsItIn).
func (b *ModelBudget) update(ctx context.Context, next func(tat, room, now int64) (newTat, newRoom, shift int64)) error {
	t, err := b.s.begin(ctx)
	if err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	defer t.Rollback()
	var tat, room int64
	if err := t.lock(ctx, `SELECT tat_us, room_us FROM model_budget WHERE name = ?`, b.name).Scan(&tat, &room); err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	movedTat, movedRoom, shift := next(tat, room, b.nowUS())
	if movedTat != tat || movedRoom != room {
		if _, err := t.exec(ctx, `UPDATE model_budget SET tat_us = ?, room_us = ? WHERE name = ?`, movedTat, movedRoom, b.name); err != nil {
			return fmt.Errorf("store: model budget %q: %w", b.name, err)
		}
	}
	if shift != 0 {
		if _, err := t.exec(ctx, `UPDATE model_budget_room SET turn_us = turn_us + ? WHERE name = ?`, shift, b.name); err != nil {
			return fmt.Errorf("store: model budget %q: %w", b.name, err)
		}
	}
	if err := t.Commit(); err != nil {
		return fmt.Errorf("store: model budget %q: %w", b.name, err)
	}
	return nil
}
