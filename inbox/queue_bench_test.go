package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/store"
)

// The inbox's first page as adjuster-17 sees it, through HTTP, with 1,000
// and with 20,000 claims waiting (SQLite): `go test -bench FirstPage
// ./inbox`. The surge workload of make bench measures the same page of a
// real inbox process while a real worker holds the claims.
func BenchmarkFirstPage(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			ctx := context.Background()
			st, err := store.Open(filepath.Join(b.TempDir(), "claims.db"))
			require.NoError(b, err)
			defer st.Close()
			base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
			for i := range n {
				id := fmt.Sprintf("claim-%05d", i)
				a := approvals.Approval{Request: approvals.Request{ClaimID: id, PayeeName: "Ada Lovelace", AmountMinor: 184000,
					Currency: "usd", Reasons: []string{"above the auto-approve limit"}}, Stage: approvals.StageWaiting, Quorum: 1,
					Deadline: base.Add(time.Duration(i) * time.Second), Rev: 1}
				e, err := activities.QueueEntry(id, "run-"+id, true, a)
				require.NoError(b, err)
				_, err = st.PutQueueEntry(ctx, e)
				require.NoError(b, err)
			}
			ts, _ := testServer(b, sampleBook(b))
			ts.Config.Handler.(*server).queue = st
			c := browser(b)
			devSignIn(b, c, ts.URL, "adjuster-17")
			for b.Loop() {
				res, err := c.Get(ts.URL + "/")
				require.NoError(b, err)
				page := body(b, res)
				if res.StatusCode != http.StatusOK || !strings.Contains(page, `id="counts"`) {
					b.Fatalf("%s: %.300s", res.Status, page)
				}
			}
		})
	}
}
