package parked

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commandpb "go.temporal.io/api/command/v1"
	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
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
	} {
		t.Run(name, func(t *testing.T) {
			r := &workflowservice.RespondWorkflowTaskCompletedRequest{Commands: c.commands, ForceCreateNewWorkflowTask: c.force}
			assert.Equal(t, c.parks, Parks(r, DefaultAfter))
		})
	}
}

// The interceptor drops the sticky attributes of a parking completion and
// of nothing else, and passes every call on.
func TestInterceptor(t *testing.T) {
	sticky := func() *taskqueuepb.StickyExecutionAttributes {
		return &taskqueuepb.StickyExecutionAttributes{WorkerTaskQueue: &taskqueuepb.TaskQueue{Name: "host:sticky"},
			ScheduleToStartTimeout: durationpb.New(2 * time.Second)}
	}
	var sent []any
	invoke := func(_ context.Context, _ string, req, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		sent = append(sent, req)
		return nil
	}
	parking := &workflowservice.RespondWorkflowTaskCompletedRequest{Commands: []*commandpb.Command{timer(time.Hour)}, StickyAttributes: sticky()}
	working := &workflowservice.RespondWorkflowTaskCompletedRequest{
		Commands: []*commandpb.Command{command(enumspb.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK)}, StickyAttributes: sticky()}
	other := &workflowservice.PollWorkflowTaskQueueRequest{}

	i := Interceptor(DefaultAfter)
	for _, req := range []any{parking, working, other} {
		require.NoError(t, i(context.Background(), "/m", req, nil, nil, invoke))
	}
	assert.Equal(t, []any{parking, working, other}, sent)
	assert.Nil(t, parking.GetStickyAttributes(), "a parked run stays sticky")
	assert.NotNil(t, working.GetStickyAttributes(), "a working run lost its sticky queue")

	off := &workflowservice.RespondWorkflowTaskCompletedRequest{Commands: []*commandpb.Command{timer(time.Hour)}, StickyAttributes: sticky()}
	require.NoError(t, Interceptor(0)(context.Background(), "/m", off, nil, nil, invoke))
	assert.NotNil(t, off.GetStickyAttributes(), "STICKY_RELEASE_AFTER=0 still released a run")
}
