// Package cluster runs a real Temporal server (not the dev server) on
// PostgreSQL, with SQL visibility, on this machine: for tests, the chaos
// soak, the benchmark and `make cluster`.
//
// Start uses (or starts, through testbed/pgserver) a PostgreSQL, creates
// and migrates the temporal and temporal_visibility databases with the
// server's SQL tool, writes a server config on free loopback ports, starts
// the server binary, registers the default namespace and the project's
// search attributes, and returns once all of that answers. The server and
// its SQL tool are installed by `make temporal-server`, at the version the
// Temporal CLI v1.5.1 embeds.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
	"github.com/durableclaims/durableclaims/testbed/pgserver"
	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// ServerVersion is the Temporal server this package runs: the one the
// Temporal CLI v1.5.1 embeds (its go.mod requires go.temporal.io/server
// v1.29.1). The Makefile's TEMPORAL_SERVER_VERSION is the same.
const ServerVersion = "v1.29.1"

// ServerBinary is the server's file name in InstallDir: Temporal's server
// built with durableclaims' authorizer, from temporalserver/.
const ServerBinary = "durableclaims-server"

// Namespace is registered by Start.
const Namespace = "default"

// The databases Start creates on the PostgreSQL.
const (
	DatabaseName           = "temporal"
	VisibilityDatabaseName = "temporal_visibility"
)

const pgUser = pgserver.User

// SearchAttributes are the custom search attributes Start registers unless
// Options.SearchAttributes says otherwise: serversettings' list, the names
// workflows/names.go uses (the test checks they agree).
var SearchAttributes = func() map[string]enumspb.IndexedValueType {
	out := make(map[string]enumspb.IndexedValueType, len(serversettings.SearchAttributes))
	for name, typ := range serversettings.SearchAttributes {
		v, err := enumspb.IndexedValueTypeFromString(typ)
		if err != nil {
			panic(fmt.Sprintf("serversettings: search attribute %s: %v", name, err))
		}
		out[name] = v
	}
	return out
}()

// Options tune Start. The zero value starts a PostgreSQL under dir and a
// server with 4 history shards, logging warnings and errors.
type Options struct {
	// Postgres to use. Nil starts one under dir/postgres, which the
	// cluster then owns (Stop stops it). A given one must not have the
	// temporal and temporal_visibility databases yet.
	Postgres *pgserver.Server
	// NumHistoryShards is fixed for the life of the databases; 0 means 4
	// (the server's development-postgres12.yaml).
	NumHistoryShards int
	// LogLevel of the server's log (dir/temporal/server.log): debug, info,
	// warn or error; "" means warn.
	LogLevel string
	// DynamicConfig values set over DefaultDynamicConfig (a nil value
	// removes a default). Keys are the server's, e.g.
	// "history.transferProcessorMaxPollRPS".
	DynamicConfig map[string]any
	// SearchAttributes to register; nil means SearchAttributes.
	SearchAttributes map[string]enumspb.IndexedValueType
	// Retention of closed workflows in the namespace; 0 means 24 hours.
	Retention time.Duration
	// ServerBin and SQLTool override Binaries.
	ServerBin, SQLTool string
	// Logger gets a line per step of Start and Restart, with its
	// duration; nil discards them.
	Logger *slog.Logger
	// NoAuth starts the server with an anonymous frontend, as the dev
	// server runs. By default every call needs a token (auth.go).
	NoAuth bool
}

// Cluster is one running Temporal server on PostgreSQL.
type Cluster struct {
	dir, root string
	opts      Options
	pg        *pgserver.Server
	ownPG     bool
	serverBin string
	ports     ports
	auth      *issuer // nil with NoAuth
	// stopRouting ends routeFirstVersions (nil with NoAuth).
	stopRouting func()

	mu         sync.Mutex // serialises Restart, Kill and Stop
	proc       *process
	registered bool // the namespace exists: readiness includes history
}

type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returns
	err    error         // cmd.Wait's, valid after exited
}

