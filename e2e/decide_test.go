package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// Deciding from a shell reads as a person would want: claimsctl decide
// answers one line (verdict, claim, amount as money, who), or with
// --output json the decision the claim recorded; a refusal, there or
// through the Temporal CLI, names its real cause first: an unsigned body
// is unsigned, a receipt for another claim is that, an approver past their
// limit is over it.
func TestDecideFromAShell(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	approve, reject := "claim-e2e-decide-line", "claim-e2e-decide-json"
	w.start(w.claimFile(approve, "1840.00"), w.claimFile(reject, "1840.00"))
	w.waitStatus(approve, workflows.StatusWaiting)
	w.waitStatus(reject, workflows.StatusWaiting)
	key := func(who string) string { return filepath.Join(w.keys, who+".key") }
	stdout := func(args ...string) (string, error) {
		return testenv.RunStdout(t, w.env, filepath.Join(w.bin, "claimsctl"), args...)
	}

	// The Temporal CLI's refusals, first cause first.
	for body, want := range map[string]string{
		`{"approver":"adjuster-17"}`:                "unsigned: a decision needs a signed receipt",
		w.receipt("approve", reject, "adjuster-17"): "receipt is for claim " + reject + ", not " + approve,
	} {
		out, err := w.decideRaw(approve, body)
		assert.Equal(t, 1, exitCode(err), "%s: %s", body, out)
		assert.Contains(t, out, want, body)
	}

	// claimsctl's: over the limit, in text and in JSON.
	out, err := w.ctl("decide", "approve", approve, "--key", key("adjuster-9"))
	assert.Equal(t, 1, exitCode(err), out)
	assert.Equal(t, "claimsctl: "+approve+" refused the decision: over limit: adjuster-9 may decide up to 1500.00 USD, the request is 1840.00 (over-limit)\n", out)
	out, err = stdout("decide", "approve", approve, "--key", key("adjuster-9"), "--output", "json")
	assert.Equal(t, 1, exitCode(err), out)
	var refused map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &refused), out)
	assert.Equal(t, map[string]string{"claim_id": approve, "refused": approvals.CodeOverLimit,
		"reason": "over limit: adjuster-9 may decide up to 1500.00 USD, the request is 1840.00"}, refused)
	assert.Equal(t, workflows.StatusWaiting, w.status(approve).State, "nothing refused changed the claim")

	// Accepted: one short line, and the claim is paid once.
	out, err = stdout("decide", "approve", approve, "--key", key("adjuster-17"), "--note", "invoice checks out")
	require.NoError(t, err, out)
	assert.Equal(t, "approved "+approve+": 1,840.00 USD by adjuster-17\n", out)
	assert.Equal(t, workflows.StatusPaid, w.result(approve).Status)
	n, _ := w.transfers(approve)
	assert.Equal(t, 1, n)

	// For scripts: the decision as the claim recorded it.
	out, err = stdout("decide", "reject", reject, "--key", key("supervisor-3"), "--reason", "the damage predates the policy", "-o", "json")
	require.NoError(t, err, out)
	var d approvals.Decision
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	assert.Equal(t, approvals.Reject, d.Verdict)
	assert.Equal(t, "supervisor-3", d.Approver)
	assert.Equal(t, "the damage predates the policy", d.Reason)
	assert.Equal(t, reject, d.Request.ClaimID)
	assert.Equal(t, "update", d.Channel)
	assert.True(t, strings.HasPrefix(out, "{\n"), "one JSON object: %s", out)
	assert.Equal(t, workflows.StatusRejected, w.result(reject).Status)
}
