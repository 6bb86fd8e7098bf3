package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v76"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// The attacker of these tests reaches the Temporal frontend and nothing
// else: no approver key, no claims store, no worker configuration. With an
// ordinary SDK client they run workflow code of their own, in their own
// process, on a task queue of their own, and have it schedule the claims
// worker's activities on the claims task queue by name, with any input.

// rogueCall is one activity the rogue workflow asks the claims worker for.
type rogueCall struct {
	Activity string `json:"activity"`
	Input    any    `json:"input"`
}

// rogueAnswer is what the claims worker answered.
type rogueAnswer struct {
	Activity string `json:"activity"`
	Output   string `json:"output,omitempty"`
	Error    string `json:"error,omitempty"`
}

// rogueWorkflow is the attacker's code: each call once, no retries, on the
// claims worker's task queue.
func rogueWorkflow(ctx workflow.Context, calls []rogueCall) ([]rogueAnswer, error) {
	return askEach(ctx, workflows.TaskQueue, calls)
}

// askEach asks queue's worker for each call once, and keeps every answer.
func askEach(ctx workflow.Context, queue string, calls []rogueCall) ([]rogueAnswer, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{TaskQueue: queue,
		StartToCloseTimeout: 30 * time.Second, RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
	var out []rogueAnswer
	for _, c := range calls {
		var v any
		err := workflow.ExecuteActivity(ctx, c.Activity, c.Input).Get(ctx, &v)
		a := rogueAnswer{Activity: c.Activity}
		if err != nil {
			a.Error = err.Error()
		} else {
			b, _ := json.Marshal(v)
			a.Output = string(b)
		}
		out = append(out, a)
	}
	return out, nil
}

// rogue is the attacker's own worker, polling a task queue of its own, its
// workflow registered under the claim workflow's type name.
type rogue struct {
	w     *world
	c     client.Client
	queue string
}

func newRogue(w *world) *rogue {
	c, err := client.Dial(client.Options{HostPort: addr(w.env), Namespace: "default"})
	require.NoError(w.t, err)
	w.t.Cleanup(c.Close)
	r := &rogue{w: w, c: c, queue: "rogue-queue"}
	wk := worker.New(c, r.queue, worker.Options{})
	wk.RegisterWorkflowWithOptions(rogueWorkflow, workflow.RegisterOptions{Name: workflows.WorkflowType})
	require.NoError(w.t, wk.Start())
	w.t.Cleanup(wk.Stop)
	return r
}

// run runs the rogue workflow under id and returns what the worker answered.
func (r *rogue) run(id string, calls ...rogueCall) []rogueAnswer {
	r.w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run, err := r.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: r.queue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, workflows.WorkflowType, calls)
	require.NoError(r.w.t, err)
	var out []rogueAnswer
	require.NoError(r.w.t, run.Get(ctx, &out))
	require.Len(r.w.t, out, len(calls))
	return out
}

