package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The claims DB holds every claimant's name, e-mail and payout account:
// a store opened where no directory is yet makes it owner-only, and the
// file too (dialect.go, openSQLite).
func TestANewClaimsDBIsOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	st, err := Open(filepath.Join(dir, "claims.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	info, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	info, err = os.Stat(filepath.Join(dir, "claims.db"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}
