package replaycheck

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/workflows"
)

func corpus(t *testing.T) []string {
	paths, err := HistoryFiles(filepath.Join("..", "..", "workflows", "testdata", "histories"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	return paths
}

// The committed corpus replays on this build, as CI checks it.
func TestTheCommittedCorpusReplays(t *testing.T) {
	paths := corpus(t)
	rep, err := CheckFiles(paths, Options{})
	require.NoError(t, err)
	assert.Empty(t, rep.Failures)
	assert.Equal(t, len(paths), rep.Replayed)
	assert.Positive(t, rep.Events)
}

// screened is ClaimWorkflow with a new first step, not behind GetVersion.
func screened(ctx workflow.Context, in workflows.ClaimInput) (workflows.ClaimResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := workflow.ExecuteActivity(actx, "ScreenClaimant").Get(ctx, nil); err != nil {
		return workflows.ClaimResult{}, err
	}
	return workflows.ClaimWorkflow(ctx, in)
}

// A build whose claim workflow issues a new first command fails on the
// first file and names the event the history holds instead.
func TestABuildWithANewFirstStepIsNamed(t *testing.T) {
	register := func(r workflows.Registry) {
		r.RegisterWorkflowWithOptions(screened, workflow.RegisterOptions{Name: workflows.WorkflowType})
		r.RegisterWorkflowWithOptions(workflows.ReconcileWorkflow, workflow.RegisterOptions{Name: workflows.ReconcileWorkflowType})
	}
	paths := corpus(t)
	rep, err := CheckFiles(paths, Options{Register: register})
	require.NoError(t, err)
	require.Len(t, rep.Failures, 1, "stops at the first")
	assert.True(t, rep.Stopped)
	f := rep.Failures[0]
	assert.Contains(t, f.Err.Error(), "TMPRL1100")
	assert.NotEmpty(t, f.WorkflowID)
	assert.Contains(t, f.String(), f.WorkflowID)

	all, err := CheckFiles(paths, Options{Register: register, KeepGoing: true})
	require.NoError(t, err)
	assert.Greater(t, len(all.Failures)+all.FailuresDropped, len(paths)/2, "most claim histories break")
	assert.Len(t, all.Failures, maxFailures, "the report keeps the first %d and counts the rest", maxFailures)
	for _, f := range all.Failures {
		assert.LessOrEqual(t, len(f.Err.Error()), maxErrorText+len(" …"))
	}
}

// The event an SDK error names is described from the history.
func TestNamedEvent(t *testing.T) {
	h, err := readHistory(corpus(t)[0])
	require.NoError(t, err)
	var scheduled int64
	var name string
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled, name = ev.GetEventId(), a.GetActivityType().GetName()
			break
		}
	}
	require.Positive(t, scheduled)
	got := namedEvent(h, errorf("[TMPRL1100] lookup failed for scheduledEventID to activityID: scheduleEventID: %d, activityID: 5", scheduled))
	assert.Equal(t, "event "+itoa(scheduled)+": ActivityTaskScheduled "+name, got)
	assert.Empty(t, namedEvent(h, errorf("no event here")))
}

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// fakeClient serves the listing and the histories of Check from memory:
// pages of pageSize runs, each run's history from a corpus file (or a
// NotFound, or a short history).
type fakeClient struct {
	client.Client
	runs      []*workflowpb.WorkflowExecutionInfo
	histories map[string]*historypb.History // by workflow ID; missing: NotFound
	pageSize  int
	listed    atomic.Int32  // ListWorkflow calls
	block     chan struct{} // when set, GetWorkflowHistory waits on it
}

func (f *fakeClient) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	f.listed.Add(1)
	if !strings.Contains(req.GetQuery(), `ExecutionStatus = "Running"`) {
		return &workflowservice.ListWorkflowExecutionsResponse{}, nil // no closed runs
	}
	from := 0
	if len(req.GetNextPageToken()) > 0 {
		from, _ = strconv.Atoi(string(req.GetNextPageToken()))
	}
	to := min(from+f.pageSize, len(f.runs))
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: f.runs[from:to]}
	if to < len(f.runs) {
		resp.NextPageToken = []byte(strconv.Itoa(to))
	}
	return resp, nil
}

