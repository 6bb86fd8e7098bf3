package unitguard_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// Under make unit, the rig's servers refuse to start, before they touch
// anything, and say where the test belongs.
func TestServersRefuseToStartUnderMakeUnit(t *testing.T) {
	t.Setenv(unitguard.Env, "1")
	dir := filepath.Join(t.TempDir(), "never")
	_, err := pgserver.Start(context.Background(), dir, pgserver.Options{})
	require.ErrorContains(t, err, "PostgreSQL: make unit starts nothing")
	assert.NoDirExists(t, dir)
	_, err = cluster.Start(context.Background(), dir, cluster.Options{})
	require.ErrorContains(t, err, "a Temporal server: make unit starts nothing")
	assert.ErrorContains(t, err, "belongs to make test")
	assert.NoDirExists(t, dir)
}

func TestOutsideMakeUnitNothingIsRefused(t *testing.T) {
	t.Setenv(unitguard.Env, "")
	assert.NoError(t, unitguard.Refuse("PostgreSQL"))
}
