package main

import (
	"context"
	"time"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/config"
)

// The yardsticks, on their own task queue: an empty workflow (one workflow
// task: the ceiling of what the server and one worker can start and finish)
// and nine no-op regular activities in a row (what a naive nine-step claim
// would cost).
const noopQueue = "bench-noop"

func EmptyWorkflow(ctx workflow.Context) error { return nil }

func NineActivities(ctx workflow.Context) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	for range 9 {
		if err := workflow.ExecuteActivity(ctx, Noop).Get(ctx, nil); err != nil {
			return err
		}
	}
	return nil
}

func Noop(context.Context) error { return nil }

// runNoopWorker is `bench noop-worker`: a worker process for the
// yardsticks, so they run out of process like the claims worker does.
func runNoopWorker() error {
	logger := config.Logger("bench-noop-worker")
	c, err := config.Dial(context.Background(), logger)
	if err != nil {
		return err
	}
	defer c.Close()
	// The claims worker's cache and pollers, so the yardsticks differ from
	// a claim only in the workflow they run.
	var opts worker.Options
	if err := config.Tune(&opts); err != nil {
		return err
	}
	w := worker.New(c, noopQueue, opts)
	w.RegisterWorkflow(EmptyWorkflow)
	w.RegisterWorkflow(NineActivities)
	w.RegisterActivity(Noop)
	w.RegisterWorkflow(FloorWorkflow)
	w.RegisterActivity(Echo)
	return w.Run(worker.InterruptCh())
}