// Start starts a cluster under dir (created if missing; it should be empty).
// Stop it with Stop. ctx bounds the start only, not the cluster's life.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	if err := unitguard.Refuse("a Temporal server"); err != nil {
		return nil, err
	}
	serverBin, sqlTool, err := binaries(opts.ServerBin, opts.SQLTool)
	if err != nil {
		return nil, err
	}
	if opts.NumHistoryShards == 0 {
		opts.NumHistoryShards = 4
	}
	if opts.LogLevel == "" {
		opts.LogLevel = "warn"
	}
	if opts.SearchAttributes == nil {
		opts.SearchAttributes = SearchAttributes
	}
	if opts.Retention == 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	log := opts.Logger
	began := time.Now()
	step := time.Now()
	done := func(msg string, args ...any) {
		log.Info(msg, append(args, "took", time.Since(step).Round(time.Millisecond))...)
		step = time.Now()
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, root: filepath.Join(dir, "temporal"), opts: opts, pg: opts.Postgres, serverBin: serverBin}
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return nil, err
	}
	if c.pg == nil {
		if c.pg, err = pgserver.Start(ctx, filepath.Join(dir, "postgres"), pgserver.Options{}); err != nil {
			return nil, err
		}
		c.ownPG = true
		done("PostgreSQL started", "dir", c.pg.Dir, "port", c.pg.Port)
	}
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()
	if err := c.setupSchemas(ctx, sqlTool); err != nil {
		return nil, err
	}
	done("databases created and migrated", "databases", DatabaseName+","+VisibilityDatabaseName)
	if c.ports, err = newPorts(); err != nil {
		return nil, err
	}
	if !opts.NoAuth {
		if c.auth, err = newIssuer(dir); err != nil {
			return nil, fmt.Errorf("cluster: token issuer: %w", err)
		}
		done("tokens issued", "dir", c.TokensDir(), "jwks", c.auth.url)
	}
	if err := c.writeConfig(); err != nil {
		return nil, err
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	done("Temporal server serving", "address", c.Address(), "log", c.LogPath())
	if err := c.register(ctx); err != nil {
		return nil, err
	}
	done("namespace and search attributes registered", "namespace", Namespace)
	if c.auth != nil {
		rctx, stop := context.WithCancel(context.Background())
		routed := make(chan struct{})
		go func() { defer close(routed); c.routeFirstVersions(rctx, log) }()
		c.stopRouting = func() { stop(); <-routed }
	}
	log.Info("cluster started", "took", time.Since(began).Round(time.Millisecond))
	ok = true
	return c, nil
}

// Binaries finds the server and its SQL tool: $TEMPORAL_SERVER_BIN and
// $TEMPORAL_SQL_TOOL, else GOPATH/temporal-server-v1.29.1/{durableclaims-server,sql},
// where `make temporal-server` builds them: the server is Temporal's, built
// with durableclaims' authorizer (temporalserver/). A missing one is an
// error that says how to install it.
func Binaries() (server, sqlTool string, err error) { return binaries("", "") }

func binaries(server, sqlTool string) (string, string, error) {
	dir := InstallDir()
	for _, b := range []struct {
		path *string
		env  string
		name string
	}{{&server, "TEMPORAL_SERVER_BIN", ServerBinary}, {&sqlTool, "TEMPORAL_SQL_TOOL", "sql"}} {
		if *b.path == "" {
			*b.path = os.Getenv(b.env)
		}
		if *b.path == "" {
			*b.path = filepath.Join(dir, b.name)
		}
		if fi, err := os.Stat(*b.path); err != nil || fi.IsDir() {
			return "", "", fmt.Errorf("the Temporal server %s is needed (%s not found): run `make temporal-server` "+
				"(it builds temporalserver/ into %s and installs go.temporal.io/server/cmd/tools/sql@%s beside it, about 2 minutes) "+
				"or set TEMPORAL_SERVER_BIN and TEMPORAL_SQL_TOOL", ServerVersion, *b.path, dir, ServerVersion)
		}
	}
	return server, sqlTool, nil
}

// InstallDir is where `make temporal-server` puts the binaries:
// GOPATH/temporal-server-v1.29.1 (their names, server and sql, are too
// generic for PATH).
func InstallDir() string {
	gopath := ""
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	if list := filepath.SplitList(gopath); len(list) > 0 {
		gopath = list[0]
	}
	return filepath.Join(gopath, "temporal-server-"+ServerVersion)
}

// setupSchemas creates both databases and migrates them to the newest
// schema embedded in the SQL tool, the two in parallel.
func (c *Cluster) setupSchemas(ctx context.Context, sqlTool string) error {
	env := append(os.Environ(),
		"SQL_PLUGIN=postgres12",
		"SQL_HOST=127.0.0.1",
		fmt.Sprintf("SQL_PORT=%d", c.pg.Port),
		"SQL_USER="+pgUser,
		"SQL_PASSWORD=",
	)
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, sqlTool, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("cluster: %s %s: %w\n%s", filepath.Base(sqlTool), strings.Join(args, " "), err, out)
		}
		return nil
	}
	var g errgroup.Group
	for db, schema := range map[string]string{
		DatabaseName:           "postgresql/v12/temporal",
		VisibilityDatabaseName: "postgresql/v12/visibility",
	} {
		g.Go(func() error {
			if err := run("--db", db, "create-database"); err != nil {
				return err
			}
			if err := run("--db", db, "setup-schema", "--version", "0.0"); err != nil {
				return err
			}
			return run("--db", db, "update-schema", "--schema-name", schema)
		})
	}
	return g.Wait()
}

