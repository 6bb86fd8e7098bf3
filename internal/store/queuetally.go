package store

import (
	"context"
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
// (nil: any), in currency ("": any), with an amount in [lo, hi] (nil: no
// bound).
type countTerm struct {
	stages   []string
	currency string
	lo, hi   *int64
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
	add := func(cur string, hi *int64) {
		if f.MaxMinor > 0 && (hi == nil || f.MaxMinor < *hi) {
			hi = bound(f.MaxMinor)
		}
		if f.Currency != "" && cur != f.Currency && cur != "" {
			return
		}
		if cur == "" {
			cur = f.Currency
		}
		if lo != nil && hi != nil && *lo > *hi {
			return
		}
		terms = append(terms, countTerm{stages: stages, currency: cur, lo: lo, hi: hi})
	}
	if v := f.Viewer; v != nil {
		for _, cur := range slices.Sorted(maps.Keys(v.Limits)) {
			add(cur, bound(v.Limits[cur]))
		}
	} else {
		add("", nil)
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
	if t.currency != "" {
		conds, args = append(conds, p+"currency = ?"), append(args, t.currency)
	}
	return conds, args
}

// sql is the term's count as an SQL expression, and its arguments: the
// tally's whole bands and the rows at either end.
func (t countTerm) sql() (string, []any) {
	var parts []string
	var args []any
	scan := func(lo, hi *int64, hiOpen bool) {
		conds, a := t.keys("q.open = 1", "q.")
		if lo != nil {
			conds, a = append(conds, "q.amount_minor >= ?"), append(a, *lo)
		}
		if hi != nil && hiOpen {
			conds, a = append(conds, "q.amount_minor < ?"), append(a, *hi)
		} else if hi != nil {
			conds, a = append(conds, "q.amount_minor <= ?"), append(a, *hi)
		}
		parts, args = append(parts, "(SELECT COUNT(*) FROM approval_queue q WHERE "+strings.Join(conds, " AND ")+")"), append(args, a...)
	}
	// The whole bands are [from, to): from the first band starting at or
	// after lo, to the band hi falls in, whose rows up to hi are read.
	var from, to *int64
	if t.lo != nil {
		start, next, ok := amountBand(*t.lo)
		switch {
		case start == *t.lo:
			from = t.lo
		case ok:
			from = &next
		default: // lo is in the last band there is: no whole band after it
			scan(t.lo, t.hi, false)
			return strings.Join(parts, " + "), args
		}
	}
	if t.hi != nil {
		start, _, _ := amountBand(*t.hi)
		to = &start
	}
	if from != nil && to != nil && *from >= *to {
		scan(t.lo, t.hi, false)
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
	if t.lo != nil && *t.lo < *from {
		scan(t.lo, from, true)
	}
	if t.hi != nil {
		scan(to, t.hi, false)
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
// together in every transaction that writes the queue; they can part only
// when the tally itself was written by hand or restored apart from the
// rows. Writers of the queue wait while it counts (SQLite's write lock; a
// table lock on PostgreSQL), readers do not.
func (s *Store) RecountQueue(ctx context.Context) (fixed int, err error) {
	t, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = t.Rollback() }()
	if s.d.name == "postgres" {
		if _, err := t.exec(ctx, `LOCK TABLE approval_queue IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return 0, err
		}
	}
	type key struct {
		stage, currency string
		band            int64
	}
	read := func(q string) (map[key]int64, error) {
		rows, err := t.QueryContext(ctx, q)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := map[key]int64{}
		for rows.Next() {
			var k key
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
		return 0, fmt.Errorf("store: recount approval queue: %w", err)
	}
	have, err := read(`SELECT stage, currency, band, n FROM approval_queue_tally`)
	if err != nil {
		return 0, fmt.Errorf("store: recount approval queue: %w", err)
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			want[k] = 0
		}
	}
	for k, n := range want {
		if have[k] == n {
			continue
		}
		fixed++
		if _, err := t.exec(ctx, `INSERT INTO approval_queue_tally (stage, currency, band, n) VALUES (?, ?, ?, ?)
			ON CONFLICT (stage, currency, band) DO UPDATE SET n = excluded.n`, k.stage, k.currency, k.band, n); err != nil {
			return 0, fmt.Errorf("store: recount approval queue: %w", err)
		}
	}
	return fixed, t.Commit()
}
