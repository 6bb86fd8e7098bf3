package crash

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

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
	kills := 0
	newInjector := func() *Injector {
		i := New(pts, state, slog.Default())
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
