package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
)

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A batch with one malformed claim starts nothing, and says which field is
// wrong and why; starting a claim twice never makes a second run.
func TestStarterValidatesFirstAndNeverStartsTwice(t *testing.T) {
	w := newWorld(t)
	good := w.claimFile("claim-e2e-start", "640.00")
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"claim_id":"claim-e2e-bad","policy_id":"pol-1001",
		"claimant":{"name":"B","email":"b@example.com","stripe_account":"acct_1B"},"amount":"12.345","currency":"usd"}`), 0o644))

	starter := filepath.Join(w.bin, "starter")
	out, err := testenv.Run(t, w.env, starter, good, bad)
	assert.Equal(t, 2, exitCode(err), out)
	assert.Contains(t, out, bad+": amount: \"12.345\" has more than 2 decimal places for USD")
	assert.Contains(t, out, "nothing started")
	_, err = w.client.DescribeWorkflow(context.Background(), "claim-e2e-start", "")
	var notFound *serviceerror.NotFound
	assert.ErrorAs(t, err, &notFound, "the valid claim in a bad batch must not start")
	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	_, err = st.GetClaim(context.Background(), "claim-e2e-start")
	assert.ErrorIs(t, err, store.ErrNotFound, "nor be registered")

	out, err = testenv.Run(t, w.env, starter, "--claim-id", "claim-e2e-flags", "--policy", "pol-1001", "--name", "F",
		"--email", "f@example.com", "--account", "acct_1F", "--amount", "-5")
	assert.Equal(t, 2, exitCode(err), out)
	assert.Contains(t, out, "flags: amount:")

	// No worker runs: the claim stays running, and a second start finds it.
	out, err = testenv.Run(t, w.env, starter, good)
	require.NoError(t, err, out)
	assert.Contains(t, out, "started claim-e2e-start")
	assert.Contains(t, out, `if it waits for a decision (claimsctl wait claim-e2e-start --status waiting): temporal workflow update execute --workflow-id claim-e2e-start --name decide --input "$(claimsctl receipt approve claim-e2e-start --key YOUR.key)"`)
	first, err := w.client.DescribeWorkflow(context.Background(), "claim-e2e-start", "")
	require.NoError(t, err)

	out, err = testenv.Run(t, w.env, starter, good)
	require.NoError(t, err, out)
	assert.Contains(t, out, "claim-e2e-start already exists (run "+first.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId())
	assert.Contains(t, out, "not starting another")
}
