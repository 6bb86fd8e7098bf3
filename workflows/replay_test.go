package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claimfile"
)

// corpus is the replay corpus: real runs recorded by `make histories`, one
// per path, on a shelf (a folder) per workflow version (corpus_test.go).
var corpus = filepath.Join("testdata", "histories")

// histories are every recorded history, of every shelf.
func histories(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(corpus, "*", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories: run `make histories`")
	return files
}

// replay runs a recorded history against wf. The file is named after the
// workflow ID, which the replay must keep: the claim workflow checks it and
// derives every idempotency key from it. The interceptors are the worker's
// that the replay runs with.
func replay(t *testing.T, wf any, file string, interceptors ...interceptor.WorkerInterceptor) error {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: interceptors})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: WorkflowType})
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	id := strings.TrimSuffix(filepath.Base(file), ".json")
	return r.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id},
	})
}

// Every recorded history still replays against today's workflow code: a
// change that would break a claim in flight fails here, not in production.
func TestRecordedHistoriesReplay(t *testing.T) {
	for _, f := range histories(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			assert.NoError(t, replay(t, ClaimWorkflow, f))
		})
	}
}

// withExtraStep is ClaimWorkflow with a step added before the payment (a
// payee screen, say), with or without workflow.GetVersion. Replays never
// execute the activity, so it need not exist.
func withExtraStep(versioned bool) func(workflow.Context, ClaimInput) (ClaimResult, error) {
	return func(ctx workflow.Context, in ClaimInput) (ClaimResult, error) {
		r, err := newClaimRun(ctx, in)
		if err != nil {
			return ClaimResult{}, err
		}
		r.beforePay = func(ctx workflow.Context) error {
			if versioned && workflow.GetVersion(ctx, "screen-payee", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
				return nil // a run that started before the change keeps its old steps
			}
			ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
			return workflow.ExecuteActivity(ctx, "ScreenPayee").Get(ctx, nil)
		}
		return r.run(ctx)
	}
}

// A new step before the payment, added behind workflow.GetVersion, replays
// every old history; the same change without it breaks those that paid.
func TestAStepAddedBehindGetVersionKeepsOldHistoriesReplaying(t *testing.T) {
	var broken int
	for _, f := range histories(t) {
		assert.NoError(t, replay(t, withExtraStep(true), f), "%s: versioned change must replay", filepath.Base(f))
		if err := replay(t, withExtraStep(false), f); err != nil {
			broken++
			assert.Contains(t, err.Error(), "TMPRL1100", "%s: a nondeterminism error", filepath.Base(f))
		}
	}
	assert.Positive(t, broken, "the unversioned change should break the histories that reached the payment")
}

// The task priorities as a real server recorded them (checkpoint.go): the
// payment and the notices ahead of the model calls.
func TestRecordedHistoriesCarryTaskPriorities(t *testing.T) {
	got := map[string]int32{}
	for _, name := range []string{"hist-budget-openai-approved.json", "hist-budget-openai-expired.json"} {
		h := recordedHistory(t, name)
		for _, ev := range h.GetEvents() {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				got[a.GetActivityType().GetName()] = a.GetPriority().GetPriorityKey()
			}
		}
	}
	assert.Equal(t, map[string]int32{"TriageTurn": 4, "AssessClaim": 4, "PayClaimant": 1,
		"RemindApprovers": 1, "EscalateApproval": 1, "NotifyClaimant": 1}, got)
}

// A model step that found no capacity in time waited on a durable timer
// and ran again: the rate-limited history holds the handed-back wait.
func TestRecordedHistoryOfADurableModelWait(t *testing.T) {
	b, err := os.ReadFile(recordedPath(t, "hist-budget-openai-rate-limited.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "ModelBudgetWait")
	assert.Contains(t, string(b), "EVENT_TYPE_TIMER_FIRED")
}

// outbound is a worker interceptor that puts what wrap makes in front of
// each workflow's outbound calls (its activities, its timers…).
type outbound struct {
	interceptor.WorkerInterceptorBase
	wrap func(next interceptor.WorkflowOutboundInterceptor) interceptor.WorkflowOutboundInterceptor
}

func (o *outbound) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &outboundIn{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, wrap: o.wrap}
}

type outboundIn struct {
	interceptor.WorkflowInboundInterceptorBase
	wrap func(next interceptor.WorkflowOutboundInterceptor) interceptor.WorkflowOutboundInterceptor
}

func (i *outboundIn) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(i.wrap(out))
}