// asMap is a claim as the attacker writes it: JSON, no project types.
func asMap(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// allTransfers lists every transfer the payment provider holds.
func (w *world) allTransfers() []*stripe.Transfer {
	var out []*stripe.Transfer
	it := w.stripe.Stripe.Transfers.List(&stripe.TransferListParams{})
	for it.Next() {
		out = append(out, it.Transfer())
	}
	require.NoError(w.t, it.Err())
	return out
}

func (w *world) record(id string) store.Record {
	st, err := store.Open(w.store)
	require.NoError(w.t, err)
	defer st.Close()
	rec, err := st.GetClaim(context.Background(), id)
	require.NoError(w.t, err)
	return rec
}

// A rogue workflow calls every activity the claims worker registers, with
// forged input: pay a stranger, pay again under a fresh key, read a real
// claim, a real claimant's prior claims, the insurer's approver directory,
// spend the insurer's model, mail anyone, close a waiting claim as paid,
// forge its audit record, read the payment reconciliation. Under its own
// workflow ID, and as "ClaimWorkflow" under the ID of a real claim that was
// registered and never started. The worker pays nothing, changes nothing in
// the store, answers no claimant data, and the real claims still complete.
func TestAttackARogueWorkflowGetsNothingFromTheWorker(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	victim, unstarted := "claim-e2e-victim", "claim-e2e-unstarted"
	w.start(w.claimFile(victim, "1840.00"))
	w.waitStatus(victim, workflows.StatusWaiting)
	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "starter"), "--register-only", w.claimFile(unstarted, "640.00"))
	require.NoError(t, err, out)

	forged := asMap(t, claim.Claim{ID: unstarted, PolicyID: "pol-1001", AmountMinor: 64000, Currency: "usd",
		Claimant:    claim.Claimant{Name: "Mallory", Email: "mallory@evil.example", StripeAccount: "acct_1Mallory"},
		Description: "A burst pipe flooded the kitchen overnight"})
	pay := func(id string, key string, minor int64, to string) rogueCall {
		return rogueCall{"PayClaimant", map[string]any{"key": key, "workflow_id": id, "claim_id": id,
			"amount_minor": minor, "currency": "usd", "destination": to}}
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	calls := []rogueCall{
		pay(unstarted, unstarted+":step6", 4999999, "acct_1Mallory"),
		pay(unstarted, unstarted+":step6", 4999999, "acct_1Ada"), // the real payee, any amount
		pay(unstarted, unstarted+":step6-again", 64000, "acct_1Ada"),
		{"LoadClaim", map[string]any{"claim": forged}},
		{"OpenApproval", map[string]any{"claim_id": unstarted}},
		{"CallTool", map[string]any{"key": unstarted + ":step2:turn1:prior_claims",
			"scope": map[string]any{"claim_id": unstarted, "email": "ada@example.com", "account": "acct_1Ada"},
			"call":  map[string]any{"id": "c1", "name": "prior_claims", "arguments": "{}"}}},
		{"CallTool", map[string]any{"key": unstarted + ":step2:turn1:lookup_policy",
			"scope": map[string]any{"claim_id": unstarted, "policy_id": "pol-1001"},
			"call":  map[string]any{"id": "c2", "name": "lookup_policy", "arguments": "{}"}}},
		{"CallTool", map[string]any{"key": unstarted + ":step2:turn1:flag_fraud_signal",
			"scope": map[string]any{"claim_id": victim},
			"call":  map[string]any{"id": "c3", "name": "flag_fraud_signal", "arguments": `{"signal":"forged"}`}}},
		{"TriageTurn", map[string]any{"key": unstarted + ":step2:turn1", "claim": forged, "turn": 1, "waits_for_budget": true}},
		{"AssessClaim", map[string]any{"key": unstarted + ":step4", "claim": forged, "waits_for_budget": true}},
		{"NotifyClaimant", map[string]any{"key": unstarted + ":step7", "claim_id": unstarted, "to": "mallory@evil.example",
			"name": "Mallory", "outcome": "paid", "payout_minor": 4999999, "currency": "usd", "transfer_id": "tr_forged"}},
		{"RemindApprovers", map[string]any{"key": unstarted + ":step5:remind", "claim_id": unstarted, "amount": "0.01",
			"currency": "usd", "request_sha256": strings.Repeat("0", 64), "deadline": until}},
		{"EscalateApproval", map[string]any{"key": unstarted + ":step5:escalate", "claim_id": unstarted, "amount": "0.01",
			"currency": "usd", "request_sha256": strings.Repeat("0", 64), "deadline": until}},
		{"CloseClaim", map[string]any{"key": victim + ":step8", "claim_id": victim, "outcome": "paid",
			"transfer_id": "tr_forged", "payout_minor": 184000}},
		{"WriteAudit", map[string]any{"key": victim + ":step9", "claim_id": victim, "record": map[string]any{"outcome": "paid"}}},
		// The victim's wait shown closed, and a wait that never was shown open.
		{"PublishApproval", map[string]any{"claim_id": victim, "open": false, "approval": map[string]any{"rev": 99, "stage": "waiting"}}},
		{"PublishApproval", map[string]any{"claim_id": unstarted, "open": true, "approval": map[string]any{"rev": 99, "stage": "waiting",
			"request": map[string]any{"claim_id": unstarted, "amount_minor": 1, "currency": "usd"}}}},
		{"ReconcilePayments", map[string]any{"key": "rogue:reconcile", "workflow_id": "rogue", "started": until,
			"since": since, "until": until}},
	}
	assessedBefore := w.modelCalls(victim)
	r := newRogue(w)
	answers := append(r.run("rogue-payer", pay("rogue-payer", "rogue-payer:step6", 4999999, "acct_1Mallory"),
		pay("rogue-payer", "rogue-payer:step6-b", 4999999, "acct_1Mallory")),
		r.run(unstarted, calls...)...) // a "ClaimWorkflow" under a real claim's ID, on its own queue
	for _, a := range answers {
		assert.Empty(t, a.Output, "%s answered the rogue workflow", a.Activity)
		if assert.NotEmpty(t, a.Error, "%s ran for the rogue workflow", a.Activity) {
			for _, secret := range []string{"Lovelace", "ada@example.com", "acct_1Ada", "adjuster17@", "limits"} {
				assert.NotContains(t, a.Error, secret, "%s told the rogue workflow something", a.Activity)
			}
		}
	}

	assert.Empty(t, w.allTransfers(), "nothing paid to anyone")
	for _, id := range []string{victim, unstarted} {
		rec := w.record(id)
		assert.Equal(t, store.StatusOpen, rec.Status, "%s: the store is unchanged", id)
		assert.Empty(t, rec.ClosedKey, id)
	}
	assert.Equal(t, assessedBefore, w.modelCalls(victim), "no model call billed to the insurer")
	assert.Empty(t, w.modelCalls(unstarted), "no model call billed to the insurer")
	assert.Empty(t, w.record(unstarted).RunID, "the rogue run took nothing")
	st, err := store.Open(w.store)
	require.NoError(t, err)
	flags, err := st.FraudFlags(context.Background(), victim)
	require.NoError(t, err)
	assert.Empty(t, flags, "no fraud flag forged on a real claim")
	_, err = st.Audit(context.Background(), victim)
	assert.ErrorIs(t, err, store.ErrNotFound, "no audit record forged")
	refused, err := st.Refusals(context.Background(), unstarted)
	require.NoError(t, err)
	st.Close()
	assert.NotEmpty(t, refused, "the foreign calls are on the claim's record")
	mails, _ := filepath.Glob(filepath.Join(w.mail, "*.eml"))
	for _, m := range mails {
		b, err := os.ReadFile(m)
		require.NoError(t, err)
		assert.NotContains(t, string(b), "mallory@evil.example", "no mail sent for the rogue")
		assert.NotContains(t, string(b), "0.01", "no reminder forged")
	}

	// The real claims still complete: the victim is approved and paid once,
	// the registered claim is started by the starter (the rogue run that
	// used its ID has ended) and paid once.
	w.approve(victim, "adjuster-17")
	assert.Equal(t, workflows.StatusPaid, w.result(victim).Status)
	assert.Contains(t, w.start(w.claimFile(unstarted, "640.00")), "a foreign run (ClaimWorkflow on task queue \"rogue-queue\"")
	assert.Equal(t, workflows.StatusPaid, w.result(unstarted).Status)
	for id, want := range map[string]int64{victim: 184000, unstarted: 64000} {
		n, total := w.transfers(id)
		assert.Equal(t, 1, n, id)
		assert.Equal(t, want, total, id)
	}

	// Paid claims are no more use to it: a second payment under a new key,
	// or the same one, is refused.
	answers = r.run(victim, pay(victim, victim+":step6", 184000, "acct_1Ada"), pay(victim, victim+":step6-b", 184000, "acct_1Ada"))
	for _, a := range answers {
		assert.NotEmpty(t, a.Error, a.Activity)
	}
	n, _ := w.transfers(victim)
	assert.Equal(t, 1, n, "a paid claim is paid once, ever")
}

