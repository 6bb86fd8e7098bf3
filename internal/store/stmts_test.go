package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SQLite's statements are prepared once and reused, inside transactions
// too; a statement the database refuses is run unprepared and reports its
// own error; the cache stops growing at its bound, and the queries past it
// still run.
func TestSQLiteStatementsArePreparedOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer s.Close()
	require.NotNil(t, s.stmts)

	const q = `SELECT count(*) FROM claims WHERE id = ?`
	var n int
	require.NoError(t, s.queryRow(ctx, q, "claim-0001").Scan(&n))
	first := s.stmts.m[q]
	require.NotNil(t, first, "prepared on first use")
	require.NoError(t, s.queryRow(ctx, q, "claim-0002").Scan(&n))
	assert.Same(t, first, s.stmts.m[q], "and reused")

	tx, err := s.begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.queryRow(ctx, q, "claim-0003").Scan(&n))
	require.NoError(t, tx.Rollback())
	assert.Same(t, first, s.stmts.m[q], "a transaction uses the same statement")

	// A statement a transaction runs first is prepared apart, for next time.
	const inTx = `SELECT count(*) FROM claims WHERE status = ?`
	tx, err = s.begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.queryRow(ctx, inTx, "open").Scan(&n))
	require.NoError(t, tx.Rollback())
	require.Eventually(t, func() bool {
		s.stmts.mu.RLock()
		defer s.stmts.mu.RUnlock()
		return s.stmts.m[inTx] != nil
	}, 5*time.Second, time.Millisecond)

	err = s.queryRow(ctx, `SELECT nonsense FROM nowhere`).Scan(&n)
	require.ErrorContains(t, err, "no such table: nowhere", "the database's own error")
	assert.NotContains(t, s.stmts.m, `SELECT nonsense FROM nowhere`)

	long := `SELECT count(*) FROM claims WHERE id IN (?` + strings.Repeat(`, ?`, maxCachedPlaceholders) + `)`
	args := make([]any, maxCachedPlaceholders+1)
	for i := range args {
		args[i] = fmt.Sprintf("claim-%04d", i)
	}
	require.NoError(t, s.queryRow(ctx, long, args...).Scan(&n))
	assert.NotContains(t, s.stmts.m, long, "a list of arguments past the bound is not kept")

	for i := len(s.stmts.m); i < maxCachedStatements+10; i++ {
		require.NoError(t, s.queryRow(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&n))
		assert.Equal(t, i, n)
	}
	assert.Len(t, s.stmts.m, maxCachedStatements)

	require.NoError(t, s.Close())
	assert.Empty(t, s.stmts.m, "closing the store releases them")
}

// PostgreSQL's driver caches its statements itself: the store keeps none.
func TestPostgresKeepsNoStatementCache(t *testing.T) {
	for _, b := range backends(t) {
		if b.name != "postgres" {
			continue
		}
		s, err := Open(b.fresh(t))
		require.NoError(t, err)
		defer s.Close()
		assert.Nil(t, s.stmts)
	}
}
