// Package e2e runs durableclaims as it runs in production: a Temporal dev
// server, stripesim, the real worker binary killed with SIGKILL by its own
// crash injection and restarted by a supervisor, claims started by the real
// starter binary, approvals sent with the real `temporal workflow signal`.
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
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

type world struct {
	t        *testing.T
	temporal string
	bin      string
	env      []string
	client   client.Client
	codecURL string // a codec server, for the Temporal CLI
	store    string
	mail     string
	keys     string                 // approvers' private keys, one file each
	stripe   *activities.Activities // only its Stripe client, to list transfers
	sim      *stripesim.Server      // the payment provider itself: its key records and faults
}

func newWorld(t *testing.T) *world {
	srv := testenv.DevServer(t)
	sim, stripeURL := testenv.Stripe(t)
	dir := t.TempDir()
	keys := testenv.PayloadKeys(t, dir, srv.FrontendHostPort(), "default")
	w := &world{t: t, temporal: testenv.TemporalCLI(t), bin: testenv.Binaries(t), client: keys.Client, codecURL: keys.CodecURL,
		store: filepath.Join(dir, "claims.db"), mail: filepath.Join(dir, "mail"), sim: sim}
	w.env = []string{keys.Env,
		"TEMPORAL_ADDRESS=" + srv.FrontendHostPort(), "TEMPORAL_NAMESPACE=default",
		"STRIPE_API_BASE=" + stripeURL, "STRIPE_SECRET_KEY=sk_test_local",
		"CLAIMS_DB=" + w.store, "MAIL_SPOOL=" + w.mail, "LOG_LEVEL=info",
		"BLOB_URL=file://" + filepath.Join(dir, "blobs") + "?create_dir=true",
	}
	w.stripe = &activities.Activities{Stripe: activities.NewStripeClient(activities.StripeConfig{APIBase: stripeURL})}
	w.makeKeys(dir)
	return w
}

// makeKeys gives every sample approver a signing key with the real
// claimsctl keygen, as an operator would, and points the worker at the
// directory holding their public halves.
func (w *world) makeKeys(dir string) {
	w.keys = filepath.Join(dir, "keys")
	directory := filepath.Join(dir, "approvers.json")
	for _, id := range []string{"adjuster-17", "adjuster-9", "supervisor-3"} {
		out, err := testenv.Run(w.t, nil, filepath.Join(w.bin, "claimsctl"), "keygen", "--approver", id,
			"--out", filepath.Join(w.keys, id+".key"), "--directory", directory)
		require.NoError(w.t, err, out)
	}
	ledger := filepath.Join(w.keys, "ledger.key")
	out, err := testenv.Run(w.t, nil, filepath.Join(w.bin, "claimsctl"), "keygen", "--ledger", "e2e-ledger", "--out", ledger)
	require.NoError(w.t, err, out)
	w.env = append(w.env, "APPROVERS_FILE="+directory, "LEDGER_KEY="+ledger)
}

// receipt is a signed decision from approver's key file, made by the real
// claimsctl receipt: the payload for temporal workflow signal or update.
func (w *world) receipt(verdict, id, approver string, flags ...string) string {
	w.t.Helper()
	args := append([]string{"receipt", verdict, id, "--key", filepath.Join(w.keys, approver+".key")}, flags...)
	out, err := testenv.RunStdout(w.t, w.env, filepath.Join(w.bin, "claimsctl"), args...)
	require.NoError(w.t, err, out)
	return strings.TrimSpace(out)
}

// approve signals a signed approval through the real Temporal CLI.
func (w *world) approve(id, approver string, flags ...string) {
	w.t.Helper()
	out, err := w.cli("workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", w.receipt("approve", id, approver, flags...))
	require.NoError(w.t, err, out)
}

func (w *world) claimFile(id, amount string) string {
	return w.claimFileIn(id, amount, "usd", "pol-1001")
}

