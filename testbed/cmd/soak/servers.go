package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
)

// temporalServer is the Temporal server the soak runs against and restarts
// once mid-run: the dev server (one process, SQLite), or a real Temporal
// server on PostgreSQL (testbed/cluster).
type temporalServer interface {
	name() string
	hostPort() string
	// auth is what a program in role (temporalauth.Role*) adds to reach the
	// server: the environment of a child process and an SDK client's
	// credentials. Nothing for the dev server, whose frontend is open.
	auth(role string) (env []string, creds client.Credentials)
	// restart stops the server (SIGTERM; SIGKILL after a grace period,
	// reported as forced) and starts it again on the same ports and data.
	restart(ctx context.Context) (forced bool, err error)
	stop(grace time.Duration) (forced bool)
}

func (d *devServer) name() string { return "dev server" }

func (d *devServer) auth(string) ([]string, client.Credentials) { return nil, nil }

func (d *devServer) restart(ctx context.Context) (bool, error) {
	forced := d.stop(10 * time.Second)
	return forced, d.start(ctx, 2*time.Minute)
}

// clusterServer is a real Temporal server with PostgreSQL persistence and
// SQL visibility, on the PostgreSQL the claims store also uses.
type clusterServer struct{ c *cluster.Cluster }

func startCluster(ctx context.Context, dir string, pg *pgserver.Server, log *slog.Logger) (*clusterServer, error) {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := cluster.Start(sctx, filepath.Join(dir, "cluster"), cluster.Options{Postgres: pg, Logger: log.With("component", "cluster")})
	if err != nil {
		return nil, err
	}
	return &clusterServer{c: c}, nil
}

func (c *clusterServer) name() string {
	return "Temporal server " + cluster.ServerVersion + " on PostgreSQL"
}
func (c *clusterServer) hostPort() string { return c.c.Address() }

func (c *clusterServer) auth(role string) ([]string, client.Credentials) {
	return c.c.AuthEnv(role), c.c.ClientOptions(role).Credentials
}

func (c *clusterServer) restart(ctx context.Context) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	return false, c.c.Restart(rctx)
}

func (c *clusterServer) stop(time.Duration) bool {
	_ = c.c.Stop()
	return false
}
