package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
)

// devServer is `temporal server start-dev` as a process the soak owns, so it
// can be stopped and started again on the same ports and database file:
// testsuite.StartDevServer cannot restart a server in place.
type devServer struct {
	cli     string
	dir     string
	ports   serverPorts
	logPath string

	mu   sync.Mutex
	proc *process
}

type serverPorts struct{ frontend, http, metrics int }

func newDevServer(cli, dir string) (*devServer, error) {
	p, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	return &devServer{cli: cli, dir: dir, ports: serverPorts{frontend: p[0], http: p[1], metrics: p[2]},
		logPath: filepath.Join(dir, "temporal.log")}, nil
}

// hostPort is the frontend address clients dial.
func (d *devServer) hostPort() string { return "127.0.0.1:" + strconv.Itoa(d.ports.frontend) }

// args are the flags scripts/lib.sh uses, plus fixed ports (every one of
// them, so a restart binds exactly what the first start did and nothing
// collides with another dev server on the machine) and a database file (so
// a restart keeps every workflow).
func (d *devServer) args() []string {
	return append([]string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(d.ports.frontend),
		"--http-port", strconv.Itoa(d.ports.http),
		"--metrics-port", strconv.Itoa(d.ports.metrics),
		"--headless",
		"--db-filename", filepath.Join(d.dir, "temporal.db"),
		"--log-level", "error",
	}, serversettings.DevServerArgs()...)
}

// start launches the server and waits until it serves the project's search
// attributes.
func (d *devServer) start(ctx context.Context, within time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := spawn(d.cli, d.args(), childEnv(), d.logPath)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.proc = p
	d.mu.Unlock()
	return d.waitReady(ctx, p, within)
}

// waitReady dials and lists the search attributes until both work. Dialling
// alone is not enough: the frontend answers before the namespace's search
// attributes are registered, and a claim started then would fail.
func (d *devServer) waitReady(ctx context.Context, p *process, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("dev server %s (see %s): %s", p.exitDescription(), d.logPath, tail(d.logPath, 2000))
		}
		if last = d.probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dev server on %s not ready within %s: %v", d.hostPort(), within, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *devServer) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: d.hostPort(), Namespace: "default",
		Logger: log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: "default"})
	if err != nil {
		return err
	}
	for _, name := range []string{"ClaimStatus", "ApprovalDeadline"} {
		if _, ok := resp.GetCustomAttributes()[name]; !ok {
			return fmt.Errorf("search attribute %s not registered yet", name)
		}
	}
	return nil
}

// stop stops the server: SIGTERM, then SIGKILL after grace. It reports
// whether SIGKILL was needed.
func (d *devServer) stop(grace time.Duration) (forced bool) {
	d.mu.Lock()
	p := d.proc
	d.mu.Unlock()
	if p == nil {
		return false
	}
	return p.stop(grace)
}
