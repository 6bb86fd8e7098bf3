package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/workflows"
)

// The floor workload: what the engine alone costs for what a claim's
// history records, beside what the claim costs, in one run. Its rows are
// Temporal's primitives run bare on the yardsticks' worker (an empty
// workflow; then four of each: regular activities, local activities in
// one task, 1 ms timers, signals, updates, search-attribute upserts), and
// the auto-approve path's floor: a workflow of no-op steps shaped like the
// history a claim of this build records in this run (its regular
// activity attempts, its workflow tasks that ran local activities and how
// many each, its upserts, ClaimStatus at start, a 1 KB payload each way).
// Each row's figure is the CPU of the stack's processes a workflow
// (server, the worker that ran it, the bench as the client), the claim's
// on its own worker, and the claim is printed as a ratio of its floor.

// FloorInput says what FloorWorkflow does: Locals local activities in
// each of LocalTasks workflow tasks, kept apart by the regular activities
// and timers between them; Signals and Updates it waits for, in that
// order; Upserts of ClaimStatus in its last task.
type FloorInput struct {
	// Version calls workflow.GetVersion first, as a claim does: a marker
	// and an upsert of TemporalChangeVersion.
	Version                                                           bool
	Activities, LocalTasks, Locals, Timers, Upserts, Signals, Updates int
	// PayloadBytes pads every activity's argument and result.
	PayloadBytes int
}

// floorSignal and floorUpdate are what FloorWorkflow waits for.
const (
	floorSignal = "floor-signal"
	floorUpdate = "floor-update"
)

func FloorWorkflow(ctx workflow.Context, in FloorInput) error {
	if in.Version {
		_ = workflow.GetVersion(ctx, "floor", workflow.DefaultVersion, 1)
	}
	updates := 0
	if err := workflow.SetUpdateHandler(ctx, floorUpdate, func(workflow.Context) error {
		updates++
		return nil
	}); err != nil {
		return err
	}
	pad := strings.Repeat("x", in.PayloadBytes)
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	acts, timers := in.Activities, in.Timers
	for task := range in.LocalTasks {
		// A regular activity, or else a timer, ends the task before: these
		// local activities run in a task of their own (with neither left,
		// they join the task before).
		if task > 0 {
			switch {
			case acts > 0:
				if err := workflow.ExecuteActivity(actx, Echo, pad).Get(ctx, nil); err != nil {
					return err
				}
				acts--
			case timers > 0:
				if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
					return err
				}
				timers--
			}
		}
		for range in.Locals {
			if err := workflow.ExecuteLocalActivity(lctx, Echo, pad).Get(ctx, nil); err != nil {
				return err
			}
		}
	}
	for ; acts > 0; acts-- {
		if err := workflow.ExecuteActivity(actx, Echo, pad).Get(ctx, nil); err != nil {
			return err
		}
	}
	for ; timers > 0; timers-- {
		if err := workflow.Sleep(ctx, time.Millisecond); err != nil {
			return err
		}
	}
	sig := workflow.GetSignalChannel(ctx, floorSignal)
	for range in.Signals {
		sig.Receive(ctx, nil)
	}
	if err := workflow.Await(ctx, func() bool { return updates >= in.Updates }); err != nil {
		return err
	}
	for range in.Upserts {
		if err := workflow.UpsertTypedSearchAttributes(ctx, workflows.ClaimStatusKey.ValueSet(workflows.StatusPaid)); err != nil {
			return err
		}
	}
	return nil
}

// floorShape is the FloorInput of what a run's history records: a
// GetVersion (its marker, and its upsert, which billing leaves out), its
// regular activity attempts, its workflow tasks that recorded local
// activities and their mean count a task (rounded), its timers, upserts
// (TemporalChangeVersion's excepted), signals and accepted updates.
func floorShape(events []*historypb.HistoryEvent) FloorInput {
	var in FloorInput
	a := billableActions(events)
	in.Activities, in.Timers, in.Upserts = a.ByKind[actActivityAttempt], a.ByKind[actTimer], a.ByKind[actUpsert]
	in.Signals, in.Updates = a.ByKind[actSignal], a.ByKind[actUpdate]
	tasks, locals := map[int64]bool{}, 0
	for _, ev := range events {
		if ev.GetEventType() != enumspb.EVENT_TYPE_MARKER_RECORDED {
			continue
		}
		m := ev.GetMarkerRecordedEventAttributes()
		in.Version = in.Version || m.GetMarkerName() == "Version"
		if m.GetMarkerName() == "LocalActivity" {
			tasks[m.GetWorkflowTaskCompletedEventId()] = true
			locals++
		}
	}
	in.LocalTasks = len(tasks)
	if in.LocalTasks > 0 {
		in.Locals = (locals + in.LocalTasks/2) / in.LocalTasks
	}
	return in
}

