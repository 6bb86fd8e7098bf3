package main

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Temporal Cloud bills Actions, not history events. billableActions
// estimates a run's Actions from its event history, by the rules of
// https://docs.temporal.io/cloud/actions (the same list is on
// https://docs.temporal.io/cloud/pricing#action), read 2026-11:
//
//   - Workflow started: 1 (client start, Continue-As-New, child start).
//     The Signal-With-Start's signal is free: "one total action occurs for
//     any Signal-With-Start", so a signal recorded before the first
//     workflow task (event 2) is not counted.
//   - Workflow reset: 1; "Actions that occur before a Reset are counted on
//     the original workflow": the events a reset run copied from its base
//     (up to the workflow task failed with cause ResetWorkflow) are skipped.
//   - Activity started or retried: 1 per attempt. The server writes one
//     ActivityTaskStarted, for the last attempt, whose attempt field counts
//     all of them (retries are not events); an activity that closed without
//     ever starting (cancelled or timed out while scheduled) costs nothing.
//   - Local activities: "All Local Activities associated with one Workflow
//     Task count as a single Action ... Temporal Cloud counts all
//     RecordMarkers from each Workflow Task as one action", and "each
//     additional Workflow Task heartbeat ... counts as an additional
//     Action". Counted: 1 per completed workflow task that recorded a marker
//     (of any name: LocalActivity, Version, SideEffect, MutableSideEffect,
//     which the Go SDK records only when the value changes), plus 1 per
//     workflow task heartbeat that recorded none. A heartbeat is a completed
//     task followed by a new one with nothing new in between but the task's
//     own commands. Assumed: a Version marker counts like any RecordMarker
//     (it is one); here it always shares its task with local activities.
//   - Timer started: 1 (timers the SDK starts for a timeout included).
//   - Search attribute upsert: 1 per UpsertWorkflowSearchAttributes command,
//     however many attributes it sets; one that sets only
//     TemporalChangeVersion (written by workflow.GetVersion) is exempt, and
//     attributes given at start are free.
//   - Signal: 1 per WorkflowExecutionSignaled. A signal sent by a workflow
//     (SignalExternalWorkflowExecutionInitiated) is counted on the receiving
//     run's history, not again on the sender's, so that adding the costs of
//     two runs does not count it twice.
//   - Update: 1 per accepted update (WorkflowExecutionUpdateAccepted) and 1
//     per rejected one; an Update-With-Start pays the start too.
//   - Child workflow: 2 per StartChildWorkflowExecutionInitiated (the start
//     and the attempted execution).
//   - Nexus: 1 per operation scheduled, 1 per cancellation requested.
//   - Workflow Execution Options updated: 1.
//   - Free: workflow tasks (scheduled, started, completed, failed, timed
//     out), activity scheduled and results, timer fired or cancelled, the
//     workflow's completion, failure, cancellation or termination, memo
//     changes (WorkflowPropertiesModified), replay.
//
// What a history cannot show, and is left out of the total:
//
//   - Queries (1 Action each, "including viewing the call stack in the
//     Temporal Cloud UI"): the inbox and claimsctl read the status query;
//     the bench itself queries while it waits. Not in history.
//   - Rejected updates: a validator's rejection writes no event (the refused
//     decisions of this project are mostly signals, which are counted).
//   - Activity heartbeats that reached the server: not in history.
//     heartbeatsEstimated gives an estimate, kept apart from the total.
//   - Attempts of an activity that is still running, or that timed out
//     while waiting to be retried (no ActivityTaskStarted is written then).
//   - Export, schedules, and the extra actions of local activities retried
//     after a workflow task heartbeat (capped at 100).
type actionCount struct {
	// Total is the Actions the history shows.
	Total int `json:"total"`
	// ByKind breaks Total down by the kinds below.
	ByKind map[string]int `json:"by_kind"`
	// HeartbeatsEstimated is heartbeatsEstimated: activity heartbeats that
	// likely reached the server, not in Total.
	HeartbeatsEstimated int `json:"heartbeats_estimated"`
}

// Kinds of Action, in the order they are printed.
const (
	actWorkflowStarted = "start"
	actWorkflowReset   = "reset"
	actActivityAttempt = "activity attempts"
	actLocalActivities = "local-activity tasks"
	actTimer           = "timers"
	actUpsert          = "upserts"
	actSignal          = "signals"
	actUpdate          = "updates"
	actChildWorkflow   = "child workflows"
	actNexus           = "nexus operations"
	actOptionsUpdated  = "options updated"
)

var actionKinds = []string{actWorkflowStarted, actWorkflowReset, actActivityAttempt, actLocalActivities, actTimer,
	actUpsert, actSignal, actUpdate, actChildWorkflow, actNexus, actOptionsUpdated}

// changeVersionAttr is the search attribute workflow.GetVersion upserts.
const changeVersionAttr = "TemporalChangeVersion"

