package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/workflows"
)

// The throughput workloads: the ceiling (an empty workflow), the naive
// baseline (nine no-op regular activities) and the claim workflow's
// auto-approve path, each -n workflows at -concurrency, -reps times in
// turn, and what each workflow costs each process (scaling.go's /proc
// readings): the yardsticks run on the noop worker, the claims on the
// claims worker; the server and the bench (client, stripesim) serve both.

// throughputWorkload is -only ceiling, baseline and claims; it measures
// those of the three -only names.
type throughputWorkload struct{}

func (*throughputWorkload) names() []string { return []string{"ceiling", "baseline", "claims"} }

func (*throughputWorkload) flags(*flag.FlagSet) {}

func (*throughputWorkload) run(ctx context.Context, e *env, res *results) error {
	o := e.o
	use := map[string]*cpuUsage{}
	for rep := 1; rep <= o.reps; rep++ {
		for _, w := range []flow{e.ceiling(), e.baseline(), e.autoClaims(fmt.Sprintf("r%d", rep))} {
			if !o.want(w.key) {
				continue
			}
			wp := e.noop
			if w.key == "claims" {
				wp = e.claims
			}
			groups := []cpuGroup{{name: "server", pids: []int{e.devPID}}, {name: "worker", pids: []int{wp.cmd.Process.Pid}},
				{name: "bench", pids: []int{os.Getpid()}}}
			// The claims worker's CPU profile over most of the last
			// repetition, kept as claims-worker-0.pprof beside the JSON.
			var prof *profileRun
			if w.key == "claims" && rep == o.reps {
				prof = e.startProfile(ctx, []*proc{e.claims}, "", "claims", o.n, e.lastRate["claims"])
			}
			if use[w.key] == nil {
				use[w.key] = &cpuUsage{}
			}
			rate, err := e.measure(ctx, w, o.n, groups, use[w.key])
			if err != nil {
				return fmt.Errorf("%s: %w", w.name, err)
			}
			res.add(w.key+"_per_s", rate)
			e.lastRate[w.key] = rate
			fmt.Fprintf(os.Stderr, "  rep %d %-32s %7.1f /s\n", rep, w.name, rate)
			if prof != nil {
				if err := prof.finish(res, "claims"); err != nil {
					fmt.Fprintf(os.Stderr, "  claims worker profile: %v\n", err)
				}
			}
		}
	}
	for key, u := range use {
		u.record(res, key, o.n*o.reps)
	}
	return nil
}

// flow is what a throughput measurement runs: it starts its i-th
// workflow.
type flow struct {
	key, name string
	start     func(ctx context.Context, i int) (client.WorkflowRun, error)
	// want is the claim status every run must end in ("" for the
	// yardsticks): a claim that ends another way (dead-lettered at intake,
	// say) finishes fast and would inflate claims/s unseen.
	want string
	// settle, if set, runs after the workflows end and before the CPU
	// they cost is read: work they left behind (spans still buffered) is
	// done inside the window.
	settle func(ctx context.Context)
}

func (e *env) ceiling() flow {
	return flow{key: "ceiling", name: "ceiling: empty workflow", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: noopQueue}, EmptyWorkflow)
	}}
}

func (e *env) baseline() flow {
	return flow{key: "baseline", name: "baseline: 9 no-op activities", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: noopQueue}, NineActivities)
	}}
}

func (e *env) autoClaims(tag string) flow {
	return flow{key: "claims", name: "ClaimWorkflow, auto-approve path", start: func(ctx context.Context, i int) (client.WorkflowRun, error) {
		return e.startClaim(ctx, fmt.Sprintf("bench-%s-%05d-%d", tag, i, seq.Add(1)), "640.00")
	}, want: workflows.StatusPaid}
}

// throughput runs n workflows, at most e.o.concurrency at a time, and
// returns completed workflows per second.
func (e *env) throughput(ctx context.Context, w flow, n int) (float64, error) {
	begin := time.Now()
	err := parallel(n, e.o.concurrency, func(i int) error {
		run, err := w.start(ctx, i)
		if err == nil {
			err = outcome(ctx, run, w.want)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return float64(n) / time.Since(begin).Seconds(), nil
}