// claimFileIn is claimFile in another currency, on a policy in it.
func (w *world) claimFileIn(id, amount, currency, policy string) string {
	dir := w.t.TempDir()
	require.NoError(w.t, os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("a photo of "+id), 0o644))
	path := filepath.Join(dir, id+".json")
	doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":%q,"claimant":{"name":"Ada Lovelace","email":"ada@example.com","stripe_account":"acct_1Ada"},
		"amount":%q,"currency":%q,"description":"A burst pipe flooded the kitchen overnight","documents":[{"name":"a.jpg","path":"a.jpg"}]}`,
		id, policy, amount, currency)
	require.NoError(w.t, os.WriteFile(path, []byte(doc), 0o644))
	return path
}

func (w *world) start(files ...string) string {
	out, err := testenv.Run(w.t, w.env, filepath.Join(w.bin, "starter"), files...)
	require.NoError(w.t, err, out)
	return out
}

func (w *world) result(id string) workflows.ClaimResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var r workflows.ClaimResult
	require.NoError(w.t, w.client.GetWorkflow(ctx, id, "").Get(ctx, &r), "result of %s", id)
	return r
}

func (w *world) waitStatus(id, status string) {
	require.Eventually(w.t, func() bool {
		v, err := w.client.QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
		if err != nil {
			return false
		}
		var s workflows.Status
		return v.Get(&s) == nil && s.State == status
	}, time.Minute, 100*time.Millisecond, "%s never reached %s", id, status)
}

// attempts returns, per regular activity type, the attempt that finally
// ran, and how many workflow tasks timed out while running (a worker died
// in a local activity).
func (w *world) attempts(id string) (map[string]int32, int) {
	out, timeouts := map[string]int32{}, 0
	scheduled := map[int64]string{}
	it := w.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(w.t, err)
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[e.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			out[scheduled[a.GetScheduledEventId()]] = a.GetAttempt()
		}
		if a := e.GetWorkflowTaskTimedOutEventAttributes(); a != nil && a.GetTimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
			timeouts++
		}
	}
	return out, timeouts
}

// modelCalls counts the model calls in the usage ledger per step; step 2
// counts every turn of its agent loop (two with the rules model).
func (w *world) modelCalls(id string) map[claim.Step]int {
	st, err := store.Open(w.store)
	require.NoError(w.t, err)
	defer st.Close()
	calls, err := st.ModelCalls(context.Background(), id)
	require.NoError(w.t, err)
	out := map[claim.Step]int{}
	for _, c := range calls {
		for _, step := range []claim.Step{claim.StepTriage, claim.StepAssess} {
			if c.Key.Within(claim.StepKey(id, step)) {
				out[step]++
			}
		}
	}
	return out
}

func (w *world) transfers(id string) (n int, total int64) {
	it := w.stripe.Stripe.Transfers.List(transferGroup(id))
	for it.Next() {
		n++
		total += it.Transfer().Amount
	}
	require.NoError(w.t, it.Err())
	return n, total
}

func (w *world) mails(id string) int {
	files, err := filepath.Glob(filepath.Join(w.mail, id+".step7*.eml"))
	require.NoError(w.t, err)
	return len(files)
}

// TestCrashesCostOneStepAndNeverASecondPayment kills the real worker with
// SIGKILL inside step 6 after Stripe made the transfer, in step 7 before the
// e-mail, and in step 4 before the model call, one claim at a time so each
// kill interrupts exactly one step.
func TestCrashesCostOneStepAndNeverASecondPayment(t *testing.T) {
	w := newWorld(t)
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"),
		"--crash-at", "claim-e2e-pay:6:after-effect,claim-e2e-notify:7,claim-e2e-assess:4",
		"--crash-state", filepath.Join(t.TempDir(), "crash-fired"))

	// Step 6, after the effect: the transfer exists, the history does not
	// know. The retry must get the original transfer back.
	payFile := w.claimFile("claim-e2e-pay", "640.00")
	out := w.start(payFile)
	assert.Contains(t, out, "started claim-e2e-pay")
	pay := w.result("claim-e2e-pay")
	assert.Equal(t, workflows.StatusPaid, pay.Status)
	assert.True(t, pay.PaymentReplayed, "the retried step 6 returned the original transfer")
	assert.Equal(t, 1, worker.Kills())
	out = w.start(payFile)
	assert.Contains(t, out, "claim-e2e-pay already exists", "a finished claim is never started again")
	assert.Contains(t, out, "completed")

	// Step 7 on an approved claim: approve through the real CLI.
	w.start(w.claimFile("claim-e2e-notify", "1840.00"))
	w.waitStatus("claim-e2e-notify", workflows.StatusWaiting)
	w.approve("claim-e2e-notify", "adjuster-17", "--note", "e2e")
	notify := w.result("claim-e2e-notify")
	assert.Equal(t, workflows.StatusPaid, notify.Status)
	assert.Equal(t, "adjuster-17", notify.Approval.Decision.Approver)
	assert.False(t, notify.PaymentReplayed)
	assert.Equal(t, 2, worker.Kills())

	// Step 4, before the model call. With the rules model the assessment
	// runs local in the task that ran triage (versionFreeAssess): the
	// task is lost, and the next worker asks the rules again for both
	// turns, which costs nothing and answers the same; the assessment was
	// never asked (the kill came first). A model that costs keeps its
	// assessment a checkpoint of its own (TestAPaidAssessmentIsItsOwnCheckpoint).
	w.start(w.claimFile("claim-e2e-assess", "320.00"))
	assert.Equal(t, workflows.StatusPaid, w.result("claim-e2e-assess").Status)
	assert.Equal(t, 3, worker.Kills())

	// Pay is a regular activity: the server retried it (attempt 2) after
	// its heartbeat stopped. Notify and the rules' assessment are local:
	// the workflow task running each timed out and the next worker ran it
	// again.
	for id, resumed := range map[string]string{"claim-e2e-pay": "PayClaimant", "claim-e2e-notify": "local", "claim-e2e-assess": "local"} {
		n, _ := w.transfers(id)
		assert.Equal(t, 1, n, "%s: exactly one transfer", id)
		assert.Equal(t, 1, w.mails(id), "%s: exactly one claimant e-mail", id)
		calls := map[claim.Step]int{claim.StepTriage: 2, claim.StepAssess: 1}
		if id == "claim-e2e-assess" {
			calls[claim.StepTriage] = 4 // the rules, asked again in the rerun task
		}
		assert.Equal(t, calls, w.modelCalls(id),
			"%s: each model step called once: completed steps are read from history, never asked again", id)
		attempts, taskTimeouts := w.attempts(id)
		for typ, attempt := range attempts {
			if typ == resumed {
				assert.Equal(t, int32(2), attempt, "%s: the interrupted step %s ran again", id, typ)
			} else {
				assert.Equal(t, int32(1), attempt, "%s: step %s was not interrupted and ran once", id, typ)
			}
		}
		if resumed == "local" {
			assert.Equal(t, 1, taskTimeouts, "%s: the workflow task running the local step timed out once", id)
		}
	}
	n, total := w.transfers("claim-e2e-notify")
	assert.Equal(t, 1, n)
	assert.Equal(t, int64(184000), total)

	// The operator's view agrees, computed from the provider.
	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "payments", "claim-e2e-pay", "claim-e2e-notify", "claim-e2e-assess")
	require.NoError(t, err, out)
	assert.Equal(t, "claim-e2e-pay: 1 transfer, total 640.00 usd\nclaim-e2e-notify: 1 transfer, total 1840.00 usd\nclaim-e2e-assess: 1 transfer, total 320.00 usd\n", out)
	out, err = testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "show", "claim-e2e-pay")
	require.NoError(t, err, out)
	assert.Contains(t, out, "REPLAYED")
	assert.True(t, strings.Contains(out, "step 6 pay") && strings.Contains(out, "RESUMED: attempt 2"), out)
	assert.Contains(t, out, "step 2 triage    completed (local): water-damage, medium severity", "recorded outputs, local steps included")
	out, err = testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "show", "--json", "claim-e2e-pay")
	require.NoError(t, err, out)
	var story struct {
		Steps []struct {
			Activity string          `json:"activity"`
			Attempt  int             `json:"attempt"`
			Output   json.RawMessage `json:"output"`
		} `json:"steps"`
		ModelCalls map[string]int `json:"model_calls"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &story), out)
	assert.Equal(t, map[string]int{"triage": 2, "assess": 1}, story.ModelCalls, "two triage turns, one assessment")
	var pays int
	for _, st := range story.Steps {
		if st.Activity == "PayClaimant" {
			pays++
			assert.Equal(t, 2, st.Attempt)
			assert.Contains(t, string(st.Output), `"replayed":true`)
		}
	}
	assert.Equal(t, 1, pays)
}

func addr(env []string) string { return envValue(env, "TEMPORAL_ADDRESS") }

// envValue is the value of name in an environment list.
func envValue(env []string, name string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v
		}
	}
	return ""
}
