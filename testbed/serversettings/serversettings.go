// Package serversettings is the one list of Temporal server settings every
// server this project starts runs with: the dev servers of make demo, the
// tests, the soak and the benchmark, and the real cluster of make cluster.
// scripts/lib.sh repeats the dev server's flags in shell; a test holds it
// to this list.
package serversettings

import (
	"fmt"
	"maps"
	"slices"
)

// SearchAttributes are the custom search attributes the workflows publish
// (docs/design.md): name to type, as `temporal operator search-attribute
// create` and `start-dev --search-attribute` spell them.
var SearchAttributes = map[string]string{
	"ClaimStatus":      "Keyword",
	"ApprovalDeadline": "Datetime",
}

// DynamicConfig returns the dynamic config values every server gets.
func DynamicConfig() map[string]any {
	return map[string]any{
		// The history service polls its transfer queue at 20/s per shard by
		// default, which adds up to ~50 ms to every workflow step.
		"history.transferProcessorMaxPollRPS": 1000,
		// Matching's newer task matcher (the one task-queue priority and
		// fairness run on): after a worker is SIGKILLed with 1,000 claims in
		// flight, the interrupted steps were redone within 7–9 s p99 with it
		// and 12–33 s without, because the default matcher hands the
		// replacement worker the backlog's newest tasks while the retried
		// ones wait (docs/performance.md).
		"matching.useNewMatcher": true,
		// Eager activity execution: the workflow task that schedules an
		// activity gets it back in the server's answer, started, when its
		// worker has a free slot, instead of the activity going through
		// matching to a poller. With a model answering in 1–2 s and 100
		// claims in flight it cut the server's CPU per claim by 7–15 % and
		// raised claims/s by 4–5 % (docs/performance.md, "Real model
		// latency"). An activity that finds no free slot goes through the
		// queue, in priority order, as before.
		"system.enableActivityEagerExecution": true,
	}
}

// DevServerArgs are the flags `temporal server start-dev` gets after its
// address and port: the search attributes and the dynamic config values,
// in a stable order.
func DevServerArgs() []string {
	var args []string
	for _, name := range slices.Sorted(maps.Keys(SearchAttributes)) {
		args = append(args, "--search-attribute", name+"="+SearchAttributes[name])
	}
	dc := DynamicConfig()
	for _, key := range slices.Sorted(maps.Keys(dc)) {
		args = append(args, "--dynamic-config-value", fmt.Sprintf("%s=%v", key, dc[key]))
	}
	return args
}
