package config

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildIDComesFromTheCommit(t *testing.T) {
	digest := func() string { return "0123456789abcdef0123456789abcdef" }
	stamp := func(settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	rev := "c57247c3a1b2d4e5f60718293a4b5c6d7e8f9012"
	assert.Equal(t, "c57247c3a1b2", buildIDOf(stamp("vcs.revision", rev, "vcs.modified", "false"), digest))
	assert.Equal(t, "c57247c3a1b2-dirty-01234567", buildIDOf(stamp("vcs.revision", rev, "vcs.modified", "true"), digest),
		"a dirty tree is not the commit: the binary's digest tells two of them apart")
	assert.Equal(t, "exe-0123456789ab", buildIDOf(stamp("-buildmode", "exe"), digest), "no VCS stamp (go run, go test)")
	assert.Equal(t, "exe-0123456789ab", buildIDOf(nil, digest))
	for _, id := range []string{buildIDOf(stamp("vcs.revision", rev), digest), buildIDOf(nil, digest)} {
		assert.Regexp(t, buildIDRE, id)
	}
}

func TestBuildIDOfThisBinaryIsStable(t *testing.T) {
	a, b := BuildID(), executableDigest()
	require.NotEmpty(t, a)
	assert.Equal(t, a, BuildID())
	assert.Equal(t, b, executableDigest(), "the same executable, the same digest")
	assert.Regexp(t, buildIDRE, a)
}

func TestWorkerDeploymentSettings(t *testing.T) {
	for _, k := range []string{"WORKER_VERSIONING", "WORKER_DEPLOYMENT", "WORKER_BUILD_ID", "WORKER_PROMOTE"} {
		t.Setenv(k, "")
	}
	d, err := WorkerDeployment()
	require.NoError(t, err)
	assert.Equal(t, Deployment{Versioning: true, Name: DefaultDeploymentName, BuildID: BuildID(), Promote: PromoteIfNone}, d)

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
