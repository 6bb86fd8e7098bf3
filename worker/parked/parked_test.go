package parked

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commandpb "go.temporal.io/api/command/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/log"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
)

func timer(d time.Duration) *commandpb.Command {
	return &commandpb.Command{CommandType: enumspb.COMMAND_TYPE_START_TIMER,
		Attributes: &commandpb.Command_StartTimerCommandAttributes{StartTimerCommandAttributes: &commandpb.StartTimerCommandAttributes{
			TimerId: "1", StartToFireTimeout: durationpb.New(d)}}}
}

func command(t enumspb.CommandType) *commandpb.Command { return &commandpb.Command{CommandType: t} }

func TestParks(t *testing.T) {
	marker := command(enumspb.COMMAND_TYPE_RECORD_MARKER) // a local activity's result
	for name, c := range map[string]struct {
		commands []*commandpb.Command
		force    bool
		parks    bool
	}{
		"an approval wait's deadline":                 {[]*commandpb.Command{marker, timer(72 * time.Hour)}, false, true},
		"exactly the threshold":                       {[]*commandpb.Command{timer(30 * time.Second)}, false, true},
		"a short wait for model capacity":             {[]*commandpb.Command{timer(2 * time.Second)}, false, false},
		"a step's activity":                           {[]*commandpb.Command{command(enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK)}, false, false},
		"a deadline and an activity (the payment)":    {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK)}, false, false},
		"a deadline and a child":                      {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION)}, false, false},
		"a deadline and a signal to another run":      {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION)}, false, false},
		"a deadline while a local activity runs":      {[]*commandpb.Command{timer(time.Hour)}, true, false},
		"nothing new (a signal that changed nothing)": {nil, false, false},
		"the run ends":                                {[]*commandpb.Command{command(enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION)}, false, false},
		"a deadline and the run ends":                 {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_COMPLETE_WORKFLOW_EXECUTION)}, false, false},
		"a deadline and the run fails":                {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_FAIL_WORKFLOW_EXECUTION)}, false, false},
		"a deadline and the run is cancelled":         {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_CANCEL_WORKFLOW_EXECUTION)}, false, false},
		"a deadline and a new run":                    {[]*commandpb.Command{timer(time.Hour), command(enumspb.COMMAND_TYPE_CONTINUE_AS_NEW_WORKFLOW_EXECUTION)}, false, false},
	} {
		t.Run(name, func(t *testing.T) {
			r := &workflowservice.RespondWorkflowTaskCompletedRequest{Commands: c.commands, ForceCreateNewWorkflowTask: c.force}
			assert.Equal(t, c.parks, Parks(r, DefaultAfter))
		})
	}
}

