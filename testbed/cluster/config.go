package cluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"go.yaml.in/yaml/v3"
)

// ports are the loopback ports one cluster listens on. They are chosen
// once, at Start, and kept across restarts: ringpop finds its previous self
// in the cluster_membership table by host:port.
type ports struct {
	Frontend, FrontendHTTP, FrontendMembership int
	History, HistoryMembership                 int
	Matching, MatchingMembership               int
	Worker, WorkerMembership                   int
	// The internal frontend serves the server's own system workers when
	// the public frontend requires a token (auth.go).
	InternalFrontend, InternalFrontendHTTP, InternalFrontendMembership int
	Metrics                                                            int
	Pprof                                                              int
}

// freePorts picks n distinct free loopback ports below 32768, holding
// every listener open until all are chosen so that none is handed out
// twice. Below 32768 because the PostgreSQL schema keeps a membership port
// in a SMALLINT (cluster_membership.rpc_port): a port from the kernel's
// ephemeral range (32768-60999 on Linux) makes the server exit with "value
// is out of range for type smallint". Choosing outside that range also
// keeps clear of ports the kernel hands to outgoing connections.
func freePorts(n int) ([]int, error) {
	const lo, hi = 20000, 32767
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]int, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("no free port in %d-%d", lo, hi)
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", lo+rand.IntN(hi-lo+1)))
		if err != nil {
			continue
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

func newPorts() (ports, error) {
	p, err := freePorts(14)
	if err != nil {
		return ports{}, fmt.Errorf("cluster: free ports: %w", err)
	}
	return ports{
		Frontend: p[0], FrontendHTTP: p[1], FrontendMembership: p[2],
		History: p[3], HistoryMembership: p[4],
		Matching: p[5], MatchingMembership: p[6],
		Worker: p[7], WorkerMembership: p[8],
		Metrics: p[9], Pprof: p[10],
		InternalFrontend: p[11], InternalFrontendHTTP: p[12], InternalFrontendMembership: p[13],
	}, nil
}

// serverConfig is the server module's config/development-postgres12.yaml
// with the ports, the database address and user, the log and the dynamic
// config file changed, pprof on loopback, and history archival on, to a
// directory of the cluster's own (the sample's writes under /tmp).
var serverConfig = template.Must(template.New("development.yaml").Parse(`# Written by testbed/cluster (Temporal server {{.Version}}); based on the
# server module's config/development-postgres12.yaml.
log:
  stdout: true
  level: {{.LogLevel}}

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: {{.Shards}}
  datastores:
    postgres-default:
      sql:
        pluginName: "postgres12"
        databaseName: "{{.DB}}"
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: "tcp"
        user: "{{.User}}"
        password: ""
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: "1h"
    postgres-visibility:
      sql:
        pluginName: "postgres12"
        databaseName: "{{.VisibilityDB}}"
        connectAddr: "127.0.0.1:{{.PGPort}}"
        connectProtocol: "tcp"
        user: "{{.User}}"
        password: ""
        maxConns: 2
        maxIdleConns: 2
        maxConnLifetime: "1h"

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  pprof:
    # Go's /debug/pprof on loopback: the benchmark profiles the server
    # with it (bench/scaling.go).
    host: "127.0.0.1"
    port: {{.P.Pprof}}
  metrics:
    prometheus:
      framework: "tally"
      timerType: "histogram"
      listenAddress: "127.0.0.1:{{.P.Metrics}}"
{{- if .JWKS}}
  # No anonymous frontend: every call carries a JWT checked against the
  # cluster's key, and durableclaims' authorizer allows each identity its
  # own job only (temporalserver/authz; testbed/cluster/auth.go).
  authorization:
    jwtKeyProvider:
      keySourceURIs:
        - "{{.JWKS}}"
      refreshInterval: 1m
    permissionsClaimName: permissions
    authorizer: durableclaims
    claimMapper: durableclaims
{{- end}}

services:
  frontend:
    rpc:
      grpcPort: {{.P.Frontend}}
      membershipPort: {{.P.FrontendMembership}}
      bindOnLocalHost: true
      httpPort: {{.P.FrontendHTTP}}
  matching:
    rpc:
      grpcPort: {{.P.Matching}}
      membershipPort: {{.P.MatchingMembership}}
      bindOnLocalHost: true
  history:
    rpc:
      grpcPort: {{.P.History}}
      membershipPort: {{.P.HistoryMembership}}
      bindOnLocalHost: true
  worker:
    rpc:
      grpcPort: {{.P.Worker}}
      membershipPort: {{.P.WorkerMembership}}
      bindOnLocalHost: true
{{- if .JWKS}}
  # The system workers reach the cluster through this frontend, which
  # serves only the cluster's own services.
  internal-frontend:
    rpc:
      grpcPort: {{.P.InternalFrontend}}
      membershipPort: {{.P.InternalFrontendMembership}}
      bindOnLocalHost: true
      httpPort: {{.P.InternalFrontendHTTP}}
{{- end}}

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: "127.0.0.1:{{.P.Frontend}}"
      httpAddress: "127.0.0.1:{{.P.FrontendHTTP}}"

dcRedirectionPolicy:
  policy: "noop"

# History archival is the claim file's second copy (docs/records.md): a
# closed run's history is written under the cluster's own directory when
# the namespace's retention ends, and stays readable there.
archival:
  history:
    state: "enabled"
    enableRead: true
    provider:
      filestore:
        fileMode: "0600"
        dirMode: "0700"
  visibility:
    state: "disabled"

namespaceDefaults:
  archival:
    history:
      state: "enabled"
      URI: "file://{{.Archive}}"
    visibility:
      state: "disabled"

{{- if not .JWKS}}
# The system workers (in the worker service) reach the frontend here.
publicClient:
  hostPort: "127.0.0.1:{{.P.Frontend}}"
{{- end}}

dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: "10s"
`))

// DefaultDynamicConfig is what Start puts in the server's dynamic config
// file unless Options.DynamicConfig overrides a key. Everything else keeps
// the server's defaults.
func DefaultDynamicConfig() map[string]any {
	// What every dev server in this project runs with, so the real
	// cluster does too and the numbers compare.
	dc := serversettings.DynamicConfig()
	// Visibility APIs are limited to 10/s per namespace by default; the
	// soak and the benchmark check every claim through them. The dev
	// server sets 100.
	dc["frontend.namespaceRPS.visibility"] = 100
	// A rehearsal cluster: a Worker Deployment Version that stopped
	// taking new work is seen drained within seconds (the defaults, 3 min
	// between checks and a 3 min grace for visibility to catch up, suit a
	// production server, deploy/temporal/dynamicconfig.yaml).
	dc["matching.wv.VersionDrainageStatusRefreshInterval"] = "5s"
	dc["matching.wv.VersionDrainageStatusVisibilityGracePeriod"] = "10s"
	return dc
}

// ArchivePath is where the server archives closed runs' histories.
func (c *Cluster) ArchivePath() string { return filepath.Join(c.root, "archival", "history") }

// writeConfig writes config/development.yaml and dynamicconfig.yaml under
// root (the server's --root).
func (c *Cluster) writeConfig() error {
	if err := os.MkdirAll(filepath.Join(c.root, "config"), 0o755); err != nil {
		return err
	}
	dc := DefaultDynamicConfig()
	for k, v := range c.opts.DynamicConfig {
		if v == nil {
			delete(dc, k)
			continue
		}
		dc[k] = v
	}
	values := make(map[string][]map[string]any, len(dc))
	for k, v := range dc {
		values[k] = []map[string]any{{"value": v, "constraints": map[string]any{}}}
	}
	out, err := yaml.Marshal(values)
	if err != nil {
		return fmt.Errorf("cluster: dynamic config: %w", err)
	}
	if err := os.WriteFile(c.DynamicConfigPath(), out, 0o644); err != nil {
		return err
	}

	var b strings.Builder
	if err := serverConfig.Execute(&b, map[string]any{
		"Version":       ServerVersion,
		"LogLevel":      c.opts.LogLevel,
		"Shards":        c.opts.NumHistoryShards,
		"DB":            DatabaseName,
		"VisibilityDB":  VisibilityDatabaseName,
		"PGPort":        c.pg.Port,
		"User":          pgUser,
		"P":             c.ports,
		"DynamicConfig": c.DynamicConfigPath(),
		"JWKS":          c.jwksURL(),
		"Archive":       c.ArchivePath(),
	}); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.root, "config", "development.yaml"), []byte(b.String()), 0o644)
}
