package store

import (
	"context"
	"testing"

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
		require.NoError(t, s.RecordBuild(ctx, "durableclaims", "exe-1"))
		require.NoError(t, s.RecordBuild(ctx, "durableclaims", "exe-1"))
		known, err = s.KnownBuild(ctx, "durableclaims", "exe-1")
		require.NoError(t, err)
		assert.True(t, known)
		known, err = s.KnownBuild(ctx, "other", "exe-1")
		require.NoError(t, err)
		assert.False(t, known, "a build is known per deployment")
	})
}
