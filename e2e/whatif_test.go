package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	_ "modernc.org/sqlite"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/whatif"
	"github.com/durableclaims/durableclaims/workflows"
)

// TestWhatIfNamesExactlyTheChangedDecisionsAndTouchesNothing runs 50 claims
// through the rules model (paid automatically, approved, lowered, rejected
// by an approver, rejected by the coverage), then a what-if against
// modelsim answering differently for a known subset, its process killed
// midway and run again: the report names exactly that subset with the
// right deltas, the dangerous rows first; no candidate call is made after
// the history recorded its answer (only a later attempt of an activity the
// kill or a failure cut off asks again); and stripesim's transfers, the mail spool,
// the blob store and every table of the claims store are unchanged byte for
// byte. A what-if with the current model and policy changes nothing.
func TestWhatIfNamesExactlyTheChangedDecisionsAndTouchesNothing(t *testing.T) {
	w := newWorld(t)
	// Claims under no jurisdiction's rules: the coverage check rejects on
	// its own (under the law a person decides every denial, docs/law.md).
	w.env = append(w.env, "JURISDICTION_RULES_FILE=none")
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	defer worker.Stop()

	type kind struct {
		prefix string
		n      int
		amount func(i int) string
	}
	kinds := []kind{
		{"a", 20, func(i int) string { return fmt.Sprintf("%d.00", 200+30*i) }},   // paid without a human
		{"b", 10, func(i int) string { return fmt.Sprintf("%d.00", 1500+100*i) }}, // approved as asked
		{"c", 8, func(i int) string { return fmt.Sprintf("%d.00", 2000+100*i) }},  // lowered by the approver
		{"d", 6, func(i int) string { return fmt.Sprintf("%d.00", 1800+100*i) }},  // rejected by the approver
		{"e", 6, func(i int) string { return "100.00" }},                          // under the deductible: rejected by the rules
	}
	var ids, files []string
	for _, k := range kinds {
		for i := 1; i <= k.n; i++ {
			id := fmt.Sprintf("claim-wi-%s%02d", k.prefix, i)
			ids = append(ids, id)
			f := w.claimFileBy(id, k.amount(i), id+"@example.com", "acct_"+strings.ReplaceAll(id, "-", ""))
			if k.prefix == "e" {
				b, err := os.ReadFile(f)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(f, bytes.Replace(b, []byte("pol-1001"), []byte("pol-2002"), 1), 0o644))
			}
			files = append(files, f)
		}
	}
	w.start(files...)
	for _, id := range ids {
		switch id[len("claim-wi-")] {
		case 'b':
			w.waitStatus(id, workflows.StatusWaiting)
			w.approve(id, "adjuster-17")
		case 'c':
			w.waitStatus(id, workflows.StatusWaiting)
			w.approve(id, "adjuster-17", "--amount", "1200.00", "--reason", "depreciation")
		case 'd':
			w.waitStatus(id, workflows.StatusWaiting)
			out, err := w.cli("workflow", "signal", "--workflow-id", id, "--name", "reject",
				"--input", w.receipt("reject", id, "supervisor-3", "--reason", "pre-existing damage"))
			require.NoError(t, err, out)
		}
	}
	want := map[byte]string{'a': workflows.StatusPaid, 'b': workflows.StatusPaid, 'c': workflows.StatusPaid,
		'd': workflows.StatusRejected, 'e': workflows.StatusRejected}
	for _, id := range ids {
		require.Equal(t, want[id[len("claim-wi-")]], w.result(id).Status, id)
	}
	// Every claim file is written by the run's last step: wait for the 50.
	require.Eventually(t, func() bool { return len(w.claimFilesAll()) == len(ids) }, time.Minute, 200*time.Millisecond)
	worker.Stop() // nothing but the what-if runs from here
	before := w.snapshot()

	// The candidate: modelsim, answering as the rules model except for the
	// subset its rules name.
	sim := modelsim.New("sk-sim")
	rules, err := modelsim.ParseAnswers(strings.Join([]string{
		`claim-wi-a0[1-3]:recommend=50%`, // paid less, still without a human
		`claim-wi-a0[45]:fraud_score=80`, // now to a human
		`claim-wi-b0[12]:recommend=40%`,  // under the limit: skips the human who approved
		`claim-wi-c0[1-3]:recommend=40%`, // skips the human who lowered: dangerous
		`claim-wi-d0[12]:recommend=30%`,  // skips the human who rejected: dangerous
	}, ";"))
	require.NoError(t, err)
	sim.Answers = rules
	sim.Latency = modelsim.Latency{Min: 20 * time.Millisecond, Max: 40 * time.Millisecond}
	srv := httptest.NewServer(sim)
	defer srv.Close()

	out := filepath.Join(t.TempDir(), "report")
	args := []string{"whatif", "--id", "whatif-e2e", "--claims", strings.Join(ids, ","), "--model-provider", "openai",
		"--model-name", "sim-candidate", "--model-base-url", srv.URL + "/v1", "--concurrency", "4", "--price-in", "2500000",
		"--price-out", "10000000", "--out", out, "--json"}
	env := append(slices.Clone(w.env), "MODEL_API_KEY=sk-sim")

	// The what-if's process is killed with SIGKILL once 15 claims are done.
	cmd := exec.Command(filepath.Join(w.bin, "claimsctl"), args...)
	cmd.Env = append(os.Environ(), env...)
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	started := time.Now()
	var killedAt whatif.Progress
	if !assert.Eventually(t, func() bool {
		killedAt = w.whatIfProgress("whatif-e2e")
		return killedAt.Done() >= 15
	}, 2*time.Minute, 20*time.Millisecond) {
		t.Fatalf("the what-if did not get to 15 claims done in 2 minutes (at %+v); its output:\n%s", killedAt, log.String())
	}
	killAt := time.Now()
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.Less(t, killedAt.Done(), len(ids), "the kill came before the end")

	stdout, err := testenv.RunStdout(t, env, filepath.Join(w.bin, "claimsctl"), args...)
	require.NoError(t, err, stdout)
	var rep whatif.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)

	rows := map[string]whatif.Row{}
	var changed, dangerous []string
	for _, r := range rep.Rows {
		rows[r.ClaimID] = r
		assert.Empty(t, r.Error, r.ClaimID)
		if r.Changed {
			changed = append(changed, r.ClaimID)
		}
		if r.Dangerous {
			dangerous = append(dangerous, r.ClaimID)
		}
	}
	require.Len(t, rows, len(ids))
	slices.Sort(changed)
	slices.Sort(dangerous)
	assert.Equal(t, []string{"claim-wi-a01", "claim-wi-a02", "claim-wi-a03", "claim-wi-a04", "claim-wi-a05",
		"claim-wi-b01", "claim-wi-b02", "claim-wi-c01", "claim-wi-c02", "claim-wi-c03", "claim-wi-d01", "claim-wi-d02"}, changed)
	assert.Equal(t, []string{"claim-wi-c01", "claim-wi-c02", "claim-wi-c03", "claim-wi-d01", "claim-wi-d02"}, dangerous)
	for i, r := range rep.Rows[:len(dangerous)] {
		assert.True(t, r.Dangerous, "row %d: the dangerous rows come first", i)
	}

	// The deltas, row by row.
	a01 := rows["claim-wi-a01"] // 230.00 paid; the candidate recommends half
	assert.Equal(t, int64(23000), a01.PaidThenMinor)
	assert.Equal(t, int64(11500), a01.PayoutNowMinor)
	assert.Equal(t, workflows.RouteAutoApprove, a01.Now.Route.Route)
	a04 := rows["claim-wi-a04"]
	assert.Equal(t, workflows.RouteAutoApprove, a04.Then.Route.Route)
	assert.Equal(t, workflows.RouteHuman, a04.Now.Route.Route)
	assert.Contains(t, strings.Join(a04.ReasonsAdded, "\n"), "fraud score 80 is at or over the review threshold")
	b01 := rows["claim-wi-b01"] // 1,600.00 approved as asked; now 640.00 without a human
	assert.Equal(t, int64(160000), b01.PaidThenMinor)
	assert.Equal(t, int64(64000), b01.PayoutNowMinor)
	assert.Equal(t, workflows.RouteHuman, b01.Then.Route.Route)
	assert.Equal(t, workflows.RouteAutoApprove, b01.Now.Route.Route)
	assert.NotEmpty(t, b01.ReasonsDropped)
	assert.False(t, b01.Dangerous, "the approver approved what was asked: skipped, not overruled")
	c02 := rows["claim-wi-c02"] // 2,200.00 asked, lowered to 1,200.00; now 880.00 without a human
	assert.Equal(t, int64(120000), c02.PaidThenMinor)
	assert.Equal(t, int64(88000), c02.PayoutNowMinor)
	assert.Equal(t, "lowered", c02.Human.Intervention())
	d01 := rows["claim-wi-d01"] // 1,900.00 rejected by the approver; now 570.00 paid
	assert.Equal(t, int64(0), d01.PaidThenMinor)
	assert.Equal(t, int64(57000), d01.PayoutNowMinor)
	assert.Equal(t, "rejected", d01.Human.Intervention())
	for _, id := range []string{"claim-wi-a10", "claim-wi-b05", "claim-wi-c05", "claim-wi-d05", "claim-wi-e01"} {
		r := rows[id]
		assert.False(t, r.Changed, id)
		assert.Equal(t, r.Then.Route, r.Now.Route, id)
	}
	assert.Equal(t, workflows.RouteReject, rows["claim-wi-e01"].Now.Route.Route)
	for _, r := range rep.Rows {
		for _, tool := range r.Now.Tools {
			assert.Equal(t, whatif.SourceRecorded, tool.Source, "%s: the candidate made the recorded run's calls: answered from the recording", r.ClaimID)
		}
		assert.Equal(t, "openai/sim-candidate", r.Now.Usage.Model)
		assert.Positive(t, r.Now.Usage.CostMicros, r.ClaimID)
	}

	// No candidate call was made after the history recorded its answer:
	// a call repeats only in a later attempt of its activity (the kill cut
	// the attempt off, or it failed or timed out before its completion
	// reached the server), so never more often than the attempts the
	// history counts, and never after the completion.
	recorded := map[string]recordedCall{}
	for _, id := range ids {
		maps.Copy(recorded, w.recordedCalls(whatif.ClaimRunID("whatif-e2e", id)))
	}
	calls := map[string]int{}
	var repeated int
	for _, c := range sim.Calls() {
		if c.Unread {
			// A request whose body the kill cut off: modelsim refused it
			// unread and uncharged, and no model call was made for it. It
			// can only be the kill's.
			require.Equal(t, "error", c.Answered, "call %d: unread, and not refused", c.N)
			require.Zero(t, c.Tokens, "call %d: refused, yet charged", c.N)
			require.True(t, c.At.Before(killAt.Add(time.Second)), "call %d at %s: unreadable, long after the kill at %s", c.N, c.At.Format(time.StampMicro), killAt.Format(time.StampMicro))
			t.Logf("call %d at %s: refused unread (the kill at %s cut it off)", c.N, c.At.Format(time.StampMicro), killAt.Format(time.StampMicro))
			continue
		}
		require.Contains(t, ids, c.ClaimID)
		key := callKey(c)
		calls[key]++
		r, ok := recorded[key]
		if !assert.True(t, ok, "%s: a call no activity of the history recorded", key) {
			continue
		}
		assert.True(t, c.At.Before(r.completed), "%s: asked at %s, after its answer was recorded at %s", key, c.At.Format(time.StampMicro), r.completed.Format(time.StampMicro))
	}
	for key, n := range calls {
		assert.LessOrEqual(t, int32(n), recorded[key].attempt, "%s: asked %d times in %d attempts", key, n, recorded[key].attempt)
		if n > 1 {
			repeated++
		}
	}
	perClaim := map[string]int{}
	for key := range calls {
		perClaim[strings.SplitN(key, " ", 2)[0]]++
	}
	for _, id := range ids {
		wantCalls := 3 // two triage turns and the assessment
		if id[len("claim-wi-")] == 'e' {
			wantCalls = 2 // not covered: never assessed
		}
		assert.Equal(t, wantCalls, perClaim[id], "%s: the candidate's distinct calls", id)
	}
	t.Logf("killed at %d/%d done, %s after the start; %d calls asked again in a later attempt; %d calls in all", killedAt.Done(), len(ids), killAt.Sub(started).Round(time.Millisecond), repeated, len(sim.Calls()))

	// The report's files.
	for _, f := range []string{"report.md", "report.json", "payout-deltas.svg"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		require.NoError(t, err, f)
		assert.NotEmpty(t, b, f)
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if dst := os.Getenv("WHATIF_SAMPLE_REPORT"); dst != "" {
		require.NoError(t, os.WriteFile(dst, md, 0o644)) // docs/whatif.md's sample
	}
	assert.Less(t, strings.Index(string(md), "claim-wi-c01"), strings.Index(string(md), "claim-wi-a01"), "the dangerous rows are listed first")

	// The current model and policy: nothing changes.
	stdout, err = testenv.RunStdout(t, w.env, filepath.Join(w.bin, "claimsctl"), "whatif", "--id", "whatif-e2e-same",
		"--claims", strings.Join(ids, ","), "--model-provider", "rules", "--out", t.TempDir(), "--json")
	require.NoError(t, err, stdout)
	var same whatif.Report
	require.NoError(t, json.Unmarshal([]byte(stdout), &same))
	require.Len(t, same.Rows, len(ids))
	for _, r := range same.Rows {
		assert.False(t, r.Changed, "%s: the current model and policy decide as they did: %+v", r.ClaimID, r)
		assert.Empty(t, r.Error, r.ClaimID)
	}

	// An attacker who reaches the frontend starts a run of their own under
	// that what-if's ID, its memo copied, with one claim of their choosing;
	// the operator runs the same command again. It must not resume (its
	// worker would read the attacker's claims into the attacker's history).
	d, err := w.client.DescribeWorkflow(context.Background(), "whatif-e2e-same", "")
	require.NoError(t, err)
	memo := map[string]any{}
	dc, _ := testenv.Converters(t, w.env) // the worst case: an attacker who can read the memo
	for k, p := range d.RawResponse.GetWorkflowExecutionInfo().GetMemo().GetFields() {
		var v string
		require.NoError(t, dc.FromPayload(p, &v))
		memo[k] = v
	}
	hijack, err := w.client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "whatif-e2e-same",
		TaskQueue: whatif.TaskQueue("whatif-e2e-same"), Memo: memo, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE},
		whatif.WorkflowName, whatif.Input{ClaimIDs: []string{"claim-wi-c01"}, Candidate: same.Candidate})
	require.NoError(t, err)
	defer func() {
		_ = w.client.TerminateWorkflow(context.Background(), "whatif-e2e-same", hijack.GetRunID(), "test over")
	}()
	out, err = testenv.RunStdout(t, w.env, filepath.Join(w.bin, "claimsctl"), "whatif", "--id", "whatif-e2e-same",
		"--claims", strings.Join(ids, ","), "--model-provider", "rules", "--out", t.TempDir(), "--json")
	require.Error(t, err, "claimsctl resumed a what-if someone else started under its ID: %s", out)
	assert.Contains(t, out, "not resuming it")
	hist := w.client.GetWorkflowHistory(context.Background(), "whatif-e2e-same", hijack.GetRunID(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for hist.HasNext() {
		e, err := hist.Next()
		require.NoError(t, err)
		assert.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, e.GetEventType(), "the operator's worker ran the attacker's what-if")
	}

	// An attacker who reaches the frontend, while a what-if runs, asks its
	// worker for a payment and for claim files, from a workflow of their own
	// posing as one of the what-if's claims.
	slow := modelsim.New("sk-sim")
	slow.Latency = modelsim.Latency{Min: 2 * time.Second, Max: 2 * time.Second}
	slowSrv := httptest.NewServer(slow)
	defer slowSrv.Close()
	cmd = exec.Command(filepath.Join(w.bin, "claimsctl"), "whatif", "--id", "whatif-e2e-attacked", "--claims", "claim-wi-a01,claim-wi-b01",
		"--model-provider", "openai", "--model-name", "sim-candidate", "--model-base-url", slowSrv.URL+"/v1", "--concurrency", "1",
		"--out", t.TempDir(), "--json")
	cmd.Env = append(os.Environ(), env...)
	var attacked lockedBuffer
	cmd.Stdout, cmd.Stderr = &attacked, &attacked
	require.NoError(t, cmd.Start())
	require.Eventually(t, func() bool { return len(slow.Calls()) > 0 }, time.Minute, 50*time.Millisecond, attacked.String())
	queue := whatif.TaskQueue("whatif-e2e-attacked")
	answers := w.rogueWhatIf(whatif.ClaimRunID("whatif-e2e-attacked", "claim-wi-c01"), queue,
		rogueCall{"PayClaimant", map[string]any{"key": "claim-wi-c01:step6", "claim_id": "claim-wi-c01",
			"amount_minor": 99_999_00, "currency": "usd", "destination": "acct_rogue"}},
		rogueCall{"LoadRecorded", "claim-wi-c01"},
		rogueCall{"Tool", map[string]any{"claim_id": "claim-wi-c01", "call": map[string]any{"id": "x", "name": "prior_claims"},
			"scope": map[string]any{"claim_id": "claim-wi-c01", "email": "claim-wi-c01@example.com"}}})
	// The attacker holds no payload keys, so it reads each refusal's type,
	// never its message.
	assert.Contains(t, answers[0].Error, "type: ActivityNotRegisteredError", "no payment activity exists in the what-if's worker")
	for _, a := range answers[1:] {
		assert.Contains(t, a.Error, "type: "+whatif.ErrNotOurs+", retryable: false", "%s: the what-if's activities act only for its own claims", a.Activity)
		assert.Empty(t, a.Output)
	}
	require.NoError(t, cmd.Wait(), attacked.String())
	assert.Contains(t, attacked.String(), `"evaluated": 2`, "the what-if itself went on")

	assert.Equal(t, before, w.snapshot(), "no transfer, e-mail, blob or row changed")
}

