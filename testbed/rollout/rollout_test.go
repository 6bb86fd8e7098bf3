package rollout

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The rehearsal's builds compile from this tree: a change to the worker
// that breaks the overlay files fails here, not in the middle of a soak.
func TestBuildsCompile(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	root := filepath.Dir(strings.TrimSpace(string(out)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, v := range []string{"v2", "v3"} {
		_, err := Build(ctx, root, filepath.Join(t.TempDir(), v), v)
		require.NoError(t, err, v)
	}
	_, err = Build(ctx, root, t.TempDir(), "v4")
	require.Error(t, err)
}
