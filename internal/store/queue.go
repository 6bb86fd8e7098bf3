package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// QueueEntry is one approval wait as the approval queue holds it: what an
// inbox needs to list it and to say who may decide it, at revision Rev of
// its run. The claim workflow writes it at each change of the wait; the
// row is a projection, never the decision: deciding goes to the workflow,
// which checks again.
type QueueEntry struct {
	ClaimID string `json:"claim_id"`
	RunID   string `json:"run_id"`
	// Rev orders the writes of one run: an older one never overwrites a
	// newer one.
	Rev  int64 `json:"rev"`
	Open bool  `json:"open"`
	// Stage is "waiting" or "escalated"; Deadline the current stage's.
	Stage       string    `json:"stage"`
	Deadline    time.Time `json:"deadline"`
	Currency    string    `json:"currency"`
	AmountMinor int64     `json:"amount_minor"`
	Quorum      int       `json:"quorum"`
	// Voters approved a four-eyes request already: they may not decide it
	// again.
	Voters []string `json:"voters,omitempty"`
	// AssignedTo is who the request was last handed to, if anyone.
	AssignedTo string `json:"assigned_to,omitempty"`
	// Summary is the wait as the inbox lists it (JSON), bounded by the
	// writer.
	Summary   json.RawMessage `json:"summary"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// MaxQueueSummary bounds a row's summary.
const MaxQueueSummary = 16 << 10

const queueColumns = `claim_id, run_id, rev, open, stage, deadline_ms, currency, amount_minor, quorum, assigned_to, summary, updated_ms`

// PutQueueEntry writes e, unless the queue holds a newer revision of the
// same run (then applied is false). A row of another run is replaced: the
// caller has checked that e's run owns the claim now.
func (s *Store) PutQueueEntry(ctx context.Context, e QueueEntry) (applied bool, err error) {
	switch {
	case e.ClaimID == "" || e.RunID == "":
		return false, errors.New("store: queue entry without a claim or run")
	case len(e.Summary) > MaxQueueSummary:
		return false, fmt.Errorf("store: queue entry of %s: summary is %d bytes, at most %d", e.ClaimID, len(e.Summary), MaxQueueSummary)
	case !json.Valid(e.Summary):
		return false, fmt.Errorf("store: queue entry of %s: summary is not JSON", e.ClaimID)
	}
	t, err := s.begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = t.Rollback() }()
	var run string
	var rev int64
	err = t.lock(ctx, `SELECT run_id, rev FROM approval_queue WHERE claim_id = ?`, e.ClaimID).Scan(&run, &rev)
	switch {
	case err == nil && run == e.RunID && rev > e.Rev:
		return false, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	open := 0
	if e.Open {
		open = 1
	}
	updated := e.UpdatedAt
	if updated.IsZero() {
		updated = s.stamp()
	}
	if _, err := t.exec(ctx, `INSERT INTO approval_queue (`+queueColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (claim_id) DO UPDATE SET run_id = excluded.run_id, rev = excluded.rev, open = excluded.open,
		stage = excluded.stage, deadline_ms = excluded.deadline_ms, currency = excluded.currency,
		amount_minor = excluded.amount_minor, quorum = excluded.quorum, assigned_to = excluded.assigned_to,
		summary = excluded.summary, updated_ms = excluded.updated_ms
		WHERE approval_queue.run_id <> excluded.run_id OR approval_queue.rev <= excluded.rev`,
		e.ClaimID, e.RunID, e.Rev, open, e.Stage, e.Deadline.UnixMilli(), e.Currency, e.AmountMinor, e.Quorum, e.AssignedTo,
		string(e.Summary), updated.UnixMilli()); err != nil {
		return false, fmt.Errorf("store: queue entry of %s: %w", e.ClaimID, err)
	}
	if _, err := t.exec(ctx, `DELETE FROM approval_votes WHERE claim_id = ?`, e.ClaimID); err != nil {
		return false, err
	}
	if e.Open {
		for _, v := range slices.Compact(slices.Sorted(slices.Values(e.Voters))) {
			if _, err := t.exec(ctx, `INSERT INTO approval_votes (claim_id, approver) VALUES (?, ?)`, e.ClaimID, v); err != nil {
				return false, err
			}
		}
	}
	return true, t.Commit()
}

// QueueViewer is whose queue a listing is: the waits this approver may
// decide now (the inbox's mayDecide, as SQL). Nil lists every open wait.
type QueueViewer struct {
	ID string
	// Supervisor: escalated waits too; otherwise only those still waiting.
	Supervisor bool
	// Limits is the approver's limit per currency: a wait in another
	// currency, or above the limit, is not theirs.
	Limits map[string]int64
}

// ViewerOf is an approver's queue: their ID, role and limits.
func ViewerOf(ap authority.Approver) *QueueViewer {
	return &QueueViewer{ID: ap.ID, Supervisor: ap.Role == authority.Supervisor, Limits: ap.Limits}
}