func (in FloorInput) String() string {
	var parts []string
	if in.Version {
		parts = append(parts, "GetVersion")
	}
	add := func(what string, n int) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", what, n))
		}
	}
	add("activities", in.Activities)
	if in.LocalTasks > 0 {
		parts = append(parts, fmt.Sprintf("local-activity tasks %d (%d local activities each)", in.LocalTasks, in.Locals))
	}
	add("timers", in.Timers)
	add("signals", in.Signals)
	add("updates", in.Updates)
	add("upserts", in.Upserts)
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// floorRow is one row of the floor: its workflow's input, and what the
// bench sends it once started.
type floorRow struct {
	key, name string
	in        FloorInput
	// withStatus starts it with ClaimStatus set, as a claim is.
	withStatus bool
}

// floorPrimitives are the engine's primitives, four of each.
var floorPrimitives = []floorRow{
	{key: "empty", name: "empty workflow"},
	{key: "activities", name: "4 regular activities", in: FloorInput{Activities: 4}},
	{key: "locals", name: "4 local activities, one task", in: FloorInput{LocalTasks: 1, Locals: 4}},
	{key: "timers", name: "4 timers of 1 ms", in: FloorInput{Timers: 4}},
	{key: "signals", name: "4 signals", in: FloorInput{Signals: 4}},
	{key: "updates", name: "4 updates", in: FloorInput{Updates: 4}},
	{key: "upserts", name: "4 upserts", in: FloorInput{Upserts: 4}},
}

// floorWorkload is -only floor.
type floorWorkload struct{}

func (*floorWorkload) names() []string { return []string{"floor"} }

func (*floorWorkload) flags(*flag.FlagSet) {}