// The interceptor drops the sticky attributes of a parking completion and
// of nothing else, passes every call on, and answers ErrReleased for a
// parking completion the server accepted without handing back a task.
func TestInterceptor(t *testing.T) {
	sticky := func() *taskqueuepb.StickyExecutionAttributes {
		return &taskqueuepb.StickyExecutionAttributes{WorkerTaskQueue: &taskqueuepb.TaskQueue{Name: "host:sticky"},
			ScheduleToStartTimeout: durationpb.New(2 * time.Second)}
	}
	parking := func() *workflowservice.RespondWorkflowTaskCompletedRequest {
		return &workflowservice.RespondWorkflowTaskCompletedRequest{Commands: []*commandpb.Command{timer(time.Hour)}, StickyAttributes: sticky()}
	}
	var sent []any
	var answer error
	var next *workflowservice.PollWorkflowTaskQueueResponse
	invoke := func(_ context.Context, _ string, req, reply any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		sent = append(sent, req)
		if r, ok := reply.(*workflowservice.RespondWorkflowTaskCompletedResponse); ok && answer == nil {
			r.WorkflowTask = next
		}
		return answer
	}
	call := func(i grpc.UnaryClientInterceptor, req any) error {
		var reply any = &workflowservice.RespondWorkflowTaskCompletedResponse{}
		if _, ok := req.(*workflowservice.PollWorkflowTaskQueueRequest); ok {
			reply = &workflowservice.PollWorkflowTaskQueueResponse{}
		}
		return i(context.Background(), "/m", req, reply, nil, invoke)
	}
	i := Interceptor(DefaultAfter)

	parked := parking()
	assert.ErrorIs(t, call(i, parked), ErrReleased, "an accepted parking completion: the SDK must drop the run")
	assert.Nil(t, parked.GetStickyAttributes(), "a parked run stays sticky")

	working := &workflowservice.RespondWorkflowTaskCompletedRequest{
		Commands: []*commandpb.Command{command(enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK)}, StickyAttributes: sticky()}
	require.NoError(t, call(i, working))
	assert.NotNil(t, working.GetStickyAttributes(), "a working run lost its sticky queue")
	other := &workflowservice.PollWorkflowTaskQueueRequest{}
	require.NoError(t, call(i, other))
	assert.Equal(t, []any{parked, working, other}, sent, "every call goes on, once")

	next = &workflowservice.PollWorkflowTaskQueueResponse{TaskToken: []byte("t")}
	handedBack := parking()
	require.NoError(t, call(i, handedBack), "the server handed back the run's next task: the SDK must run it")
	assert.Nil(t, handedBack.GetStickyAttributes())
	next = nil

	// A completion over ~3.5 MiB goes in pages; a page that happens to
	// hold only the deadline is not the completion, and an error on it
	// would stop the SDK sending the rest.
	for _, page := range []*workflowservice.RespondWorkflowTaskCompletedRequest{
		{Commands: []*commandpb.Command{timer(time.Hour)}, IntermediatePage: true, StickyAttributes: sticky()},
		{Commands: []*commandpb.Command{timer(time.Hour)}, IntermediatePage: true, PageNumber: 1, StickyAttributes: sticky()},
		{PageNumber: 2, StickyAttributes: sticky()},
	} {
		require.NoError(t, call(i, page), "page %d", page.GetPageNumber())
		assert.NotNil(t, page.GetStickyAttributes(), "page %d", page.GetPageNumber())
	}

	answer = errors.New("unavailable")
	assert.Equal(t, answer, call(i, parking()), "a completion the server refused is the SDK's to handle")
	answer = nil

	off := parking()
	require.NoError(t, call(Interceptor(0), off))
	assert.NotNil(t, off.GetStickyAttributes(), "STICKY_RELEASE_AFTER=0 still released a run")
}

type record struct {
	level, msg string
	keyvals    []any
}

type recorder struct{ logs *[]record }

func (r recorder) Debug(msg string, kv ...any) { *r.logs = append(*r.logs, record{"debug", msg, kv}) }
func (r recorder) Info(msg string, kv ...any)  { *r.logs = append(*r.logs, record{"info", msg, kv}) }
func (r recorder) Warn(msg string, kv ...any)  { *r.logs = append(*r.logs, record{"warn", msg, kv}) }
func (r recorder) Error(msg string, kv ...any) { *r.logs = append(*r.logs, record{"error", msg, kv}) }

// Logger lowers the SDK's report of a release to debug level, and nothing
// else, with or without fields.
func TestLogger(t *testing.T) {
	var logs []record
	l := Logger(recorder{&logs})
	wrapped := fmt.Errorf("respond: %w", ErrReleased)
	other := errors.New("unavailable")
	l.Info("Task processing failed with error", "Error", ErrReleased)
	l.Warn("wrapped", "Error", wrapped)
	l.Info("Task processing failed with error", "Error", other)
	l.Error("other", "Error", other)
	withFields := log.With(l, "Namespace", "default")
	_, filtered := withFields.(quiet)
	assert.True(t, filtered, "log.With dropped the filter")
	withFields.Info("with fields", "Error", ErrReleased)
	withFields.Warn("with fields, not released")
	assert.Equal(t, []record{
		{"debug", "Task processing failed with error", []any{"Error", ErrReleased}},
		{"debug", "wrapped", []any{"Error", wrapped}},
		{"info", "Task processing failed with error", []any{"Error", other}},
		{"error", "other", []any{"Error", other}},
		{"debug", "with fields", []any{"Namespace", "default", "Error", ErrReleased}},
		{"warn", "with fields, not released", []any{"Namespace", "default"}},
	}, logs)
}
