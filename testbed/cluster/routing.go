package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
)

// On this cluster only the operator may change a Worker Deployment's
// routing (temporalserver/authz), so a worker cannot make its own build
// current the way it does on the dev server (WORKER_PROMOTE=if-none). The
// cluster stands in for the operator's first deploy: a deployment whose
// routing nobody ever set gets its first version as current, under the
// operator's identity. Anything after that (a second build, a ramp, a
// rollback) is the operator's to do, as in production.

// routeFirstVersions runs until ctx ends.
func (c *Cluster) routeFirstVersions(ctx context.Context, log *slog.Logger) {
	o := c.ClientOptions(temporalauth.RoleOperator)
	cl, err := client.NewLazyClient(o)
	if err != nil {
		log.Error("cluster: no operator client: first versions are not routed", "error", err)
		return
	}
	defer cl.Close()
	dc := cl.WorkerDeploymentClient()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		it, err := dc.List(ctx, client.WorkerDeploymentListOptions{})
		if err != nil {
			continue // the server restarting, say
		}
		for it.HasNext() {
			d, err := it.Next()
			if err != nil {
				break
			}
			rc := d.RoutingConfig
			if rc.CurrentVersion != nil || !rc.CurrentVersionChangedTime.IsZero() || rc.RampingVersion != nil || !rc.RampingVersionChangedTime.IsZero() {
				continue
			}
			if err := routeFirst(ctx, dc.GetHandle(d.Name)); err == nil {
				log.Info("cluster: the deployment's first version made current, as its operator", "deployment", d.Name)
			}
		}
	}
}

func routeFirst(ctx context.Context, h client.WorkerDeploymentHandle) error {
	desc, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err != nil {
		return err
	}
	vs := desc.Info.VersionSummaries
	if len(vs) == 0 {
		return errors.New("no version yet")
	}
	first := slices.MinFunc(vs, func(a, b client.WorkerDeploymentVersionSummary) int { return a.CreateTime.Compare(b.CreateTime) })
	_, err = h.SetCurrentVersion(ctx, client.WorkerDeploymentSetCurrentVersionOptions{BuildID: first.Version.BuildID,
		ConflictToken: desc.ConflictToken, Identity: "testbed/cluster (the operator's first deploy)"})
	return err
}
