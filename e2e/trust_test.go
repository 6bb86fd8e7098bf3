package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// Attacks by someone who can reach the Temporal frontend and nothing else:
// no approver key, no worker configuration, no write access to the claims
// store. Each runs the real worker against a real dev server; nothing may
// be paid.

// A typed approver name proves nothing, and neither does a receipt that
// proves something else: each is refused, recorded with its reason, and the
// claim keeps waiting with nothing paid. Then a good receipt pays it once.
func TestAttackForgedAndMisdirectedDecisionsAreRefused(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id, other := "claim-e2e-forged", "claim-e2e-other"
	w.start(w.claimFile(id, "1840.00"), w.claimFile(other, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	w.waitStatus(other, workflows.StatusWaiting)
	waiting := w.status(id)
	sum := waiting.Approval.RequestSHA256

	// A key the directory does not list: made like a real one, never added.
	rogue := filepath.Join(t.TempDir(), "supervisor-3.key")
	out, err := w.ctl("keygen", "--approver", "supervisor-3", "--out", rogue)
	require.NoError(t, err, out)
	// An expired receipt, signed by a real key.
	kf, err := authority.ReadKeyFile(filepath.Join(w.keys, "adjuster-17.key"))
	require.NoError(t, err)
	old, err := approvals.NewReceipt(approvals.Receipt{Subject: "adjuster-17", ClaimID: id, RequestSHA256: sum, Verdict: approvals.Approve,
		Audience: waiting.Audience},
		time.Now().Add(-20*time.Minute), approvals.DefaultReceiptTTL)
	require.NoError(t, err)
	expired, err := approvals.Sign(kf, old)
	require.NoError(t, err)
	rogueReceipt, err := testenv.RunStdout(t, w.env, filepath.Join(w.bin, "claimsctl"), "receipt", "approve", id, "--key", rogue)
	require.NoError(t, err, rogueReceipt)

	attacks := []struct {
		name, payload, code string
	}{
		{"plain name", `{"approver":"supervisor-3"}`, approvals.CodeUnsigned},
		{"plain name with the hash", fmt.Sprintf(`{"approver":"supervisor-3","payload_sha256":%q}`, sum), approvals.CodeUnsigned},
		{"unknown key", rogueReceipt, approvals.CodeUnknownKey},
		{"another claim's receipt", w.receipt("approve", other, "adjuster-17"), approvals.CodeOtherClaim},
		{"stale hash", w.receipt("approve", id, "adjuster-17", "--request-sha256", strings.Repeat("0", 64)), approvals.CodeStaleHash},
		{"expired", fmt.Sprintf(`{"receipt":%q}`, expired), approvals.CodeExpired},
		{"over the signer's limit", w.receipt("approve", id, "adjuster-9"), approvals.CodeOverLimit},
	}
	for _, a := range attacks {
		out, err := w.cli("workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", a.payload)
		require.NoError(t, err, out)
		out, err = w.decideRaw(id, a.payload)
		assert.Equal(t, 1, exitCode(err), "%s: a refused update fails the command: %s", a.name, out)
	}
	require.Eventually(t, func() bool { return len(w.status(id).Attempts) == len(attacks) }, testTimeout, pollEvery)
	s := w.status(id)
	assert.Equal(t, workflows.StatusWaiting, s.State, "nothing refused decides a claim")
	for i, at := range s.Attempts {
		assert.False(t, at.Accepted, "%s was accepted", attacks[i].name)
		assert.Equal(t, attacks[i].code, at.Code, "%s: %s", attacks[i].name, at.Refusal)
	}
	n, _ := w.transfers(id)
	assert.Zero(t, n, "nothing paid")
	st, err := store.Open(w.store)
	require.NoError(t, err)
	refused, err := st.Refusals(context.Background(), id)
	st.Close()
	require.NoError(t, err)
	assert.Len(t, refused, len(attacks), "every refused update is in the audit trail")

	// The real approver, with their own key: paid exactly once.
	w.approve(id, "adjuster-17", "--note", "invoice checks out")
	r := w.result(id)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	assert.Equal(t, approvals.ProofReceipt, r.Approval.Decision.Proof)
	assert.Equal(t, kf.Key.KeyID, r.Approval.Decision.KeyID)
	n, total := w.transfers(id)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)

	// And by update, on the other claim.
	out, err = w.decideRaw(other, w.receipt("approve", other, "adjuster-17"))
	require.NoError(t, err, out)
	assert.Equal(t, workflows.StatusPaid, w.result(other).Status)
	n, _ = w.transfers(other)
	assert.Equal(t, 1, n)
}

// Above the four-eyes threshold one approver is not enough, and a receipt
// counts once: the claim waits until a second approver, a supervisor,
// agrees. Whoever amended a claim may not approve it, and an approver may
// approve a lower amount, which is what is paid.
func TestFourEyesLowerAmountsAndAmenders(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	quorum, lowered := "claim-e2e-quorum", "claim-e2e-lowered"
	w.start("--four-eyes-above", "1500.00", w.claimFile(quorum, "1840.00"))
	w.start(w.claimFile(lowered, "1840.00"))
	w.waitStatus(quorum, workflows.StatusWaiting)
	w.waitStatus(lowered, workflows.StatusWaiting)

	first := w.receipt("approve", quorum, "adjuster-17")
	for range 2 { // the second is a replay of the first
		out, err := w.cli("workflow", "signal", "--workflow-id", quorum, "--name", "approve", "--input", first)
		require.NoError(t, err, out)
	}
	w.approve(quorum, "adjuster-17") // a new receipt, the same approver
	require.Eventually(t, func() bool { return len(w.status(quorum).Attempts) == 3 }, testTimeout, pollEvery)
	s := w.status(quorum)
	assert.Equal(t, workflows.StatusWaiting, s.State, "one approver alone: still waiting")
	assert.Equal(t, 2, s.Approval.Quorum)
	assert.Len(t, s.Approval.Votes, 1)
	assert.Equal(t, []string{"", approvals.CodeReplayed, approvals.CodeSameApprover},
		[]string{s.Attempts[0].Code, s.Attempts[1].Code, s.Attempts[2].Code})
	out, err := w.ctl("show", quorum)
	require.NoError(t, err, out)
	assert.Contains(t, out, "four eyes: 1 of 2 approvals (adjuster-17)")
	n, _ := w.transfers(quorum)
	assert.Zero(t, n)
	out, err = w.decideRaw(quorum, w.receipt("approve", quorum, "supervisor-3"))
	require.NoError(t, err, out)
	r := w.result(quorum)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	require.Len(t, r.Approval.Votes, 2)
	n, total := w.transfers(quorum)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)
	out, err = w.ctl("audit", quorum)
	require.NoError(t, err, out)
	assert.Contains(t, out, "approved by adjuster-17 (adjuster)")
	assert.Contains(t, out, "approved by supervisor-3 (supervisor)")

	// supervisor-3 amends the claim: the claim re-reads itself at once, the
	// request for the old amount is void, and supervisor-3 may not approve
	// the new one.
	out, err = w.ctl("amend", lowered, "--by", "supervisor-3", "--amount", "2000.00")
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		s := w.status(lowered)
		return s.State == workflows.StatusWaiting && s.Approval.Request.Amount == "2000.00"
	}, testTimeout, pollEvery)
	out, err = w.decideRaw(lowered, w.receipt("approve", lowered, "supervisor-3"))
	assert.Equal(t, 1, exitCode(err), out)
	assert.Contains(t, out, "supervisor-3 amended this claim and may not decide it")
	// claimsctl will not sign what the claim would refuse (the workflow's own
	// refusal of it is in workflows/claim_workflow_test.go).
	out, err = testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "receipt", "approve", lowered,
		"--key", filepath.Join(w.keys, "adjuster-17.key"), "--amount", "1500.00")
	assert.Equal(t, 1, exitCode(err), out)
	assert.Contains(t, out, "approving a lower amount needs a reason")
	out, err = w.decideRaw(lowered, w.receipt("approve", lowered, "adjuster-17", "--amount", "1500.00", "--reason", "the invoice says 1500.00"))
	require.NoError(t, err, out)
	r = w.result(lowered)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	assert.Equal(t, "1500.00", r.Payout)
	n, total = w.transfers(lowered)
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(150000), total, "paid the approved amount, not the claimed one")
}

