package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// However many callers write at once, a SQLite store opens no more than
// sqliteConns connections: SQLite runs one writer at a time anyway (and
// readers beside it), and the rest wait in database/sql's pool instead of
// polling SQLite's lock
// (a worker parking 20,000 claims had 23 open).
func TestSQLiteOpensABoundedNumberOfConnections(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer s.Close()
	var most atomic.Int64
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			most.Store(max(most.Load(), int64(s.db.Stats().OpenConnections)))
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for w := range 48 {
		wg.Go(func() {
			for i := range 10 {
				e := QueueEntry{ClaimID: fmt.Sprintf("claim-%02d-%02d", w, i), RunID: "run-1", Rev: 1, Open: true,
					Stage: "waiting", Deadline: time.Now().Add(time.Hour), Currency: "usd", AmountMinor: 100_000,
					Quorum: 1, Summary: json.RawMessage(`{}`)}
				_, err := s.PutQueueEntry(ctx, e)
				assert.NoError(t, err)
				if _, err := s.GetClaim(ctx, "claim-none"); !errors.Is(err, ErrNotFound) {
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	<-watched
	assert.LessOrEqual(t, most.Load(), int64(sqliteConns), "connections open at once")
}
