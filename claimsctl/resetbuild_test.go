package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reset point never keeps a workflow task a worker started on a retry
// (its started event carries the build's stamp, and the server assigns a
// run rebuilt past it to that build): e2e TestResetBuildAfterARetriedFirstTask
// shows the server doing so.
func TestResetPointStopsBeforeAStampedTask(t *testing.T) {
	// 1 started, 2-4 a first task that timed out, 5-7 its retry by the
	// bad build, then three more tasks.
	tasks := []int64{4, 7, 12, 20}
	for name, c := range map[string]struct {
		h     runHistory
		point int64
		want  int64
		why   bool
	}{
		"no retried task: the build's own point":    {runHistory{finished: tasks}, 7, 7, false},
		"retried by the bad build: the task before": {runHistory{finished: tasks, stamped: 6, stampedBuild: "bad"}, 7, 4, true},
		"a retry after the point changes nothing":   {runHistory{finished: tasks, stamped: 19, stampedBuild: "good"}, 7, 7, false},
		"a stranded run: before the stamp":          {runHistory{finished: tasks, stamped: 11, stampedBuild: "bad"}, 0, 7, false},
		// 15: a sticky task that timed out unstarted (no started event of its own)
		"a sticky timeout after the stamp is past it": {runHistory{finished: []int64{4, 12, 15, 18}, stamped: 11, stampedBuild: "good"}, 18, 4, true},
	} {
		t.Run(name, func(t *testing.T) {
			at, why, err := resetPoint(c.h, c.point)
			require.NoError(t, err)
			assert.Equal(t, c.want, at)
			assert.Equal(t, c.why, why != "", why)
		})
	}
	_, _, err := resetPoint(runHistory{finished: tasks, stamped: 3, stampedBuild: "bad"}, 7)
	assert.ErrorContains(t, err, "before event 3, a task started with build bad's stamp")
	_, _, err = resetPoint(runHistory{finished: tasks}, 0)
	assert.ErrorContains(t, err, "no workflow task in its history carries a build's stamp")
}

// A payment scheduled after the point counts, completed or not: it may
// have reached the provider.
func TestPaidAfter(t *testing.T) {
	h := runHistory{paid: []int64{30}}
	assert.True(t, h.paidAfter(20))
	assert.False(t, h.paidAfter(30))
	assert.False(t, runHistory{}.paidAfter(0))
}
