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
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/worker/crash"
	"github.com/durableclaims/durableclaims/workflows"
)

// crashCase kills the worker once at one step and phase.
type crashCase struct {
	step  claim.Step
	phase crash.Phase
	// regular names the step's regular activity; empty for a local one.
	regular string
	// approval runs the claim down the approval path (step 5 exists there).
	approval bool
}

// The matrix: every step with something to interrupt, before its side
// effect and after it (before the activity returns). Step 3, coverage, is
// pure workflow code with no activity: the kill points around it are the
// end of step 2 and the start of step 4, both below.
func matrix() []crashCase {
	var out []crashCase
	for _, c := range []crashCase{
		{step: claim.StepIntake}, {step: claim.StepTriage}, {step: claim.StepAssess},
		{step: claim.StepApproval, approval: true}, {step: claim.StepPay, regular: "PayClaimant"},
		{step: claim.StepNotify}, {step: claim.StepClose}, {step: claim.StepAudit},
	} {
		for _, ph := range []crash.Phase{crash.BeforeEffect, crash.AfterEffect} {
			c.phase = ph
			out = append(out, c)
		}
	}
	return out
}

// TestCrashMatrix runs every case in parallel against one dev server, each
// with its own worker process, task queue and claims store, so a kill
// interrupts exactly one claim. For each: the claim completes; exactly one
// transfer, one e-mail and one ledger close; no model call repeated for a
// completed step; and the step run again is the one the kill interrupted.
func TestCrashMatrix(t *testing.T) {
	srv := testenv.DevServer(t)
	_, stripeURL := testenv.Stripe(t)
	bin := testenv.Binaries(t)
	temporalCLI := testenv.TemporalCLI(t)
	payments := activities.NewStripeClient(activities.StripeConfig{APIBase: stripeURL})

	for _, tc := range matrix() {
		name := fmt.Sprintf("step%d-%s-%s", tc.step, tc.step, tc.phase)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			id := "claim-matrix-" + name
			queue := "claims-" + name
			keys := testenv.PayloadKeys(t, dir, srv.FrontendHostPort(), "default")
			w := &world{t: t, temporal: temporalCLI, bin: bin, client: keys.Client, codecURL: keys.CodecURL,
				store: filepath.Join(dir, "claims.db"), mail: filepath.Join(dir, "mail"),
				stripe: &activities.Activities{Stripe: payments}}
			w.env = []string{keys.Env,
				"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "TEMPORAL_NAMESPACE=default",
				"STRIPE_API_BASE=" + stripeURL, "STRIPE_SECRET_KEY=sk_test_local",
				"CLAIMS_DB=" + w.store, "MAIL_SPOOL=" + w.mail, "CLAIMS_TASK_QUEUE=" + queue, "LOG_LEVEL=info",
				"BLOB_URL=file://" + filepath.Join(dir, "blobs") + "?create_dir=true",
			}
			w.makeKeys(dir)
			worker := testenv.Supervise(t, w.env, filepath.Join(bin, "worker"),
				"--crash-at", fmt.Sprintf("%s:%d:%s", id, tc.step, tc.phase), "--crash-state", filepath.Join(dir, "crash-fired"))

			amount := "640.00"
			if tc.approval {
				amount = "1840.00"
			}
			opts := workflows.StartOptions(id)
			opts.TaskQueue = queue
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			run, err := w.client.ExecuteWorkflow(ctx, opts, workflows.WorkflowType, workflows.ClaimInput{Claim: w.register(id, amount)})
			require.NoError(t, err)
			if tc.approval {
				w.waitStatus(id, workflows.StatusWaiting)
				w.approve(id, "adjuster-17")
			}
			var r workflows.ClaimResult
			require.NoError(t, run.Get(ctx, &r))

			assert.Equal(t, workflows.StatusPaid, r.Status)
			assert.Equal(t, 1, worker.Kills(), "the crash point fired once")
			n, total := w.transfers(id)
			assert.Equal(t, 1, n, "exactly one transfer")
			assert.Equal(t, r.PayoutMinor, total)
			assert.Equal(t, 1, w.mails(id), "exactly one claimant e-mail")
			st, err := store.Open(w.store)
			require.NoError(t, err)
			rec, err := st.GetClaim(ctx, id)
			st.Close()
			require.NoError(t, err)
			assert.Equal(t, "paid", rec.Status)
			assert.Equal(t, string(claim.StepKey(id, claim.StepClose)), rec.ClosedKey)
			assert.Equal(t, int64(2), rec.Version, "registered once, closed once")
			files, _ := filepath.Glob(filepath.Join(dir, "blobs", "claim-files", id, "*.json"))
			assert.Len(t, files, 1, "exactly one claim file")
			out, err := w.ctl("checkpoint")
			require.NoError(t, err, out)
			out, err = w.ctl("verify", id)
			assert.NoError(t, err, out)
			assert.Contains(t, out, "verifies")

			// A model step is called again only if it was the one interrupted
			// after its call, or the rules model's answer was not yet
			// recorded. Triage is two turns of the agent loop; the kill lands
			// in the first. The rules' assessment and the approval's opening
			// run local in the task that ran triage (versionFreeAssess): a
			// kill at either loses that task, and its rerun asks the rules
			// again (free, the same answers) for both turns and for the
			// assessment, if it had been asked.
			want := map[claim.Step]int{claim.StepTriage: 2, claim.StepAssess: 1}
			switch {
			case tc.step == claim.StepAssess || tc.step == claim.StepApproval:
				want[claim.StepTriage] += 2
				if tc.step == claim.StepApproval || tc.phase == crash.AfterEffect {
					want[claim.StepAssess]++
				}
			case tc.step == claim.StepTriage && tc.phase == crash.AfterEffect:
				want[tc.step]++
			}
			assert.Equal(t, want, w.modelCalls(id), "model calls per step")

			attempts, taskTimeouts := w.attempts(id)
			for typ, attempt := range attempts {
				if typ == tc.regular {
					assert.Equal(t, int32(2), attempt, "the interrupted step %s ran again", typ)
				} else {
					assert.Equal(t, int32(1), attempt, "step %s was not interrupted", typ)
				}
			}
			if tc.regular == "" {
				assert.Equal(t, 1, taskTimeouts, "the workflow task running the local step timed out once and ran again")
			} else {
				assert.Contains(t, attempts, tc.regular)
				assert.Zero(t, taskTimeouts, "no workflow task was interrupted")
			}
			assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.describe(id).GetWorkflowExecutionInfo().GetStatus())
		})
	}
}

