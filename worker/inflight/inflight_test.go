package inflight

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/serviceerror"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Two live workers never share a journal: the second would hand back the
// first's tasks while it still runs them.
func TestAJournalBelongsToOneLiveWorker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "journal")
	j, err := Open(dir, quiet)
	require.NoError(t, err)
	_, err = Open(dir, quiet)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "held by another live worker")
	fi, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "task tokens are the worker's alone")
	require.NoError(t, j.Close())
	j, err = Open(dir, quiet)
	require.NoError(t, err, "free once the first is gone")
	require.NoError(t, j.Close())
}

// call runs one request through the interceptor with the server's answer.
func call(t *testing.T, j *Journal, method string, req, reply any, answer error) {
	t.Helper()
	err := j.Interceptor()(context.Background(), service+method, req, reply, nil,
		func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return answer })
	require.ErrorIs(t, err, answer)
}

// The journal holds exactly the tasks polled and not yet answered, and the
// sticky queue; what the predecessor held is handed back once: activity
// attempts failed for an immediate retry, workflow tasks failed, the
// sticky queue shut down; tokens the server no longer knows are forgotten.
func TestTheJournalHandsBackWhatWasHeldAndNothingElse(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, quiet)
	require.NoError(t, err)
	call(t, j, "PollWorkflowTaskQueue", &workflowservice.PollWorkflowTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: "host:sticky-1", Kind: enumspb.TASK_QUEUE_KIND_STICKY}},
		&workflowservice.PollWorkflowTaskQueueResponse{TaskToken: []byte("wft-held")}, nil)
	call(t, j, "PollWorkflowTaskQueue", &workflowservice.PollWorkflowTaskQueueRequest{TaskQueue: &taskqueuepb.TaskQueue{Name: "claims"}},
		&workflowservice.PollWorkflowTaskQueueResponse{TaskToken: []byte("wft-done")}, nil)
	call(t, j, "RespondWorkflowTaskCompleted", &workflowservice.RespondWorkflowTaskCompletedRequest{TaskToken: []byte("wft-done")},
		&workflowservice.RespondWorkflowTaskCompletedResponse{WorkflowTask: &workflowservice.PollWorkflowTaskQueueResponse{TaskToken: []byte("wft-next-held")},
			ActivityTasks: []*workflowservice.PollActivityTaskQueueResponse{{TaskToken: []byte("eager-held")}}}, nil)
	call(t, j, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("act-held")}, nil)
	call(t, j, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("act-done")}, nil)
	call(t, j, "RespondActivityTaskCompleted", &workflowservice.RespondActivityTaskCompletedRequest{TaskToken: []byte("act-done")}, &workflowservice.RespondActivityTaskCompletedResponse{}, nil)
	call(t, j, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("act-lost")}, nil)
	call(t, j, "RecordActivityTaskHeartbeat", &workflowservice.RecordActivityTaskHeartbeatRequest{TaskToken: []byte("act-lost")},
		&workflowservice.RecordActivityTaskHeartbeatResponse{}, serviceerror.NewNotFound("gone"))
	call(t, j, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("act-unknown")}, nil)
	call(t, j, "PollActivityTaskQueue", &workflowservice.PollActivityTaskQueueRequest{},
		&workflowservice.PollActivityTaskQueueResponse{TaskToken: []byte("act-unsent")}, nil)
	call(t, j, "RespondActivityTaskFailed", &workflowservice.RespondActivityTaskFailedRequest{TaskToken: []byte("act-unsent")},
		&workflowservice.RespondActivityTaskFailedResponse{}, serviceerror.NewUnavailable("the frontend is down"))
	require.NoError(t, j.Close(), "killed")

	next, err := Open(dir, quiet)
	require.NoError(t, err)
	svc := &recorder{gone: map[string]bool{"act-unknown": true}}
	rep := next.HandBack(context.Background(), svc, "default", "successor")
	assert.Equal(t, "host:sticky-1", rep.StickyQueue)
	assert.Equal(t, []string{"host:sticky-1"}, svc.shutdown)
	assert.ElementsMatch(t, []string{"wft-held", "wft-next-held"}, svc.workflowTasks, "polled, or handed back with an answer")
	assert.ElementsMatch(t, []string{"eager-held", "act-held", "act-unknown", "act-unsent"}, svc.activities,
		"held: polled, dispatched eagerly, or answered with an error the server may not have seen")
	assert.Equal(t, Report{StickyQueue: "host:sticky-1", WorkflowTasks: 2, ActivityTasks: 3, Gone: 1, Took: rep.Took}, rep)
	for _, f := range svc.failures {
		assert.Equal(t, ErrKilled, f.GetApplicationFailureInfo().GetType())
	}
	for _, d := range svc.delays {
		assert.Equal(t, retryAfter, d, "retried at once, not after the policy's backoff")
	}

	again := &recorder{}
	rep = next.HandBack(context.Background(), again, "default", "successor")
	assert.Equal(t, Report{Took: rep.Took}, rep, "handed back once")
	assert.Empty(t, again.activities)
	require.NoError(t, next.Close())
}

// recorder is the frontend as HandBack sees it.
type recorder struct {
	workflowservice.WorkflowServiceClient
	mu                        sync.Mutex // HandBack calls it from several goroutines
	gone                      map[string]bool
	shutdown                  []string
	workflowTasks, activities []string
	failures                  []*failurepb.Failure
	delays                    []time.Duration
}

func (r *recorder) ShutdownWorker(_ context.Context, in *workflowservice.ShutdownWorkerRequest, _ ...grpc.CallOption) (*workflowservice.ShutdownWorkerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shutdown = append(r.shutdown, in.GetStickyTaskQueue())
	return &workflowservice.ShutdownWorkerResponse{}, nil
}

func (r *recorder) RespondWorkflowTaskFailed(_ context.Context, in *workflowservice.RespondWorkflowTaskFailedRequest, _ ...grpc.CallOption) (*workflowservice.RespondWorkflowTaskFailedResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.workflowTasks = append(r.workflowTasks, string(in.GetTaskToken()))
	r.failures = append(r.failures, in.GetFailure())
	return &workflowservice.RespondWorkflowTaskFailedResponse{}, nil
}

func (r *recorder) RespondActivityTaskFailed(_ context.Context, in *workflowservice.RespondActivityTaskFailedRequest, _ ...grpc.CallOption) (*workflowservice.RespondActivityTaskFailedResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.activities = append(r.activities, string(in.GetTaskToken()))
	if r.gone[string(in.GetTaskToken())] {
		return nil, serviceerror.NewNotFound("workflow execution already completed")
	}
	r.failures = append(r.failures, in.GetFailure())
	r.delays = append(r.delays, in.GetFailure().GetApplicationFailureInfo().GetNextRetryDelay().AsDuration())
	return &workflowservice.RespondActivityTaskFailedResponse{}, nil
}
