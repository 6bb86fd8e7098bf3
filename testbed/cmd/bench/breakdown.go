package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Where a claim's time goes, read from its history: the parts of the real
// model workload's completion time beyond the floor. Each part is summed
// over a claim's history; what no part covers is "other".
const (
	partClient        = "client"         // before the start event and after the close, as the client saw it
	partWFTQueue      = "wft_queue"      // workflow task scheduled → started
	partWFTRun        = "wft_run"        // workflow task started → completed (or failed, timed out)
	partActivityQueue = "activity_queue" // activity scheduled → started
	partActivityRun   = "activity_run"   // activity started → closed, less the model's own latency
	partModel         = "model"          // the model's own latency (modelsim's record)
	partOther         = "other"
)

var parts = []string{partModel, partActivityRun, partActivityQueue, partWFTRun, partWFTQueue, partClient, partOther}

// claimTime is one claim's completion time split into parts, and the
// activity parts by activity type.
type claimTime struct {
	parts        map[string]time.Duration
	activityQ    map[string]time.Duration
	activityRun  map[string]time.Duration
	wftTimeouts  int
	workflowTask int
	wftQueue     []time.Duration // each workflow task's time in the queue, in order
	wftRun       []time.Duration
}

// modelCall is one model call of a claim: when modelsim took it, and how
// long it held the answer.
type modelCall struct {
	at     time.Time
	waited time.Duration
}

// breakdown reads a claim's history and splits took (the client's start to
// result) into parts; calls are the claim's model calls. A call made while a
// workflow task ran (a local activity) is taken out of that task's run
// time, any other out of the activity's.
func (e *env) breakdown(ctx context.Context, id string, began time.Time, took time.Duration, calls []modelCall) (claimTime, error) {
	ct := claimTime{parts: map[string]time.Duration{}, activityQ: map[string]time.Duration{}, activityRun: map[string]time.Duration{}}
	at := map[int64]*historypb.HistoryEvent{}
	var model, inTasks time.Duration
	for _, c := range calls {
		model += c.waited
	}
	var first, last time.Time
	it := e.client.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return ct, fmt.Errorf("history of %s: %w", id, err)
		}
		at[ev.GetEventId()] = ev
		t := ev.GetEventTime().AsTime()
		if first.IsZero() {
			first = t
		}
		last = t
		since := func(eventID int64) time.Duration {
			if p, ok := at[eventID]; ok {
				return t.Sub(p.GetEventTime().AsTime())
			}
			return 0
		}
		activityType := func(scheduled int64) string {
			return at[scheduled].GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		}
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			ct.parts[partWFTQueue] += since(ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId())
			ct.wftQueue = append(ct.wftQueue, since(ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()))
			ct.workflowTask++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			started := ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()
			run := since(started)
			if st, ok := at[started]; ok {
				for _, c := range calls {
					if !c.at.Before(st.GetEventTime().AsTime()) && c.at.Before(t) {
						run -= c.waited
						inTasks += c.waited
					}
				}
			}
			ct.parts[partWFTRun] += run
			ct.wftRun = append(ct.wftRun, run)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			ct.parts[partWFTRun] += since(ev.GetWorkflowTaskFailedEventAttributes().GetStartedEventId())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			a := ev.GetWorkflowTaskTimedOutEventAttributes()
			ct.wftTimeouts++
			if a.GetStartedEventId() != 0 {
				ct.parts[partWFTRun] += since(a.GetStartedEventId())
			} else {
				ct.parts[partWFTQueue] += since(a.GetScheduledEventId())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			s := ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()
			ct.parts[partActivityQueue] += since(s)
			ct.activityQ[activityType(s)] += since(s)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := ev.GetActivityTaskCompletedEventAttributes()
			ct.parts[partActivityRun] += since(a.GetStartedEventId())
			ct.activityRun[activityType(a.GetScheduledEventId())] += since(a.GetStartedEventId())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := ev.GetActivityTaskFailedEventAttributes()
			ct.parts[partActivityRun] += since(a.GetStartedEventId())
			ct.activityRun[activityType(a.GetScheduledEventId())] += since(a.GetStartedEventId())
		}
	}
	ct.parts[partActivityRun] -= model - inTasks
	ct.parts[partModel] = model
	if !first.IsZero() {
		ct.parts[partClient] = first.Sub(began) + began.Add(took).Sub(last)
	}
	var covered time.Duration
	for _, d := range ct.parts {
		covered += d
	}
	ct.parts[partOther] = took - covered
	return ct, nil
}

// recordBreakdown puts the mean of each part per claim in the results
// (latency_part_<part>_ms), and a note: each workflow task's time in the
// queue (mean, p50, p90) in the order a claim runs them, and the activity
// types with the most queue and run time.
func recordBreakdown(res *results, all []claimTime) {
	if len(all) == 0 {
		return
	}
	sum := map[string]time.Duration{}
	q, run := map[string]time.Duration{}, map[string]time.Duration{}
	var timeouts, tasks int
	for _, ct := range all {
		for k, d := range ct.parts {
			sum[k] += d
		}
		for k, d := range ct.activityQ {
			q[k] += d
		}
		for k, d := range ct.activityRun {
			run[k] += d
		}
		timeouts += ct.wftTimeouts
		tasks += ct.workflowTask
	}
	n := time.Duration(len(all))
	for _, p := range parts {
		res.Values["latency_part_"+p+"_ms"] = float64((sum[p] / n).Microseconds()) / 1000
	}
	var byTask []string
	for i := 0; ; i++ {
		var ql, rl []float64
		for _, ct := range all {
			if i < len(ct.wftQueue) && i < len(ct.wftRun) {
				ql = append(ql, float64(ct.wftQueue[i].Milliseconds()))
				rl = append(rl, float64(ct.wftRun[i].Milliseconds()))
			}
		}
		if len(ql) == 0 {
			break
		}
		byTask = append(byTask, fmt.Sprintf("#%d in the queue %.0f ms (p50 %.0f, p90 %.0f), running %.0f ms", i+1,
			mean(ql), percentile(ql, 50), percentile(ql, 90), mean(rl)))
	}
	top := func(m map[string]time.Duration) string {
		keys := slices.Collect(maps.Keys(m))
		slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
		var s []string
		for _, k := range keys[:min(4, len(keys))] {
			s = append(s, fmt.Sprintf("%s %.0f ms", k, float64((m[k]/n).Microseconds())/1000))
		}
		return strings.Join(s, ", ")
	}
	res.Notes = append(res.Notes, fmt.Sprintf("latency: %.1f workflow tasks a claim, %d timed out: %s; activities in the queue: %s; running (model included): %s",
		float64(tasks)/float64(len(all)), timeouts, strings.Join(byTask, "; "), top(q), top(run)))
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