// QueueFilter narrows a listing.
type QueueFilter struct {
	Viewer *QueueViewer
	// Stage, Currency: only waits in this stage, in this currency.
	Stage, Currency string
	// MinMinor, MaxMinor bound the amount (0: unbounded).
	MinMinor, MaxMinor int64
	// AssignedTo: only waits last handed to this approver.
	AssignedTo string
}

// QueueCursor is where a page ends: the next page starts after it.
type QueueCursor struct {
	Deadline time.Time
	ClaimID  string
}

// CursorAfter is the cursor of the page that ends with e.
func CursorAfter(e QueueEntry) QueueCursor {
	return QueueCursor{Deadline: e.Deadline, ClaimID: e.ClaimID}
}

// String is the cursor as a page's address carries it: the deadline in
// Unix milliseconds, a dot, the claim.
func (c QueueCursor) String() string { return fmt.Sprintf("%d.%s", c.Deadline.UnixMilli(), c.ClaimID) }

// ParseQueueCursor reads what String wrote.
func ParseQueueCursor(s string) (QueueCursor, error) {
	ms, id, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || id == "" || len(id) > 128 {
		return QueueCursor{}, fmt.Errorf("%q is not a page of the approval queue", clipped(s))
	}
	return QueueCursor{Deadline: time.UnixMilli(n).UTC(), ClaimID: id}, nil
}

