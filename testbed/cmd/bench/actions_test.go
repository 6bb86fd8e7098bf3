package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// recorded loads a history recorded by `make histories` (`temporal workflow
// show --output json`), as the workflows' replay test does.
func recorded(t *testing.T, name string) []*historypb.HistoryEvent {
	t.Helper()
	// The corpus keeps a shelf per workflow version; a name is on one shelf.
	paths, err := filepath.Glob(filepath.Join("..", "..", "..", "workflows", "testdata", "histories", "*", name+".json"))
	require.NoError(t, err)
	require.Len(t, paths, 1, "history %s on exactly one shelf", name)
	f, err := os.Open(paths[0])
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	return h.GetEvents()
}

// The counts below are derived by hand from the newest recorded histories
// (tag hist-records-*), event by event, with the rules in actions.go.
func TestBillableActionsOfRecordedPaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events int
		want   map[string]int
		total  int
	}{
		// hist-records-auto, 34 events (28 plus two workflow tasks that
		// timed out on a killed worker and were retried: free).
		//   1 WorkflowExecutionStarted                          1 workflow started
		//   7 WorkflowTaskCompleted, then markers 8 (intake), 9 (Version),
		//     11-14 (triage turns and tools): one task          1 local-activity task
		//  10 upsert of TemporalChangeVersion alone (GetVersion) 0, exempt
		//  16 ActivityTaskStarted AssessClaim, attempt 1         1 activity attempt
		//  25 ActivityTaskStarted PayClaimant, attempt 1         1 activity attempt
		//  29 WorkflowTaskCompleted, then markers 30-32 (notify,
		//     close, audit): one task                            1 local-activity task
		//  33 upsert ClaimStatus=paid                            1 upsert
		//  34 WorkflowExecutionCompleted                         0
		// Total 6.
		{"hist-records-auto", 34, map[string]int{actWorkflowStarted: 1, actLocalActivities: 2, actActivityAttempt: 2, actUpsert: 1}, 6},
		// hist-records-approved, 42 events.
		//   1 started                                            1
		//   7 task: markers 8, 9, 11-14                          1 local-activity task
		//  10 TemporalChangeVersion alone                        0
		//  16 AssessClaim attempt 1                              1 activity attempt
		//  22 task: marker 23 (OpenApproval)                     1 local-activity task
		//  24 upsert ClaimStatus=waiting, ApprovalDeadline       1 upsert
		//  25 TimerStarted (the 36 h reminder)                   1 timer
		//  26 WorkflowExecutionSignaled approve                  1 signal
		//  29 task: 30 upsert ClaimStatus=running                1 upsert
		//         31 marker (LoadClaim: the re-read)             1 local-activity task
		//  33 PayClaimant attempt 1                              1 activity attempt
		//  37 task: markers 38-40                                1 local-activity task
		//  41 upsert ClaimStatus=paid                            1 upsert
		// Total 12.
		{"hist-records-approved", 42, map[string]int{actWorkflowStarted: 1, actLocalActivities: 4, actActivityAttempt: 2,
			actUpsert: 3, actTimer: 1, actSignal: 1}, 12},
		// hist-records-rejected, 29 events.
		//   1 started 1; task 4: markers 5, 6, 8-11: 1; 7 TemporalChangeVersion
		//   alone: 0; 13 AssessClaim attempt 1: 1; task 17: marker 18: 1;
		//  19 upsert waiting: 1; 20 timer: 1; 21 signal reject: 1; task 24:
		//   markers 25-27: 1; 28 upsert rejected: 1. Total 9.
		{"hist-records-rejected", 29, map[string]int{actWorkflowStarted: 1, actLocalActivities: 3, actActivityAttempt: 1,
			actUpsert: 2, actTimer: 1, actSignal: 1}, 9},
		// hist-records-expired, 55 events (TTLs of 2 s).
		//   1 started 1; task 7: markers 8, 9, 11-14: 1; 10: 0;
		//  16 AssessClaim: 1; task 20: marker 21: 1; 22 upsert waiting: 1;
		//  23 timer (reminder): 1; 29 RemindApprovers: 1; 34 timer (escalation): 1;
		//  39 upsert escalated: 1; 41 EscalateApproval: 1; 46 timer (final): 1;
		//  task 50: markers 51-53: 1; 54 upsert expired: 1. Total 13.
		{"hist-records-expired", 55, map[string]int{actWorkflowStarted: 1, actLocalActivities: 3, actActivityAttempt: 3,
			actUpsert: 3, actTimer: 3}, 13},
		// hist-local-notices-escalated, 52 events (versionLocalNotices,
		// TTL 16 s, escalation TTL 2 s): each notice a marker in the task
		// its timer woke, no activity of its own.
		//   1 started 1; task 4: markers 5, 6, 8-11: 1; 7: 0;
		//  13 AssessClaim: 1; task 17: markers 18, 20: 1; 19 upsert waiting: 1;
		//  21 timer (reminder): 1; task 27 (after a task that timed out on
		//   a restarting worker): marker 28 RemindApprovers: 1; 29 timer
		//   (escalation): 1; task 33: 34 upsert escalated: 1, markers 35, 36
		//   (queue row, EscalateApproval): 1; 37 timer (final): 1;
		//  task 41: marker 42: 1; 44 NotifyClaimant: 1; task 48: markers
		//   49, 50: 1; 51 upsert expired: 1. Total 15 (the same path before
		//   versionLocalNotices, hist-provenance-expired: 16, and 62 events).
		{"hist-local-notices-escalated", 52, map[string]int{actWorkflowStarted: 1, actLocalActivities: 6, actActivityAttempt: 2,
			actUpsert: 3, actTimer: 3}, 15},
		// hist-records-approved-update: as approved, with the decide update
		// (24 WorkflowExecutionUpdateAccepted: 1) in place of the signal.
		{"hist-records-approved-update", 38, map[string]int{actWorkflowStarted: 1, actLocalActivities: 4, actActivityAttempt: 2,
			actUpsert: 3, actTimer: 1, actUpdate: 1}, 12},
		// hist-records-crashed-pay: the worker was killed after Stripe
		// committed; 22 ActivityTaskStarted PayClaimant has attempt 2, and
		// both attempts are billed. 1 + 2 tasks + 1 + 2 + 1 upsert = 7.
		{"hist-records-crashed-pay", 33, map[string]int{actWorkflowStarted: 1, actLocalActivities: 2, actActivityAttempt: 3, actUpsert: 1}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := recorded(t, tc.name)
			require.Len(t, events, tc.events)
			got := billableActions(events)
			assert.Equal(t, tc.want, got.ByKind)
			assert.Equal(t, tc.total, got.Total)
			// Every activity ended in milliseconds: no heartbeat was due.
			assert.Zero(t, got.HeartbeatsEstimated)
		})
	}
}

