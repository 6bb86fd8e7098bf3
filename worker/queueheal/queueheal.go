// Package queueheal mends the approval queue against Temporal.
//
// The queue (store.QueueEntry) is a projection each claim workflow keeps
// with a local activity at every change of its approval wait. The workflow
// is the truth, and a row can fall behind it: a write that failed past its
// retries, a run started before the queue existed, a run terminated or
// reset by an operator while it waited, a claims database restored from a
// backup. The healer compares the queue with what visibility says is
// waiting, and for every claim where the two disagree (a wait missing from
// the queue, a row of another run, another stage or deadline, a row whose
// run waits no more) asks the workflow itself, with the status query, and
// writes what it answers, at the revision it answers: a newer write of the
// workflow's own is never overwritten. Claims where both agree cost
// nothing; a pass where the counts agree reads no list at all, except the
// full pass Run makes every so many checks, which also checks the queue's
// counts (its tally) against its rows.
package queueheal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// Healer mends the queue of one namespace.
type Healer struct {
	Temporal  client.Client
	Namespace string
	Store     *store.Store
	Log       *slog.Logger
	// MaxQueries bounds the status queries of one pass (default 500): a
	// queue lost whole heals over several passes.
	MaxQueries int
	// KeepClosed is how long a closed row stays (default 24 hours).
	KeepClosed time.Duration
	// Grace: a row written this recently is not judged against visibility,
	// which shows a wait's stage a moment after the workflow wrote its row
	// (default 30 s). Without it, every claim parking in a surge would be
	// queried.
	Grace time.Duration

	// differed: the last check's counts differed. A full pass runs when
	// two checks in a row differ: a count that differs once is most often
	// visibility a moment behind.
	differed bool
	// cooldown: checks left before counts may start another full pass. A
	// disagreement no pass can mend (a stale search attribute, a claim the
	// store does not hold) would otherwise cost a full pass every other
	// check.
	cooldown int
}

// Report is what one pass found and did.
type Report struct {
	Waiting  int `json:"waiting"`  // waits visibility lists
	Queued   int `json:"queued"`   // open rows before the pass
	Queried  int `json:"queried"`  // status queries made
	Written  int `json:"written"`  // rows written from a query
	Closed   int `json:"closed"`   // rows closed: their run waits no more
	Deferred int `json:"deferred"` // disagreements left for the next pass (MaxQueries)
	Pruned   int `json:"pruned"`   // closed rows deleted
	// Recounted: counts of the queue's tally set from its rows (they
	// differed: the tally was written apart from the rows).
	Recounted int  `json:"recounted"`
	Skipped   bool `json:"skipped"` // counts agreed: no list read
}

const waitingQuery = `WorkflowType = "ClaimWorkflow" AND ExecutionStatus = "Running" AND ` +
	`(ClaimStatus = "waiting" OR ClaimStatus = "escalated")`

type visible struct {
	run      string
	stage    string
	deadline time.Time
}

// Check is the cheap pass: it compares the count of waits in visibility
// with the queue's open rows, and runs a full pass only when they differ.
func (h *Healer) Check(ctx context.Context) (Report, error) {
	resp, err := h.Temporal.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: h.Namespace, Query: waitingQuery})
	if err != nil {
		return Report{}, fmt.Errorf("queueheal: count waits: %w", err)
	}
	c, err := h.Store.CountQueue(ctx, store.QueueFilter{})
	if err != nil {
		return Report{}, err
	}
	if h.cooldown > 0 {
		h.cooldown--
	}
	if int64(c.Total) == resp.GetCount() || !h.differed || h.cooldown > 0 {
		h.differed = int64(c.Total) != resp.GetCount()
		return Report{Waiting: int(resp.GetCount()), Queued: c.Total, Skipped: true}, nil
	}
	h.differed, h.cooldown = false, 5
	return h.Heal(ctx)
}

