package provenance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/durableclaims/durableclaims/internal/codec"
)

func signer(t *testing.T) *Signer {
	t.Helper()
	kr, _, err := codec.GenerateKeyring("k1")
	require.NoError(t, err)
	s, err := NewSigner(&kr)
	require.NoError(t, err)
	return s
}

// A signature is valid for its own task only, and only with the keys.
func TestASignatureIsValidForItsOwnTaskOnly(t *testing.T) {
	s := signer(t)
	task := Task{Namespace: "default", WorkflowID: "claim-0042", RunID: "run-1", StartedEventID: 7}
	id := s.Sign("12@host@", task)
	assert.Contains(t, id, "12@host@ wts=k1.")
	present, valid := s.Signed(id, task)
	assert.True(t, present && valid)
	assert.Equal(t, id, s.Sign(id, task), "signing again replaces, never stacks")
	for name, other := range map[string]Task{
		"another event":     {Namespace: "default", WorkflowID: "claim-0042", RunID: "run-1", StartedEventID: 8},
		"another run":       {Namespace: "default", WorkflowID: "claim-0042", RunID: "run-2", StartedEventID: 7},
		"another claim":     {Namespace: "default", WorkflowID: "claim-0043", RunID: "run-1", StartedEventID: 7},
		"another namespace": {Namespace: "staging", WorkflowID: "claim-0042", RunID: "run-1", StartedEventID: 7},
	} {
		_, valid := s.Signed(id, other)
		assert.False(t, valid, name)
	}
	_, valid = signer(t).Signed(id, task)
	assert.False(t, valid, "another key ring's signer")
	present, valid = s.Signed("12@host@", task)
	assert.False(t, present || valid)
	present, valid = s.Signed("thief wts=k1.AAAA", task)
	assert.True(t, present)
	assert.False(t, valid, "a made-up signature")
}

type hist struct {
	events []*historypb.HistoryEvent
	start  time.Time
}

func (h *hist) add(e *historypb.HistoryEvent) *hist {
	e.EventId = int64(len(h.events) + 1)
	e.EventTime = timestamppb.New(h.start)
	h.events = append(h.events, e)
	return h
}

func (h *hist) completed(identity string) *hist {
	started := int64(len(h.events)) // the event before it
	return h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
			StartedEventId: started, Identity: identity}}})
}

func (h *hist) other() *hist {
	return h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED})
}

func (h *hist) reset(base string) *hist {
	return h.add(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED,
		Attributes: &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
			Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW, BaseRunId: base}}})
}

// Check finds the first completion a stranger wrote, and the last of this
// deployment's before it; unsigned completions of older builds count only
// in runs started before signing began, and only before the first signed.
func TestCheckFindsTheFirstCompletionAStrangerWrote(t *testing.T) {
	s := signer(t)
	began := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	sign := func(run string, h *hist) string {
		return s.Sign("w@host@", Task{Namespace: "default", WorkflowID: "claim-0042", RunID: run, StartedEventID: int64(len(h.events))})
	}
	// mine adds a task this deployment completed: its started event, then
	// the completion signed for it.
	mine := func(h *hist, run string) { h.other(); h.completed(sign(run, h)) }

	h := &hist{start: began.Add(time.Hour)}
	mine(h, "run-1")
	mine(h, "run-1")
	f := s.Check(h.events, "default", "claim-0042", "run-1", began)
	assert.Nil(t, f.Foreign, "every completion ours")

	ours := int64(len(h.events))
	h.other().completed("thief")
	mine(h, "run-1")
	f = s.Check(h.events, "default", "claim-0042", "run-1", began)
	require.NotNil(t, f.Foreign)
	assert.Equal(t, ours+2, f.Foreign.GetEventId())
	assert.Contains(t, f.Reason(), `(by "thief")`)
	at, ok := ResetPoint(f.Reason())
	assert.True(t, ok)
	assert.Equal(t, ours+2, at, "the dead letter names where to reset: the stranger's completion, dropped with all after it")
	_, ok = ResetPoint("terminated by an operator")
	assert.False(t, ok)

	// A run started since signing began: an unsigned first completion is
	// a stranger's too.
	first := &hist{start: began.Add(time.Hour)}
	first.other().completed("thief")
	mine(first, "run-1")
	assert.NotNil(t, s.Check(first.events, "default", "claim-0042", "run-1", began).Foreign)

	// A run started before: its older builds' unsigned completions, then
	// signed ones.
	old := &hist{start: began.Add(-time.Hour)}
	old.other().completed("old-build@host@")
	mine(old, "run-1")
	assert.Nil(t, s.Check(old.events, "default", "claim-0042", "run-1", began).Foreign)
	old.other().completed("thief")
	assert.NotNil(t, s.Check(old.events, "default", "claim-0042", "run-1", began).Foreign, "after a signed one, unsigned is a stranger's")

	// A reset run: completions copied from the base run are the base
	// run's, signed for it; after the reset, the new run's.
	reset := &hist{start: began.Add(time.Hour)}
	mine(reset, "run-1")
	reset.reset("run-1")
	mine(reset, "run-2")
	assert.Nil(t, s.Check(reset.events, "default", "claim-0042", "run-2", began).Foreign)
	assert.NotNil(t, s.Check(reset.events, "default", "claim-0042", "run-3", began).Foreign,
		"a signature for another run of the claim is not this one's")
}

// The interceptor signs a completion with the task its poll handed out,
// even after thousands of other tokens came and went; a query-only task's
// token is forgotten once answered.
func TestTheInterceptorKeepsAnInFlightTasksToken(t *testing.T) {
	s := signer(t)
	ix := s.Interceptor(nil, nil, nil, func(string, ...any) {})
	poll := func(token string, started int64) {
		req := &workflowservice.PollWorkflowTaskQueueRequest{Namespace: "default"}
		reply := &workflowservice.PollWorkflowTaskQueueResponse{}
		require.NoError(t, ix(context.Background(), "Poll", req, reply, nil,
			func(_ context.Context, _ string, _, r any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
				*r.(*workflowservice.PollWorkflowTaskQueueResponse) = workflowservice.PollWorkflowTaskQueueResponse{TaskToken: []byte(token),
					WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "claim-0042", RunId: "run-1"}, StartedEventId: started}
				return nil
			}))
	}
	answer := func(req any) {
		require.NoError(t, ix(context.Background(), "Respond", req, &workflowservice.RespondWorkflowTaskCompletedResponse{}, nil,
			func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }))
	}
	poll("in-flight", 7)
	for i := range maxTasks + 10 {
		poll(fmt.Sprintf("query-%d", i), 3)
		answer(&workflowservice.RespondQueryTaskCompletedRequest{TaskToken: []byte(fmt.Sprintf("query-%d", i))})
	}
	done := &workflowservice.RespondWorkflowTaskCompletedRequest{TaskToken: []byte("in-flight"), Identity: "w@host@"}
	answer(done)
	_, valid := s.Signed(done.GetIdentity(), Task{Namespace: "default", WorkflowID: "claim-0042", RunID: "run-1", StartedEventID: 7})
	assert.True(t, valid, "signed for its own task: %s", done.GetIdentity())
}
