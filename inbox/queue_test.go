package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// The inbox lists from the approval queue what mayDecide, asked of every
// claim's status, would: on a mixed population (stages, currencies,
// amounts about each limit, four-eyes requests with a vote, hand-offs,
// waits that ended), for every approver of a directory with mixed roles
// and limits, the rows written the way the workflow writes them
// (activities.QueueEntry), every filter, a page at a time.
func TestTheQueueListsWhatMayDecideWould(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer st.Close()
	dir := authority.Directory{
		{ID: "adj-usd", Role: authority.Adjuster, Limits: map[string]int64{"usd": 150000}},
		{ID: "adj-both", Role: authority.Adjuster, Limits: map[string]int64{"usd": 500000, "eur": 450000}},
		{ID: "adj-none", Role: authority.Adjuster},
		{ID: "sup", Role: authority.Supervisor, Limits: map[string]int64{"usd": 5000000, "eur": 4500000}},
		{ID: "sup-eur", Role: authority.Supervisor, Limits: map[string]int64{"eur": 100000}},
	}
	rng := rand.New(rand.NewPCG(42, 2026))
	amounts := []int64{100000, 150000, 150001, 450000, 500000, 500001, 4500000, 5000001}
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	statuses := map[string]workflows.Status{}
	for i := range 400 {
		id := fmt.Sprintf("claim-%04d", i)
		cur := []string{"usd", "eur", "gbp"}[rng.IntN(3)]
		a := &approvals.Approval{Request: approvals.Request{ClaimID: id, PayeeName: "Payee " + id, AmountMinor: amounts[rng.IntN(len(amounts))],
			Currency: cur, Reasons: []string{"above the auto-approve limit"}}, Stage: approvals.StageWaiting, Quorum: 1 + rng.IntN(2),
			Deadline: base.Add(time.Duration(rng.IntN(5000)) * time.Minute), Rev: int64(1 + rng.IntN(4))}
		state := workflows.StatusWaiting
		if rng.IntN(4) == 0 {
			a.Stage, state = approvals.StageEscalated, workflows.StatusEscalated
		}
		if a.Quorum == 2 && rng.IntN(2) == 0 {
			a.Votes = []approvals.Decision{{Verdict: approvals.Approve, Approver: dir[rng.IntN(len(dir))].ID}}
		}
		if rng.IntN(5) == 0 {
			a.Handoffs = []approvals.HandedOn{{From: "adj-both", To: dir[rng.IntN(len(dir))].ID, At: base}}
		}
		open := true
		if rng.IntN(10) == 0 { // ended: decided, or the run is over
			a.Decision = &approvals.Decision{Verdict: approvals.Reject, Approver: "sup"}
			state, open = workflows.StatusRejected, false
		}
		statuses[id] = workflows.Status{ClaimID: id, State: state, Approval: a}
		e, err := activities.QueueEntry(id, "run-"+id, open, *a)
		require.NoError(t, err)
		ok, err := st.PutQueueEntry(ctx, e)
		require.NoError(t, err)
		require.True(t, ok)
	}

	filters := []struct {
		name string
		keep func(*approvals.Approval, authority.Approver) bool
		f    func(*store.QueueFilter, authority.Approver)
	}{
		{"all", func(*approvals.Approval, authority.Approver) bool { return true }, func(*store.QueueFilter, authority.Approver) {}},
		{"escalated", func(a *approvals.Approval, _ authority.Approver) bool { return a.Stage == approvals.StageEscalated },
			func(f *store.QueueFilter, _ authority.Approver) { f.Stage = "escalated" }},
		{"usd 1,500.01–5,000.00", func(a *approvals.Approval, _ authority.Approver) bool {
			return a.Request.Currency == "usd" && a.Request.AmountMinor >= 150001 && a.Request.AmountMinor <= 500000
		}, func(f *store.QueueFilter, _ authority.Approver) {
			f.Currency, f.MinMinor, f.MaxMinor = "usd", 150001, 500000
		}},
		{"handed to me", func(a *approvals.Approval, ap authority.Approver) bool { return a.AssignedTo() == ap.ID },
			func(f *store.QueueFilter, ap authority.Approver) { f.AssignedTo = ap.ID }},
	}
	for _, ap := range dir {
		for _, fl := range filters {
			var want []string
			for id, s := range statuses {
				if ok, _ := mayDecide(ap, s); ok && fl.keep(s.Approval, ap) {
					want = append(want, id)
				}
			}
			f := store.QueueFilter{Viewer: store.ViewerOf(ap)}
			fl.f(&f, ap)
			var got []string
			var after *store.QueueCursor
			var last time.Time
			for {
				page, err := st.ApprovalQueue(ctx, f, after, 37)
				require.NoError(t, err)
				for _, e := range page {
					require.False(t, e.Deadline.Before(last), "%s/%s: oldest deadline first", ap.ID, fl.name)
					last = e.Deadline
					got = append(got, e.ClaimID)
				}
				if len(page) < 37 {
					break
				}
				after = &store.QueueCursor{Deadline: page[36].Deadline, ClaimID: page[36].ClaimID}
			}
			slices.Sort(want)
			slices.Sort(got)
			assert.Equal(t, want, got, "%s, %s", ap.ID, fl.name)
			c, err := st.CountQueue(ctx, f)
			require.NoError(t, err)
			assert.Equal(t, len(want), c.Matching, "%s, %s: count", ap.ID, fl.name)
		}
	}
	// The directory's approvers all see something of this population, and
	// the one without limits nothing.
	c, err := st.CountQueue(ctx, store.QueueFilter{Viewer: store.ViewerOf(dir[2])})
	require.NoError(t, err)
	assert.Zero(t, c.Total)
}