// directStart starts a ClaimWorkflow with the SDK, as anyone with frontend
// access can, bypassing the starter.
func (w *world) directStart(id, amount string, opts workflows.Options, register bool) {
	w.t.Helper()
	c, err := claim.File{ClaimID: id, PolicyID: "pol-1001",
		Claimant: claim.Claimant{Name: "Mallory", Email: "mallory@example.com", StripeAccount: "acct_1Mallory"},
		Amount:   amount, Currency: "usd", Description: "A burst pipe flooded the kitchen overnight"}.Claim()
	require.NoError(w.t, err)
	if register {
		st, err := store.Open(w.store)
		require.NoError(w.t, err)
		_, _, err = st.PutClaim(context.Background(), c)
		st.Close()
		require.NoError(w.t, err)
	}
	_, err = w.client.ExecuteWorkflow(context.Background(), workflows.StartOptions(id), workflows.WorkflowType,
		workflows.ClaimInput{Claim: c, Options: opts})
	require.NoError(w.t, err)
}

// The workflow's input is not the insurer's policy: a run started with a
// looser limit, looser waits or an approving final outcome ends at once
// with an error naming the option; a claim the system of record never saw
// is refused. Nothing is paid.
func TestAttackDirectStartsCannotBendThePolicy(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	cases := []struct {
		id       string
		opts     workflows.Options
		register bool
		want     string
	}{
		{"claim-e2e-loose-limit", workflows.Options{AutoApproveLimitMinor: 1 << 62}, true, "options.auto_approve_limit_minor"},
		{"claim-e2e-loose-ttl", workflows.Options{Approval: approvals.Policy{TTL: 10000 * time.Hour}}, true, "options.approval.ttl"},
		{"claim-e2e-by-policy", workflows.Options{Approval: approvals.Policy{TTL: time.Second, EscalationTTL: time.Second,
			FinalOutcome: approvals.Approve}}, true, "options.approval.final_outcome"},
		{"claim-e2e-unregistered", workflows.Options{}, false, "not registered"},
	}
	for _, tc := range cases {
		w.directStart(tc.id, "640.00", tc.opts, tc.register)
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var r workflows.ClaimResult
		err := w.client.GetWorkflow(ctx, tc.id, "").Get(ctx, &r)
		cancel()
		if assert.Error(t, err, "%s must not complete: it ended %s", tc.id, r.Status) {
			assert.Contains(t, err.Error(), tc.want, tc.id)
		}
		n, _ := w.transfers(tc.id)
		assert.Zero(t, n, "%s: nothing paid", tc.id)
	}

	// The refused runs did nothing, so the real claim can still be
	// started, by the starter, under the insurer's policy.
	out := w.start(w.claimFile("claim-e2e-unregistered", "640.00"))
	assert.Contains(t, out, "started claim-e2e-unregistered")
	assert.Equal(t, workflows.StatusPaid, w.result("claim-e2e-unregistered").Status)
	n, _ := w.transfers("claim-e2e-unregistered")
	assert.Equal(t, 1, n)
}