// rogueWhatIf runs, under id, the attacker's workflow registered as the
// what-if's claim workflow type, asking queue's worker for each call once.
func (w *world) rogueWhatIf(id, queue string, calls ...rogueCall) []rogueAnswer {
	w.t.Helper()
	c, err := client.Dial(client.Options{HostPort: addr(w.env), Namespace: "default"})
	require.NoError(w.t, err)
	defer c.Close()
	wk := worker.New(c, "rogue-whatif", worker.Options{})
	wk.RegisterWorkflowWithOptions(func(ctx workflow.Context, calls []rogueCall) ([]rogueAnswer, error) {
		return askEach(ctx, queue, calls)
	}, workflow.RegisterOptions{Name: whatif.ClaimWorkflowName})
	require.NoError(w.t, wk.Start())
	defer wk.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: "rogue-whatif"}, whatif.ClaimWorkflowName, calls)
	require.NoError(w.t, err)
	var out []rogueAnswer
	require.NoError(w.t, run.Get(ctx, &out))
	require.Len(w.t, out, len(calls))
	return out
}

// callKey names one candidate call: the claim, the kind, and how far its
// conversation was (which triage turn).
// A claim has one assessment, whatever its conversation.
func callKey(c modelsim.Call) string {
	if c.Kind == "assessment" {
		return c.ClaimID + " assessment"
	}
	return fmt.Sprintf("%s %s %d", c.ClaimID, c.Kind, c.Messages)
}

