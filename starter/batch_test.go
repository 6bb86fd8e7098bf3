package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A batch never runs more than its concurrency at once, counts every
// outcome, and stops feeding claims when told (those under way finish).
func TestBatchBoundsAndStops(t *testing.T) {
	var running, peak atomic.Int64
	one := func(i int) outcome {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(time.Millisecond)
		running.Add(-1)
		if i%10 == 0 {
			return existed
		}
		return started
	}
	var progress lockedWriter
	var sb strings.Builder
	progress.w = &sb
	b := &batch{total: 200}
	b.run(context.Background(), 4, one, &progress, 5*time.Millisecond)
	assert.LessOrEqual(t, peak.Load(), int64(4))
	assert.Equal(t, 180, b.count(started))
	assert.Equal(t, 20, b.count(existed))
	assert.Equal(t, "180 started, 20 already started", b.summary())
	assert.Contains(t, sb.String(), "/200 claims (")

	stop, cancel := context.WithCancel(context.Background())
	b = &batch{total: 1000}
	var calls, atStop atomic.Int64
	b.run(stop, 2, func(int) outcome {
		if calls.Add(1) == 10 {
			cancel()
			atStop.Store(calls.Load())
		}
		return started
	}, nil, 0)
	// Once stopped, the batch hands out at most the claim a send already
	// under way carries; the other worker may hold one it took before.
	assert.LessOrEqual(t, b.done(), int(atStop.Load())+2, "a stopped batch takes no more claims")
	assert.Equal(t, int(calls.Load()), b.done(), "and counts every one it took")
}

func TestClaimFilesExpandsDirectories(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.json", "a.json", "photo.jpg"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("{}"), 0o600))
	}
	got, err := claimFiles([]string{"one.json", dir})
	require.NoError(t, err)
	assert.Equal(t, []string{"one.json", filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")}, got)

	_, err = claimFiles([]string{t.TempDir()})
	assert.ErrorContains(t, err, "no claim files (*.json)")
}
