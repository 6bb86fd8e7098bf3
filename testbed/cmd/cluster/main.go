// Command cluster runs PostgreSQL and a real Temporal server on it (not the
// dev server), on loopback ports, until SIGINT or SIGTERM, then stops both.
// The server's frontend takes no anonymous call: each program has a token
// of its own (testbed/cluster/auth.go), in DIR/tokens/ROLE.jwt. It prints
// what a worker needs to reach them:
//
//	TEMPORAL_ADDRESS=127.0.0.1:…
//	TEMPORAL_NAMESPACE=default
//	TEMPORAL_API_KEY=eyJ…   (the worker's token)
//	TEMPORAL_TLS=false      (loopback; in production the frontend takes TLS)
//	CLAIMS_DB=postgres://claims@127.0.0.1:…/claims?sslmode=disable
//	WORKER_DEPLOYMENT=durableclaims
//
// and writes the same lines to DIR/env (`set -a; . var/cluster/env`), and
// one file per program, DIR/env.ROLE (starter, inbox, claimsctl, reader,
// admin), with that program's token instead of the worker's.
// `make cluster` builds and runs it; the server comes from
// `make temporal-server`. DIR is wiped at start: every run is a fresh
// cluster.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/cluster"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
)

func main() {
	dir := flag.String("dir", "var/cluster", "working directory: PostgreSQL's data, the server's config and log (wiped at start)")
	logLevel := flag.String("log-level", "warn", "the Temporal server's log level (debug, info, warn, error)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*dir, *logLevel, log); err != nil {
		log.Error("cluster", "err", err)
		os.Exit(1)
	}
}

func run(dir, logLevel string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if pid := runningPostgres(dir); pid != 0 {
		return fmt.Errorf("a PostgreSQL (pid %d) still runs in %s, from an earlier run that did not stop: "+
			"stop it (kill %d) or choose another -dir", pid, dir, pid)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(startCtx, dir, cluster.Options{LogLevel: logLevel, Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping the Temporal server and PostgreSQL")
		if err := c.Stop(); err != nil {
			log.Error("stop", "err", err)
		}
	}()
	claimsDB, err := c.Postgres().CreateDatabase(startCtx, "claims")
	if err != nil {
		return err
	}
	envOf := func(role string) string {
		return strings.Join(append(c.Env(role), "CLAIMS_DB="+claimsDB), "\n") + "\n"
	}
	for _, role := range temporalauth.Roles {
		if err := os.WriteFile(filepath.Join(c.Dir(), "env."+role), []byte(envOf(role)), 0o600); err != nil {
			return err
		}
	}
	// The workers' env names their Worker Deployment: the first build
	// started on the fresh cluster makes itself current; a second one for
	// a rehearsed rollout adds WORKER_PROMOTE=never and its own
	// WORKER_BUILD_ID (docs/operations.md, "Deploying a build").
	env := envOf(temporalauth.RoleWorker) + "WORKER_DEPLOYMENT=durableclaims\n"
	if err := os.WriteFile(filepath.Join(c.Dir(), "env"), []byte(env), 0o600); err != nil {
		return err
	}
	fmt.Print(env)
	log.Info("running until Ctrl-C", "server_log", c.LogPath(), "metrics", c.MetricsURL(),
		"env_file", filepath.Join(c.Dir(), "env"))
	<-ctx.Done()
	return nil
}

// runningPostgres is the pid of a PostgreSQL still running on dir's data
// directory (a run that was SIGKILLed leaves one behind), or 0.
func runningPostgres(dir string) int {
	pid := pgserver.PostmasterPID(filepath.Join(dir, "postgres"))
	if pid == 0 {
		return 0
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0
	}
	return pid
}
