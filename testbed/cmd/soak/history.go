package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// historyFacts is what one claim's event history says about resumes.
type historyFacts struct {
	// activityResumes counts ActivityTaskStarted events with attempt > 1,
	// by activity type: a regular step the server retried (after a killed
	// worker stopped heartbeating, usually).
	activityResumes map[string]int
	// wtTimeouts counts workflow tasks that timed out on a worker
	// (start-to-close: the worker died holding it); stickyTimeouts those that
	// sat on a dead worker's sticky queue and moved to the shared one.
	wtTimeouts, stickyTimeouts, wtFailures int
	// wtAttemptsLost counts workflow task attempts that started and never
	// completed, including the ones history leaves out: after a recorded
	// failure the server retries a task "transiently" and records only the
	// attempt that completes (WorkflowTaskScheduled attempt N > 2: N-2 lost
	// unrecorded). A sticky task moved to the shared queue restarts at
	// attempt 1, so attempt numbers alone undercount.
	wtAttemptsLost int
	// localRetries counts local activities recorded with attempt > 1.
	localRetries int
	// triage is the run's first workflow tasks, up to the one that recorded
	// the triage answer (a local activity); every attempt lost on the way
	// may have asked the model once.
	triage localSpan
	// assess is the assessment step as a regular activity, if scheduled;
	// assessLocal the same span as triage's for an assessment run local (the
	// rules model's, from versionFreeAssess: in the task that ran triage).
	assess      *activitySpan
	assessLocal localSpan
	// turns are the triage turns run as regular activities: with a model
	// whose answers cost something, a turn after the first is a regular
	// activity until its answer is recorded (workflows/checkpoint.go).
	turns []activitySpan
}

// localSpan is what history says about the workflow tasks that ran a
// local model step (triage, a local assessment) until its marker was
// recorded.
type localSpan struct {
	recorded bool
	// firstStartedAt..recordedStartedAt is when the lost attempts ran: from
	// the run's first task to the task that recorded the step's last marker.
	firstStartedAt, recordedStartedAt time.Time
	// lost counts attempts lost before the step's last marker (a turn after
	// a pending paid one runs in a later task, so triage's markers may come
	// in several); interrupts are those history recorded, with the worker
	// that held each.
	lost       int
	interrupts []interruption
	// retries counts the step's local attempts that failed and ran again
	// within their task (marker attempt - 1): each asked the model for an
	// answer that was never recorded.
	retries int
	// since are the losses after the last marker so far: the step's
	// if another of its markers follows.
	since      int
	sinceLosts []interruption
}

// marked notes a marker of the step, recorded by the task started last:
// the attempts lost since the previous one may have run the step.
func (t *localSpan) marked(lastStarted *historypb.HistoryEvent, attempt int32) {
	t.retries += max(int(attempt)-1, 0)
	t.recorded = true
	t.recordedStartedAt = lastStarted.GetEventTime().AsTime()
	t.lost += t.since
	t.interrupts = append(t.interrupts, t.sinceLosts...)
	t.since, t.sinceLosts = 0, nil
}

// lostTask notes n workflow task attempts lost (in, when history recorded
// the one): the step's, if one of its markers follows.
func (t *localSpan) lostTask(n int, in *interruption) {
	t.since += n
	if in != nil {
		t.sinceLosts = append(t.sinceLosts, *in)
	}
}

// interruption is one workflow task that did not complete.
type interruption struct {
	startedAt, endedAt time.Time
	identity           string // the worker that held it: "pid@host@"
}

// activitySpan is a regular activity from scheduling to its last attempt's
// start (the history keeps only the last attempt's started event).
type activitySpan struct {
	scheduledAt, lastStartedAt time.Time
	attempt                    int32
	lastFailure                string
}

// Activity type names as the worker registers them (methods of Activities).
const (
	activityTriage = "TriageClaim"
	// activityTurn is a turn of the triage agent loop: with the rules model
	// every turn runs in the run's first workflow task, recorded together.
	activityTurn   = "TriageTurn"
	activityAssess = "AssessClaim"
)