// recordedCall is a candidate call as its what-if claim's history recorded
// it: when its activity's completion reached the server, and in which
// attempt.
type recordedCall struct {
	completed time.Time
	attempt   int32
}

// recordedCalls reads a what-if claim's history: each completed Turn or
// Assess activity, by the callKey of the call it made (a turn's
// conversation is the system prompt, the claim and the messages before it).
func (w *world) recordedCalls(runID string) map[string]recordedCall {
	claimID := runID[strings.Index(runID, "/")+1:]
	keys, attempts := map[int64]string{}, map[int64]int32{}
	out := map[string]recordedCall{}
	for _, e := range w.events(runID) {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
			switch a.GetActivityType().GetName() {
			case "Turn":
				var in whatif.TurnInput
				dc, _ := testenv.Converters(w.t, w.env)
				require.NoError(w.t, dc.FromPayloads(a.GetInput(), &in))
				keys[e.GetEventId()] = fmt.Sprintf("%s triage %d", claimID, 2+len(in.Messages))
			case "Assess":
				keys[e.GetEventId()] = claimID + " assessment"
			}
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil {
			attempts[a.GetScheduledEventId()] = a.GetAttempt()
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && keys[a.GetScheduledEventId()] != "" {
			out[keys[a.GetScheduledEventId()]] = recordedCall{completed: e.GetEventTime().AsTime(), attempt: attempts[a.GetScheduledEventId()]}
		}
	}
	return out
}

func (w *world) whatIfProgress(id string) whatif.Progress {
	v, err := w.client.QueryWorkflow(context.Background(), id, "", whatif.QueryProgress)
	var p whatif.Progress
	if err == nil {
		_ = v.Get(&p)
	}
	return p
}

func (w *world) claimFilesAll() []string {
	db, err := sql.Open("sqlite", "file:"+w.store+"?mode=ro")
	require.NoError(w.t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT claim_id FROM claim_files`)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(w.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	return ids
}

// snapshot is everything a what-if must not change: every transfer at the
// payment provider, every file of the mail spool and the blob store, and
// every row of every table of the claims store, as digests.
func (w *world) snapshot() map[string]string {
	out := map[string]string{}
	var transfers []string
	for _, tr := range w.allTransfers() {
		b, err := json.Marshal(tr)
		require.NoError(w.t, err)
		transfers = append(transfers, string(b))
	}
	slices.Sort(transfers)
	out["stripe transfers"] = strings.Join(transfers, "\n")
	for _, dir := range []string{w.mail, strings.TrimSuffix(strings.TrimPrefix(envValue(w.env, "BLOB_URL"), "file://"), "?create_dir=true")} {
		require.NoError(w.t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			sum := sha256.Sum256(b)
			out[path] = hex.EncodeToString(sum[:])
			return err
		}))
	}
	db, err := sql.Open("sqlite", "file:"+w.store+"?mode=ro")
	require.NoError(w.t, err)
	defer db.Close()
	tables, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	require.NoError(w.t, err)
	var names []string
	for tables.Next() {
		var n string
		require.NoError(w.t, tables.Scan(&n))
		names = append(names, n)
	}
	require.NoError(w.t, tables.Close())
	require.Greater(w.t, len(names), 5)
	for _, n := range names {
		rows, err := db.Query(`SELECT * FROM "` + n + `"`)
		require.NoError(w.t, err, n)
		cols, _ := rows.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		var all []string
		for rows.Next() {
			require.NoError(w.t, rows.Scan(ptrs...))
			all = append(all, fmt.Sprintf("%#v", vals))
		}
		require.NoError(w.t, rows.Close())
		slices.Sort(all)
		sum := sha256.Sum256([]byte(strings.Join(all, "\n")))
		out["table "+n] = fmt.Sprintf("%d rows %x", len(all), sum)
	}
	return out
}
