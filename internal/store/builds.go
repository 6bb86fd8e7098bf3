package store

import (
	"context"
	"fmt"
	"time"
)

// RecordBuild notes that build ran as a worker of deployment on this store
// (a worker calls it as it starts). Only a process that holds the store
// can: whoever merely reaches the Temporal frontend cannot.
func (s *Store) RecordBuild(ctx context.Context, deployment, build string) error {
	now := s.ts(s.stamp())
	if _, err := s.exec(ctx, `INSERT INTO worker_builds (deployment, build_id, first_seen, last_seen) VALUES (?, ?, ?, ?)
		ON CONFLICT (deployment, build_id) DO UPDATE SET last_seen = excluded.last_seen`, deployment, build, now, now); err != nil {
		return fmt.Errorf("store: record build %s of %s: %w", build, deployment, err)
	}
	return nil
}

// KnownBuild says whether build ever ran as a worker of deployment on this
// store.
func (s *Store) KnownBuild(ctx context.Context, deployment, build string) (bool, error) {
	var n int
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM worker_builds WHERE deployment = ? AND build_id = ?`, deployment, build).Scan(&n); err != nil {
		return false, fmt.Errorf("store: build %s of %s: %w", build, deployment, err)
	}
	return n > 0, nil
}

// FirstBuild is when the first build recorded for deployment ran (the
// worker records its signing builds under a name of their own: from then
// on, completions are signed, worker/provenance). Zero when none is.
func (s *Store) FirstBuild(ctx context.Context, deployment string) (time.Time, error) {
	var first stamp
	if err := s.queryRow(ctx, `SELECT MIN(first_seen) FROM worker_builds WHERE deployment = ?`, deployment).Scan(&first); err != nil {
		return time.Time{}, fmt.Errorf("store: first build of %s: %w", deployment, err)
	}
	return first.Time, nil
}