func (*floorWorkload) run(ctx context.Context, e *env, res *results) error {
	// The auto path's shape, from a claim of this build run now.
	id := fmt.Sprintf("bench-floor-auto-%d", seq.Add(1))
	if err := e.runPath(ctx, id, "640.00", workflows.Options{}, "", workflows.StatusPaid); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	events, err := history(ctx, e.client, id, "")
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	shape := floorShape(events)
	shape.PayloadBytes = 1000
	rows := append(append([]floorRow(nil), floorPrimitives...),
		floorRow{key: "auto", name: "the auto path's floor", in: shape, withStatus: true})
	res.FloorShape = &shape

	flows := map[string]flow{}
	groups := map[string][]cpuGroup{}
	var order []string
	for _, r := range rows {
		opts := client.StartWorkflowOptions{TaskQueue: noopQueue}
		if r.withStatus {
			opts.TypedSearchAttributes = temporal.NewSearchAttributes(workflows.ClaimStatusKey.ValueSet(workflows.StatusRunning))
		}
		k := "floor_" + r.key
		flows[k] = flow{key: k, name: r.name, start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
			run, err := e.client.ExecuteWorkflow(ctx, opts, FloorWorkflow, r.in)
			if err != nil {
				return nil, err
			}
			for range r.in.Signals {
				if err := e.client.SignalWorkflow(ctx, run.GetID(), run.GetRunID(), floorSignal, nil); err != nil {
					return nil, err
				}
			}
			for range r.in.Updates {
				h, err := e.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: run.GetID(), RunID: run.GetRunID(),
					UpdateName: floorUpdate, WaitForStage: client.WorkflowUpdateStageCompleted})
				if err == nil {
					err = h.Get(ctx, nil)
				}
				if err != nil {
					return nil, err
				}
			}
			return run, nil
		}}
		groups[k] = []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{e.noop.cmd.Process.Pid}},
			{name: "bench", pids: []int{os.Getpid()}}}
		order = append(order, k)
	}
	flows["floor_claims"] = e.autoClaims("floor")
	groups["floor_claims"] = []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{e.claims.cmd.Process.Pid}},
		{name: "bench", pids: []int{os.Getpid()}}}
	order = append(order, "floor_claims")

	for _, k := range order {
		rate, err := e.throughput(ctx, flows[k], min(e.o.n, 30))
		if err != nil {
			return fmt.Errorf("floor: warm-up %s: %w", flows[k].name, err)
		}
		e.lastRate[k] = rate
	}
	use := map[string]*cpuUsage{}
	var prof *profileRun
	for rep := 1; rep <= e.o.reps; rep++ {
		for _, k := range order {
			if use[k] == nil {
				use[k] = &cpuUsage{}
			}
			// The claims worker's CPU profile over most of the claim row's
			// last repetition: where its milliseconds go (where.go).
			if k == "floor_claims" && rep == e.o.reps {
				prof = e.startProfile(ctx, []*proc{e.claims}, "", "floor-claims", e.o.n, e.lastRate[k])
			}
			rate, err := e.measure(ctx, flows[k], e.o.n, groups[k], use[k])
			if err != nil {
				return fmt.Errorf("floor: %s: %w", flows[k].name, err)
			}
			res.add(k+"_per_s", rate)
			e.lastRate[k] = rate
		}
	}
	n := e.o.n * e.o.reps
	for _, k := range order {
		use[k].record(res, k, n)
		res.Values[k+"_cpu_stack_ms_per_claim"] = use[k].stackMS(groups[k], n)
	}
	if prof != nil {
		err := prof.wait()
		if err == nil {
			err = recordWhere(res, prof.paths, res.Values["floor_claims_cpu_worker_ms_per_claim"])
		}
		if err != nil {
			return fmt.Errorf("floor: the claims worker's profile: %w", err)
		}
	}
	res.Values["floor_claims_vs_auto_floor"] = res.Values["floor_claims_cpu_stack_ms_per_claim"] / res.Values["floor_auto_cpu_stack_ms_per_claim"]
	fmt.Fprintf(os.Stderr, "  floor: the auto-approve claim %.1f ms a claim, its floor (%s) %.1f ms: %.2f×\n",
		res.Values["floor_claims_cpu_stack_ms_per_claim"], shape, res.Values["floor_auto_cpu_stack_ms_per_claim"], res.Values["floor_claims_vs_auto_floor"])
	return nil
}

// history reads the events of run runID of workflow id ("": its latest).
func history(ctx context.Context, c client.Client, id, runID string) ([]*historypb.HistoryEvent, error) {
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		events = append(events, ev)
	}
	return events, nil
}

// printFloor prints the floor's rows: CPU a workflow by process, what each
// primitive adds to the empty workflow (a fourth of the row's difference),
// and the claim beside its floor.
func (r *results) printFloor(w io.Writer) {
	if _, ok := r.Values["floor_claims_vs_auto_floor"]; !ok {
		return
	}
	fmt.Fprintf(w, "\nthe engine's floor (CPU a workflow, ms; the stack is server + worker + bench):\n\n")
	fmt.Fprintln(w, "| workflow | server | worker | bench | stack | each one adds: stack (server) | workflows/s |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	empty, emptyServer := r.Values["floor_empty_cpu_stack_ms_per_claim"], r.Values["floor_empty_cpu_server_ms_per_claim"]
	row := func(k, name, adds string) {
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %.1f | %s | %.1f |\n", name, r.Values[k+"_cpu_server_ms_per_claim"],
			r.Values[k+"_cpu_worker_ms_per_claim"], r.Values[k+"_cpu_bench_ms_per_claim"], r.Values[k+"_cpu_stack_ms_per_claim"],
			adds, r.Summary[k+"_per_s"].Median)
	}
	for _, p := range floorPrimitives {
		k := "floor_" + p.key
		adds := ""
		if p.key != "empty" {
			adds = fmt.Sprintf("%+.1f (%+.1f)", (r.Values[k+"_cpu_stack_ms_per_claim"]-empty)/4, (r.Values[k+"_cpu_server_ms_per_claim"]-emptyServer)/4)
		}
		row(k, p.name, adds)
	}
	row("floor_auto", "the auto path's floor: ClaimStatus at start, "+r.FloorShape.String()+", 1 KB each way", "")
	row("floor_claims", "ClaimWorkflow, auto-approve path", fmt.Sprintf("**%.2f× its floor**", r.Values["floor_claims_vs_auto_floor"]))
}