// start starts the server process and waits until it serves.
func (c *Cluster) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return errors.New("cluster: the server is already running")
	}
	logf, err := os.OpenFile(c.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "--- testbed/cluster: starting the server at %s\n", time.Now().Format(time.RFC3339Nano))
	args := []string{"--root", c.root, "--config", "config", "--env", "development", "--allow-no-auth", "start"}
	if c.auth != nil {
		args = []string{"--root", c.root, "--config", "config", "--env", "development", "start",
			"--service", "frontend", "--service", "internal-frontend", "--service", "history", "--service", "matching", "--service", "worker"}
	}
	cmd := exec.Command(c.serverBin, args...)
	cmd.Dir = c.root
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("cluster: start %s: %w", c.serverBin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	c.proc = p
	if err := c.waitServing(ctx, p); err != nil {
		c.stopLocked(syscall.SIGKILL)
		return err
	}
	return nil
}

// stopLocked signals the server and waits for it to exit (SIGKILL after a
// minute).
func (c *Cluster) stopLocked(sig syscall.Signal) {
	p := c.proc
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	c.proc = nil
}

func (c *Cluster) dial() (client.Client, error) {
	return client.NewLazyClient(c.ClientOptions(temporalauth.RoleAdmin))
}

// ClientOptions are the SDK client options of a program in role.
func (c *Cluster) ClientOptions(role string) client.Options {
	o := client.Options{
		HostPort:  c.Address(),
		Namespace: Namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	}
	if tok, err := c.Token(role); err == nil {
		// An API key turns TLS on unless told otherwise: the loopback
		// frontend is plaintext (TEMPORAL_TLS=false in Env).
		o.Credentials = client.NewAPIKeyStaticCredentials(tok)
		o.ConnectionOptions.TLSDisabled = true
	}
	return o
}

func (c *Cluster) jwksURL() string {
	if c.auth == nil {
		return ""
	}
	return c.auth.url
}

