package testenv

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/netfault"
)

// Toxiproxy starts the toxiproxy server (bin/toxiproxy-server, make
// toxiproxy) until the test ends; its links put faults between a program
// and what it dials.
func Toxiproxy(t testing.TB) *netfault.Server {
	t.Helper()
	bin, err := netfault.Bin(ModuleRoot(t))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := netfault.Start(ctx, bin, filepath.Join(t.TempDir(), "toxiproxy.log"), 1)
	require.NoError(t, err)
	t.Cleanup(s.Stop)
	return s
}
