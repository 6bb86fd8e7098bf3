package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
)

func TestPriorClaimsByEmailOrAccountUsingTheIndexes(t *testing.T) {
	eachBackend(t, priorClaimsUsingTheIndexes)
}

func priorClaimsUsingTheIndexes(t *testing.T, s *Store, _ string) {
	ctx := context.Background()
	put := func(id, email, account string) {
		_, _, err := s.PutClaim(ctx, claim.Claim{ID: id, PolicyID: "pol-1001", AmountMinor: 100, Currency: "usd",
			Claimant: claim.Claimant{Name: "n", Email: email, StripeAccount: account}})
		require.NoError(t, err)
	}
	put("a-1", "ada@example.com", "acct_1Ada")
	put("a-2", "ada@example.com", "acct_1Other") // same e-mail
	put("a-3", "ada.l@example.com", "acct_1Ada") // same account
	put("b-1", "bob@example.com", "acct_1Bob")

	prior, total, capped, err := s.PriorClaims(ctx, "a-1", "ada@example.com", "acct_1Ada", 5)
	require.NoError(t, err)
	assert.Equal(t, 2, total)
	assert.False(t, capped)
	var ids []string
	for _, p := range prior {
		ids = append(ids, p.ClaimID)
		assert.Equal(t, int64(100), p.AmountMinor)
		assert.Equal(t, StatusOpen, p.Status)
	}
	assert.ElementsMatch(t, []string{"a-2", "a-3"}, ids, "either the e-mail or the account matches; the claim itself is left out")

	for i := range PriorClaimsCountCap + 5 {
		put(fmt.Sprintf("c-%03d", i), "carol@example.com", "acct_1Carol")
	}
	prior, total, capped, err = s.PriorClaims(ctx, "c-000", "carol@example.com", "acct_1Carol", 3)
	require.NoError(t, err)
	assert.Len(t, prior, 3)
	assert.Equal(t, PriorClaimsCountCap, total)
	assert.True(t, capped, "the count stops at the cap")

	n, err := s.CountPriorClaims(ctx, "a-1", "ada@example.com", "acct_1Ada", time.Now().Add(-time.Hour), time.Time{})
	require.NoError(t, err)
	assert.Equal(t, 2, n, "within the window")
	n, err = s.CountPriorClaims(ctx, "a-1", "ada@example.com", "acct_1Ada", time.Now().Add(time.Hour), time.Time{})
	require.NoError(t, err)
	assert.Zero(t, n, "none registered since a time to come")
	n, err = s.CountPriorClaims(ctx, "c-000", "carol@example.com", "acct_1Carol", time.Time{}, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, PriorClaimsCountCap, n, "capped")

	assert.Contains(t, queryPlan(t, s, `SELECT id FROM claims WHERE `+s.d.claimant("email")+` = ? AND id <> ?`, "x", "y"),
		"claims_by_email", "no scan of every claim per tool call")
	assert.Contains(t, queryPlan(t, s, `SELECT id FROM claims WHERE `+s.d.claimant("stripe_account")+` = ? AND id <> ?`, "x", "y"),
		"claims_by_account")
}

// queryPlan is the backend's plan for q. On PostgreSQL, sequential scans
// are switched off for it: on a table this small the planner would rightly
// prefer one, and the question is whether the index can serve the query.
func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	explain := "EXPLAIN QUERY PLAN "
	if s.d.name == "postgres" {
		_, err := tx.ExecContext(ctx, "SET LOCAL enable_seqscan = off")
		require.NoError(t, err)
		explain = "EXPLAIN "
	}
	rows, err := tx.QueryContext(ctx, explain+s.d.rebind(q), args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var plan string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		plan += fmt.Sprint(vals...) + "\n"
	}
	require.NoError(t, rows.Err())
	return plan
}