func clipped(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// where is the SQL predicate of a listing and its arguments.
func (f QueueFilter) where() (string, []any) {
	conds, args := f.predicate()
	if v := f.Viewer; v != nil {
		// Only a four-eyes wait has voters to look up.
		conds = append(conds, "(q.quorum = 1 OR NOT EXISTS (SELECT 1 FROM approval_votes v WHERE v.claim_id = q.claim_id AND v.approver = ?))")
		args = append(args, v.ID)
	}
	return strings.Join(conds, " AND "), args
}

// predicate is where's conditions but the viewer's own votes.
func (f QueueFilter) predicate() ([]string, []any) {
	conds := []string{"q.open = 1"}
	var args []any
	if v := f.Viewer; v != nil {
		if !v.Supervisor {
			conds = append(conds, "q.stage = 'waiting'")
		}
		var limits []string
		for _, cur := range slices.Sorted(maps.Keys(v.Limits)) {
			limits = append(limits, "(q.currency = ? AND q.amount_minor <= ?)")
			args = append(args, cur, v.Limits[cur])
		}
		if len(limits) == 0 {
			limits = []string{"1 = 0"} // no limit in any currency: nothing to decide
		}
		conds = append(conds, "("+strings.Join(limits, " OR ")+")")
	}
	if f.Stage != "" {
		conds, args = append(conds, "q.stage = ?"), append(args, f.Stage)
	}
	if f.Currency != "" {
		conds, args = append(conds, "q.currency = ?"), append(args, f.Currency)
	}
	if f.MinMinor > 0 {
		conds, args = append(conds, "q.amount_minor >= ?"), append(args, f.MinMinor)
	}
	if f.MaxMinor > 0 {
		conds, args = append(conds, "q.amount_minor <= ?"), append(args, f.MaxMinor)
	}
	if f.AssignedTo != "" {
		conds, args = append(conds, "q.assigned_to = ?"), append(args, f.AssignedTo)
	}
	return conds, args
}

// ApprovalQueue lists open waits under f, oldest deadline first, at most
// limit of them, starting after the cursor (nil: from the first).
func (s *Store) ApprovalQueue(ctx context.Context, f QueueFilter, after *QueueCursor, limit int) ([]QueueEntry, error) {
	where, args := f.where()
	if after != nil {
		where += " AND (q.deadline_ms > ? OR (q.deadline_ms = ? AND q.claim_id > ?))"
		ms := after.Deadline.UnixMilli()
		args = append(args, ms, ms, after.ClaimID)
	}
	args = append(args, max(limit, 1))
	rows, err := s.query(ctx, `SELECT `+prefixed("q.", queueColumns)+` FROM approval_queue q WHERE `+where+
		` ORDER BY q.deadline_ms, q.claim_id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: approval queue: %w", err)
	}
	defer rows.Close()
	var out []QueueEntry
	for rows.Next() {
		e, err := scanQueueEntry(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, s.voters(ctx, out)
}

// voters fills in the voters of four-eyes waits.
func (s *Store) voters(ctx context.Context, es []QueueEntry) error {
	idx := map[string]int{}
	var ids []any
	for i, e := range es {
		if e.Quorum > 1 {
			idx[e.ClaimID] = i
			ids = append(ids, e.ClaimID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err := s.query(ctx, `SELECT claim_id, approver FROM approval_votes WHERE claim_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`) ORDER BY claim_id, approver`, ids...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, who string
		if err := rows.Scan(&id, &who); err != nil {
			return err
		}
		es[idx[id]].Voters = append(es[idx[id]].Voters, who)
	}
	return rows.Err()
}

// QueueCounts are the sizes of a queue.
type QueueCounts struct {
	// Total is every open wait the viewer may decide; ByStage splits it.
	Total   int            `json:"total"`
	ByStage map[string]int `json:"by_stage"`
	// AssignedToYou: of those, handed to the viewer.
	AssignedToYou int `json:"assigned_to_you"`
	// Matching: those under the listing's own filters.
	Matching int `json:"matching"`
}

// CountQueue counts the viewer's queue, and what f's filters keep of it:
// from the tally of open waits by stage, currency and amount band, and the
// rows of the bands an approver's limit or a filter cuts (queuetally.go).
// What is handed to the viewer, and their own four-eyes votes, are
// counted by row: a few each.
func (s *Store) CountQueue(ctx context.Context, f QueueFilter) (QueueCounts, error) {
	c := QueueCounts{ByStage: map[string]int{}}
	base := QueueFilter{Viewer: f.Viewer}
	var err error
	if c.Total, err = s.count(ctx, base); err != nil {
		return c, err
	}
	waiting := c.Total // an approver who is not a supervisor sees only waits still waiting
	if f.Viewer == nil || f.Viewer.Supervisor {
		if waiting, err = s.count(ctx, QueueFilter{Viewer: f.Viewer, Stage: "waiting"}); err != nil {
			return c, err
		}
	}
	if waiting > 0 {
		c.ByStage["waiting"] = waiting
	}
	if escalated := c.Total - waiting; escalated > 0 {
		c.ByStage["escalated"] = escalated
	}
	if f.Viewer != nil {
		if c.AssignedToYou, err = s.count(ctx, QueueFilter{Viewer: f.Viewer, AssignedTo: f.Viewer.ID}); err != nil {
			return c, err
		}
	}
	if f == base {
		c.Matching = c.Total
		return c, nil
	}
	c.Matching, err = s.count(ctx, f)
	return c, err
}

// QueueRun is what the queue says of one claim's wait, for the healer to
// compare with Temporal.
type QueueRun struct {
	RunID    string
	Rev      int64
	Stage    string
	Deadline time.Time
	Updated  time.Time
}

// OpenQueue lists every open wait by claim.
func (s *Store) OpenQueue(ctx context.Context) (map[string]QueueRun, error) {
	rows, err := s.query(ctx, `SELECT claim_id, run_id, rev, stage, deadline_ms, updated_ms FROM approval_queue WHERE open = 1`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]QueueRun{}
	for rows.Next() {
		var id string
		var r QueueRun
		var ms, updated int64
		if err := rows.Scan(&id, &r.RunID, &r.Rev, &r.Stage, &ms, &updated); err != nil {
			return nil, err
		}
		r.Deadline, r.Updated = time.UnixMilli(ms).UTC(), time.UnixMilli(updated).UTC()
		out[id] = r
	}
	return out, rows.Err()
}

// CloseQueueEntry marks a claim's open wait of run at revision rev closed
// (its run waits no more: the healer found it so), unless the row moved on
// meanwhile (another run, or a newer revision: a new wait of the run).
func (s *Store) CloseQueueEntry(ctx context.Context, claimID, runID string, rev int64) error {
	if _, err := s.exec(ctx, `DELETE FROM approval_votes WHERE claim_id = ? AND EXISTS (SELECT 1 FROM approval_queue WHERE claim_id = ? AND run_id = ? AND rev = ?)`,
		claimID, claimID, runID, rev); err != nil {
		return err
	}
	_, err := s.exec(ctx, `UPDATE approval_queue SET open = 0, updated_ms = ? WHERE claim_id = ? AND run_id = ? AND rev = ?`,
		s.stamp().UnixMilli(), claimID, runID, rev)
	return err
}

// PruneQueue deletes closed waits last written before t.
func (s *Store) PruneQueue(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM approval_queue WHERE open = 0 AND updated_ms < ?`, before.UnixMilli())
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func scanQueueEntry(row interface{ Scan(...any) error }) (QueueEntry, error) {
	var e QueueEntry
	var open int
	var deadline, updated int64
	var summary string
	err := row.Scan(&e.ClaimID, &e.RunID, &e.Rev, &open, &e.Stage, &deadline, &e.Currency, &e.AmountMinor, &e.Quorum, &e.AssignedTo, &summary, &updated)
	e.Open, e.Deadline, e.UpdatedAt, e.Summary = open == 1, time.UnixMilli(deadline).UTC(), time.UnixMilli(updated).UTC(), json.RawMessage(summary)
	return e, err
}

func prefixed(p, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = p + c
	}
	return strings.Join(cols, ", ")
}
