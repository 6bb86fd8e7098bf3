package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/pgserver"
)

// Postgres starts a throwaway PostgreSQL (Debian's postgresql package:
// initdb and pg_ctl in a temporary directory, on a free port, as the
// postgres user when the test runs as root) and stops it when the test
// ends. A missing PostgreSQL fails the test with the command that installs
// it; it never skips.
func Postgres(t testing.TB) *pgserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgserver.Start(ctx, t.TempDir(), pgserver.Options{})
	require.NoError(t, err, "start PostgreSQL")
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

var databases atomic.Int64

// PostgresDB makes a fresh database on srv and returns its URL.
func PostgresDB(t testing.TB, srv *pgserver.Server) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", databases.Add(1), strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, strings.ToLower(t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := srv.CreateDatabase(ctx, name)
	require.NoError(t, err)
	return url
}
