package crash

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
)

func TestParse(t *testing.T) {
	pts, err := Parse("claim-0042:7, claim-0043:6:after-effect")
	require.NoError(t, err)
	assert.Equal(t, []Point{
		{WorkflowID: "claim-0042", Step: claim.StepNotify, Phase: BeforeEffect},
		{WorkflowID: "claim-0043", Step: claim.StepPay, Phase: AfterEffect},
	}, pts)
	for _, bad := range []string{"claim-0042", "claim-0042:0", "claim-0042:10", "claim-0042:x", "claim-0042:6:during", ":6"} {
		_, err := Parse(bad)
		assert.Error(t, err, bad)
	}
}

func TestFiresOnceAcrossRestarts(t *testing.T) {
	state := filepath.Join(t.TempDir(), "fired")
	pts, err := Parse("claim-0043:6:after-effect")
	require.NoError(t, err)
	kills, flushes := 0, 0
	newInjector := func() *Injector {
		i := New(pts, state, slog.Default()).BeforeKill(func() {
			assert.Equal(t, kills, flushes, "the flush comes before the kill")
			flushes++
		})
		i.kill = func() { kills++ }
		return i
	}
	ctx := context.Background()
	i := newInjector()
	i.At(ctx, "claim-0043:step6", BeforeEffect) // wrong phase
	i.At(ctx, "claim-0042:step6", AfterEffect)  // wrong claim
	assert.Equal(t, 0, kills)
	i.At(ctx, "claim-0043:step6", AfterEffect)
	assert.Equal(t, 1, kills)
	assert.Equal(t, 1, flushes)
	// The "restarted" worker reads the state file and carries on.
	newInjector().At(ctx, "claim-0043:step6", AfterEffect)
	assert.Equal(t, 1, kills)
}

func TestPointsWithinAStep(t *testing.T) {
	pts, err := Parse("claim-7:2/turn2:after-effect,claim-8:2,claim-9:2/turn1/lookup_policy")
	require.NoError(t, err)
	assert.Equal(t, "claim-7:2/turn2:after-effect", pts[0].String())
	kills := 0
	i := New(pts, filepath.Join(t.TempDir(), "fired"), slog.Default())
	i.kill = func() { kills++ }
	ctx := context.Background()
	i.At(ctx, "claim-7:step2:turn1", AfterEffect) // another turn
	i.At(ctx, "claim-7:step2:turn2:prior_claims", AfterEffect)
	assert.Equal(t, 0, kills, "a point with a Sub fires at that activity only")
	i.At(ctx, "claim-7:step2:turn2", AfterEffect)
	assert.Equal(t, 1, kills)

	i.At(ctx, "claim-8:step2:turn1", BeforeEffect)
	assert.Equal(t, 2, kills, "a step's point fires at its first activity")
	i.At(ctx, "claim-8:step2:turn2", BeforeEffect)
	assert.Equal(t, 2, kills, "once")
	i.At(ctx, "claim-80:step2", BeforeEffect)
	assert.Equal(t, 2, kills, "another claim whose ID shares the prefix")

	i.At(ctx, "claim-9:step2:turn1:lookup_policy", BeforeEffect)
	assert.Equal(t, 3, kills)
}

// With a batch, one kill interrupts several claims at their points: each
// is held until the batch is full (or the wait since the first passed),
// then all are remembered on one line and the process is killed once.
func TestBatchKillsOnceForSeveralClaims(t *testing.T) {
	state := filepath.Join(t.TempDir(), "fired")
	pts, err := Parse("c1:6:after-effect,c2:6:after-effect,c3:6:after-effect,c4:6:after-effect")
	require.NoError(t, err)
	var mu sync.Mutex
	kills := 0
	newInjector := func(wait time.Duration) *Injector {
		i := New(pts, state, slog.Default()).Batch(3, wait)
		i.kill = func() { mu.Lock(); kills++; mu.Unlock() }
		return i
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return kills }
	ctx := context.Background()
	i := newInjector(time.Minute)
	var held sync.WaitGroup
	for _, c := range []string{"c1", "c2"} {
		held.Go(func() { i.At(ctx, claim.IdempotencyKey(c+":step6"), AfterEffect) })
	}
	require.Eventually(t, func() bool { i.mu.Lock(); defer i.mu.Unlock(); return len(i.held) == 2 }, time.Second, time.Millisecond)
	assert.Equal(t, 0, count(), "two of three: held, not killed")
	i.At(ctx, "c3:step6", AfterEffect)
	held.Wait()
	assert.Equal(t, 1, count(), "the third fills the batch: one kill")
	b, err := os.ReadFile(state)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"c1:6:after-effect", "c2:6:after-effect", "c3:6:after-effect"}, strings.Fields(string(b)))
	assert.Equal(t, 1, strings.Count(string(b), "\n"), "one line a kill")

	// Restarted: the three pass; the last claim alone is killed once the
	// wait has passed.
	j := newInjector(50 * time.Millisecond)
	for _, c := range []string{"c1", "c2", "c3"} {
		j.At(ctx, claim.IdempotencyKey(c+":step6"), AfterEffect)
	}
	assert.Equal(t, 1, count())
	j.At(ctx, "c4:step6", AfterEffect)
	assert.Equal(t, 2, count(), "a batch not filled is killed after the wait")
}
