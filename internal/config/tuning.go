package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.temporal.io/sdk/worker"
)

// DefaultWorkflowCacheSize is WORKFLOW_CACHE_SIZE's default: the claims a
// worker keeps in memory between their workflow tasks. It must cover the
// claims in flight on one worker (a claim evicted between two steps
// replays its whole history on the next: with 32 and 100 in flight that
// cost the claim path 40 % of its throughput), but every parked claim
// fills it too, at ~80 KiB each, and memory with thousands parked must
// stay within 15 % of idle. Measured in docs/performance.md: 128 meets
// both (+11.5 % RSS with 2,000 parked; 256 gave +22 %, 1,000 gave +80 %).
const DefaultWorkflowCacheSize = 128

// CatastropheSettings are the worker settings (KEY=value) docs/operations.md
// gives for a catastrophe week: one queue (no sticky cache, so a parked
// claim's decision and the surge's next steps wait in the same queue,
// where task priority orders them) and a bound on the workflow tasks the
// worker takes at once (so they wait there, rather than for the worker's
// CPU and the server's database, which serve in arrival order), and a
// model call that waits for capacity (its turn in the model budget, a
// 429's Retry-After) gives its slot back after half a second, the claim
// waiting on a durable timer instead (with the budget binding, a 2 s wait
// kept every slot held and a decision waiting for one). The bench's
// priority workload and the e2e tests run a worker on exactly these.
var CatastropheSettings = []string{"WORKFLOW_CACHE_SIZE=0", "WORKFLOW_TASK_SLOTS=32", "MODEL_MAX_WAIT=500ms"}

// Tune applies the worker settings every worker process in this project
// shares (bin/worker and the benchmark's yardstick worker, so the two
// compare like for like): the process-wide workflow cache from
// WORKFLOW_CACHE_SIZE, and the workflow task slots and pollers from
// WORKFLOW_TASK_SLOTS and WORKER_POLLERS into opts.
//
// WORKFLOW_TASK_SLOTS bounds the workflow tasks the worker runs at once (a
// task waiting on a local activity, such as a triage turn's model call,
// holds its slot): 0, the default, leaves the SDK's 1,000. A worker that
// takes fewer leaves the rest waiting in the server's queue, where task
// priority orders them; with a thousand it takes each the moment it is
// there, and the rest wait for its CPU and the server's database, which
// serve in arrival order. A catastrophe week runs with CatastropheSettings.
//
// WORKER_POLLERS is "auto" (the default: the SDK scales each task type's
// pollers from 1 up to DefaultMaxPollers from how often a poll finds a
// task; with the SDK's fixed two pollers a burst of claims waits in the
// server's matcher while the worker has free slots), "auto:N" (up to N),
// or a fixed number of pollers per task type.
func Tune(opts *worker.Options) error {
	size, err := Int("WORKFLOW_CACHE_SIZE", DefaultWorkflowCacheSize)
	if err != nil || size < 0 {
		return fmt.Errorf("WORKFLOW_CACHE_SIZE=%q: want a number of workflows", os.Getenv("WORKFLOW_CACHE_SIZE"))
	}
	worker.SetStickyWorkflowCacheSize(size)

	slots, err := Int("WORKFLOW_TASK_SLOTS", 0)
	if err != nil || slots < 0 || slots == 1 {
		return fmt.Errorf("WORKFLOW_TASK_SLOTS=%q: want a number of workflow tasks, at least 2 (0: the SDK's %d)", os.Getenv("WORKFLOW_TASK_SLOTS"), sdkWorkflowTaskSlots)
	}
	if slots > 0 {
		// Not with a worker.Options.Tuner: the SDK refuses both.
		opts.MaxConcurrentWorkflowTaskExecutionSize = slots
	}

	v := Get("WORKER_POLLERS", "auto")
	bad := fmt.Errorf("WORKER_POLLERS=%q: want \"auto\", \"auto:N\" or a number of pollers (at least 1)", v)
	if v == "auto" || strings.HasPrefix(v, "auto:") {
		most := DefaultMaxPollers
		if n, ok := strings.CutPrefix(v, "auto:"); ok {
			if most, err = strconv.Atoi(n); err != nil || most < 1 {
				return bad
			}
		}
		auto := worker.NewPollerBehaviorAutoscaling(worker.PollerBehaviorAutoscalingOptions{
			InitialNumberOfPollers: min(2, most), MinimumNumberOfPollers: 1, MaximumNumberOfPollers: most})
		opts.WorkflowTaskPollerBehavior, opts.ActivityTaskPollerBehavior = auto, auto
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return bad
	}
	fixed := worker.NewPollerBehaviorSimpleMaximum(worker.PollerBehaviorSimpleMaximumOptions{MaximumNumberOfPollers: n})
	opts.WorkflowTaskPollerBehavior, opts.ActivityTaskPollerBehavior = fixed, fixed
	return nil
}

// sdkWorkflowTaskSlots is the SDK's bound on the workflow tasks a worker
// runs at once, WORKFLOW_TASK_SLOTS=0.
const sdkWorkflowTaskSlots = 1000

// DefaultMaxPollers bounds WORKER_POLLERS=auto. Every open poll is a
// goroutine and an HTTP/2 stream with its buffers: with the SDK's bound
// (100 each for workflow, sticky and activity tasks) parking 2,000 claims
// grew the worker from 60 to 766 goroutines and its RSS by 29 %; with 16,
// by 10 % (docs/performance.md).
const DefaultMaxPollers = 16
