package store

import (
	"context"
	"database/sql"
	"strings"
	"sync"
)

// stmtCache keeps each statement the store runs prepared, once per
// connection, for SQLite: modernc.org/sqlite parses a query anew on every
// call, which was 12 % of the claims worker's CPU on the auto-approve
// path (docs/performance.md), while pgx caches its statements itself. A
// query that cannot be prepared is run unprepared, so that its own error
// is the one returned. The queries are the store's constants and a few
// built from column lists; maxCachedStatements bounds the cache should a
// query ever be built from its arguments.
type stmtCache struct {
	db      *sql.DB
	ctx     context.Context // for the statements prepared apart; ended when the cache closes
	cancel  context.CancelFunc
	mu      sync.RWMutex
	m       map[string]*sql.Stmt
	warming map[string]bool // being prepared apart for a transaction
	warmers sync.WaitGroup
}

const maxCachedStatements = 512

// maxCachedPlaceholders keeps a query built from a list of its arguments
// (IN (?, ?, …)) out of the cache past that length: each length is a
// statement of its own.
const maxCachedPlaceholders = 16

func newStmtCache(db *sql.DB) *stmtCache {
	ctx, cancel := context.WithCancel(context.Background())
	return &stmtCache{db: db, ctx: ctx, cancel: cancel, m: map[string]*sql.Stmt{}, warming: map[string]bool{}}
}

// get is q prepared, or nil: no cache (PostgreSQL), a full cache, or a
// query the database refuses to prepare. Preparing takes a connection
// from the pool, so a transaction, which holds one already, asks with
// forTx: a statement not yet prepared is then prepared apart, for the
// next time, and this time runs unprepared (else transactions holding
// every connection, and the write lock, would wait for one another).
func (c *stmtCache) get(ctx context.Context, q string, forTx bool) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	st, full := c.m[q], len(c.m) >= maxCachedStatements
	c.mu.RUnlock()
	if st != nil || full || strings.Count(q, "?") > maxCachedPlaceholders {
		return st
	}
	if forTx {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.warming[q] && c.ctx.Err() == nil {
			c.warming[q] = true
			c.warmers.Go(func() {
				c.prepare(c.ctx, q)
				c.mu.Lock()
				delete(c.warming, q)
				c.mu.Unlock()
			})
		}
		return nil
	}
	return c.prepare(ctx, q)
}

func (c *stmtCache) prepare(ctx context.Context, q string) *sql.Stmt {
	st, err := c.db.PrepareContext(ctx, q)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if had := c.m[q]; had != nil || c.ctx.Err() != nil || len(c.m) >= maxCachedStatements {
		st.Close()
		return had
	}
	c.m[q] = st
	return st
}

// close releases every prepared statement, once none is being prepared
// apart; the store is closing.
func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.cancel() // closed; a statement prepared apart may be waiting for a connection
	c.mu.Unlock()
	c.warmers.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}
