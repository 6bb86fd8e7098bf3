package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/workflows"
)

// timersWorkload is the catastrophe week's burst of deadlines (-only timers,
// -timers claims): claims parked with approval TTLs chosen so that their
// escalations fall due together (each claim's TTL is the time left, when
// it starts, to one common deadline), a reminder half way. It follows the
// approval queue (one query every 2 s): a claim's deadline as its wait
// opened, and the moment its row turned escalated. The figures: how many
// deadlines fell in the busiest minute, how late escalations came after
// their deadline (p50, p99, max), and that none was dead-lettered.
type timersWorkload struct {
	timers     int
	timersPace float64
}

func (*timersWorkload) names() []string { return []string{"timers"} }

func (tw *timersWorkload) flags(fs *flag.FlagSet) {
	fs.IntVar(&tw.timers, "timers", 5000, "the timers workload (-only timers): claims whose escalations fall due together")
	fs.Float64Var(&tw.timersPace, "timers-pace", 15, "the timers workload: claims started a second (at a pace the worker parks them, so that their deadlines stay together)")
}

func (tw *timersWorkload) run(ctx context.Context, e *env, res *results) error {
	if err := tw.measure(ctx, e, res); err != nil {
		return fmt.Errorf("timers: %w", err)
	}
	return nil
}

func (tw *timersWorkload) measure(ctx context.Context, e *env, res *results) error {
	n := tw.timers
	prefix := fmt.Sprintf("bench-timers-%d-", seq.Add(1))
	// A wait's deadline is its TTL from when it opens, after triage. Claims
	// started faster than the worker parks them queue for triage longer
	// and longer, and their deadlines spread with the queue: at once, 3,298
	// of 5,000 fell in the busiest minute. So they start at a pace the
	// worker keeps (-timers-pace a second), each with the TTL that puts its
	// deadline at the same moment, a minute after the last start.
	pace := max(tw.timersPace, 1)
	begin := time.Now()
	due := begin.Add(time.Duration(float64(n)/pace*float64(time.Second)) + time.Minute)
	if err := parallel(n, e.o.concurrency, func(i int) error {
		time.Sleep(time.Until(begin.Add(time.Duration(float64(i) / pace * float64(time.Second)))))
		ttl := max(time.Until(due), time.Minute).Round(time.Second)
		opts := workflows.Options{Approval: approvals.Policy{TTL: ttl, EscalationTTL: time.Hour}}
		_, err := e.startClaimOn(ctx, e.store, e.client, workflows.TaskQueue, fmt.Sprintf("%s%05d", prefix, i), "1840.00", opts)
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  timers: %d claims started; their escalations fall due from about %s\n", n, due.Format(time.TimeOnly))

	deadlines := map[string]time.Time{}
	late := map[string]time.Duration{}
	for stop := due.Add(10 * time.Minute); len(late) < n; {
		if time.Now().After(stop) {
			return fmt.Errorf("timers: %d of %d claims escalated 10 minutes after the deadline", len(late), n)
		}
		rows, err := e.store.OpenQueue(ctx)
		if err != nil {
			return err
		}
		for id, r := range rows {
			if !strings.HasPrefix(id, prefix) {
				continue
			}
			switch r.Stage {
			case string(approvals.StageWaiting):
				deadlines[id] = r.Deadline
			case string(approvals.StageEscalated):
				if d, ok := deadlines[id]; ok {
					if _, done := late[id]; !done {
						late[id] = r.Updated.Sub(d)
					}
				}
			}
		}
		time.Sleep(2 * time.Second)
	}
	dead, err := e.countStatus(ctx, prefix, workflows.StatusDeadLettered)
	if err != nil {
		return err
	}
	// The busiest minute of deadlines.
	var ds []time.Time
	for _, d := range deadlines {
		ds = append(ds, d)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Before(ds[j]) })
	busiest := 0
	for i, j := 0, 0; j < len(ds); j++ {
		for ds[j].Sub(ds[i]) > time.Minute {
			i++
		}
		busiest = max(busiest, j-i+1)
	}
	for _, d := range late {
		res.add("timers_escalation_late_ms", float64(d.Milliseconds()))
	}
	res.Values["timers_claims"] = float64(n)
	res.Values["timers_busiest_minute"] = float64(busiest)
	res.Values["timers_dead_lettered"] = float64(dead)
	ids := make([]string, 0, len(late))
	for id := range late {
		ids = append(ids, id)
	}
	lost, read, err := e.lostTasks(ctx, ids, 200)
	if err != nil {
		return err
	}
	for k, v := range lost {
		res.Values["timers_wft_timeouts_"+k] = float64(v)
	}
	res.Values["timers_histories_read"] = float64(read)
	fmt.Fprintf(os.Stderr, "  timers: workflow tasks timed out in %d of the claims' histories, by timers fired before them: %v\n", read, lost)
	s := res.Samples["timers_escalation_late_ms"]
	fmt.Fprintf(os.Stderr, "  timers: %d escalations, %d of their deadlines in the busiest minute; late after the deadline p50 %.1f s, p99 %.1f s, max %.1f s; %d dead-lettered\n",
		len(late), busiest, percentile(s, 50)/1000, percentile(s, 99)/1000, percentile(s, 100)/1000, dead)
	if dead > 0 {
		return fmt.Errorf("timers: %d claims dead-lettered", dead)
	}
	return nil
}

// lostTasks counts, in the histories of up to sample of the claims whose
// IDs are given, the workflow tasks that timed out (a task the server
// handed to no worker in time, or one a worker did not finish in time:
// work the server does again), by the number of timers that had fired in
// the claim before it and by kind. A burst that costs such tasks costs the
// server a timeout and a second dispatch each.
func (e *env) lostTasks(ctx context.Context, ids []string, sample int) (map[string]int, int, error) {
	sort.Strings(ids)
	step := max(1, len(ids)/max(sample, 1))
	lost := map[string]int{}
	read := 0
	for i := 0; i < len(ids); i += step {
		it := e.client.GetWorkflowHistory(ctx, ids[i], "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		fired := 0
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return nil, 0, err
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_TIMER_FIRED:
				fired++
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
				kind := strings.ToLower(strings.TrimPrefix(ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType().String(), "TIMEOUT_TYPE_"))
				lost[fmt.Sprintf("after_%d_timers_%s", fired, kind)]++
			}
		}
		read++
	}
	return lost, read, nil
}
