package config

import (
	"errors"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildIDComesFromTheCommit(t *testing.T) {
	digest := func() (string, error) { return "0123456789abcdef0123456789abcdef", nil }
	unreadable := func() (string, error) { return "", errors.New("permission denied") }
	stamp := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	id := func(info *debug.BuildInfo, digest func() (string, error)) string {
		t.Helper()
		s, err := buildIDOf(info, digest)
		require.NoError(t, err)
		assert.Regexp(t, buildIDRE, s)
		return s
	}
	rev := "c57247c3a1b2d4e5f60718293a4b5c6d7e8f9012"
	assert.Equal(t, "c57247c3a1b2", id(stamp("vcs.revision", rev, "vcs.modified", "false"), digest))
	assert.Equal(t, "c57247c3a1b2", id(stamp("vcs.revision", rev, "vcs.modified", "false"), unreadable),
		"a clean commit needs no digest")
	assert.Equal(t, "c57247c3a1b2-dirty-01234567", id(stamp("vcs.revision", rev, "vcs.modified", "true"), digest),
		"a dirty tree is not the commit: the binary's digest tells two of them apart")
	assert.Equal(t, "c57247c3a1b2-dirty-01234567", id(stamp("-tags", "rehearsal", "vcs.revision", rev, "vcs.modified", "false"), digest),
		"build tags make other code from the same commit")
	assert.Equal(t, "exe-0123456789ab", id(stamp("-buildmode", "exe"), digest), "no VCS stamp (go run, go test, an image without .git)")
	assert.Equal(t, "exe-0123456789ab", id(nil, digest))
	for _, info := range []*debug.BuildInfo{nil, stamp("vcs.revision", rev, "vcs.modified", "true")} {
		_, err := buildIDOf(info, unreadable)
		require.Error(t, err, "no ID of its own: two images at one path must not share one")
		assert.Contains(t, err.Error(), "WORKER_BUILD_ID")
	}
}

func TestBuildIDOfThisBinaryIsStable(t *testing.T) {
	a, err := BuildID()
	require.NoError(t, err)
	b, err := BuildID()
	require.NoError(t, err)
	assert.Equal(t, a, b)
	assert.Regexp(t, buildIDRE, a)
	d1, err := executableDigest()
	require.NoError(t, err)
	d2, _ := executableDigest()
	assert.Equal(t, d1, d2, "the same executable, the same digest")
}

func TestWorkerDeploymentSettings(t *testing.T) {
	for _, k := range []string{"WORKER_VERSIONING", "WORKER_DEPLOYMENT", "WORKER_BUILD_ID", "WORKER_PROMOTE"} {
		t.Setenv(k, "")
	}
	d, err := WorkerDeployment()
	require.NoError(t, err)
	own, err := BuildID()
	require.NoError(t, err)
	assert.Equal(t, Deployment{Versioning: true, Name: DefaultDeploymentName, BuildID: own, Promote: PromoteIfNone}, d)

	t.Setenv("WORKER_DEPLOYMENT", "insurer-eu")
	t.Setenv("WORKER_BUILD_ID", "v2.1+rc1")
	t.Setenv("WORKER_PROMOTE", "never")
	t.Setenv("WORKER_VERSIONING", "false")
	d, err = WorkerDeployment()
	require.NoError(t, err)
	assert.Equal(t, Deployment{Versioning: false, Name: "insurer-eu", BuildID: "v2.1+rc1", Promote: PromoteNever}, d)

	for name, env := range map[string][2]string{
		"a dot in the name":   {"WORKER_DEPLOYMENT", "insurer.eu"},
		"a space in build ID": {"WORKER_BUILD_ID", "v 2"},
		"a slash in build ID": {"WORKER_BUILD_ID", "../v2"},
		"promote always":      {"WORKER_PROMOTE", "always"},
		"versioning maybe":    {"WORKER_VERSIONING", "maybe"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(env[0], env[1])
			_, err := WorkerDeployment()
			require.Error(t, err)
			assert.Contains(t, err.Error(), env[0])
		})
	}
}