// readHistory reads claim id's history; dc decodes what the workers wrote
// (the local-activity markers, under the workers' payload keys).
func readHistory(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (historyFacts, error) {
	h := historyFacts{activityResumes: map[string]int{}}
	scheduled := map[int64]*historypb.HistoryEvent{}
	wtStarted := map[int64]*historypb.HistoryEvent{}
	var lastStarted *historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return h, err
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			// Attempt N after a recorded failure means N-2 more were lost
			// unrecorded in between.
			if n := int(ev.GetWorkflowTaskScheduledEventAttributes().GetAttempt()); n > 2 {
				h.wtAttemptsLost += n - 2
				h.triage.lostTask(n-2, nil)
				h.assessLocal.lostTask(n-2, nil)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			wtStarted[ev.GetEventId()] = ev
			lastStarted = ev
			if h.triage.firstStartedAt.IsZero() {
				h.triage.firstStartedAt = ev.GetEventTime().AsTime()
				h.assessLocal.firstStartedAt = h.triage.firstStartedAt
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			a := ev.GetWorkflowTaskTimedOutEventAttributes()
			if a.GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				h.stickyTimeouts++ // never started: no lost work
				continue
			}
			h.wtTimeouts++
			h.lostTask(interruptionOf(wtStarted[a.GetStartedEventId()], ev))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			h.wtFailures++
			h.lostTask(interruptionOf(wtStarted[ev.GetWorkflowTaskFailedEventAttributes().GetStartedEventId()], ev))
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			h.activityStarted(scheduled, ev)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			typ, attempt := localActivity(dc, ev)
			if attempt > 1 {
				h.localRetries++
			}
			switch typ {
			case activityTriage, activityTurn:
				h.triage.marked(lastStarted, attempt)
			case activityAssess:
				h.assessLocal.marked(lastStarted, attempt)
			}
		}
	}
	return h, nil
}

// lostTask notes a recorded workflow task attempt that did not complete.
func (h *historyFacts) lostTask(t interruption) {
	h.wtAttemptsLost++
	h.triage.lostTask(1, &t)
	h.assessLocal.lostTask(1, &t)
}

func (h *historyFacts) activityStarted(scheduled map[int64]*historypb.HistoryEvent, ev *historypb.HistoryEvent) {
	a := ev.GetActivityTaskStartedEventAttributes()
	sch := scheduled[a.GetScheduledEventId()]
	typ := sch.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
	if a.GetAttempt() > 1 {
		h.activityResumes[typ]++
	}
	span := activitySpan{scheduledAt: sch.GetEventTime().AsTime(), lastStartedAt: ev.GetEventTime().AsTime(),
		attempt: a.GetAttempt(), lastFailure: a.GetLastFailure().GetMessage()}
	switch {
	case typ == activityAssess && h.assess == nil:
		h.assess = &span
	case typ == activityTurn:
		h.turns = append(h.turns, span)
	}
}

func interruptionOf(started, ended *historypb.HistoryEvent) interruption {
	return interruption{startedAt: started.GetEventTime().AsTime(), endedAt: ended.GetEventTime().AsTime(),
		identity: started.GetWorkflowTaskStartedEventAttributes().GetIdentity()}
}

// localActivity decodes a local activity marker's type and attempt (the Go
// SDK records them under "data", through the workers' data converter dc);
// zero values for other markers, or ones dc cannot read.
func localActivity(dc converter.DataConverter, ev *historypb.HistoryEvent) (string, int32) {
	data, ok := ev.GetMarkerRecordedEventAttributes().GetDetails()["data"]
	if !ok {
		return "", 0
	}
	var m struct {
		ActivityType string
		Attempt      int32
	}
	if err := dc.FromPayloads(data, &m); err != nil {
		return "", 0
	}
	return m.ActivityType, m.Attempt
}

// pidOf reads the process ID from an SDK worker identity ("pid@host@…").
func pidOf(identity string) int {
	s, _, _ := strings.Cut(identity, "@")
	pid, _ := strconv.Atoi(s)
	return pid
}
