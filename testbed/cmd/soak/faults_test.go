package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/netfault"
)

// Every schedule the soak can draw is one toxiproxy takes: a known kind
// with valid attributes on a real link, one fault a link at a time, the
// fixed three always there. (A bandwidth drawn as a duration rounded to
// the millisecond once became 0 KB/s, and the soak stopped mid-run.)
func TestEveryDrawnScheduleCanBeApplied(t *testing.T) {
	workers := []string{"worker-1", "worker-2", "worker-3"}
	for seed := range uint64(50) {
		plan := planFaults(seed, workers, 250*time.Second, time.Minute)
		require.Greater(t, len(plan), 3, "seed %d", seed)
		fixed := 0
		for i, p := range plan {
			require.NoError(t, p.Fault.Validate(), "seed %d: %s", seed, p)
			assert.Contains(t, deps, p.Dep)
			assert.Contains(t, workers, p.Worker)
			if p.Why != "" {
				fixed++
			}
			if p.Fault.Kind == netfault.Bandwidth {
				assert.GreaterOrEqual(t, p.Fault.RateKBps, int64(4), "seed %d", seed)
			}
			for _, q := range plan[i+1:] {
				if q.Worker == p.Worker && q.Dep == p.Dep {
					assert.GreaterOrEqual(t, q.At, p.At+p.For, "seed %d: two faults at once on %s→%s", seed, p.Worker, p.Dep)
				}
			}
		}
		assert.Equal(t, 3, fixed, "seed %d", seed)
	}
	assert.Equal(t, planFaults(7, workers, time.Minute, time.Minute), planFaults(7, workers, time.Minute, time.Minute), "seeded")
}
