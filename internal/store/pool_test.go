package store

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A SQLite store keeps the connections its callers use at once: a new one
// opens the file, runs the pragmas and parses the schema, so closing one
// after each use (database/sql keeps two idle by default) cost a busy
// worker 13 % of its CPU.
func TestSQLiteKeepsTheConnectionsABurstUses(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer s.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if _, err := s.GetClaim(ctx, "claim-none"); !errors.Is(err, ErrNotFound) {
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	st := s.db.Stats()
	assert.Zero(t, st.MaxIdleClosed, "connections closed because too many were idle: %+v", st)
	assert.LessOrEqual(t, st.OpenConnections, 8)
}
