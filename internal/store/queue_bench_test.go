package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// The inbox's two questions of a queue of 20,000 waiting claims (SQLite):
// the first page, and the counts. `go test -bench Queue ./internal/store`.
func BenchmarkQueue(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "claims.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	summary := json.RawMessage(`{"request":{"payee_name":"Ada Lovelace","amount_minor":184000,"currency":"usd","reasons":["above the auto-approve limit"]}}`)
	for i := range 20000 {
		e := QueueEntry{ClaimID: fmt.Sprintf("claim-%05d", i), RunID: "run", Rev: 1, Open: true, Stage: "waiting",
			Deadline: base.Add(time.Duration(i) * time.Second), Currency: "usd", AmountMinor: 184000, Quorum: 1, Summary: summary}
		if i%10 == 0 {
			e.Quorum, e.Voters = 2, []string{"adjuster-9"}
		}
		if _, err := s.PutQueueEntry(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	f := QueueFilter{Viewer: &QueueViewer{ID: "adjuster-17", Limits: map[string]int64{"usd": 500000, "eur": 450000}}}
	b.Run("first page", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.ApprovalQueue(ctx, f, nil, 51); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("counts", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.CountQueue(ctx, f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
