package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/workflows"
)

// The anatomy workload: what each ingredient of a claim's history costs
// the Temporal server, one added at a time to the empty workflow, each
// run like the throughput rows (e.o.n workflows, e.o.concurrency in
// flight) on the yardsticks' worker, with the server's CPU per workflow
// from /proc. The ingredients are the auto-approve path's: a search
// attribute at start, GetVersion (a marker and an upsert of
// TemporalChangeVersion), local activities (markers in a task), a
// search-attribute upsert, a regular activity (three events and two
// tasks), and a claim-sized payload.

// anatomyStep is one workflow of the anatomy: FloorWorkflow (floor.go)
// with the ingredients so far.
type anatomyStep struct {
	key, name string
	in        FloorInput
	// withStatus starts the workflow with ClaimStatus set, as a claim is.
	withStatus bool
}

// The local activities run in one task, then the regular activities, then
// the upsert, as FloorWorkflow orders them.
var anatomySteps = []anatomyStep{
	{key: "empty", name: "empty workflow"},
	{key: "status", name: "+ ClaimStatus at start", withStatus: true},
	{key: "version", name: "+ GetVersion", withStatus: true, in: FloorInput{Version: true}},
	{key: "local8", name: "+ 8 local activities", withStatus: true, in: FloorInput{Version: true, LocalTasks: 1, Locals: 8}},
	{key: "upsert", name: "+ an upsert at the end", withStatus: true, in: FloorInput{Version: true, LocalTasks: 1, Locals: 8, Upserts: 1}},
	{key: "act2", name: "+ 2 regular activities", withStatus: true, in: FloorInput{Version: true, LocalTasks: 1, Locals: 8, Upserts: 1, Activities: 2}},
	{key: "payload", name: "+ claim-sized payloads", withStatus: true, in: FloorInput{Version: true, LocalTasks: 1, Locals: 8, Upserts: 1, Activities: 2, PayloadBytes: 1000}},
}

// Echo returns its argument: a no-op activity with a payload each way.
func Echo(_ context.Context, s string) (string, error) { return s, nil }

// anatomyWorkload is -only anatomy (opt-in): it runs every step and
// records the server's and the worker's CPU per workflow of each.
type anatomyWorkload struct{}

func (*anatomyWorkload) names() []string { return []string{"anatomy"} }

func (*anatomyWorkload) flags(*flag.FlagSet) {}

func (*anatomyWorkload) run(ctx context.Context, e *env, res *results) error {
	noop := e.noop
	fmt.Fprintf(os.Stderr, "  anatomy: the claim's ingredients one at a time (server CPU per workflow)\n")
	for _, s := range anatomySteps {
		opts := client.StartWorkflowOptions{TaskQueue: noopQueue}
		if s.withStatus {
			opts.TypedSearchAttributes = temporal.NewSearchAttributes(workflows.ClaimStatusKey.ValueSet(workflows.StatusRunning))
		}
		w := flow{key: "anatomy_" + s.key, name: s.name, start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
			return e.client.ExecuteWorkflow(ctx, opts, FloorWorkflow, s.in)
		}}
		if _, err := e.throughput(ctx, w, 30); err != nil { // warm-up
			return fmt.Errorf("anatomy %s: %w", s.name, err)
		}
		groups := []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{noop.cmd.Process.Pid}}}
		var use cpuUsage
		for range e.o.reps {
			rate, err := e.measure(ctx, w, e.o.n, groups, &use)
			if err != nil {
				return fmt.Errorf("anatomy %s: %w", s.name, err)
			}
			res.add(w.key+"_per_s", rate)
		}
		use.record(res, w.key, e.o.n*e.o.reps)
		fmt.Fprintf(os.Stderr, "  %-28s server %5.1f ms, worker %4.1f ms a workflow\n", s.name,
			res.Values[w.key+"_cpu_server_ms_per_claim"], res.Values[w.key+"_cpu_worker_ms_per_claim"])
	}
	return nil
}