// A claim the system of record closed (paid, rejected by a supervisor,
// expired) is never taken again: started again under its ID with
// AllowDuplicate, the new run ends at once, paying nothing, whatever
// approver then approves it; the store keeps its outcome.
func TestAttackClosedClaimsAreNeverTakenAgain(t *testing.T) {
	w := newWorld(t)
	// Under no jurisdiction's rules an unanswered claim expires (docs/law.md).
	w.env = append(w.env, "APPROVAL_TTL=2s", "ESCALATION_TTL=2s", "JURISDICTION_RULES_FILE=none", "FINAL_OUTCOME=reject")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	paid, rejected, expired := "claim-e2e-was-paid", "claim-e2e-was-rejected", "claim-e2e-was-expired"
	w.start(w.claimFile(paid, "640.00"), w.claimFile(rejected, "1840.00"), w.claimFile(expired, "1840.00"))
	w.waitStatus(rejected, workflows.StatusWaiting)
	out, err := w.cli("workflow", "signal", "--workflow-id", rejected, "--name", "reject",
		"--input", w.receipt("reject", rejected, "supervisor-3", "--reason", "the invoice is forged"))
	require.NoError(t, err, out)
	want := map[string]string{paid: workflows.StatusPaid, rejected: workflows.StatusRejected, expired: workflows.StatusExpired}
	for id, status := range want {
		assert.Equal(t, status, w.result(id).Status, id)
	}

	for id, status := range want {
		rec := w.record(id)
		before, _ := w.transfers(id)
		run, err := w.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.TaskQueue,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE}, workflows.WorkflowType, workflows.ClaimInput{Claim: rec.Claim})
		require.NoError(t, err)
		// An approver is at hand: if the new run waits, it is approved.
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var r workflows.ClaimResult
			done <- run.Get(ctx, &r)
		}()
		var runErr error
	wait:
		for {
			select {
			case runErr = <-done:
				break wait
			case <-time.After(200 * time.Millisecond):
				v, err := w.client.QueryWorkflow(context.Background(), id, run.GetRunID(), workflows.QueryStatus)
				var s workflows.Status
				if err == nil && v.Get(&s) == nil && s.State == workflows.StatusWaiting && s.Approval != nil && len(s.Approval.Votes) == 0 {
					_, _ = w.cli("workflow", "signal", "--workflow-id", id, "--name", "approve", "--input", w.receipt("approve", id, "adjuster-17"))
				}
			}
		}
		if assert.Error(t, runErr, "%s: a new run of a %s claim must end at once", id, status) {
			assert.Contains(t, runErr.Error(), "closed", id)
		}
		after, _ := w.transfers(id)
		assert.Equal(t, before, after, "%s: nothing more paid", id)
		assert.Equal(t, status, w.record(id).Status, "%s: the store keeps its outcome", id)
	}
}

