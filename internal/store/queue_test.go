package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The approval queue answers "what may this approver decide now, oldest
// deadline first" from its rows alone: stage for the role, the limit in
// each currency, four-eyes voters, hand-offs; pages by deadline; counts.
func TestApprovalQueueListsWhatAnApproverMayDecide(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		put := func(e QueueEntry) {
			t.Helper()
			if e.RunID == "" {
				e.RunID = "run-" + e.ClaimID
			}
			if e.Summary == nil {
				e.Summary = json.RawMessage(`{"claim":"` + e.ClaimID + `"}`)
			}
			ok, err := s.PutQueueEntry(ctx, e)
			require.NoError(t, err)
			require.True(t, ok, "%s rev %d applied", e.ClaimID, e.Rev)
		}
		// 60 waits in usd, 1 minute apart, amounts 100.00 to 6,000.00.
		for i := range 60 {
			put(QueueEntry{ClaimID: fmt.Sprintf("claim-%03d", i), Rev: 1, Open: true, Stage: "waiting",
				Deadline: base.Add(time.Duration(60-i) * time.Minute), Currency: "usd", AmountMinor: int64(i+1) * 10000, Quorum: 1})
		}
		put(QueueEntry{ClaimID: "claim-eur", Rev: 1, Open: true, Stage: "waiting", Deadline: base, Currency: "eur", AmountMinor: 50000, Quorum: 1})
		put(QueueEntry{ClaimID: "claim-esc", Rev: 2, Open: true, Stage: "escalated", Deadline: base, Currency: "usd", AmountMinor: 50000, Quorum: 1})
		put(QueueEntry{ClaimID: "claim-4eyes", Rev: 2, Open: true, Stage: "waiting", Deadline: base, Currency: "usd", AmountMinor: 50000,
			Quorum: 2, Voters: []string{"ana"}})
		put(QueueEntry{ClaimID: "claim-handed", Rev: 2, Open: true, Stage: "waiting", Deadline: base.Add(time.Hour), Currency: "usd",
			AmountMinor: 50000, Quorum: 1, AssignedTo: "ben"})
		put(QueueEntry{ClaimID: "claim-done", Rev: 3, Open: false, Stage: "waiting", Deadline: base, Currency: "usd", AmountMinor: 100, Quorum: 1})

		ana := &QueueViewer{ID: "ana", Limits: map[string]int64{"usd": 150000}}
		ben := &QueueViewer{ID: "ben", Limits: map[string]int64{"usd": 150000, "eur": 100000}}
		sup := &QueueViewer{ID: "sue", Supervisor: true, Limits: map[string]int64{"usd": 1 << 40}}
		ids := func(es []QueueEntry) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.ClaimID)
			}
			return out
		}
		// ana: usd up to 1,500.00, waiting only, not the four-eyes wait she voted on.
		list, err := s.ApprovalQueue(ctx, QueueFilter{Viewer: ana}, nil, 100)
		require.NoError(t, err)
		assert.Equal(t, []string{"claim-014", "claim-013", "claim-012", "claim-011", "claim-010", "claim-009", "claim-008", "claim-007",
			"claim-006", "claim-005", "claim-004", "claim-003", "claim-002", "claim-001", "claim-000", "claim-handed"}, ids(list))
		// ben: the eur one too, and the four-eyes wait, with its voter.
		list, err = s.ApprovalQueue(ctx, QueueFilter{Viewer: ben, MaxMinor: 60000}, nil, 100)
		require.NoError(t, err)
		assert.Equal(t, []string{"claim-4eyes", "claim-eur", "claim-005", "claim-004", "claim-003", "claim-002", "claim-001", "claim-000", "claim-handed"}, ids(list))
		assert.Equal(t, []string{"ana"}, list[0].Voters)
		// The supervisor sees escalated waits; nobody sees a closed one.
		list, err = s.ApprovalQueue(ctx, QueueFilter{Viewer: sup, Stage: "escalated"}, nil, 100)
		require.NoError(t, err)
		assert.Equal(t, []string{"claim-esc"}, ids(list))

		// Pages by deadline: 25 at a time, each after the last one's.
		var seen []string
		var after *QueueCursor
		for {
			page, err := s.ApprovalQueue(ctx, QueueFilter{Viewer: sup}, after, 25)
			require.NoError(t, err)
			seen = append(seen, ids(page)...)
			if len(page) < 25 {
				break
			}
			last := page[len(page)-1]
			after = &QueueCursor{Deadline: last.Deadline, ClaimID: last.ClaimID}
		}
		assert.Len(t, seen, 63, "60 + escalated + four eyes + handed: every open usd wait, once")
		assert.Equal(t, "claim-4eyes", seen[0])
		assert.Equal(t, "claim-handed", seen[len(seen)-1])

		c, err := s.CountQueue(ctx, QueueFilter{Viewer: ben, AssignedTo: "ben"})
		require.NoError(t, err)
		assert.Equal(t, QueueCounts{Total: 18, ByStage: map[string]int{"waiting": 18}, AssignedToYou: 1, Matching: 1}, c)
		c, err = s.CountQueue(ctx, QueueFilter{})
		require.NoError(t, err)
		assert.Equal(t, 64, c.Total)
		assert.Equal(t, map[string]int{"waiting": 63, "escalated": 1}, c.ByStage)

		// An older revision of the same run never overwrites a newer one;
		// the next run's first write replaces the row.
		ok, err := s.PutQueueEntry(ctx, QueueEntry{ClaimID: "claim-4eyes", RunID: "run-claim-4eyes", Rev: 1, Open: true, Stage: "waiting",
			Deadline: base, Currency: "usd", AmountMinor: 50000, Quorum: 2, Summary: json.RawMessage(`{}`)})
		require.NoError(t, err)
		assert.False(t, ok)
		put(QueueEntry{ClaimID: "claim-done", RunID: "run-2", Rev: 1, Open: true, Stage: "waiting", Deadline: base, Currency: "usd", AmountMinor: 100, Quorum: 1})
		open, err := s.OpenQueue(ctx)
		require.NoError(t, err)
		assert.Len(t, open, 65)
		got := open["claim-4eyes"]
		got.Updated = time.Time{}
		assert.Equal(t, QueueRun{RunID: "run-claim-4eyes", Rev: 2, Stage: "waiting", Deadline: base}, got)
		assert.Equal(t, "run-2", open["claim-done"].RunID)

		// The healer closes a wait whose run is over; another run's row stays.
		require.NoError(t, s.CloseQueueEntry(ctx, "claim-4eyes", "run-claim-4eyes", 1)) // a newer revision holds it
		assert.Contains(t, func() map[string]QueueRun { q, _ := s.OpenQueue(ctx); return q }(), "claim-4eyes")
		require.NoError(t, s.CloseQueueEntry(ctx, "claim-4eyes", "run-claim-4eyes", 2))
		require.NoError(t, s.CloseQueueEntry(ctx, "claim-done", "run-old", 1))
		open, err = s.OpenQueue(ctx)
		require.NoError(t, err)
		assert.NotContains(t, open, "claim-4eyes")
		assert.Contains(t, open, "claim-done")
		n, err := s.PruneQueue(ctx, time.Now().Add(time.Minute))
		require.NoError(t, err)
		assert.EqualValues(t, 1, n, "the one closed row")

		// Bad rows are refused.
		_, err = s.PutQueueEntry(ctx, QueueEntry{ClaimID: "x", RunID: "r", Summary: json.RawMessage(`{`)})
		assert.ErrorContains(t, err, "not JSON")
		_, err = s.PutQueueEntry(ctx, QueueEntry{ClaimID: "x", RunID: "r", Summary: json.RawMessage(`"` + string(make([]byte, MaxQueueSummary)) + `"`)})
		assert.ErrorContains(t, err, "at most")
	})
}
