package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// cli runs the real Temporal CLI against the test's dev server.
func (w *world) cli(args ...string) (string, error) {
	return testenv.Run(w.t, nil, w.temporal, append(args, "--address", addr(w.env), "--namespace", "default", "--codec-endpoint", w.codecURL)...)
}

func (w *world) ctl(args ...string) (string, error) {
	return testenv.Run(w.t, w.env, filepath.Join(w.bin, "claimsctl"), args...)
}

func (w *world) decide(id string, in map[string]string) (string, error) {
	b, _ := json.Marshal(in)
	return w.decideRaw(id, string(b))
}

func (w *world) decideRaw(id, payload string) (string, error) {
	return w.cli("workflow", "update", "execute", "--workflow-id", id, "--name", "decide", "--input", payload)
}

// signed is a receipt approver's own key signs for the request id waits on,
// as anyone holding the key can make one, whatever claimsctl would refuse;
// edit changes it before signing.
func (w *world) signed(approver, id string, edit func(*approvals.Receipt)) string {
	w.t.Helper()
	kf, err := authority.ReadKeyFile(filepath.Join(w.keys, approver+".key"))
	require.NoError(w.t, err)
	st := w.status(id)
	require.NotNil(w.t, st.Approval)
	r, err := approvals.NewReceipt(approvals.Receipt{Subject: approver, ClaimID: id, RequestSHA256: st.Approval.RequestSHA256,
		Verdict: approvals.Approve, Audience: st.Audience}, time.Now(), approvals.DefaultReceiptTTL)
	require.NoError(w.t, err)
	edit(&r)
	tok, err := approvals.Sign(kf, r)
	require.NoError(w.t, err)
	b, err := json.Marshal(approvals.Input{Receipt: tok})
	require.NoError(w.t, err)
	return string(b)
}

func (w *world) status(id string) workflows.Status {
	v, err := w.client.QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
	require.NoError(w.t, err)
	var s workflows.Status
	require.NoError(w.t, v.Get(&s))
	return s
}

// Decisions through the commands an adjuster really types: refused updates
// fail the command with the reason and change nothing; refused signals are
// recorded; the audit trail has every attempt.
func TestApprovalsThroughTheTemporalCLI(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-decide"
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)

	for _, tc := range []struct {
		in   string
		want string
	}{
		{`{"approver":"mallory","decision":"approve"}`, `unsigned: a decision needs a signed receipt`},
		{w.receipt("approve", id, "adjuster-9"), "over limit: adjuster-9 may decide up to 1500.00 USD"},
		{w.receipt("approve", id, "adjuster-17", "--request-sha256", strings.Repeat("0", 64)), "stale decision"},
		// claimsctl refuses to sign it (below); a key's owner can sign it all the same.
		{w.signed("adjuster-17", id, func(r *approvals.Receipt) { r.Verdict = approvals.Reject }), "a rejection needs a reason"},
	} {
		out, err := w.decideRaw(id, tc.in)
		assert.Equal(t, 1, exitCode(err), "a refused update fails the command: %s", out)
		assert.Contains(t, out, tc.want)
		assert.Contains(t, out, "retryable: false", "the same decision is refused again: %s", out)
		assert.NotContains(t, out, "type: Refusal", out)
	}
	out, err := w.decideRaw(id, w.receipt("approve", id, "adjuster-9"))
	assert.Contains(t, out, "(type: over-limit, retryable: false)", "the refusal's code is its type, for scripts: %v", err)

	// What the workflow would refuse, claimsctl does not sign; its preview
	// says what the receipt does.
	for args, want := range map[string]string{
		"reject":                              "a rejection needs a reason",
		"approve --amount 1840.00 --reason x": "must be above 0 and below the request's 1840.00 USD",
		"approve --amount 1500.00":            "approving a lower amount needs a reason",
		"reject --amount 1500.00 --reason x":  "only an approval may name a lower amount",
	} {
		f := strings.Fields(args)
		out, err := w.ctl(append([]string{"receipt", f[0], id, "--key", filepath.Join(w.keys, "adjuster-17.key")}, f[1:]...)...)
		assert.Equal(t, 1, exitCode(err), "%s: %s", args, out)
		assert.Contains(t, out, want, args)
		assert.NotContains(t, out, `"receipt"`, "%s: nothing signed", args)
	}
	for args, want := range map[string]string{
		"approve --amount 1500.00 --reason invoice": "approve " + id + " as adjuster-17: pay 1500.00 USD, not the 1840.00 USD asked",
		"reject --reason duplicate":                 "reject " + id + " as adjuster-17: pay nothing",
		"approve":                                   "approve " + id + " as adjuster-17: pay 1840.00 USD to Ada Lovelace",
	} {
		f := strings.Fields(args)
		out, err := w.ctl(append([]string{"receipt", f[0], id, "--key", filepath.Join(w.keys, "adjuster-17.key")}, f[1:]...)...)
		require.NoError(t, err, out)
		assert.Contains(t, out, want, args)
	}
	for _, help := range []string{"help", "--help", "-h"} {
		out, err := w.ctl(help)
		assert.NoError(t, err, "claimsctl %s exits 0", help)
		assert.Contains(t, out, "usage:", help)
	}

	w.approve(id, "adjuster-9") // over limit, by signal
	assert.Equal(t, workflows.StatusWaiting, w.status(id).State, "nothing refused changed the claim")

	// Operators find waits by stage and deadline through visibility.
	deadline := w.status(id).Approval.Deadline
	query := func(before time.Time) string {
		out, err := w.cli("workflow", "list", "--query",
			fmt.Sprintf(`ClaimStatus="waiting" AND ApprovalDeadline < "%s"`, before.UTC().Format(time.RFC3339)))
		require.NoError(t, err, out)
		return out
	}
	require.Eventually(t, func() bool { return strings.Contains(query(deadline.Add(time.Minute)), id) }, testTimeout, pollEvery)
	assert.NotContains(t, query(deadline.Add(-time.Minute)), id, "not yet past its deadline")

	out, err = w.decideRaw(id, w.receipt("approve", id, "adjuster-17", "--note", "checked"))
	require.NoError(t, err, out)
	assert.Contains(t, out, "approver:adjuster-17")
	assert.Contains(t, out, "hash_bound:true")
	assert.Contains(t, out, "proof:receipt")
	r := w.result(id)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	assert.Equal(t, "update", r.Approval.Decision.Channel)
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)

	out, err = w.decide(id, map[string]string{"approver": "adjuster-17", "decision": "approve"})
	assert.NotZero(t, exitCode(err), "a closed claim takes no decision: %s", out)

	out, err = w.ctl("audit", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "from the audit record (step 9); outcome paid")
	assert.Contains(t, out, "decision: approve by adjuster-17 (adjuster) via update")
	assert.Contains(t, out, "proven by a receipt signed with adjuster-17-")
	assert.Equal(t, 5, strings.Count(out, "refused before history"), out)
	assert.Contains(t, out, "refused (over-limit): over limit", "the refused signal is in history")
	assert.Contains(t, out, "ACCEPTED")
}

