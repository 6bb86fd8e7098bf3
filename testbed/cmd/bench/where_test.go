package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A `go tool pprof -traces` listing in its own format: a header, then
// blocks of "<value> <leaf>" and the frames to the root.
const tracesListing = `File: worker
Type: cpu
-----------+-------------------------------------------------------
      30ms   modernc.org/sqlite/lib.sqlite3Parser
             github.com/durableclaims/durableclaims/internal/store.(*Store).GetClaim
             github.com/durableclaims/durableclaims/activities.(*Activities).authorise
             github.com/durableclaims/durableclaims/activities.(*Activities).PayClaimant
             go.temporal.io/sdk/internal.(*activityTaskHandlerImpl).Execute
-----------+-------------------------------------------------------
      20ms   crypto/aes.encryptBlock
             github.com/durableclaims/durableclaims/internal/codec.(*Codec).Encode
             go.temporal.io/sdk/internal.(*activityTaskHandlerImpl).Execute
-----------+-------------------------------------------------------
      10ms   encoding/json.(*decodeState).object
             github.com/durableclaims/durableclaims/workflows.ClaimWorkflow
             go.temporal.io/sdk/internal.(*coroutineState).initialYield
-----------+-------------------------------------------------------
      40ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
`

func TestWhereSortsEachSampleByStepAndPart(t *testing.T) {
	cells, total := classifyWhere(parseTraces([]byte(tracesListing)))
	require.Equal(t, 100*time.Millisecond, total)
	require.Equal(t, map[whereCell]time.Duration{
		{"PayClaimant", "store"}: 30 * time.Millisecond, // the outermost activity is the step
		{"activity", "crypto"}:   20 * time.Millisecond, // encoding a result, after the activity returned
		{"workflow", "encoding"}: 10 * time.Millisecond,
		{"gc", "gc"}:             40 * time.Millisecond,
	}, cells)
}

func TestWherePrintsMillisecondsAClaim(t *testing.T) {
	r := &results{Values: map[string]float64{"where_worker_ms": 10,
		"where_PayClaimant__store_ms": 3, "where_activity__crypto_ms": 2, "where_workflow__encoding_ms": 1, "where_gc__gc_ms": 4}}
	var out bytes.Buffer
	r.printWhere(&out)
	require.Contains(t, out.String(), "| garbage collection | 4.00 |")
	require.Contains(t, out.String(), "| `PayClaimant` | 3.00 |")
	require.Contains(t, out.String(), "| **all** | **10.00** |")
}

func TestWriteDocsReplacesOnlyItsSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	before := "# P\n\nprose\n\n<!-- bench:floor -->\nold table\n<!-- /bench:floor -->\n\nmore prose\n"
	require.NoError(t, os.WriteFile(path, []byte(before), 0o644))
	r := &results{Date: "2026-12-07T06:30:00Z", Machine: "2 cores", Flags: []string{"-only", "floor"},
		Values: map[string]float64{"where_worker_ms": 10, "where_gc__gc_ms": 10}}
	require.NoError(t, r.writeDocs(path))
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(after), "# P\n\nprose\n\n<!-- bench:floor -->\n*Written by `bin/bench -only floor` (2026-12-07 06:30 UTC, 2 cores")
	require.NotContains(t, string(after), "old table")
	require.Contains(t, string(after), "<!-- /bench:floor -->\n\nmore prose\n")

	require.NoError(t, os.WriteFile(path, []byte("no markers\n"), 0o644))
	require.ErrorContains(t, r.writeDocs(path), "want one")
}
