package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durableclaims/durableclaims/internal/config"
)

// fakeDeployment answers Describe with info and records SetCurrentVersion.
type fakeDeployment struct {
	client.WorkerDeploymentHandle
	info     client.WorkerDeploymentInfo
	setErr   error
	promoted []string
	tokens   [][]byte
}

func (f *fakeDeployment) Describe(context.Context, client.WorkerDeploymentDescribeOptions) (client.WorkerDeploymentDescribeResponse, error) {
	return client.WorkerDeploymentDescribeResponse{ConflictToken: []byte("token-1"), Info: f.info}, nil
}

func (f *fakeDeployment) SetCurrentVersion(_ context.Context, o client.WorkerDeploymentSetCurrentVersionOptions) (client.WorkerDeploymentSetCurrentVersionResponse, error) {
	if f.setErr != nil {
		return client.WorkerDeploymentSetCurrentVersionResponse{}, f.setErr
	}
	f.promoted = append(f.promoted, o.BuildID)
	f.tokens = append(f.tokens, o.ConflictToken)
	return client.WorkerDeploymentSetCurrentVersionResponse{}, nil
}

// A worker makes itself current only on a deployment nobody has routed
// yet: not over a current build, an operator's ramp, a manager, or a
// deliberate return to unversioned workers; never with WORKER_PROMOTE=never.
func TestPromoteOnlyADeploymentNobodyRouted(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := config.Deployment{Versioning: true, Name: "durableclaims", BuildID: "b2", Promote: config.PromoteIfNone}
	v := func(b string) *worker.WorkerDeploymentVersion {
		return &worker.WorkerDeploymentVersion{DeploymentName: "durableclaims", BuildID: b}
	}

	fresh := &fakeDeployment{}
	r, err := promoteIfNone(context.Background(), fresh, d, log)
	require.NoError(t, err)
	assert.True(t, r.current)
	assert.Equal(t, []string{"b2"}, fresh.promoted)
	assert.Equal(t, [][]byte{[]byte("token-1")}, fresh.tokens, "the conflict token of the read the decision rests on")

	for name, info := range map[string]client.WorkerDeploymentInfo{
		"another build current":    {RoutingConfig: client.WorkerDeploymentRoutingConfig{CurrentVersion: v("b1")}},
		"an operator's ramp":       {RoutingConfig: client.WorkerDeploymentRoutingConfig{RampingVersion: v("b3"), RampingVersionPercentage: 10}},
		"a ramp removed":           {RoutingConfig: client.WorkerDeploymentRoutingConfig{RampingVersionChangedTime: time.Now()}},
		"unversioned on purpose":   {RoutingConfig: client.WorkerDeploymentRoutingConfig{CurrentVersionChangedTime: time.Now()}},
		"a manager owns the route": {ManagerIdentity: "worker-controller"},
	} {
		t.Run(name, func(t *testing.T) {
			f := &fakeDeployment{info: info}
			r, err := promoteIfNone(context.Background(), f, d, log)
			require.NoError(t, err)
			assert.False(t, r.current)
			assert.Empty(t, f.promoted)
		})
	}

	never := d
	never.Promote = config.PromoteNever
	f := &fakeDeployment{}
	_, err = promoteIfNone(context.Background(), f, never, log)
	require.NoError(t, err)
	assert.Empty(t, f.promoted)

	raced := &fakeDeployment{setErr: serviceerror.NewFailedPrecondition("conflict token mismatch")}
	_, err = promoteIfNone(context.Background(), raced, d, log)
	assert.Error(t, err, "a lost race is retried from a fresh read, never taken for a promotion")

	current := &fakeDeployment{info: client.WorkerDeploymentInfo{RoutingConfig: client.WorkerDeploymentRoutingConfig{CurrentVersion: v("b2")}}}
	r, err = promoteIfNone(context.Background(), current, d, log)
	require.NoError(t, err)
	assert.True(t, r.current)
	assert.Equal(t, "current", r.String())
	assert.Empty(t, current.promoted)
}

type knownBuilds map[string]bool

func (k knownBuilds) KnownBuild(_ context.Context, _, build string) (bool, error) {
	return k[build], nil
}

// Routing to a build that ran on the claims store is a deploy; to one that
// never did, an alert; this worker's own build is never a stranger.
func TestStrangersAreBuildsThatNeverRanHere(t *testing.T) {
	d := config.Deployment{Versioning: true, Name: "durableclaims", BuildID: "b1"}
	known := knownBuilds{"b1": true, "b2": true}
	for name, tc := range map[string]struct {
		r    role
		want []string
	}{
		"our build current":            {role{current: true, currentBuild: "b1"}, nil},
		"the next deploy current":      {role{currentBuild: "b2"}, nil},
		"the next deploy ramping":      {role{current: true, currentBuild: "b1", rampingBuild: "b2"}, nil},
		"a stranger current":           {role{currentBuild: "rogue"}, []string{"rogue"}},
		"a stranger ramping":           {role{current: true, currentBuild: "b1", rampingBuild: "rogue"}, []string{"rogue"}},
		"unversioned":                  {role{}, nil},
		"a stranger current and ramps": {role{currentBuild: "rogue", rampingBuild: "rogue"}, []string{"rogue"}},
	} {
		got, err := strangers(context.Background(), known, d, tc.r)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, name)
	}
}