// auditProbe hears, during a replay, every audit record the workflow
// builds for step 9 (and for a dead letter's file): the input of WriteAudit.
func auditProbe(records *[][]byte) interceptor.WorkerInterceptor {
	return &outbound{wrap: func(next interceptor.WorkflowOutboundInterceptor) interceptor.WorkflowOutboundInterceptor {
		return &auditProbeOut{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: next}, records: records}
	}}
}

type auditProbeOut struct {
	interceptor.WorkflowOutboundInterceptorBase
	records *[][]byte
}

func (p *auditProbeOut) hear(args []any) {
	if len(args) == 1 {
		if in, ok := args[0].(activities.AuditInput); ok {
			*p.records = append(*p.records, in.Record)
		}
	}
}

func (p *auditProbeOut) ExecuteLocalActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	p.hear(args)
	return p.Next.ExecuteLocalActivity(ctx, typ, args...)
}

func (p *auditProbeOut) ExecuteActivity(ctx workflow.Context, typ string, args ...any) workflow.Future {
	p.hear(args)
	return p.Next.ExecuteActivity(ctx, typ, args...)
}

// recorded reads what a history recorded: the claim workflow's version
// (-1 when the run recorded none) and the SHA-256 of every audit record
// the claims store's ledger took, in order.
func recorded(t *testing.T, h *historypb.History) (version int, sums []string) {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	version = -1
	audits := map[int64]bool{}
	for _, e := range h.GetEvents() {
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == "WriteAudit" {
			audits[e.GetEventId()] = true
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && audits[a.GetScheduledEventId()] {
			var res activities.AuditResult
			require.NoError(t, dc.FromPayloads(a.GetResult(), &res))
			sums = append(sums, res.SHA256)
		}
		m := e.GetMarkerRecordedEventAttributes()
		switch {
		case m == nil:
		case m.GetMarkerName() == "Version":
			var id string
			var v int
			if dc.FromPayloads(m.GetDetails()["change-id"], &id) == nil && id == versionClaim {
				require.NoError(t, dc.FromPayloads(m.GetDetails()["version"], &v))
				version = v
			}
		case m.GetMarkerName() == "LocalActivity" && m.GetFailure() == nil:
			var data struct{ ActivityType string }
			if dc.FromPayloads(m.GetDetails()["data"], &data) == nil && data.ActivityType == "WriteAudit" {
				var res activities.AuditResult
				require.NoError(t, dc.FromPayloads(m.GetDetails()["result"], &res))
				sums = append(sums, res.SHA256)
			}
		}
	}
	return version, sums
}

// The audit record a replay rebuilds is, byte for byte, the one the run
// wrote: its SHA-256 is the one the ledger recorded. This is what lets step
// 9 run again in a later workflow task (the ledger refuses a different
// record under the same key), and it holds for every run from
// versionRecords on, whatever the code added to the record since: a field
// added for new runs is left out of older runs' records. (Runs before
// versionRecords audited as a regular activity, recorded once; their
// records have since grown fields they did not have.) From
// versionProvenance on, the builds the record names are read from the
// history, and replay names the same.
// replayAuditRecords replays a recorded run of version since or later that
// wrote an audit record, and returns its ID, the digests the ledger took
// (want), the records the replay rebuilt (got) and the history; ok is
// false for runs it skips.
func replayAuditRecords(t *testing.T, file string, since int) (id string, want []string, got [][]byte, h *historypb.History, ok bool) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	h, err = client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	f.Close()
	require.NoError(t, err)
	version, want := recorded(t, h)
	if version < since || len(want) == 0 {
		return "", nil, nil, nil, false
	}
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{
		Interceptors: []interceptor.WorkerInterceptor{auditProbe(&got)}})
	require.NoError(t, err)
	r.RegisterWorkflowWithOptions(ClaimWorkflow, workflow.RegisterOptions{Name: WorkflowType})
	quiet := log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	id = strings.TrimSuffix(filepath.Base(file), ".json")
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(quiet, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: id}}), id)
	return id, want, got, h, true
}

func TestRecordedAuditRecordsRebuildAsWritten(t *testing.T) {
	checked := 0
	for _, file := range histories(t) {
		id, want, got, _, ok := replayAuditRecords(t, file, versionRecords)
		if !ok {
			continue
		}
		require.GreaterOrEqual(t, len(got), len(want), id)
		for i, sum := range want {
			digest := sha256.Sum256(got[i])
			assert.Equal(t, sum, hex.EncodeToString(digest[:]), "%s: audit record %d rebuilt on replay is not the one written:\n%s", id, i, got[i])
		}
		checked++
	}
	assert.GreaterOrEqual(t, checked, 190, "histories with an audit record to check")
}

