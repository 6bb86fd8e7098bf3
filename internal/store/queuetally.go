package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// The approval queue's counts come from a tally the database keeps as
// rows change (migration queue_tally): open waits by stage, currency and
// amount band. A count is the bands wholly inside the range asked for,
// summed, plus the rows of the bands the range's ends cut, read from the
// counts index: it grows with the bands in use and the claims near an
// approver's limit, not with the claims waiting.

// amountBand is the band of the tally an amount falls in, as the
// amount_band column computes it: the amount cut to two significant
// digits, each amount under 100 its own. next is where the band after it
// starts; ok is false past the largest band's end.
func amountBand(a int64) (start, next int64, ok bool) {
	if a < 100 {
		return a, a + 1, true
	}
	unit := int64(1)
	for a/unit >= 100 {
		unit *= 10
	}
	start = a / unit * unit
	if start > math.MaxInt64-unit {
		return start, 0, false
	}
	return start, start + unit, true
}

// countTerm is one currency's part of a count: open waits in stages
// (nil: any), in currency (any when anyCurrency), with an amount in
// [lo, hi] (nil: no bound).
type countTerm struct {
	stages      []string
	currency    string
	anyCurrency bool
	lo, hi      *int64
}

// terms splits f into countTerms, none when nothing can match; ok is false
// for a filter the tally cannot count (by whom a wait was handed to).
func (f QueueFilter) terms() (terms []countTerm, ok bool) {
	if f.AssignedTo != "" {
		return nil, false
	}
	var stages []string
	if v := f.Viewer; v != nil && !v.Supervisor {
		stages = []string{"waiting"}
	}
	if f.Stage != "" {
		if stages != nil && !slices.Contains(stages, f.Stage) {
			return nil, true
		}
		stages = []string{f.Stage}
	}
	bound := func(n int64) *int64 { return &n }
	var lo *int64
	if f.MinMinor > 0 {
		lo = bound(f.MinMinor)
	}
	add := func(t countTerm) {
		if f.MaxMinor > 0 && (t.hi == nil || f.MaxMinor < *t.hi) {
			t.hi = bound(f.MaxMinor)
		}
		if t.lo != nil && t.hi != nil && *t.lo > *t.hi {
			return
		}
		terms = append(terms, t)
	}
	if v := f.Viewer; v != nil {
		for _, cur := range slices.Sorted(maps.Keys(v.Limits)) {
			if f.Currency == "" || cur == f.Currency {
				add(countTerm{stages: stages, currency: cur, lo: lo, hi: bound(v.Limits[cur])})
			}
		}
	} else {
		add(countTerm{stages: stages, currency: f.Currency, anyCurrency: f.Currency == "", lo: lo})
	}
	return terms, true
}

// keys are the conditions on the term's stages and currency, after
// first, with the columns' prefix p.
func (t countTerm) keys(first, p string) ([]string, []any) {
	conds := []string{first}
	var args []any
	if t.stages != nil {
		conds = append(conds, p+"stage IN (?"+strings.Repeat(", ?", len(t.stages)-1)+")")
		for _, s := range t.stages {
			args = append(args, s)
		}
	}
	if !t.anyCurrency {
		conds, args = append(conds, p+"currency = ?"), append(args, t.currency)
	}
	return conds, args
}

// sql is the term's count as an SQL expression, and its arguments: the
// tally's whole bands and the rows at either end.
func (t countTerm) sql() (string, []any) {
	var parts []string
	var args []any
	// rows counts the rows with an amount in [lo, hi] (nil: no bound).
	rows := func(lo, hi *int64) {
		conds, a := t.keys("q.open = 1", "q.")
		if lo != nil {
			conds, a = append(conds, "q.amount_minor >= ?"), append(a, *lo)
		}
		if hi != nil {
			conds, a = append(conds, "q.amount_minor <= ?"), append(a, *hi)
		}
		parts, args = append(parts, "(SELECT COUNT(*) FROM approval_queue q WHERE "+strings.Join(conds, " AND ")+")"), append(args, a...)
	}
	// The whole bands are [from, to): from the first band starting at or
	// after lo, to the band hi falls in, whose rows up to hi are read.
	from, to, whole := t.lo, (*int64)(nil), true
	if t.lo != nil {
		if start, next, ok := amountBand(*t.lo); start != *t.lo {
			from, whole = &next, ok // not ok: lo is in the last band there is
		}
	}
	if t.hi != nil {
		start, _, _ := amountBand(*t.hi)
		to = &start
	}
	if !whole || from != nil && to != nil && *from >= *to {
		rows(t.lo, t.hi)
		return strings.Join(parts, " + "), args
	}
	conds, a := t.keys("1 = 1", "")
	args = append(args, a...)
	if from != nil {
		conds, args = append(conds, "band >= ?"), append(args, *from)
	}
	if to != nil {
		conds, args = append(conds, "band < ?"), append(args, *to)
	}
	parts = append(parts, "(SELECT COALESCE(SUM(n), 0) FROM approval_queue_tally WHERE "+strings.Join(conds, " AND ")+")")
	if from != t.lo {
		below := *from - 1
		rows(t.lo, &below)
	}
	if t.hi != nil {
		rows(to, t.hi)
	}
	return strings.Join(parts, " + "), args
}