// ev builds a history event for the synthetic histories below.
func ev(id int64, typ enumspb.EventType, attrs ...func(*historypb.HistoryEvent)) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventId: id, EventType: typ, EventTime: timestamppb.New(time.Unix(1000, 0))}
	for _, a := range attrs {
		a(e)
	}
	return e
}

func marker(name string, completed int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: name, WorkflowTaskCompletedEventId: completed}}
	}
}

func upsert(completed int64, names ...string) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		fields := map[string]*commonpb.Payload{}
		for _, n := range names {
			fields[n] = &commonpb.Payload{}
		}
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			WorkflowTaskCompletedEventId: completed, SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}
	}
}

func completedWF(completed int64) func(*historypb.HistoryEvent) {
	return func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{
			WorkflowTaskCompletedEventId: completed}}
	}
}

const (
	started       = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
	wftScheduled  = enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
	wftStarted    = enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED
	wftCompleted  = enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
	markerEvent   = enumspb.EVENT_TYPE_MARKER_RECORDED
	upsertEvent   = enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
	wfCompleted   = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
	signaledEvent = enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
)

// A workflow task that runs local activities longer than the task timeout
// heartbeats: the SDK completes it (recording the markers done so far) and
// a new task starts at once. Each completion is one Action, with or without
// markers; a signal-with-start's signal is free; an upsert of
// TemporalChangeVersion alone is free, one that also sets another attribute
// is not.
func TestBillableActionsOfTaskHeartbeatsAndSignalWithStart(t *testing.T) {
	events := []*historypb.HistoryEvent{
		ev(1, started),
		ev(2, signaledEvent),
		ev(3, wftScheduled), ev(4, wftStarted), ev(5, wftCompleted),
		ev(6, markerEvent, marker("LocalActivity", 5)),
		ev(7, upsertEvent, upsert(5, changeVersionAttr)),
		ev(8, wftScheduled), ev(9, wftStarted), ev(10, wftCompleted), // a heartbeat with no marker
		ev(11, wftScheduled), ev(12, wftStarted), ev(13, wftCompleted),
		ev(14, markerEvent, marker("LocalActivity", 13)),
		ev(15, markerEvent, marker("LocalActivity", 13)),
		ev(16, upsertEvent, upsert(13, changeVersionAttr, "ClaimStatus")),
		ev(17, wfCompleted, completedWF(13)),
	}
	got := billableActions(events)
	assert.Equal(t, map[string]int{actWorkflowStarted: 1, actLocalActivities: 3, actUpsert: 1}, got.ByKind)
	assert.Equal(t, 5, got.Total)
}