// A recorded run from versionProvenance on, filed as step 9 files it (its
// history, the audit record the run wrote, rebuilt here by replay, and the
// keys of the approver directory it read), verifies: the policy version is
// the digest of the rules intake recorded, every decision names a build
// that completed one of the run's workflow tasks and the run's policy,
// and every model answer the prompt version and build its step recorded.
func TestRecordedRunsFileClaimFilesThatVerify(t *testing.T) {
	dc := converter.GetDefaultDataConverter()
	checked := 0
	for _, file := range histories(t) {
		id, want, got, h, ok := replayAuditRecords(t, file, versionProvenance)
		if !ok {
			continue
		}
		require.NotEmpty(t, got, id)
		record := got[len(want)-1]

		var rec AuditRecord
		require.NoError(t, json.Unmarshal(record, &rec), id)
		cf := claimfile.File{Schema: claimfile.Schema, ClaimID: id, Outcome: rec.Outcome, Record: record, RecordSHA256: want[len(want)-1]}
		cf.FromHistory(h.GetEvents(), dc)
		seen := map[string]bool{}
		for _, s := range cf.Steps {
			var dir activities.OpenApprovalResult
			if s.Activity != "OpenApproval" || json.Unmarshal(s.Output, &dir) != nil {
				continue
			}
			add := func(approver, service string, k authority.Key) {
				jwk, err := json.Marshal(k.JWK())
				require.NoError(t, err)
				if !seen[k.ID] {
					seen[k.ID] = true
					cf.Keys = append(cf.Keys, claimfile.Key{ID: k.ID, Approver: approver, Service: service, JWK: jwk})
				}
			}
			for _, ap := range dir.Approvers {
				for _, k := range ap.Keys {
					add(ap.ID, "", k)
				}
			}
			for _, sv := range dir.Services {
				add("", sv.Name, sv.Key)
			}
		}
		assert.Empty(t, cf.Check(), id)
		if rec.Outcome != StatusDeadLettered && rec.Outcome != StatusWithdrawn {
			require.NotNil(t, rec.Decided, "%s: the outcome names what decided it", id)
			assert.NotEmpty(t, rec.Decided.BuildID, id)
		}
		assert.NotEmpty(t, rec.PolicyVersion, id)
		for _, m := range rec.Models {
			assert.NotEmpty(t, m.PromptVersion, "%s: step %d turn %d", id, m.Step, m.Turn)
		}
		checked++
	}
	assert.GreaterOrEqual(t, checked, 10, "recorded runs from versionProvenance on")
}

// An escalation recorded under versionLocalNotices is one workflow task:
// the timer fires, and the task it wakes writes the search attribute, the
// queue row and the supervisors' notice (markers) and starts the next
// timer; no activity task, no second workflow task.
func TestARecordedEscalationIsOneWorkflowTask(t *testing.T) {
	for _, name := range []string{"hist-local-notices-escalated.json", "hist-local-notices-openai-escalated.json"} {
		h := recordedHistory(t, name)
		events := h.GetEvents()
		notice := slices.IndexFunc(events, func(ev *historypb.HistoryEvent) bool {
			for _, p := range ev.GetMarkerRecordedEventAttributes().GetDetails()["data"].GetPayloads() {
				if strings.Contains(string(p.GetData()), `"ActivityType":"EscalateApproval"`) {
					return true
				}
			}
			return false
		})
		require.Positive(t, notice, "%s: the escalation notice is a marker", name)
		from, to := notice, notice
		for from > 0 && events[from].GetEventType() != enumspb.EVENT_TYPE_TIMER_FIRED {
			from--
		}
		for to < len(events)-1 && events[to].GetEventType() != enumspb.EVENT_TYPE_TIMER_STARTED {
			to++
		}
		var got []string
		for _, ev := range events[from : to+1] {
			got = append(got, strings.TrimPrefix(ev.GetEventType().String(), "EventType"))
		}
		assert.Equal(t, []string{"TimerFired", "WorkflowTaskScheduled", "WorkflowTaskStarted", "WorkflowTaskCompleted",
			"UpsertWorkflowSearchAttributes", "MarkerRecorded", "MarkerRecorded", "TimerStarted"}, got, name)
		for _, ev := range events {
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				assert.NotContains(t, []string{"RemindApprovers", "EscalateApproval"}, a.GetActivityType().GetName(), name)
			}
		}
	}
}

// recordedPath finds one of the recorded histories by file name, on
// whichever shelf it is.
func recordedPath(t *testing.T, name string) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(corpus, "*", name))
	require.NoError(t, err)
	require.Len(t, paths, 1, "recorded history %s", name)
	return paths[0]
}

// recordedHistory reads one of the recorded histories by file name.
func recordedHistory(t *testing.T, name string) *historypb.History {
	t.Helper()
	f, err := os.Open(recordedPath(t, name))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h
}
