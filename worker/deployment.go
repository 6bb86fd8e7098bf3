package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/durableclaims/durableclaims/internal/config"
)

// deploymentOptions makes the worker a Worker Deployment Version, or, with
// WORKER_VERSIONING=false, an unversioned worker that still names its
// build (the server records it with each workflow task it completes, and
// decisions name it). Each workflow type names its own versioning
// behaviour where it is registered (workflows.Register), so there is no
// default to fall back on.
func deploymentOptions(d config.Deployment) worker.DeploymentOptions {
	return worker.DeploymentOptions{UseVersioning: d.Versioning,
		Version: worker.WorkerDeploymentVersion{DeploymentName: d.Name, BuildID: d.BuildID}}
}

// role is what the deployment's routing makes of this build.
type role struct {
	current, ramping bool
	percent          float32
	currentBuild     string // the deployment's current build, "" when unversioned
	rampingBuild     string // the build it ramps to, "" when none
	modifiedBy       string // who last changed the routing, as they named themselves
}

func (r role) String() string {
	switch {
	case r.current:
		return "current"
	case r.ramping:
		return fmt.Sprintf("ramping %g%%", r.percent)
	case r.currentBuild == "":
		return "inactive (the deployment has no current version)"
	default:
		return "inactive (current: " + r.currentBuild + ")"
	}
}

// watchDeployment tells the operator what routing makes of this build and
// keeps telling them when it changes: a build that is neither current nor
// ramping gets no new claims and no auto-upgrade claim's next step. With
// WORKER_PROMOTE=if-none, a deployment with no current version (a new
// namespace, the first deploy with versioning on) gets this build as its
// current version, so make demo, a fresh cluster and every test need no
// extra command; with never, routing is the operator's alone (a rollout).
// The conflict token makes a promotion lose cleanly to another worker's
// or an operator's change made meanwhile. A current or ramping build that
// never ran on this claims store (strangers) is an alert, and unknown
// counts them. It returns when ctx ends.
func watchDeployment(ctx context.Context, c client.Client, d config.Deployment, builds Builds, unknown func(n int), logger *slog.Logger) {
	if !d.Versioning {
		logger.Warn("WORKER_VERSIONING=false: this worker polls unversioned; a deployment's current version, if any, takes the claims instead")
		return
	}
	h := c.WorkerDeploymentClient().GetHandle(d.Name)
	log := logger.With("deployment", d.Name, "build_id", d.BuildID)
	var last, lastStrangers string
	wait := time.Second
	var failingSince time.Time
	warned := false
	for {
		r, err := promoteIfNone(ctx, h, d, log)
		if err == nil {
			if s, serr := strangers(ctx, builds, d, r); serr != nil {
				log.Debug("routed builds not checked against the claims store", "error", serr)
			} else {
				unknown(len(s))
				if key := strings.Join(s, ","); key != lastStrangers {
					lastStrangers = key
					if key != "" {
						log.Error("ALERT: the deployment routes claims to a build that never ran as a worker on this claims store: "+
							"someone who reaches the Temporal frontend routed it, and it takes the claims' tasks "+
							"(route back: temporal worker deployment set-current-version; docs/operations.md)",
							"alert", "deployment_unknown_build", "builds", s, "current", r.currentBuild, "ramping", r.rampingBuild,
							"last_modified_by", r.modifiedBy)
					}
				}
			}
		}
		var refused *routingRefused
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &refused):
			// A server of the insurer's own lets only an operator route
			// (temporalserver/authz): the first deploy is theirs too.
			log.Warn("worker deployment has no current version, and this worker may not make its build current on this server: "+
				"an operator does (temporal worker deployment set-current-version --deployment-name "+d.Name+" --build-id "+d.BuildID+
				"; docs/operations.md)", "error", refused.err)
			d.Promote = config.PromoteNever
			wait = time.Second
		case err != nil:
			// The deployment appears with the first poll of its first
			// version; until then, and while the server is away, ask
			// again. A refusal no retry mends (the token may not change
			// routing, the server has no Worker Deployments), or failing
			// for half a minute, is said out loud: this worker may be
			// taking no work at all.
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			var denied *serviceerror.PermissionDenied
			var unimplemented *serviceerror.Unimplemented
			if !warned && (errors.As(err, &denied) || errors.As(err, &unimplemented) || time.Since(failingSince) > 30*time.Second) {
				log.Error("worker deployment unreadable: this build may take no work until its routing is set "+
					"(temporal worker deployment describe / set-current-version; WORKER_VERSIONING=false on a server without Worker Deployments)",
					"error", err, "failing_for", time.Since(failingSince).Round(time.Second))
				warned = true
			} else {
				log.Debug("worker deployment not readable yet", "error", err)
			}
			wait = min(2*wait, 15*time.Second)
		case r.String() != last:
			last = r.String()
			if r.current || r.ramping {
				log.Info("worker deployment: this build takes work", "role", last)
			} else {
				log.Warn("worker deployment: this build takes no new work until it is made current or ramping "+
					"(temporal worker deployment set-current-version / set-ramping-version; docs/operations.md)", "role", last)
			}
			wait = 15 * time.Second
		}
		if err == nil {
			failingSince, warned = time.Time{}, false
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// promoteIfNone reads the deployment's routing and, with WORKER_PROMOTE
// if-none and no current version, makes this build current.
func promoteIfNone(ctx context.Context, h client.WorkerDeploymentHandle, d config.Deployment, log *slog.Logger) (role, error) {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return role{}, err
	}
	r := roleOf(desc.Info.RoutingConfig, d.BuildID)
	r.modifiedBy = desc.Info.LastModifierIdentity
	if r.current || r.currentBuild != "" || d.Promote != config.PromoteIfNone {
		return r, nil
	}
	rc := desc.Info.RoutingConfig
	if desc.Info.ManagerIdentity != "" || !rc.CurrentVersionChangedTime.IsZero() ||
		rc.RampingVersion != nil || !rc.RampingVersionChangedTime.IsZero() {
		// Someone manages this deployment's routing (a controller or an
		// operator who said so), the current version was set to
		// unversioned on purpose (a rollback to unversioned workers), or
		// an operator is ramping a build from unversioned workers: a
		// worker does not take it from them.
		return r, nil
	}
	_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{
		BuildID: d.BuildID, ConflictToken: desc.ConflictToken})
	var pre *serviceerror.FailedPrecondition
	var denied *serviceerror.PermissionDenied
	if errors.As(err, &denied) {
		return role{}, &routingRefused{err}
	}
	if errors.As(err, &pre) {
		// Another worker or an operator changed the routing since we
		// read it, or the server has not yet seen this version poll.
		return role{}, err
	}
	if err != nil {
		return role{}, err
	}
	log.Info("worker deployment had no current version: this build is now current (WORKER_PROMOTE=if-none)")
	return role{current: true, currentBuild: d.BuildID}, nil
}

