package e2e

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// TestTriageAgentResumesFromItsRecordedTurns runs the real worker with
// MODEL_PROVIDER=openai against a Chat Completions server that answers
// differently on every call, and kills it with SIGKILL after the model
// answered turn 2 of the triage loop, before the activity returned. The
// resumed run asks turn 2 again (it was interrupted) but never turn 1 (it
// was recorded), answers the same recorded tool calls, and reaches the
// classification those tool results imply.
func TestTriageAgentResumesFromItsRecordedTurns(t *testing.T) {
	w := newWorld(t)
	sim := modelsim.New("sk-sim")
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	metricsAddr := freePort(t)
	w.env = append(w.env, "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+srv.URL+"/v1", "MODEL_NAME=sim-1", "MODEL_API_KEY=sk-sim",
		"METRICS_ADDR="+metricsAddr)
	// The very first call is rate limited (Retry-After: 1 s), the second
	// fails with a 500: both are retried by the activity, not the SDK.
	sim.Inject("429:1", modelsim.ServerError)
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"),
		"--crash-at", "claim-e2e-agent:2/turn2:after-effect", "--crash-state", filepath.Join(t.TempDir(), "crash-fired"))

	const id = "claim-e2e-agent"
	w.start(w.claimFile(id, "640.00"))
	r := w.result(id)
	assert.Equal(t, workflows.StatusPaid, r.Status)
	assert.Equal(t, 1, worker.Kills())

	var turn1, turn2, assess []modelsim.Call
	for _, c := range sim.Calls() {
		switch {
		case c.ClaimID != id:
		case c.Kind == "assessment":
			assess = append(assess, c)
		case len(c.Answers) == 0:
			turn1 = append(turn1, c)
		default:
			turn2 = append(turn2, c)
		}
	}
	require.Len(t, turn1, 3, "turn 1: the 429, the 500, the answer")
	assert.Equal(t, modelsim.Fault("429:1"), turn1[0].Fault)
	assert.GreaterOrEqual(t, turn1[1].At.Sub(turn1[0].At), time.Second, "the retry waited for Retry-After")
	assert.Equal(t, modelsim.ServerError, turn1[1].Fault)
	recorded := turn1[2].Issued
	require.Len(t, recorded, 3, "lookup_policy, prior_claims, get_document_text")
	require.Len(t, turn2, 2, "turn 2 was interrupted after the model answered and asked once more")
	for _, c := range turn2 {
		assert.Equal(t, recorded, c.Answers, "both turn-2 requests answer the recorded turn 1's tool calls")
	}
	assert.Len(t, assess, 1)

	calls, ledger := w.ledger(id)
	assert.Equal(t, map[string]int{id + ":step2:turn1": 1, id + ":step2:turn2": 2, id + ":step4": 1}, calls,
		"the usage ledger: turn 1 once (the 429 and the 500 never reached a model), turn 2 twice, assess once")
	assert.NotEmpty(t, ledger)

	// Turn 1 ran as a local activity; with turn 1's answer unrecorded in the
	// same workflow task, turn 2 ran as a regular activity: its own
	// checkpoint, retried by the server after the kill.
	attempts, _ := w.attempts(id)
	assert.Equal(t, int32(2), attempts["TriageTurn"], "turn 2 ran again")
	assert.Equal(t, int32(1), attempts["AssessClaim"])

	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "show", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "completed (local): asks for lookup_policy, prior_claims, get_document_text (openai/sim-1")
	assert.Contains(t, out, "tool get_document_text:")
	assert.Regexp(t, `RESUMED: attempt 2 .*water-damage, medium severity, fraud score 0 \(openai/sim-1`, out,
		"the resumed turn reached the classification the recorded tool results imply")

	// A claim with strong fraud signals: the agent flags it for
	// investigators (a tool with a side effect, keyed by turn) and a human
	// decides.
	dir := t.TempDir()
	path := filepath.Join(dir, "fraud.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"claim_id":"claim-e2e-fraud","policy_id":"pol-1001",
		"claimant":{"name":"Mallory","email":"mallory@example.com","stripe_account":"acct_1Mal"},
		"amount":"3000.00","currency":"usd","description":"urgent: stolen laptop, pay cash by wire"}`), 0o644))
	w.start(path)
	w.waitStatus("claim-e2e-fraud", workflows.StatusWaiting)
	st := w.status("claim-e2e-fraud")
	require.NotNil(t, st.Approval)
	assert.Contains(t, st.Approval.Request.Reasons[len(st.Approval.Request.Reasons)-1], "fraud score 75")
	assert.Equal(t, 3, st.ToolCalls, "two lookups (it has no documents), one flag")
	var turns int
	for _, m := range st.ModelCalls {
		if m.Step == 2 {
			turns++
			assert.Positive(t, m.CostMicros)
		}
	}
	assert.Equal(t, 3, turns)
	out, err = w.cli("workflow", "signal", "--workflow-id", "claim-e2e-fraud", "--name", "reject",
		"--input", w.receipt("reject", "claim-e2e-fraud", "adjuster-17", "--reason", "fraud"))
	require.NoError(t, err, out)
	assert.Equal(t, workflows.StatusRejected, w.result("claim-e2e-fraud").Status)
	s, err := store.Open(w.store)
	require.NoError(t, err)
	defer s.Close()
	flags, err := s.FraudFlags(context.Background(), "claim-e2e-fraud")
	require.NoError(t, err)
	require.Len(t, flags, 1)
	assert.Equal(t, "claim-e2e-fraud:step2:turn2:flag_fraud_signal", string(flags[0].Key))
	assert.True(t, strings.Contains(flags[0].Signal, "pressure-language"), flags[0].Signal)
	n, _ := w.transfers("claim-e2e-fraud")
	assert.Zero(t, n)

	// The replacement worker's metrics: turn 2 of the first claim (asked
	// again) and the fraud claim's three turns; both assessments; the fraud
	// claim's tools.
	text := scrape(t, metricsAddr)
	sim1 := `provider="openai/sim-1"`
	assert.Equal(t, 4.0, value(text, "model_calls_total", sim1+`.*step="triage"|step="triage".*`+sim1))
	assert.Equal(t, 2.0, value(text, "model_calls_total", `step="assess"`))
	assert.Positive(t, value(text, "model_tokens_total", `direction="in"`))
	assert.Positive(t, value(text, "model_tokens_total", `direction="out"`))
	assert.Positive(t, value(text, "model_cost_micros_total", sim1))
	assert.Equal(t, 1.0, value(text, "triage_tool_calls_total", `tool="flag_fraud_signal"`))
	assert.Equal(t, 1.0, value(text, "triage_tool_calls_total", `outcome="ok",.*tool="lookup_policy"|tool="lookup_policy".*outcome="ok"`))
	assert.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, w.describe(id).GetWorkflowExecutionInfo().GetStatus())
}

// ledger counts the usage ledger's calls per key.
func (w *world) ledger(id string) (map[string]int, []store.ModelCall) {
	st, err := store.Open(w.store)
	require.NoError(w.t, err)
	defer st.Close()
	calls, err := st.ModelCalls(context.Background(), id)
	require.NoError(w.t, err)
	out := map[string]int{}
	for _, c := range calls {
		out[string(c.Key)]++
	}
	return out, calls
}

// A model that costs to ask again keeps its assessment a checkpoint of its
// own (only the rules model's is free to repeat, versionFreeAssess): killed
// after the model answered the assessment, the worker's replacement gets
// the activity retried by the server, attempt 2, and no triage turn is
// asked again.
func TestAPaidAssessmentIsItsOwnCheckpoint(t *testing.T) {
	w := newWorld(t)
	sim := modelsim.New("sk-sim")
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	w.env = append(w.env, "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+srv.URL+"/v1", "MODEL_NAME=sim-1", "MODEL_API_KEY=sk-sim")
	const id = "claim-e2e-paid-assess"
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"),
		"--crash-at", id+":4:after-effect", "--crash-state", filepath.Join(t.TempDir(), "crash-fired"))

	w.start(w.claimFile(id, "640.00"))
	assert.Equal(t, workflows.StatusPaid, w.result(id).Status)
	assert.Equal(t, 1, worker.Kills())

	calls, _ := w.ledger(id)
	assert.Equal(t, map[string]int{id + ":step2:turn1": 1, id + ":step2:turn2": 1, id + ":step4": 2}, calls,
		"the assessment asked again (it was interrupted after its answer), no turn")
	attempts, taskTimeouts := w.attempts(id)
	assert.Equal(t, int32(2), attempts["AssessClaim"], "the server retried the regular assessment")
	assert.Zero(t, taskTimeouts, "no workflow task was lost")
}