// Heal is the full pass.
func (h *Healer) Heal(ctx context.Context) (Report, error) {
	var rep Report
	waits, err := h.waits(ctx)
	if err != nil {
		return rep, err
	}
	queued, err := h.Store.OpenQueue(ctx)
	if err != nil {
		return rep, err
	}
	rep.Waiting, rep.Queued = len(waits), len(queued)
	maxQ := h.MaxQueries
	if maxQ <= 0 {
		maxQ = 500
	}
	grace := h.Grace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	settled := func(q store.QueueRun) bool { return time.Since(q.Updated) > grace }
	var todo []string
	for id, v := range waits {
		q, ok := queued[id]
		if !ok || (settled(q) && (q.RunID != v.run || q.Stage != v.stage || !sameMilli(q.Deadline, v.deadline))) {
			todo = append(todo, id)
		}
	}
	// A row visibility does not list: its run waits no more, or visibility
	// has not caught up yet. The workflow says which.
	for id, q := range queued {
		if _, ok := waits[id]; !ok && settled(q) {
			todo = append(todo, id)
		}
	}
	for i, id := range todo {
		if i >= maxQ {
			rep.Deferred = len(todo) - i
			break
		}
		rep.Queried++
		wrote, closed, err := h.mend(ctx, id, waits[id].run, queued[id])
		if err != nil {
			h.Log.Warn("approval queue not mended", "claim", id, "error", err)
			continue
		}
		if wrote {
			rep.Written++
		}
		if closed {
			rep.Closed++
		}
	}
	keep := h.KeepClosed
	if keep <= 0 {
		keep = 24 * time.Hour
	}
	n, err := h.Store.PruneQueue(ctx, time.Now().Add(-keep))
	if err != nil {
		return rep, err
	}
	rep.Pruned = int(n)
	if rep.Recounted, err = h.Store.RecountQueue(ctx); rep.Recounted > 0 {
		h.Log.Warn("approval queue counts set from its rows", "counts", rep.Recounted)
	}
	return rep, err
}

// mend asks the claim's workflow and writes what it says: its wait at its
// revision, or the row closed when the run waits no more.
func (h *Healer) mend(ctx context.Context, id, run string, q store.QueueRun) (wrote, closed bool, err error) {
	rec, err := h.Store.GetClaim(ctx, id)
	if err != nil {
		return false, false, err
	}
	// The run the claim belongs to is the one the system of record names.
	owner := rec.RunID
	if run != "" && run != owner {
		return false, false, fmt.Errorf("visibility lists run %s, the claims store names run %s: left for the next pass", run, owner)
	}
	closeRow := func() (bool, bool, error) {
		if q.RunID == "" {
			return false, false, nil
		}
		return false, true, h.Store.CloseQueueEntry(ctx, id, q.RunID, q.Rev)
	}
	// A closed run still answers queries, with its state when it closed (a
	// terminated wait says "waiting"): ask the server whether it runs first.
	d, err := h.Temporal.DescribeWorkflow(ctx, id, owner)
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return closeRow()
	case err != nil:
		return false, false, err
	case d.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return closeRow()
	}
	val, err := h.Temporal.QueryWorkflow(ctx, id, owner, workflows.QueryStatus)
	if err != nil {
		return false, false, err
	}
	var st workflows.Status
	if err := val.Get(&st); err != nil {
		return false, false, err
	}
	if (st.State != workflows.StatusWaiting && st.State != workflows.StatusEscalated) || st.Approval == nil || st.Approval.Decision != nil {
		return closeRow()
	}
	e, err := activities.QueueEntry(id, owner, true, *st.Approval)
	if err != nil {
		return false, false, err
	}
	ok, err := h.Store.PutQueueEntry(ctx, e)
	return ok, false, err
}

// waits lists the running claims visibility says wait for a decision.
func (h *Healer) waits(ctx context.Context) (map[string]visible, error) {
	out := map[string]visible{}
	dc := converter.GetDefaultDataConverter()
	var token []byte
	for {
		resp, err := h.Temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: h.Namespace,
			Query: waitingQuery, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("queueheal: list waits: %w", err)
		}
		for _, e := range resp.GetExecutions() {
			v := visible{run: e.GetExecution().GetRunId()}
			sa := e.GetSearchAttributes().GetIndexedFields()
			if p := sa[workflows.ClaimStatusKey.GetName()]; p != nil {
				_ = dc.FromPayload(p, &v.stage)
			}
			if p := sa[workflows.ApprovalDeadlineKey.GetName()]; p != nil {
				_ = dc.FromPayload(p, &v.deadline)
			}
			out[e.GetExecution().GetWorkflowId()] = v
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// sameMilli: visibility may keep a deadline less precisely than the queue.
func sameMilli(a, b time.Time) bool { return a.Sub(b).Abs() < time.Second }

// Run heals every interval until ctx ends: the cheap check each time, a
// full pass every full intervals.
func (h *Healer) Run(ctx context.Context, every time.Duration, full int) {
	t := time.NewTicker(every)
	defer t.Stop()
	for n := 0; ; n++ {
		pass := h.Check
		if full > 0 && n%full == 0 {
			pass = h.Heal
		}
		rep, err := pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			h.Log.Warn("approval queue heal failed", "error", err)
		case err == nil && !rep.Skipped && (rep.Written > 0 || rep.Closed > 0 || rep.Deferred > 0):
			h.Log.Info("approval queue healed", "waiting", rep.Waiting, "queued", rep.Queued, "queried", rep.Queried,
				"written", rep.Written, "closed", rep.Closed, "deferred", rep.Deferred)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