// A claim withdrawn or amended while it waits ends or asks again at once,
// not at the next decision or the deadline (hours away): claimsctl tells
// the run, which reads the system of record. The approval given for the old
// facts does not pay, and whoever amended the claim may not approve it.
func TestWithdrawAndAmendWhileWaiting(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	w.start(w.claimFile("claim-e2e-withdraw", "1840.00"), w.claimFile("claim-e2e-amend", "1840.00"))
	w.waitStatus("claim-e2e-withdraw", workflows.StatusWaiting)
	w.waitStatus("claim-e2e-amend", workflows.StatusWaiting)

	out, err := w.ctl("withdraw", "claim-e2e-withdraw")
	require.NoError(t, err, out)
	assert.Contains(t, out, "withdrawn (version 2); its run was told")
	r := w.result("claim-e2e-withdraw")
	assert.Equal(t, workflows.StatusWithdrawn, r.Status, "nobody decided: the withdrawal alone ended the wait")
	require.Len(t, r.Approvals, 1)
	assert.True(t, r.Approvals[0].Interrupted)
	assert.Nil(t, r.Approvals[0].Decision)
	n, _ := w.transfers("claim-e2e-withdraw")
	assert.Zero(t, n, "a withdrawn claim is never paid")
	out, err = w.ctl("amend", "claim-e2e-withdraw", "--by", "adjuster-9", "--amount", "10.00")
	assert.Error(t, err, "a closed claim cannot be amended: %s", out)

	first := w.status("claim-e2e-amend").Approval.RequestSHA256
	stale := w.receipt("approve", "claim-e2e-amend", "adjuster-17", "--request-sha256", first)
	out, err = w.ctl("amend", "claim-e2e-amend", "--by", "adjuster-9", "--amount", "2100.00")
	require.NoError(t, err, out)
	assert.Contains(t, out, "amended by adjuster-9 to 2100.00 usd")
	assert.Contains(t, out, "its run was told")
	// The request was for 1840.00: void; a new request for 2100.00 waits.
	var second workflows.Status
	require.Eventually(t, func() bool {
		second = w.status("claim-e2e-amend")
		return second.Approval != nil && second.Approval.RequestSHA256 != first && second.State == workflows.StatusWaiting
	}, testTimeout, pollEvery)
	assert.Equal(t, "2100.00", second.Approval.Request.Amount)
	out, err = w.decideRaw("claim-e2e-amend", stale)
	assert.Equal(t, 1, exitCode(err), "the old hash is stale now: %s", out)
	assert.Contains(t, out, "stale decision")
	out, err = w.decideRaw("claim-e2e-amend", w.receipt("approve", "claim-e2e-amend", "supervisor-3", "--as", "supervisor-3"))
	require.NoError(t, err, out)
	r = w.result("claim-e2e-amend")
	assert.Equal(t, workflows.StatusPaid, r.Status)
	require.Len(t, r.Approvals, 2)
	assert.Contains(t, r.Approvals[0].Voided, "amount 1840.00 usd → 2100.00 usd")
	n, total := w.transfers("claim-e2e-amend")
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(210000), total)
}

