package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// Documents go to the blob store and the workflow carries references, so a
// claim with a 10 MiB photo has the same history size as one with 1 KiB.
func TestDocumentsStayOutOfHistory(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	sizes := map[string]int64{}
	for _, c := range []struct {
		id   string
		size int
	}{{"claim-e2e-doc-1k", 1 << 10}, {"claim-e2e-doc-10m", 10 << 20}} {
		dir := t.TempDir()
		photo := make([]byte, c.size)
		_, err := rand.Read(photo)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "photo.jpg"), photo, 0o644))
		file := filepath.Join(dir, c.id+".json")
		require.NoError(t, os.WriteFile(file, []byte(fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001",
			"claimant":{"name":"Ada Lovelace","email":"ada@example.com","stripe_account":"acct_1Ada"},
			"amount":"640.00","currency":"usd","description":"A burst pipe flooded the kitchen overnight",
			"documents":[{"name":"photo.jpg","path":"photo.jpg"}]}`, c.id)), 0o644))
		w.start(file)
		r := w.result(c.id)
		require.Equal(t, workflows.StatusPaid, r.Status)
		sizes[c.id] = w.describe(c.id).GetWorkflowExecutionInfo().GetHistorySizeBytes()
	}
	small, large := float64(sizes["claim-e2e-doc-1k"]), float64(sizes["claim-e2e-doc-10m"])
	t.Logf("history: %.0f bytes with a 1 KiB document, %.0f bytes with a 10 MiB one", small, large)
	assert.InDelta(t, small, large, small*0.10, "history sizes within 10%%")
	assert.Less(t, large, float64(64<<10), "within the 64 KiB history budget")

	// A document over the limit is refused before anything starts.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "huge.jpg"), bytes.Repeat([]byte{1}, 26<<20), 0o644))
	file := filepath.Join(dir, "claim-e2e-doc-huge.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"claim_id":"claim-e2e-doc-huge","policy_id":"pol-1001",
		"claimant":{"name":"A","email":"a@example.com","stripe_account":"acct_1A"},"amount":"1.00","currency":"usd",
		"documents":[{"name":"huge.jpg","path":"huge.jpg"}]}`), 0o644))
	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "starter"), file)
	assert.Equal(t, 2, exitCode(err), out)
	assert.Contains(t, out, "documents[0].path:")
	assert.Contains(t, out, "more than 26214400")
}
