package main

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func names(ws []workload) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.names()[0])
	}
	return out
}

// -only picks workloads by name, in the bench's order; without it, all
// but the opt-in ones run. The throughput workload answers to each of its
// three flows, and the claims flow brings its history and costs along.
func TestOnlySelectsWorkloadsInOrder(t *testing.T) {
	all := workloads()
	assert.Equal(t, []string{"ceiling", "floor", "scaling", "history", "approval", "latency", "kill", "tracing", "parked"}, names(selected(all, "")))
	assert.Equal(t, []string{"peers"}, names(selected(all, "peers")))
	assert.Equal(t, []string{"ceiling", "history"}, names(selected(all, "claims")))
	assert.Equal(t, []string{"ceiling"}, names(selected(all, "baseline")))
	assert.Equal(t, []string{"anatomy", "surge", "timers", "parked"}, names(selected(all, "parked,timers,surge,anatomy")))
	assert.Empty(t, selected(all, "nothing-by-this-name"))
}

// Every workload's flags fit on one command line beside the others (a
// name defined twice panics), each reaches its own workload, and a
// workload keeps its defaults for the flags not given.
func TestWorkloadsHaveTheirOwnFlags(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	all := workloads()
	for _, w := range all {
		require.NotPanics(t, func() { w.flags(fs) }, "%s's flags", w.names()[0])
	}
	require.NoError(t, fs.Parse([]string{"-inflight", "50", "-scaling-servers", "dev", "-surge", "30"}))
	for _, l := range all {
		switch w := l.workload.(type) {
		case *killWorkload:
			assert.Equal(t, []int{50}, w.inflight)
		case *scalingWorkload:
			assert.Equal(t, []string{"dev"}, w.servers)
			assert.Equal(t, []int{1, 2, 4}, w.workers)
		case *surgeWorkload:
			assert.Equal(t, 30, w.surge)
			assert.Equal(t, 1000, w.surgeBase)
		case *replayCheckWorkload:
			assert.Equal(t, []int{4, 16}, w.concurrency)
		}
	}
}

// Counts no measurement can be made with are refused, naming the flag.
func TestCountsBelowOneAreRefused(t *testing.T) {
	ok := options{n: 200, reps: 3, concurrency: 100}
	require.NoError(t, ok.check())
	for name, o := range map[string]options{
		"-reps must be at least 1, not 0":        {n: 200, reps: 0, concurrency: 100},
		"-n must be at least 1, not -1":          {n: -1, reps: 3, concurrency: 100},
		"-concurrency must be at least 1, not 0": {n: 200, reps: 3},
	} {
		assert.EqualError(t, o.check(), name)
	}
}