// An approver cannot approve their own claim under another spelling of
// their address (case, a +tag) or through an address or payout account of
// their own the directory lists; another approver can.
func TestAttackSelfApprovalThroughAliasesAndOwnAccounts(t *testing.T) {
	w := newWorld(t)
	dirPath := envValue(w.env, "APPROVERS_FILE")
	var dir map[string]any
	b, err := os.ReadFile(dirPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &dir))
	for _, a := range dir["approvers"].([]any) {
		if ap := a.(map[string]any); ap["id"] == "adjuster-9" {
			ap["emails"] = []string{"nine.at.home@example.com"}
			ap["payout_accounts"] = []string{"acct_1NinePrivate"}
		}
	}
	b, err = json.Marshal(dir)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dirPath, b, 0o644))
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))

	cases := []struct{ id, email, account, approver string }{
		{"claim-e2e-alias-tag", "Adjuster17+home@Insurer.Example", "acct_1Home17", "adjuster-17"},
		{"claim-e2e-alias-email", "nine.at.home@example.com", "acct_1Other", "adjuster-9"},
		{"claim-e2e-alias-account", "someone@example.com", "acct_1NinePrivate", "adjuster-9"},
	}
	for _, c := range cases {
		w.start(w.claimFileBy(c.id, "1200.00", c.email, c.account))
	}
	for _, c := range cases {
		w.waitStatus(c.id, workflows.StatusWaiting)
		out, err := w.decideRaw(c.id, w.receipt("approve", c.id, c.approver))
		if assert.Error(t, err, "%s: %s approved their own claim: %s", c.id, c.approver, out) {
			assert.Contains(t, out, "self-approval", c.id)
		}
		assert.Equal(t, workflows.StatusWaiting, w.status(c.id).State, c.id)
	}
	for _, c := range cases {
		w.approve(c.id, "supervisor-3")
		assert.Equal(t, workflows.StatusPaid, w.result(c.id).Status, c.id)
		n, _ := w.transfers(c.id)
		assert.Equal(t, 1, n, c.id)
	}
}

func (w *world) claimFileBy(id, amount, email, account string) string {
	dir := w.t.TempDir()
	require.NoError(w.t, os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("a photo of "+id), 0o644))
	path := filepath.Join(dir, id+".json")
	doc := fmt.Sprintf(`{"claim_id":%q,"policy_id":"pol-1001","claimant":{"name":"Someone","email":%q,"stripe_account":%q},
		"amount":%q,"currency":"usd","description":"A burst pipe flooded the kitchen overnight","documents":[{"name":"a.jpg","path":"a.jpg"}]}`,
		id, email, account, amount)
	require.NoError(w.t, os.WriteFile(path, []byte(doc), 0o644))
	return path
}