// count counts the open waits under f: from the tally where it can, the
// rows otherwise.
func (s *Store) count(ctx context.Context, f QueueFilter) (int, error) {
	terms, ok := f.terms()
	var expr string
	var args []any
	switch {
	case !ok:
		where, a := f.where()
		expr, args = "(SELECT COUNT(*) FROM approval_queue q WHERE "+where+")", a
	case len(terms) == 0:
		return 0, nil
	default:
		var parts []string
		for _, t := range terms {
			e, a := t.sql()
			parts, args = append(parts, e), append(args, a...)
		}
		expr = strings.Join(parts, " + ")
		if v := f.Viewer; v != nil {
			// Less the four-eyes waits the viewer voted on already.
			conds, a := f.predicate()
			expr += " - (SELECT COUNT(*) FROM approval_votes v JOIN approval_queue q ON q.claim_id = v.claim_id WHERE v.approver = ? AND q.quorum <> 1 AND " +
				strings.Join(conds, " AND ") + ")"
			args = append(append(args, v.ID), a...)
		}
	}
	var n int64
	if err := s.queryRow(ctx, "SELECT CAST("+expr+" AS BIGINT)", args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: approval queue counts: %w", err)
	}
	return int(n), nil
}

// RecountQueue checks the tally against the open rows and sets every
// count that differs, returning how many did. The triggers keep the two
// together in every transaction that writes the queue, however it writes
// it, but for what fires no row trigger: a TRUNCATE (the tally is emptied
// with it), a restore with triggers disabled, SQLite's REPLACE from a
// shell without recursive_triggers, a tally written by hand. It compares
// first without locking anything; only when they differ does it lock the
// queue's writers out (SQLite's write lock; a table lock on PostgreSQL,
// waiting at most five seconds for it), compare again and set the counts.
func (s *Store) RecountQueue(ctx context.Context) (int, error) {
	diff, err := s.tallyDiff(ctx, s.db)
	if err != nil || len(diff) == 0 {
		return 0, err
	}
	t, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = t.Rollback() }()
	if s.d.name == "postgres" {
		if _, err := t.exec(ctx, `SET LOCAL lock_timeout = '5s'`); err != nil {
			return 0, err
		}
		if _, err := t.exec(ctx, `LOCK TABLE approval_queue IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return 0, fmt.Errorf("store: recount approval queue: %w", err)
		}
	}
	if diff, err = s.tallyDiff(ctx, t); err != nil {
		return 0, err
	}
	for k, n := range diff {
		if _, err := t.exec(ctx, `INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES (?, ?, ?, ?)
			ON CONFLICT (stage, currency, band) DO UPDATE SET n = excluded.n`, k.stage, k.currency, k.band, n); err != nil {
			return 0, fmt.Errorf("store: recount approval queue: %w", err)
		}
	}
	if err := t.Commit(); err != nil {
		return 0, err
	}
	return len(diff), nil
}

type tallyKey struct {
	stage, currency string
	band            int64
}

// tallyDiff is every count of the tally that differs from the rows', with
// the rows' count.
func (s *Store) tallyDiff(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[tallyKey]int64, error) {
	read := func(q string) (map[tallyKey]int64, error) {
		rows, err := db.QueryContext(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("store: recount approval queue: %w", err)
		}
		defer rows.Close()
		out := map[tallyKey]int64{}
		for rows.Next() {
			var k tallyKey
			var n int64
			if err := rows.Scan(&k.stage, &k.currency, &k.band, &n); err != nil {
				return nil, err
			}
			out[k] = n
		}
		return out, rows.Err()
	}
	want, err := read(`SELECT stage, currency, amount_band, COUNT(*) FROM approval_queue WHERE open = 1 GROUP BY stage, currency, amount_band`)
	if err != nil {
		return nil, err
	}
	have, err := read(`SELECT stage, currency, band, n FROM approval_queue_tally`)
	if err != nil {
		return nil, err
	}
	diff := map[tallyKey]int64{}
	for k, n := range want {
		if have[k] != n {
			diff[k] = n
		}
	}
	for k, n := range have {
		if _, ok := want[k]; !ok && n != 0 {
			diff[k] = 0
		}
	}
	return diff, nil
}
