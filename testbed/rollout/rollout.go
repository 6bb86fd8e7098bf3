// Package rollout builds the workers of a rehearsed deploy from this one
// tree: v1 is the product's worker as it is; v2 and v3 are the same worker
// compiled with one more file (go build -tags rehearsal -overlay) that
// changes what a claim does, the way the next release's workflow code
// would:
//
//	v2  a cooling-off timer before the payment, behind workflow.GetVersion
//	    (builds/v2.go): the change done right; every run replays.
//	v3  v2, plus a new first step without GetVersion (builds/v3.go): the
//	    change done wrong; no run of another build replays on it, and no
//	    run it starts replays on another.
//
// The files live here, not beside the worker, so the product build never
// holds them; the worker carries only the hook they append to
// (worker/main.go, rehearsal).
package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Versions a rehearsal can build, and the overlay files each adds.
var overlays = map[string][]string{
	"v1": nil,
	"v2": {"v2.go"},
	"v3": {"v2.go", "v3.go"},
}

// Build compiles the worker of version (v1, v2 or v3) from the module at
// root into dir/worker and returns its path.
func Build(ctx context.Context, root, dir, version string) (string, error) {
	files, ok := overlays[version]
	if !ok {
		return "", fmt.Errorf("rollout: no version %q (want v1, v2 or v3)", version)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "worker")
	args := []string{"build", "-o", out}
	if len(files) > 0 {
		replace := map[string]string{}
		for _, f := range files {
			replace[filepath.Join(root, "worker", "rehearsal_"+f)] = filepath.Join(root, "testbed", "rollout", "builds", f)
		}
		b, err := json.Marshal(map[string]any{"Replace": replace})
		if err != nil {
			return "", err
		}
		overlay := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(overlay, b, 0o644); err != nil {
			return "", err
		}
		args = append(args, "-tags", "rehearsal", "-overlay", overlay)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./worker")...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("rollout: go build %s: %v\n%s", version, err, b)
	}
	return out, nil
}
