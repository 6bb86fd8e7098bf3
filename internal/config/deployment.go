package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/debug"
	"sync"
)

// Deployment is the worker's Worker Deployment Version: the deployment it
// belongs to, the build it is, and what it does when it comes up
// (docs/operations.md, "Deploying a build").
type Deployment struct {
	// Versioning is WORKER_VERSIONING (default true): the worker polls as a
	// Worker Deployment Version and the server routes it only the work of
	// its version (pinned runs) or of the deployment's current or ramping
	// version (auto-upgrade runs). False polls unversioned, as before
	// Temporal server 1.29.
	Versioning bool
	// Name is WORKER_DEPLOYMENT (default "durableclaims"): one deployment
	// per insurer deployment of the worker, shared by all its builds.
	Name string
	// BuildID is WORKER_BUILD_ID, or the binary's own (BuildID).
	BuildID string
	// Promote is WORKER_PROMOTE: PromoteIfNone (default) makes this build
	// the deployment's current version when it has none (a new namespace,
	// the first deploy after versioning was turned on); PromoteNever leaves
	// routing to the operator (a rollout's new build, started beside the
	// current one to be replay-checked and ramped).
	Promote string
}

// WORKER_PROMOTE values.
const (
	PromoteIfNone = "if-none"
	PromoteNever  = "never"
)

// DefaultDeploymentName is the Worker Deployment's name when
// WORKER_DEPLOYMENT is unset.
const DefaultDeploymentName = "durableclaims"

// Temporal refuses "." in a deployment name (it separated name and build
// in earlier APIs); build IDs are kept to what a shell, a URL and a log
// line carry without quoting.
var (
	deploymentNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)
	buildIDRE        = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,99}$`)
)

// WorkerDeployment reads the worker's deployment settings.
func WorkerDeployment() (Deployment, error) {
	on, err := Bool("WORKER_VERSIONING", true)
	if err != nil {
		return Deployment{}, err
	}
	d := Deployment{Versioning: on, Name: Get("WORKER_DEPLOYMENT", DefaultDeploymentName),
		BuildID: Get("WORKER_BUILD_ID", ""), Promote: Get("WORKER_PROMOTE", PromoteIfNone)}
	if !deploymentNameRE.MatchString(d.Name) {
		return Deployment{}, fmt.Errorf("WORKER_DEPLOYMENT=%q: want letters, digits, '-' or '_' (no '.'), at most 100", d.Name)
	}
	if d.BuildID == "" {
		if d.BuildID, err = BuildID(); err != nil {
			return Deployment{}, err
		}
	} else if !buildIDRE.MatchString(d.BuildID) {
		return Deployment{}, fmt.Errorf("WORKER_BUILD_ID=%q: want letters, digits, '-', '_', '.' or '+', at most 100", d.BuildID)
	}
	if d.Promote != PromoteIfNone && d.Promote != PromoteNever {
		return Deployment{}, fmt.Errorf("WORKER_PROMOTE=%q: want %s or %s", d.Promote, PromoteIfNone, PromoteNever)
	}
	return d, nil
}

var buildID = sync.OnceValues(func() (string, error) {
	info, _ := debug.ReadBuildInfo()
	return buildIDOf(info, executableDigest)
})

// BuildID names this binary: the commit it was built from
// (vcs.revision, 12 hex digits), with "-dirty-" and the first 8 hex
// digits of the executable's SHA-256 when the tree had uncommitted
// changes or the build added build tags (two such builds of one commit
// are different code), or "exe-" and 12 hex digits of that digest when the
// binary carries no VCS stamp (a Docker image built without .git, go run,
// go test, -buildvcs=false). The same binary always gets the same ID;
// WORKER_BUILD_ID overrides it. A binary that cannot read its own
// executable has no ID of its own: WORKER_BUILD_ID must name it.
func BuildID() (string, error) { return buildID() }

func buildIDOf(info *debug.BuildInfo, digest func() (string, error)) (string, error) {
	var rev string
	var dirty bool
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = dirty || s.Value == "true"
			case "-tags":
				dirty = dirty || s.Value != ""
			}
		}
	}
	if rev != "" && !dirty {
		return short(rev, 12), nil
	}
	sum, err := digest()
	if err != nil {
		return "", fmt.Errorf("this binary has no build ID of its own (%v): set WORKER_BUILD_ID", err)
	}
	if rev == "" {
		return "exe-" + short(sum, 12), nil
	}
	return short(rev, 12) + "-dirty-" + short(sum, 8), nil
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// executableDigest is the SHA-256 of the running executable, hex.
func executableDigest() (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