// A key revoked with claimsctl revoke-key after it signed: the decision it
// signed is accepted by the wait (its directory snapshot still lists the
// key), then voided at the re-read before the payment; a new request waits
// and pays once another approver decides.
func TestRevokedKeysDecisionDoesNotPay(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-revoked"
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	first := w.status(id).Approval.RequestSHA256
	stolen := w.receipt("approve", id, "adjuster-17")
	kf, err := authority.ReadKeyFile(filepath.Join(w.keys, "adjuster-17.key"))
	require.NoError(t, err)
	out, err := w.ctl("revoke-key", "--directory", envValue(w.env, "APPROVERS_FILE"), kf.Key.KeyID)
	require.NoError(t, err, out)

	out, err = w.cli("workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", stolen)
	require.NoError(t, err, out)
	var s workflows.Status
	require.Eventually(t, func() bool {
		s = w.status(id)
		return s.State == workflows.StatusWaiting && len(s.Attempts) == 1
	}, testTimeout, pollEvery)
	n, _ := w.transfers(id)
	assert.Zero(t, n, "nothing paid on a revoked key's decision")
	assert.Equal(t, first, s.Approval.RequestSHA256, "the same request, asked again")

	out, err = w.decideRaw(id, w.receipt("approve", id, "adjuster-17"))
	assert.Equal(t, 1, exitCode(err), out)
	assert.Contains(t, out, "does not list", "the revoked key signs nothing in the new wait")
	w.approve(id, "supervisor-3")
	r := w.result(id)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	require.Len(t, r.Approvals, 2)
	assert.Contains(t, r.Approvals[0].Voided, kf.Key.KeyID+" revoked before the payment")
	n, _ = w.transfers(id)
	assert.Equal(t, 1, n)
}
