package crash

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

func TestParse(t *testing.T) {
	pts, err := Parse("claim-0042:7, claim-0043:6:after-effect")
	require.NoError(t, err)
	assert.Equal(t, []Point{
		{WorkflowID: "claim-0042", Step: claim.StepNotify, Phase: activities.BeforeEffect},
		{WorkflowID: "claim-0043", Step: claim.StepPay, Phase: activities.AfterEffect},
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
	i.At(ctx, "claim-0043:step6", activities.BeforeEffect) // wrong phase
	i.At(ctx, "claim-0042:step6", activities.AfterEffect)  // wrong claim
	assert.Equal(t, 0, kills)
	i.At(ctx, "claim-0043:step6", activities.AfterEffect)
	assert.Equal(t, 1, kills)
	// The "restarted" worker reads the state file and carries on.
	newInjector().At(ctx, "claim-0043:step6", activities.AfterEffect)
	assert.Equal(t, 1, kills)
}