// billableActions estimates the Temporal Cloud Actions of one run from its
// history, by the rules above.
func billableActions(events []*historypb.HistoryEvent) actionCount {
	c := actionCount{ByKind: map[string]int{}}
	add := func(kind string, n int) {
		if n > 0 {
			c.ByKind[kind] += n
			c.Total += n
		}
	}
	// A reset run starts with its base run's events, billed there.
	from := 0
	for i, ev := range events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED &&
			ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			from = i + 1
		}
	}
	if from > 0 {
		add(actWorkflowReset, 1)
	}
	// Workflow tasks that recorded a marker, by WorkflowTaskCompleted ID.
	markerTasks := map[int64]bool{}
	for i := from; i < len(events); i++ {
		ev := events[i]
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			add(actWorkflowStarted, 1)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			add(actActivityAttempt, max(1, int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())))
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			markerTasks[ev.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId()] = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			if isTaskHeartbeat(events, i) && !recordsMarker(events, i) {
				add(actLocalActivities, 1)
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			add(actTimer, 1)
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			for name := range ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields() {
				if name != changeVersionAttr {
					add(actUpsert, 1)
					break
				}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			if i != 1 { // event 2 is Signal-With-Start's signal, paid by the start
				add(actSignal, 1)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_REJECTED:
			add(actUpdate, 1)
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			add(actChildWorkflow, 2)
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			add(actNexus, 1)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
			add(actOptionsUpdated, 1)
		}
	}
	add(actLocalActivities, len(markerTasks))
	c.HeartbeatsEstimated = heartbeatsEstimated(events[from:])
	return c
}

// recordsMarker reports whether the workflow task completed at events[i]
// recorded a marker: its commands follow it directly.
func recordsMarker(events []*historypb.HistoryEvent, i int) bool {
	id := events[i].GetEventId()
	for _, ev := range events[i+1:] {
		if ev.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED && ev.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId() == id {
			return true
		}
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
			return false
		}
	}
	return false
}

// isTaskHeartbeat reports whether the workflow task completed at events[i]
// was a heartbeat: the SDK completes a task that is still running local
// activities and asks for a new one at once, so nothing but the task's own
// commands comes between it and the next WorkflowTaskScheduled.
func isTaskHeartbeat(events []*historypb.HistoryEvent, i int) bool {
	id := events[i].GetEventId()
	for _, ev := range events[i+1:] {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED {
			return true
		}
		if completedBy(ev) != id {
			return false // new input (a result, a signal, a timer) or the run's end
		}
	}
	return false
}

// completedBy is the WorkflowTaskCompleted event whose command produced ev,
// or 0 when ev is not a command's event.
func completedBy(ev *historypb.HistoryEvent) int64 {
	m := ev.ProtoReflect()
	oneof := m.Descriptor().Oneofs().ByName("attributes")
	if oneof == nil {
		return 0
	}
	fd := m.WhichOneof(oneof)
	if fd == nil {
		return 0
	}
	attrs := m.Get(fd).Message()
	f := attrs.Descriptor().Fields().ByName("workflow_task_completed_event_id")
	if f == nil {
		return 0
	}
	return attrs.Get(f).Int()
}

// heartbeatsEstimated estimates the activity heartbeats that reached the
// server, which the history does not record. The worker's interceptor
// (worker/heartbeat) beats every HeartbeatTimeout/3; the Go SDK sends the
// first beat of an attempt at once and then at most one per throttle
// interval, 0.8 × HeartbeatTimeout (capped at 60 s). So an attempt of
// duration d sends one beat for each k ≥ 0 with T/3 + k·throttle < d. Only
// the last attempt's duration is in the history (ActivityTaskStarted is
// its start); earlier attempts are taken to have sent none.
func heartbeatsEstimated(events []*historypb.HistoryEvent) int {
	timeout := map[int64]time.Duration{} // by scheduled event ID
	started := map[int64]time.Time{}
	n := 0
	for _, ev := range events {
		var scheduled int64
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			timeout[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetHeartbeatTimeout().AsDuration()
			continue
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			started[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = ev.GetEventTime().AsTime()
			continue
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			scheduled = ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			scheduled = ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			scheduled = ev.GetActivityTaskTimedOutEventAttributes().GetScheduledEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
			scheduled = ev.GetActivityTaskCanceledEventAttributes().GetScheduledEventId()
		default:
			continue
		}
		t, ok := started[scheduled]
		if !ok || timeout[scheduled] <= 0 {
			continue
		}
		n += beatsSent(timeout[scheduled], ev.GetEventTime().AsTime().Sub(t))
	}
	return n
}

// beatsSent is how many heartbeats an attempt of duration d sends with
// heartbeat timeout hb: see heartbeatsEstimated.
func beatsSent(hb, d time.Duration) int {
	every := hb / 3
	throttle := min(hb*4/5, time.Minute)
	n := 0
	for at := every; at < d; at += throttle {
		n++
	}
	return n
}