// poll calls try every 100 ms until it returns nil, ctx ends, or the
// server exits.
func (c *Cluster) poll(ctx context.Context, p *process, what string, try func(context.Context) error) error {
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 3*time.Second)
		last = try(attempt)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("cluster: the server exited (%v) while waiting for %s; its log:\n%s", p.err, what, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w (last: %v); the server's log is %s", what, ctx.Err(), last, c.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitServing waits until the frontend answers and the history service
// owns every shard.
func (c *Cluster) waitServing(ctx context.Context, p *process) error {
	cl, err := c.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := c.poll(ctx, p, "the frontend", func(ctx context.Context) error {
		_, err := cl.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	}); err != nil {
		return err
	}
	if !c.registered {
		return nil // no namespace yet: register waits for history
	}
	return c.waitHistory(ctx, p, cl)
}

// waitHistory describes workflows that do not exist until every one gets
// NotFound: an answer from the history shard that owns its ID. 8 IDs per
// shard miss a given shard with probability (1-1/n)^(8n) < 0.04%.
func (c *Cluster) waitHistory(ctx context.Context, p *process, cl client.Client) error {
	for i := range 8 * c.opts.NumHistoryShards {
		id := fmt.Sprintf("internal-cluster-readiness-%d", i)
		if err := c.poll(ctx, p, "the history service", func(ctx context.Context) error {
			_, err := cl.DescribeWorkflow(ctx, id, "")
			var nf *serviceerror.NotFound
			if err == nil || errors.As(err, &nf) {
				return nil
			}
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// register creates the namespace and the search attributes and waits until
// the frontend resolves them in a visibility query.
func (c *Cluster) register(ctx context.Context) error {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	cl, err := c.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := c.poll(ctx, p, "namespace registration", func(ctx context.Context) error {
		_, err := cl.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
			Namespace:                        Namespace,
			WorkflowExecutionRetentionPeriod: durationpb.New(c.opts.Retention),
			HistoryArchivalState:             enumspb.ARCHIVAL_STATE_ENABLED,
			HistoryArchivalUri:               "file://" + c.ArchivePath(),
		})
		var exists *serviceerror.NamespaceAlreadyExists
		if errors.As(err, &exists) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	if len(c.opts.SearchAttributes) > 0 {
		if err := c.poll(ctx, p, "search attributes", func(ctx context.Context) error {
			_, err := cl.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
				Namespace: Namespace, SearchAttributes: c.opts.SearchAttributes})
			return err
		}); err != nil {
			return err
		}
	}
	// The frontend and history resolve names through caches of the
	// namespace that refresh every 2 s (system.namespaceCacheRefreshInterval):
	// wait until the frontend accepts a query on every attribute, then one
	// more refresh for history, which upserts them.
	for name, typ := range c.opts.SearchAttributes {
		query := probeQuery(name, typ)
		if err := c.poll(ctx, p, "search attribute "+name, func(ctx context.Context) error {
			_, err := cl.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: Namespace, Query: query})
			return err
		}); err != nil {
			return err
		}
	}
	if err := c.waitHistory(ctx, p, cl); err != nil {
		return err
	}
	c.mu.Lock()
	c.registered = true
	c.mu.Unlock()
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func probeQuery(name string, typ enumspb.IndexedValueType) string {
	switch typ {
	case enumspb.INDEXED_VALUE_TYPE_DATETIME:
		return name + ` > "2000-01-01T00:00:00Z"`
	case enumspb.INDEXED_VALUE_TYPE_INT, enumspb.INDEXED_VALUE_TYPE_DOUBLE:
		return name + " = 0"
	case enumspb.INDEXED_VALUE_TYPE_BOOL:
		return name + " = true"
	default:
		return name + ` = "probe"`
	}
}

// Address is the frontend's gRPC host:port (TEMPORAL_ADDRESS).
func (c *Cluster) Address() string { return fmt.Sprintf("127.0.0.1:%d", c.ports.Frontend) }

// HTTPAddress is the frontend's HTTP API host:port.
func (c *Cluster) HTTPAddress() string { return fmt.Sprintf("127.0.0.1:%d", c.ports.FrontendHTTP) }

// MetricsURL is the server's Prometheus endpoint.
func (c *Cluster) MetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", c.ports.Metrics)
}

// PprofURL is the server's Go profiling endpoint (/debug/pprof/ under
// it), on loopback.
func (c *Cluster) PprofURL() string { return fmt.Sprintf("http://127.0.0.1:%d", c.ports.Pprof) }

// Postgres is the PostgreSQL the server keeps its state in.
func (c *Cluster) Postgres() *pgserver.Server { return c.pg }

// Dir is the directory given to Start.
func (c *Cluster) Dir() string { return c.dir }

// LogPath is the server's log (appended to across restarts).
func (c *Cluster) LogPath() string { return filepath.Join(c.root, "server.log") }

// DynamicConfigPath is the server's dynamic config file; the server reads
// changes to it within 10 s.
func (c *Cluster) DynamicConfigPath() string { return filepath.Join(c.root, "dynamicconfig.yaml") }

// PID is the server process's ID, 0 when it is not running.
func (c *Cluster) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return 0
	}
	select {
	case <-c.proc.exited:
		return 0
	default:
		return c.proc.cmd.Process.Pid
	}
}

// Restart stops the server if it runs (SIGTERM, then waits for it to exit),
// starts it again on the same ports and waits until it serves again. After
// Kill, Restart just starts it.
func (c *Cluster) Restart(ctx context.Context) error {
	began := time.Now()
	c.mu.Lock()
	c.stopLocked(syscall.SIGTERM)
	c.mu.Unlock()
	stopped := time.Since(began)
	if err := c.start(ctx); err != nil {
		return err
	}
	c.opts.Logger.Info("Temporal server restarted", "stopping", stopped.Round(time.Millisecond),
		"took", time.Since(began).Round(time.Millisecond))
	return nil
}

// Kill SIGKILLs the server, as a crash would, and waits for it to be gone.
// PostgreSQL keeps running. Restart starts the server again.
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return errors.New("cluster: the server is not running")
	}
	c.stopLocked(syscall.SIGKILL)
	return nil
}

// Stop stops the server (SIGTERM) and, if Start started it, PostgreSQL.
// Both data directories stay.
func (c *Cluster) Stop() error {
	if c.stopRouting != nil {
		c.stopRouting()
		c.stopRouting = nil
	}
	c.mu.Lock()
	c.stopLocked(syscall.SIGTERM)
	c.mu.Unlock()
	c.auth.close()
	if c.ownPG && c.pg != nil {
		return c.pg.Stop()
	}
	return nil
}

// logTail is the end of the server's log, for errors.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.LogPath())
	if err != nil {
		return err.Error()
	}
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
