package main

import (
	"flag"
	"io"
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

// Settings the peers workload cannot measure with are refused before the
// bench starts anything, naming the flag; the defaults pass.
func TestPeersRefusesSettingsItCannotMeasure(t *testing.T) {
	parse := func(args ...string) *peersWorkload {
		p := &peersWorkload{}
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p.flags(fs)
		require.NoError(t, fs.Parse(args))
		return p
	}
	require.NoError(t, parse().preflight())
	require.NoError(t, parse("-peers-claims", "10", "-peers-approvals", "3", "-peers-parked", "20", "-peers-crash-claims", "10").preflight(), "CI's short form")
	for flagName, want := range map[string]string{
		"-peers-crash-claims": "-peers-crash-claims must be at least 1, not 0", "-peers-claims": "-peers-claims must be at least 1, not 0",
		"-peers-crash-batch": "-peers-crash-batch must be at least 1, not 0",
	} {
		err := parse(flagName, "0").preflight()
		require.Error(t, err, flagName)
		assert.Contains(t, err.Error(), want)
	}
	err := parse("-peers", "dbos,camunda").preflight()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-peers names "camunda"`)
}

// A series nothing was measured into (a row whose claims all failed, a
// count of zero) has no summary, and summarising the rest goes on.
func TestSummarizeSkipsAnEmptySeries(t *testing.T) {
	r := &results{}
	r.setSamples("peers_dbos_restart_done_ms", nil)
	r.add("claims_per_s", 20)
	r.summarize()
	assert.NotContains(t, r.Summary, "peers_dbos_restart_done_ms")
	assert.Equal(t, 20.0, r.Summary["claims_per_s"].Median)
}
