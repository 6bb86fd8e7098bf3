package main

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A dependency that fails at start is an error the worker exits on, never
// a panic, and what was opened before it is closed again.
func TestNewActivitiesFailsCleanly(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv("CLAIMS_DB", "postgres://nobody@127.0.0.1:1/claims?sslmode=disable&connect_timeout=1")
	_, _, err := newActivities(log)
	require.Error(t, err, "no store")

	t.Setenv("CLAIMS_DB", filepath.Join(t.TempDir(), "claims.db"))
	t.Setenv("BLOB_URL", "file://"+t.TempDir())
	t.Setenv("APPROVERS_FILE", filepath.Join(t.TempDir(), "missing.json"))
	_, _, err = newActivities(log)
	require.ErrorContains(t, err, "missing.json", "a broken directory, after the store and the blob store opened")

	t.Setenv("APPROVERS_FILE", "")
	acts, closeAll, err := newActivities(log)
	require.NoError(t, err)
	require.NotNil(t, acts.Store)
	closeAll()
}