// A payment that fails for good (a bad key was deployed) dead-letters the
// claim; once the key is fixed, redrive runs step 6 again, and only step 6.
func TestDeadLetterAndRedrive(t *testing.T) {
	w := newWorld(t)
	broken := append(append([]string{}, w.env...), "STRIPE_SECRET_KEY=sk_test_revoked")
	bad := testenv.Supervise(t, broken, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-dlq"
	w.start(w.claimFile(id, "640.00"))
	r := w.result(id)
	require.Equal(t, workflows.StatusDeadLettered, r.Status)
	assert.Equal(t, "PaymentConfig", r.DeadLetter.ErrorType)
	assert.Equal(t, []string{"payment " + id + ":step6"}, r.DeadLetter.UnknownEffects)
	bad.Stop()
	// Stopped for good is on record too: a claim file of the dead-lettered run.
	require.Len(t, w.claimFiles(id), 1)
	out, err := w.ctl("checkpoint")
	require.NoError(t, err, out)
	out, err = w.ctl("show", "--json", id)
	require.NoError(t, err, out)
	out, err = w.ctl("verify", id)
	require.NoError(t, err, out)
	bundle := filepath.Join(t.TempDir(), "bundle")
	out, err = w.ctl("export", id, "--out", bundle)
	require.NoError(t, err, out)
	out, err = w.ctl("verify", "--bundle", bundle)
	require.NoError(t, err, out)
	assert.Contains(t, out, "(dead-lettered): The run stopped for good: step 6 (pay) failed")

	out, err = w.ctl("dlq", "list")
	require.NoError(t, err, out)
	assert.Contains(t, out, fmt.Sprintf("%s  step 6 (pay)  PaymentConfig", id))

	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	out, err = w.ctl("dlq", "redrive", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "redriven from step 6 (pay)")
	r = w.result(id)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	// The reset run has a run ID of its own: the claim passed to it when
	// its payment asked (the server said it is a claim workflow of ours).
	assert.Equal(t, w.describe(id).GetWorkflowExecutionInfo().GetExecution().GetRunId(), w.record(id).RunID,
		"the claim belongs to the redriven run")
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)
	// The run that ended it writes its own file; both verify.
	assert.Len(t, w.claimFiles(id), 2, "the dead-lettered run's file and the redriven run's")
	out, err = w.ctl("checkpoint")
	require.NoError(t, err, out)
	out, err = w.ctl("verify", id)
	assert.NoError(t, err, out)
	// The redrive resets the run to the task that scheduled the payment.
	// With the rules model that task ran triage and the assessment local
	// (versionFreeAssess), so the redriven run asked the rules again: free,
	// the same answers. A model that costs assesses in a regular activity
	// before that task, and is not asked again.
	assert.Equal(t, map[string]int{"triage": 4, "assess": 2}, map[string]int{
		"triage": w.modelCalls(id)[2], "assess": w.modelCalls(id)[4]}, "the redrive asked the rules again, and nothing else")

	// A cap is not redriven: the same input would hit it again.
	w.start("--max-payout", "100.00", w.claimFile("claim-e2e-cap", "640.00"))
	r = w.result("claim-e2e-cap")
	require.Equal(t, workflows.StatusDeadLettered, r.Status)
	files := w.claimFiles("claim-e2e-cap")
	require.Len(t, files, 1, "a cap stops the run, the claim file is written all the same")
	// The cap is met at the rules' local assessment, in the run's first
	// task: the file, built from the history, holds what that task ran.
	body, err := os.ReadFile(files[0])
	require.NoError(t, err)
	var file struct {
		Steps []struct {
			Activity string `json:"activity"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(body, &file))
	var steps []string
	for _, st := range file.Steps {
		steps = append(steps, st.Activity)
	}
	assert.Subset(t, steps, []string{"LoadClaim", "TriageTurn", "AssessClaim"}, "the capped run's file holds its steps: %v", steps)
	out, err = w.ctl("dlq", "redrive", "claim-e2e-cap")
	assert.Error(t, err)
	assert.Contains(t, out, "stopped at a cap")
}
