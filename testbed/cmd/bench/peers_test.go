package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A kill point's state file is a line a kill; durableclaims' worker names
// points (CLAIM:STEP:PHASE), the peers claims.
func TestFiredKillsReadsALineAKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	got, err := firedKills(path)
	require.NoError(t, err)
	assert.Empty(t, got, "no kill yet")
	require.NoError(t, os.WriteFile(path, []byte("a-1 a-2 a-3\n\nb-1:6:after-effect b-2:6:after-effect\nc-1\n"), 0o644))
	got, err = firedKills(path)
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"a-1", "a-2", "a-3"}, {"b-1", "b-2"}, {"c-1"}}, got)
}

func TestKillBatchIsAtMostTheClaimsInFlight(t *testing.T) {
	assert.Equal(t, 10, peerOptions{crashBatch: 10, crashConcurrency: 10, crashClaims: 100}.batch())
	assert.Equal(t, 4, peerOptions{crashBatch: 10, crashConcurrency: 4, crashClaims: 100}.batch())
	assert.Equal(t, 1, peerOptions{crashBatch: 10, crashConcurrency: 10, crashClaims: 1}.batch())
	assert.Equal(t, 1, peerOptions{crashBatch: 0, crashConcurrency: 10, crashClaims: 100}.batch())
}