// register registers a claim as an intake system would (the starter's
// --register-only: its document goes to the blob store) and returns it as
// the system of record holds it, for a run started on its own task queue.
func (w *world) register(id, amount string) claim.Claim {
	out, err := testenv.Run(w.t, w.env, filepath.Join(w.bin, "starter"), "--register-only", w.claimFile(id, amount))
	require.NoError(w.t, err, out)
	st, err := store.Open(w.store)
	require.NoError(w.t, err)
	defer st.Close()
	rec, err := st.GetClaim(context.Background(), id)
	require.NoError(w.t, err)
	return rec.Claim
}

// A decision ends the claim in the same workflow task when it rejects: the
// e-mail, the close and the audit record follow at once. A kill after the
// audit record was written loses that task; the next one must not build a
// different record from its own clock (the decision's time, the attempts'
// times), or the write-once audit refuses it and the claim dead-letters.
// Killed after each of steps 7, 8 and 9: every claim ends rejected, with one
// e-mail, one close and one audit record.
func TestCrashesAfterARejectionEndTheClaimOnce(t *testing.T) {
	w := newWorld(t)
	ids := map[claim.Step]string{claim.StepNotify: "claim-e2e-rej-7", claim.StepClose: "claim-e2e-rej-8", claim.StepAudit: "claim-e2e-rej-9"}
	var points []string
	for step, id := range ids {
		points = append(points, fmt.Sprintf("%s:%d:%s", id, step, crash.AfterEffect))
	}
	// The receipt asks the claim for its request: a query, which within
	// 10 s of a worker's death the server sends to that worker's sticky
	// queue, where it waits out its deadline. So each claim is rejected
	// only once the one before has ended, on a worker restarted with its
	// task journal, which shut the dead worker's sticky queue down first.
	env := append(append([]string{}, w.env...), "TASK_JOURNAL_DIR="+filepath.Join(t.TempDir(), "journal"))
	worker := testenv.Supervise(t, env, filepath.Join(w.bin, "worker"),
		"--crash-at", strings.Join(points, ","), "--crash-state", filepath.Join(t.TempDir(), "crash-fired"))
	for _, id := range ids {
		w.start(w.claimFile(id, "1840.00"))
	}
	for _, id := range ids {
		w.waitStatus(id, workflows.StatusWaiting)
		out, err := w.cli("workflow", "signal", "--workflow-id", id, "--name", "reject",
			"--input", w.receipt("reject", id, "adjuster-17", "--reason", "the invoice is for another address"))
		require.NoError(t, err, out)
		w.result(id)
	}
	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	for step, id := range ids {
		r := w.result(id)
		assert.Equal(t, workflows.StatusRejected, r.Status, "killed after step %d: %+v", step, r.DeadLetter)
		rec, err := st.GetClaim(context.Background(), id)
		require.NoError(t, err)
		assert.Equal(t, "rejected", rec.Status, id)
		assert.Equal(t, 1, w.mails(id), "%s: one e-mail", id)
		audit, err := st.Audit(context.Background(), id)
		require.NoError(t, err, id)
		assert.Contains(t, string(audit), `"outcome":"rejected"`, id)
		n, _ := w.transfers(id)
		assert.Zero(t, n, id)
	}
	assert.Equal(t, len(ids), worker.Kills(), "each crash point fired once")
	out, err := w.ctl("show", ids[claim.StepAudit])
	require.NoError(t, err, out)
	assert.Contains(t, out, "then rejected by adjuster-17", "claimsctl show says what the decision did")
}
