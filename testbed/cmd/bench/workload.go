package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
)

// A workload is one measurement of the bench, in a file of its own.
type workload interface {
	// names are the -only names that select it; the first names it.
	names() []string
	// flags defines its own flags on fs.
	flags(fs *flag.FlagSet)
	// run measures it on the bench's dev server and workers (e), adding
	// its figures to res.
	run(ctx context.Context, e *env, res *results) error
}

// A preflighter checks, before the bench starts anything, that what its
// run will need is there: a missing tool fails the bench at once, not
// after the workloads before it.
type preflighter interface {
	preflight() error
}

// listed is a workload in the bench's list.
type listed struct {
	workload
	// optIn: it runs only when -only names it (it takes long, or needs
	// more than the dev server).
	optIn bool
}

// workloads are the bench's workloads, in the order a run measures them.
func workloads() []listed {
	return []listed{
		{workload: &throughputWorkload{}},
		{workload: &anatomyWorkload{}, optIn: true},
		{workload: &floorWorkload{}},
		// Right after the baseline and claims measurements, on the same server.
		{workload: &scalingWorkload{}},
		{workload: &historyWorkload{}},
		{workload: &approvalWorkload{}},
		{workload: &latencyWorkload{}},
		{workload: &killWorkload{}},
		{workload: &tracingWorkload{}},
		{workload: &peersWorkload{}, optIn: true},
		// First of the waiting rooms: its checks count every claim
		// waiting, and the others leave some.
		{workload: &surgeWorkload{}, optIn: true},
		{workload: &replayCheckWorkload{}, optIn: true},
		{workload: &priorityWorkload{}, optIn: true},
		{workload: &timersWorkload{}, optIn: true},
		{workload: &ratelimitWorkload{}, optIn: true},
		{workload: &outageWorkload{}, optIn: true},
		{workload: &parkedWorkload{}},
	}
}

// selected are the workloads of list that -only (comma-separated names)
// selects: those it names, or with no -only, all but the opt-in ones.
func selected(list []listed, only string) []workload {
	var out []workload
	for _, l := range list {
		if only == "" && !l.optIn || slices.ContainsFunc(l.names(), func(n string) bool { return wanted(only, n) }) {
			out = append(out, l.workload)
		}
	}
	return out
}

// wanted says whether -only names name.
func wanted(only, name string) bool {
	return only != "" && slices.Contains(strings.Split(only, ","), name)
}

// counts reads flag name's value v, comma-separated positive whole numbers.
func counts(name, v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n <= 0 {
			return nil, fmt.Errorf("bad -%s %q", name, v)
		}
		out = append(out, n)
	}
	return out, nil
}
