package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// With no worker running, a claim mid-run makes no progress and a wait
// passes its deadline: claimsctl stuck finds both and exits 3.
func TestStuckFindsIdleRunsAndWaitsPastTheirDeadline(t *testing.T) {
	w := newWorld(t)
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	w.start(w.claimFile("claim-e2e-fine", "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result("claim-e2e-fine").Status)
	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "starter"), "--approval-ttl", "2s", "--escalation-ttl", "1h", w.claimFile("claim-e2e-late", "1840.00"))
	require.NoError(t, err, out)
	w.waitStatus("claim-e2e-late", workflows.StatusWaiting)

	// The threshold is the test's, not the machine's: --factor 0 leaves the
	// floor alone (the p95 of a loaded machine's steps times ten could be
	// longer than any fixed sleep).
	stuck := func() (string, error) { return w.ctl("stuck", "--factor", "0", "--floor", "1s") }
	out, err = stuck()
	require.NoError(t, err, out)
	assert.Contains(t, out, "no stuck claims")

	worker.Stop() // every worker gone: nothing moves, the 2 s deadline passes unanswered
	w.start(w.claimFile("claim-e2e-idle", "640.00"))
	require.Eventually(t, func() bool {
		out, err = stuck()
		return exitCode(err) == 3 && strings.Contains(out, "claim-e2e-idle") && strings.Contains(out, "claim-e2e-late")
	}, testTimeout, 500*time.Millisecond, "claimsctl stuck never named both: %s", out)
	assert.Contains(t, out, "claim-e2e-idle  running  no step progress")
	assert.Contains(t, out, "claim-e2e-late  waiting  wait past its deadline")
	assert.NotContains(t, out, "claim-e2e-fine")

	out, err = w.ctl("list", "--status", "waiting")
	require.NoError(t, err, out)
	assert.Equal(t, 3, len(strings.Split(strings.TrimSpace(out), "\n")), "the counts, a header and claim-e2e-late: %s", out)
	assert.Contains(t, out, "1 waiting for a decision (1 waiting, 0 escalated)")
	assert.Contains(t, out, "claim-e2e-late")
	out, err = w.ctl("list", "--json")
	require.NoError(t, err, out)
	assert.Contains(t, out, `"claim_id":"claim-e2e-fine","run_id"`)
}