// A receipt signed for the right claim and the right request in another
// namespace (staging, sharing the approvers' keys) does not decide the
// claim here: receipts name the namespace and deployment they are for.
func TestAttackAReceiptFromAnotherNamespaceIsRefused(t *testing.T) {
	w := newWorld(t)
	out, err := testenv.Run(t, nil, w.temporal, "operator", "namespace", "create", "--namespace", "staging", "--address", addr(w.env))
	require.NoError(t, err, out)
	for _, sa := range []string{"ClaimStatus=Keyword", "ApprovalDeadline=Datetime"} {
		name, typ, _ := strings.Cut(sa, "=")
		out, err := testenv.Run(t, nil, w.temporal, "operator", "search-attribute", "create", "--name", name, "--type", typ,
			"--address", addr(w.env), "--namespace", "staging")
		require.NoError(t, err, out)
	}
	staging := []string{}
	for _, kv := range w.env {
		switch {
		case strings.HasPrefix(kv, "TEMPORAL_NAMESPACE="), strings.HasPrefix(kv, "CLAIMS_DB="), strings.HasPrefix(kv, "BLOB_URL="):
		default:
			staging = append(staging, kv)
		}
	}
	sdir := t.TempDir()
	staging = append(staging, "TEMPORAL_NAMESPACE=staging", "CLAIMS_DB="+filepath.Join(sdir, "claims.db"),
		"BLOB_URL=file://"+filepath.Join(sdir, "blobs")+"?create_dir=true")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	testenv.Supervise(t, staging, filepath.Join(w.bin, "worker"))

	id := "claim-e2e-two-namespaces"
	file := w.claimFile(id, "1840.00")
	w.start(file)
	out, err = testenv.Run(t, staging, filepath.Join(w.bin, "starter"), file)
	require.NoError(t, err, out)
	w.waitStatus(id, workflows.StatusWaiting)
	prodHash := w.status(id).Approval.RequestSHA256
	sc := testenv.ClientFor(t, w.env, "staging")
	require.Eventually(t, func() bool {
		v, err := sc.QueryWorkflow(context.Background(), id, "", workflows.QueryStatus)
		var s workflows.Status
		return err == nil && v.Get(&s) == nil && s.State == workflows.StatusWaiting
	}, testTimeout, pollEvery, "the staging claim never waited")

	out, err = testenv.RunStdout(t, staging, filepath.Join(w.bin, "claimsctl"), "receipt", "approve", id,
		"--key", filepath.Join(w.keys, "adjuster-17.key"))
	require.NoError(t, err, out)
	fromStaging := strings.TrimSpace(out)
	var payload approvals.Input
	require.NoError(t, json.Unmarshal([]byte(fromStaging), &payload), fromStaging)
	_, r, ok := approvals.PeekReceipt(payload.Receipt)
	require.True(t, ok)
	require.Equal(t, prodHash, r.RequestSHA256, "the same request, so only the audience tells them apart")

	out, err = w.decideRaw(id, fromStaging)
	if assert.Error(t, err, "a staging receipt decided a production claim: %s", out) {
		assert.Contains(t, out, "audience")
	}
	assert.Equal(t, workflows.StatusWaiting, w.status(id).State)
	n, _ := w.transfers(id)
	assert.Zero(t, n)
	w.approve(id, "adjuster-17")
	assert.Equal(t, workflows.StatusPaid, w.result(id).Status)
}

// A thousand refused decide updates, each with its own update ID, leave a
// bounded trail in the claims store (the first ones and a count), and the
// claim still completes.
func TestAttackAThousandRefusedUpdatesStayBounded(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-update-flood"
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatus(id, workflows.StatusWaiting)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	refusedN := 0
	var mu sync.Mutex
	for i := range 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			h, err := w.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateID: fmt.Sprintf("flood-%04d", i),
				UpdateName: approvals.UpdateDecide, WaitForStage: client.WorkflowUpdateStageCompleted,
				Args: []any{map[string]string{"receipt": fmt.Sprintf("eyJ.forged-%d.x", i)}}})
			if err == nil {
				err = h.Get(ctx, nil)
			}
			if err != nil {
				mu.Lock()
				refusedN++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1000, refusedN, "every forged update is refused")
	st, err := store.Open(w.store)
	require.NoError(t, err)
	defer st.Close()
	require.Eventually(t, func() bool {
		refused, err := st.Refusals(context.Background(), id)
		dropped, err2 := st.RefusalsDropped(context.Background(), id)
		return err == nil && err2 == nil && len(refused)+dropped == 1000
	}, time.Minute, 200*time.Millisecond, "every refusal is recorded or counted")
	refused, err := st.Refusals(context.Background(), id)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(refused), store.MaxRefusalsPerClaim, "the trail is bounded")

	w.approve(id, "adjuster-17")
	assert.Equal(t, workflows.StatusPaid, w.result(id).Status, "the claim still completes")
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)
}