func roleOf(rc client.WorkerDeploymentRoutingConfig, buildID string) role {
	var r role
	if rc.CurrentVersion != nil {
		r.currentBuild = rc.CurrentVersion.BuildID
		r.current = r.currentBuild == buildID
	}
	if rc.RampingVersion != nil && rc.RampingVersionPercentage > 0 {
		// At 0 % (a ramp the CLI's --delete ended) it takes nothing.
		r.rampingBuild = rc.RampingVersion.BuildID
		if r.rampingBuild == buildID {
			r.ramping, r.percent = true, rc.RampingVersionPercentage
		}
	}
	return r
}

// Builds is what the claims store knows of the builds that ran as workers
// on it (store.RecordBuild, KnownBuild).
type Builds interface {
	KnownBuild(ctx context.Context, deployment, build string) (bool, error)
}

// strangers are the builds routing sends claims to that never ran as a
// worker on this claims store: a deploy starts its workers (which record
// their build) before an operator routes to them, so a stranger was routed
// to by someone who reaches the Temporal frontend, and takes the claims'
// tasks (docs/operations.md, "A frontend that asks who is calling").
func strangers(ctx context.Context, builds Builds, d config.Deployment, r role) ([]string, error) {
	var out []string
	for _, b := range []string{r.currentBuild, r.rampingBuild} {
		if b == "" || b == d.BuildID || slices.Contains(out, b) {
			continue
		}
		known, err := builds.KnownBuild(ctx, d.Name, b)
		if err != nil {
			return nil, err
		}
		if !known {
			out = append(out, b)
		}
	}
	return out, nil
}

// routingRefused: the server let this worker read its deployment but not
// route it.
type routingRefused struct{ err error }

func (r *routingRefused) Error() string {
	return "setting the current version refused: " + r.err.Error()
}
