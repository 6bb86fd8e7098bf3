package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A build is known once a worker of it recorded itself, per deployment,
// and recording it again (every start) keeps one row.
func TestBuildsAWorkerRecorded(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Store, _ string) {
		ctx := context.Background()
		known, err := s.KnownBuild(ctx, "durableclaims", "exe-1")
		require.NoError(t, err)
		assert.False(t, known)
		first, err := s.FirstBuild(ctx, "durableclaims")
		require.NoError(t, err)
		assert.True(t, first.IsZero(), "no build yet")
		before := time.Now().Add(-time.Second)
		require.NoError(t, s.RecordBuild(ctx, "durableclaims", "exe-1"))
		first, err = s.FirstBuild(ctx, "durableclaims")
		require.NoError(t, err)
		assert.WithinRange(t, first, before, time.Now().Add(time.Second))
		require.NoError(t, s.RecordBuild(ctx, "durableclaims", "exe-2"))
		again, err := s.FirstBuild(ctx, "durableclaims")
		require.NoError(t, err)
		assert.Equal(t, first, again, "the first build's start stays the first")
		require.NoError(t, s.RecordBuild(ctx, "durableclaims", "exe-1"))
		known, err = s.KnownBuild(ctx, "durableclaims", "exe-1")
		require.NoError(t, err)
		assert.True(t, known)
		known, err = s.KnownBuild(ctx, "other", "exe-1")
		require.NoError(t, err)
		assert.False(t, known, "a build is known per deployment")
	})
}