func (f *fakeClient) GetWorkflowHistory(ctx context.Context, id, runID string, _ bool, _ enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return &events{err: ctx.Err()}
		}
	}
	h, ok := f.histories[id]
	if !ok {
		return &events{err: serviceerror.NewNotFound("workflow not found")}
	}
	return &events{list: h.GetEvents()}
}

type events struct {
	list []*historypb.HistoryEvent
	err  error
}

func (e *events) HasNext() bool { return e.err != nil || len(e.list) > 0 }
func (e *events) Next() (*historypb.HistoryEvent, error) {
	if e.err != nil {
		err := e.err
		e.err = nil
		return nil, err
	}
	ev := e.list[0]
	e.list = e.list[1:]
	return ev, nil
}

// fake lists n runs, each with the history of a corpus claim (the files
// named after their workflow IDs, which the claim workflow checks).
func fake(t *testing.T, n int) *fakeClient {
	f := &fakeClient{histories: map[string]*historypb.History{}, pageSize: 7}
	for _, path := range corpus(t) {
		if len(f.runs) == n {
			break
		}
		h, err := readHistory(path)
		require.NoError(t, err)
		if h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName() != workflows.WorkflowType {
			continue
		}
		id := strings.TrimSuffix(filepath.Base(path), ".json")
		f.histories[id] = h
		f.runs = append(f.runs, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-" + id},
			Type: &commonpb.WorkflowType{Name: workflows.WorkflowType}, Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING})
	}
	require.Len(t, f.runs, n)
	return f
}

// Every page of the listing is replayed; a run deleted since it was
// listed and one with no completed task are counted, not passed.
func TestCheckReplaysEveryPageAndCountsWhatItSkips(t *testing.T) {
	f := fake(t, 30)
	delete(f.histories, f.runs[3].GetExecution().GetWorkflowId())
	short := f.runs[4].GetExecution().GetWorkflowId()
	f.histories[short] = &historypb.History{Events: f.histories[short].GetEvents()[:2]}
	rep, err := Check(context.Background(), f, Options{TaskQueue: "claims", Concurrency: 3})
	require.NoError(t, err)
	assert.Empty(t, rep.Failures)
	assert.Equal(t, 30, rep.Open)
	assert.Equal(t, 28, rep.Replayed)
	assert.Equal(t, 1, rep.Gone)
	assert.Equal(t, 1, rep.Skipped)
	assert.GreaterOrEqual(t, f.listed.Load(), int32(5), "30 runs in pages of 7")
}

// A check whose context ends is an error, never a pass.
func TestACheckThatDoesNotFinishIsNotAPass(t *testing.T) {
	f := fake(t, 10)
	f.block = make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	rep, err := Check(ctx, f, Options{TaskQueue: "claims", Concurrency: 2})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not finish")
	assert.Zero(t, rep.Replayed)
}

// A build that breaks them stops at the first, and names it.
func TestCheckStopsAtTheFirstRunThatBreaks(t *testing.T) {
	f := fake(t, 20)
	register := func(r workflows.Registry) {
		r.RegisterWorkflowWithOptions(screened, workflow.RegisterOptions{Name: workflows.WorkflowType})
	}
	rep, err := Check(context.Background(), f, Options{TaskQueue: "claims", Concurrency: 2, Register: register})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Failures)
	assert.True(t, rep.Stopped)
	assert.Less(t, rep.Replayed, 20, "stopped before the end")
	assert.Contains(t, rep.Failures[0].Err.Error(), "TMPRL1100")
	assert.Equal(t, "Running", rep.Failures[0].Status)

	all, err := Check(context.Background(), f, Options{TaskQueue: "claims", Concurrency: 2, Register: register, KeepGoing: true})
	require.NoError(t, err)
	assert.Len(t, all.Failures, 20)
	assert.Equal(t, 20, all.Replayed)
}