// A reset run's first events are its base run's, billed there; the reset
// is one Action.
func TestBillableActionsOfAResetRun(t *testing.T) {
	events := []*historypb.HistoryEvent{
		ev(1, started),
		ev(2, wftScheduled), ev(3, wftStarted), ev(4, wftCompleted),
		ev(5, enumspb.EVENT_TYPE_TIMER_STARTED),
		ev(6, enumspb.EVENT_TYPE_TIMER_FIRED),
		ev(7, wftScheduled), ev(8, wftStarted),
		ev(9, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
				Cause: enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW}}
		}),
		ev(10, wftScheduled), ev(11, wftStarted), ev(12, wftCompleted),
		ev(13, enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
		ev(14, signaledEvent),
		ev(15, wfCompleted, completedWF(12)),
	}
	got := billableActions(events)
	assert.Equal(t, map[string]int{actWorkflowReset: 1, actChildWorkflow: 2, actSignal: 1}, got.ByKind)
	assert.Equal(t, 4, got.Total)
}

// Heartbeats are not in the history: they are estimated from the last
// attempt's duration, with the worker's beat every HeartbeatTimeout/3 and
// the SDK's throttle of 0.8 × HeartbeatTimeout.
func TestHeartbeatsEstimated(t *testing.T) {
	for d, want := range map[time.Duration]int{
		500 * time.Millisecond:  0, // finished before the first beat at 1 s
		1500 * time.Millisecond: 1, // sent at 1 s
		3500 * time.Millisecond: 2, // 1 s, then 3.4 s
		6 * time.Second:         3, // 1, 3.4, 5.8 s
	} {
		assert.Equal(t, want, beatsSent(3*time.Second, d), "%s", d)
	}
	t0 := time.Unix(1000, 0)
	events := []*historypb.HistoryEvent{
		ev(5, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				HeartbeatTimeout: durationpb.New(3 * time.Second)}}
		}),
		ev(6, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.EventTime = timestamppb.New(t0)
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: 5, Attempt: 2}}
		}),
		ev(7, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
			e.EventTime = timestamppb.New(t0.Add(6 * time.Second))
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
				ScheduledEventId: 5}}
		}),
	}
	got := billableActions(events)
	assert.Equal(t, 3, got.HeartbeatsEstimated)
	assert.Equal(t, map[string]int{actActivityAttempt: 2}, got.ByKind, "heartbeats stay out of the total")
}

// The cost per claim is printed as a table and written in the JSON.
func TestCostsPrintedAndWritten(t *testing.T) {
	r := &results{Costs: map[string]pathCost{}}
	for _, p := range costPaths {
		events := recorded(t, "hist-records-"+p)
		r.Costs[p] = pathCost{WorkflowID: "hist-records-" + p, Events: len(events), Bytes: 12345, Actions: billableActions(events)}
	}
	var out strings.Builder
	r.printCosts(&out)
	t.Log("\n" + out.String())
	assert.Contains(t, out.String(), "| auto     |     34 |   12345 |                6 | start 1, activity attempts 2, local-activity tasks 2, upserts 1")
	assert.Contains(t, out.String(), "| expired  |     55 |   12345 |               13 |")
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"cost_per_claim":{"approved":{"workflow_id":"hist-records-approved","events":42,"bytes":12345,"actions":{"total":12,`)
}

// The floor's shape of a history is what the engine recorded for it: the
// auto path's two activity attempts and two workflow tasks of local
// activities, the approved path's timer and signal (or update) and its
// upserts (ten local activities in four tasks: three a task, rounded); a
// crashed payment's second attempt counts.
func TestFloorShapeIsWhatTheHistoryRecords(t *testing.T) {
	for name, want := range map[string]FloorInput{
		"hist-records-auto":            {Version: true, Activities: 2, LocalTasks: 2, Locals: 4, Upserts: 1},
		"hist-records-approved":        {Version: true, Activities: 2, LocalTasks: 4, Locals: 3, Timers: 1, Signals: 1, Upserts: 3},
		"hist-records-approved-update": {Version: true, Activities: 2, LocalTasks: 4, Locals: 3, Timers: 1, Updates: 1, Upserts: 3},
		"hist-records-crashed-pay":     {Version: true, Activities: 3, LocalTasks: 2, Locals: 4, Upserts: 1},
	} {
		assert.Equal(t, want, floorShape(recorded(t, name)), name)
	}
}

func TestFloorShapeReads(t *testing.T) {
	assert.Equal(t, "activities 2, local-activity tasks 2 (4 local activities each), upserts 1",
		FloorInput{Activities: 2, LocalTasks: 2, Locals: 4, Upserts: 1}.String())
	assert.Equal(t, "GetVersion, activities 1", FloorInput{Version: true, Activities: 1}.String())
	assert.Equal(t, "timers 1, signals 1", FloorInput{Timers: 1, Signals: 1}.String())
	assert.Equal(t, "nothing", FloorInput{}.String())
}
