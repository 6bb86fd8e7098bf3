// Package deploytest checks the deployment files at the repository root
// (docker-compose.yml, Dockerfile, .dockerignore) and the monitoring files
// under deploy/ (Prometheus config and alert rules, Grafana provisioning and
// dashboard) without a Docker engine: docker-compose.yml is loaded with
// compose-go, exactly as `docker compose` would parse, validate and
// interpolate it, the Dockerfile is parsed as text, and every PromQL
// expression is parsed with Prometheus' own parser (the alert rules with its
// rule file parser) and checked against the metrics the worker exports,
// which are derived from the constants of internal/metrics.
//
// Files by concern: compose_test.go (loading docker-compose.yml, the
// services and their wiring), safe_defaults_test.go, dockerfile_test.go,
// monitoring_test.go (the monitoring services, and each check rejecting a
// broken file), prometheus_test.go (prometheus.yml, alerts.yml),
// grafana_test.go (provisioning, dashboard), promql_test.go (the PromQL
// checks), knownmetrics_test.go (the series they know) and helpers_test.go.
package deploy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const projectName = "durableclaims"

// load runs compose-go's full pipeline (YAML parsing, schema validation,
// interpolation, normalization, consistency checks). The environment is
// empty on purpose so the ${VAR:-default} defaults in the file are what is
// tested, not whatever the developer's shell exports. Only the local file
// loader is installed, so `include:`/`extends:` of remote (git, oci)
// resources cannot reach the network.
func load(t *testing.T, workingDir string, file types.ConfigFile, profiles ...string) (*types.Project, error) {
	t.Helper()
	return loadEnv(t, workingDir, file, types.Mapping{}, profiles...)
}

// loadEnv is load with exactly the given environment (nothing from the
// process's own).
func loadEnv(t *testing.T, workingDir string, file types.ConfigFile, environment types.Mapping, profiles ...string) (*types.Project, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details := types.ConfigDetails{
		WorkingDir:  workingDir,
		ConfigFiles: []types.ConfigFile{file},
		Environment: environment,
	}
	return loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(projectName, true)
		o.ResourceLoaders = nil
		o.Profiles = profiles
	})
}

// requiredVars are the variables docker-compose.yml requires with
// ${VAR:?message} (it has no safe default for them), with the test values
// repoEnv gives them. Every other variable is left unset, so the file's
// ${VAR:-default} defaults are what is tested.
var requiredVars = map[string]string{
	// The host path of the payload key file; it need not exist to load.
	"CODEC_KEYS_FILE": "/srv/durableclaims-test/codec-keys.json",
	// The host path of the ledger key that signs the claim-file log.
	"LEDGER_KEY_FILE":        "/srv/durableclaims-test/ledger.key",
	"GRAFANA_ADMIN_PASSWORD": "test-grafana-password",
	// The claims database's password (claims-postgresql, CLAIMS_DB).
	"CLAIMS_DB_PASSWORD": "test-claims-db-password",
	// MinIO's root password (minio, minio-setup), and the secret key of the
	// MinIO user the workers and the starter reach the bucket with.
	"MINIO_ROOT_PASSWORD":    "test-minio-root-password",
	"BLOB_SECRET_ACCESS_KEY": "test-blob-secret-key",
	// One Temporal token per program (claimsctl temporal-auth): no call to
	// the frontend is anonymous.
	"TEMPORAL_ADMIN_TOKEN":     "test-admin-token",
	"TEMPORAL_WORKER_TOKEN":    "test-worker-token",
	"TEMPORAL_STARTER_TOKEN":   "test-starter-token",
	"TEMPORAL_CLAIMSCTL_TOKEN": "test-claimsctl-token",
}

// repoEnv is the environment the repository's compose file is loaded with:
// the required variables and nothing else.
func repoEnv() types.Mapping {
	m := types.Mapping{}
	for k, v := range requiredVars {
		m[k] = v
	}
	return m
}

// loadRepoWith loads ../../docker-compose.yml with environment and profiles.
func loadRepoWith(t *testing.T, environment types.Mapping, profiles ...string) (*types.Project, error) {
	t.Helper()
	root := repoRoot(t)
	return loadEnv(t, root, types.ConfigFile{Filename: filepath.Join(root, "docker-compose.yml")}, environment, profiles...)
}

// loadRepo loads ../../docker-compose.yml with every profile enabled and
// the required variables set (repoEnv).
func loadRepo(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadRepoWith(t, repoEnv(), "*")
	require.NoError(t, err, "docker-compose.yml must load and validate")
	return p
}

// loadRepoDefault loads ../../docker-compose.yml as a plain `docker compose
// up` would: no profile enabled, the required variables set (repoEnv).
func loadRepoDefault(t *testing.T) *types.Project {
	t.Helper()
	p, err := loadRepoWith(t, repoEnv())
	require.NoError(t, err, "docker-compose.yml must load and validate without profiles")
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	require.NoError(t, err, "service %q", name)
	return s
}

func env(t *testing.T, s types.ServiceConfig, key string) string {
	t.Helper()
	v, ok := s.Environment[key]
	require.True(t, ok && v != nil, "service %s: environment %s is not set", s.Name, key)
	return *v
}

func TestServicesExist(t *testing.T) {
	p := loadRepo(t)
	assert.ElementsMatch(t,
		[]string{"postgresql", "temporal", "temporal-jwks", "temporal-admin-tools", "temporal-archival-init", "temporal-ui", "stripesim", "worker", "starter", "claimsctl",
			"prometheus", "grafana", claimsDBService, blobService, blobSetupJob, mailService},
		p.ServiceNames())
}

func TestToolsAreNotStartedByDefault(t *testing.T) {
	p := loadRepo(t)
	for _, name := range []string{"starter", "claimsctl"} {
		assert.Contains(t, service(t, p, name).Profiles, "tools", "%s must sit in the tools profile", name)
	}

	def := loadRepoDefault(t)
	assert.NotContains(t, def.ServiceNames(), "starter", "`docker compose up` must not start starter")
	assert.Contains(t, def.DisabledServiceNames(), "starter")
	assert.Contains(t, def.ServiceNames(), "worker")
}

var versionTag = regexp.MustCompile(`^v?\d+\.\d+`)

// minioReleaseTag is MinIO's way of naming an exact release: the build's
// UTC time, e.g. RELEASE.2025-09-07T16-13-09Z.
var minioReleaseTag = regexp.MustCompile(`^RELEASE\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}Z$`)

// checkImageRef returns why ref is not an explicitly pinned image, or "".
// Third-party images need a version-like tag (postgres:16.13, not postgres:16
// or postgres:latest); the locally built image only needs a non-latest tag.
func checkImageRef(ref string, built bool) string {
	if ref == "" {
		return "no image"
	}
	name := ref
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	switch {
	case tag == "":
		return "no tag (means latest)"
	case tag == "latest":
		return "tag latest"
	case strings.Contains(tag, "$"):
		return "tag left uninterpolated"
	case !built && minioReleaseTag.MatchString(tag):
		return ""
	case !built && !versionTag.MatchString(tag):
		return fmt.Sprintf("tag %q is not an exact version", tag)
	case !built && regexp.MustCompile(`^v?\d+$`).MatchString(tag):
		return fmt.Sprintf("tag %q is a floating major version", tag)
	}
	return ""
}

func TestCheckImageRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"postgres:16.13":                                   true,
		"temporalio/auto-setup:1.29.7":                     true,
		"registry:5000/team/app:1.2.3":                     true,
		"temporalio/ui:2.51.0@sha256:abcd":                 true,
		"quay.io/minio/minio:RELEASE.2025-09-07T16-13-09Z": true,
		"quay.io/minio/mc:RELEASE.2025-08-13T08-35-41Z":    true,
		"quay.io/minio/minio:RELEASE.2025-09-07":           false,
		"quay.io/minio/minio:RELEASE":                      false,
		"postgres":                                         false,
		"postgres:latest":                                  false,
		"postgres:16":                                      false,
		"registry:5000/team/app":                           false,
		"temporalio/admin-tools:bookworm-x":                false,
		"":                                                 false,
	} {
		assert.Equal(t, want, checkImageRef(ref, false) == "", "checkImageRef(%q) = %q", ref, checkImageRef(ref, false))
	}
	assert.Empty(t, checkImageRef("durableclaims:local", true))
	assert.NotEmpty(t, checkImageRef("durableclaims", true))
}

func TestImagesArePinned(t *testing.T) {
	p := loadRepo(t)
	for _, s := range p.AllServices() {
		assert.Empty(t, checkImageRef(s.Image, s.Build != nil), "service %s image %q", s.Name, s.Image)
	}
}

func TestTemporalStack(t *testing.T) {
	p := loadRepo(t)

	pg := service(t, p, "postgresql")
	require.NotNil(t, pg.HealthCheck, "postgresql needs a healthcheck for temporal's depends_on")
	assert.Contains(t, strings.Join(pg.HealthCheck.Test, " "), "pg_isready")
	assert.True(t, mountsNamedVolume(pg, "/var/lib/postgresql/data"), "postgres data must live on a named volume")

	tmp := service(t, p, "temporal")
	require.NotNil(t, tmp.Build, "the temporal service builds durableclaims' server")
	assert.Equal(t, "deploy/temporal/Dockerfile", tmp.Build.Dockerfile)
	assert.Equal(t, "postgres12", env(t, tmp, "DB"))
	assert.Equal(t, "postgresql", env(t, tmp, "POSTGRES_SEEDS"))
	assert.Equal(t, env(t, pg, "POSTGRES_USER"), env(t, tmp, "POSTGRES_USER"))
	assert.Equal(t, env(t, pg, "POSTGRES_PASSWORD"), env(t, tmp, "POSTGRES_PWD"))
	assert.Equal(t, types.ServiceConditionHealthy, tmp.DependsOn["postgresql"].Condition)
	assert.True(t, publishes(tmp, 7233), "temporal must publish 7233")
	// History archival, the claim file's second copy: a volume of the
	// server's, handed to its user before it starts, at the URI the
	// admin job gives the namespace.
	admin := service(t, p, "temporal-admin-tools")
	uri := env(t, admin, "TEMPORAL_HISTORY_ARCHIVAL_URI")
	require.True(t, strings.HasPrefix(uri, "file:///"), uri)
	vol, _ := volumeFor(tmp, strings.TrimPrefix(uri, "file://"))
	require.NotEmpty(t, vol, "the archival URI %s must be on a named volume of the temporal service", uri)
	initJob := service(t, p, "temporal-archival-init")
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "temporal", "Dockerfile"))
	require.NoError(t, err)
	base := regexp.MustCompile(`(?m)^FROM (temporalio/auto-setup:\S+)$`).FindStringSubmatch(string(dockerfile))
	require.NotNil(t, base, "deploy/temporal/Dockerfile builds on auto-setup")
	assert.Equal(t, base[1], initJob.Image, "the init job uses the server image's base: nothing new to pin")
	initVol, _ := volumeFor(initJob, strings.TrimPrefix(uri, "file://"))
	assert.Equal(t, vol, initVol)
	assert.Contains(t, initJob.Command[0], "chown -R 1000:1000")
	assert.Equal(t, types.ServiceConditionCompletedSuccessfully, tmp.DependsOn["temporal-archival-init"].Condition)

	ui := service(t, p, "temporal-ui")
	assert.True(t, strings.HasPrefix(ui.Image, "temporalio/ui:2."), "ui image %q", ui.Image)
	assert.Equal(t, "temporal:7233", env(t, ui, "TEMPORAL_ADDRESS"))
	assert.True(t, publishes(ui, 8080), "temporal-ui must publish 8080")
}

func publishes(s types.ServiceConfig, port uint32) bool {
	for _, p := range s.Ports {
		if p.Target == port && p.Published == strconv.Itoa(int(port)) {
			return true
		}
	}
	return false
}

func mountsNamedVolume(s types.ServiceConfig, target string) bool {
	return namedVolumeAt(s, target) != ""
}

func namedVolumeAt(s types.ServiceConfig, target string) string {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Target == target {
			return v.Source
		}
	}
	return ""
}

// volumeFor returns the named volume mounted at or above path in s.
func volumeFor(s types.ServiceConfig, path string) (name, target string) {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && (path == v.Target || strings.HasPrefix(path, v.Target+"/")) {
			return v.Source, v.Target
		}
	}
	return "", ""
}

func hostPort(t *testing.T, what, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, "%s %q", what, addr)
	n, err := strconv.Atoi(port)
	require.NoError(t, err, "%s %q", what, addr)
	return host, n
}

// Every worker replica is a version of one Worker Deployment, and the
// first build on a namespace makes itself current.
func TestWorkerDeploymentVersioning(t *testing.T) {
	w := service(t, loadRepo(t), "worker")
	assert.Equal(t, "durableclaims", env(t, w, "WORKER_DEPLOYMENT"))
	assert.Equal(t, "if-none", env(t, w, "WORKER_PROMOTE"))
	build, ok := w.Environment["WORKER_BUILD_ID"]
	assert.True(t, ok && (build == nil || *build == ""), "empty by default: the image's own build ID")
}

func TestWorkerWiring(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")

	require.NotNil(t, w.Deploy)
	require.NotNil(t, w.Deploy.Replicas)
	assert.Greater(t, *w.Deploy.Replicas, 1, "the workers run as replicas (TestWorkersShareNoVolume)")
	assert.Empty(t, w.ContainerName, "container_name prevents running replicas")
	assert.Empty(t, w.Ports, "fixed host ports would collide between replicas")

	require.NotNil(t, w.StopGracePeriod, "worker needs time to drain on SIGTERM")
	assert.GreaterOrEqual(t, time.Duration(*w.StopGracePeriod), 30*time.Second)
	assert.Contains(t, []string{"", "SIGTERM"}, w.StopSignal)

	host, port := hostPort(t, "TEMPORAL_ADDRESS", env(t, w, "TEMPORAL_ADDRESS"))
	assert.Equal(t, "temporal", host)
	assert.Equal(t, 7233, port)
	_, err := p.GetService(host)
	assert.NoError(t, err, "TEMPORAL_ADDRESS must name a service")

	u, err := url.Parse(env(t, w, "STRIPE_API_BASE"))
	require.NoError(t, err)
	assert.Equal(t, "http", u.Scheme)
	assert.Equal(t, "stripesim", u.Hostname())

	sim := service(t, p, "stripesim")
	simHost, simPort := hostPort(t, "STRIPESIM_ADDR", env(t, sim, "STRIPESIM_ADDR"))
	assert.Contains(t, []string{"0.0.0.0", "", "::"}, simHost, "stripesim must listen on all interfaces inside its container")
	assert.Equal(t, strconv.Itoa(simPort), u.Port(), "STRIPE_API_BASE port must be the one stripesim listens on")
	assert.Contains(t, strings.Split(env(t, sim, "STRIPESIM_API_KEYS"), ","), env(t, w, "STRIPE_SECRET_KEY"),
		"stripesim must accept the worker's key")
	assert.True(t, mountsNamedVolume(sim, filepath.Dir(env(t, sim, "STRIPESIM_DB"))), "STRIPESIM_DB must be on a named volume")
	require.NotNil(t, sim.HealthCheck, "worker waits for stripesim to be healthy")
	assert.False(t, sim.HealthCheck.Disable)
	assert.Contains(t, sim.HealthCheck.Test, fmt.Sprintf("http://127.0.0.1:%d/_sim/health", simPort))

	require.Contains(t, w.DependsOn, "stripesim")
	assert.Equal(t, types.ServiceConditionHealthy, w.DependsOn["stripesim"].Condition)
	require.Contains(t, w.DependsOn, "temporal-admin-tools")
	assert.Equal(t, types.ServiceConditionCompletedSuccessfully, w.DependsOn["temporal-admin-tools"].Condition)

	for _, key := range []string{"MODEL_PROVIDER", "LOG_LEVEL", "TEMPORAL_NAMESPACE"} {
		assert.NotEmpty(t, env(t, w, key))
	}
	assert.Equal(t, env(t, w, "TEMPORAL_NAMESPACE"), env(t, service(t, p, "temporal"), "DEFAULT_NAMESPACE"),
		"auto-setup must create the namespace the worker uses")
	assert.Equal(t, env(t, w, "TEMPORAL_NAMESPACE"), env(t, service(t, p, "temporal-admin-tools"), "TEMPORAL_NAMESPACE"),
		"search attributes must be registered in the worker's namespace")
}

// The claims store is shared through PostgreSQL, not a volume
// (TestClaimsDBIsPostgres): the worker and the tools open the same store in
// the same Temporal namespace.
func TestToolsShareTheWorkersStores(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")
	for _, name := range []string{"starter", "claimsctl"} {
		s := service(t, p, name)
		assert.Equal(t, env(t, w, "CLAIMS_DB"), env(t, s, "CLAIMS_DB"), name)
		assert.Equal(t, env(t, w, "PGPASSWORD"), env(t, s, "PGPASSWORD"), name)
		assert.Equal(t, env(t, w, "TEMPORAL_ADDRESS"), env(t, s, "TEMPORAL_ADDRESS"), name)
		assert.Equal(t, env(t, w, "TEMPORAL_NAMESPACE"), env(t, s, "TEMPORAL_NAMESPACE"), name)
	}
	// The starter puts the documents where the worker reads them.
	assert.Equal(t, env(t, w, "BLOB_URL"), env(t, service(t, p, "starter"), "BLOB_URL"))
}

// createAttributes extracts the --name/--type pairs of every
// `temporal operator search-attribute create` in script.
func createAttributes(script string) (attrs map[string]string, addresses []string) {
	attrs = map[string]string{}
	for _, line := range strings.Split(script, "\n") {
		i := strings.Index(line, "search-attribute create")
		if i < 0 {
			continue
		}
		words := shellWords(line[i:])
		var names, typ []string
		for j := 0; j < len(words); j++ {
			flag, val, hasVal := strings.Cut(words[j], "=")
			if !hasVal && j+1 < len(words) {
				val = words[j+1]
			}
			switch flag {
			case "--name":
				names = append(names, val)
			case "--type":
				typ = append(typ, val)
			case "--address":
				addresses = append(addresses, val)
			}
		}
		for k := range names {
			if k < len(typ) {
				attrs[names[k]] = typ[k]
			}
		}
	}
	return attrs, addresses
}

func TestAdminToolsCreatesSearchAttributes(t *testing.T) {
	p := loadRepo(t)
	a := service(t, p, "temporal-admin-tools")
	assert.True(t, strings.HasPrefix(a.Image, "temporalio/admin-tools:"), a.Image)
	assert.Contains(t, []string{"", "no"}, a.Restart, "a one-shot job must not restart, or completed_successfully never fires")
	assert.Contains(t, a.DependsOn, "temporal")

	script := strings.Join(append(append([]string{}, a.Entrypoint...), a.Command...), "\n")
	attrs, addrs := createAttributes(script)
	assert.Equal(t, map[string]string{"ClaimStatus": "Keyword", "ApprovalDeadline": "Datetime"}, attrs)

	require.NotEmpty(t, addrs, "the create command must name the server with --address")
	for _, addr := range addrs {
		if strings.HasPrefix(addr, "$") {
			addr = env(t, a, strings.Trim(addr, "${}"))
		}
		assert.Equal(t, "temporal:7233", addr)
	}
}

// TestAdminToolsScriptIsIdempotent runs the job's real shell script with a
// fake `temporal` CLI on PATH, so the retry loop, the $$ escaping and the
// "already exists" handling are exercised, not just grepped for.
func TestAdminToolsScriptIsIdempotent(t *testing.T) {
	p := loadRepo(t)
	a := service(t, p, "temporal-admin-tools")
	fake := `#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls"
case "$1 $2 $3" in
"operator cluster health")
	n=$(cat "$FAKE_DIR/health" 2>/dev/null || echo 0)
	n=$((n + 1))
	echo "$n" > "$FAKE_DIR/health"
	[ "$n" -ge "$FAKE_READY_AFTER" ] ;;
"operator namespace describe")
	[ "$FAKE_NAMESPACE" = exists ] ;;
"operator namespace update")
	case "$FAKE_ARCHIVAL" in
	elsewhere) echo "Error: unable to update namespace: Cannot update existing archival URI" >&2; exit 1 ;;
	down) echo "Error: failed reaching server: connection refused" >&2; exit 1 ;;
	*) echo "Namespace default update succeeded." ;;
	esac ;;
"operator namespace create")
	case "$FAKE_NAMESPACE" in
	missing) echo "Namespace registered." ;;
	raced) echo "Error: unable to create namespace: Namespace already exists." >&2; exit 1 ;;
	*) echo "Error: Request unauthorized." >&2; exit 1 ;;
	esac ;;
"operator search-attribute create")
	n=$(cat "$FAKE_DIR/creates" 2>/dev/null || echo 0)
	n=$((n + 1))
	echo "$n" > "$FAKE_DIR/creates"
	case "$FAKE_CREATE" in
	ok) echo "Search attributes have been added" ;;
	later)
		if [ "$n" -lt 3 ]; then echo "Error: unable to get existing search attributes: Namespace default is not found." >&2; exit 1; fi
		echo "Search attributes have been added" ;;
	exists) echo "Error: unable to add search attributes: Search attribute ClaimStatus already exists." >&2; exit 1 ;;
	conflict) echo "Error: search attribute ClaimStatus already exists and has different type Text" >&2; exit 1 ;;
	*) echo "Error: failed reaching server: connection refused" >&2; exit 1 ;;
	esac ;;
*) echo "unexpected: $*" >&2; exit 64 ;;
esac
`
	cases := []struct {
		name       string
		readyAfter int
		namespace  string
		create     string
		archival   string
		wantOK     bool
	}{
		{"fresh server", 1, "missing", "ok", "ok", true},
		{"server not ready at first", 2, "missing", "ok", "ok", true},
		{"namespace and attributes already exist", 1, "exists", "exists", "ok", true},
		{"namespace created meanwhile", 1, "raced", "ok", "ok", true},
		{"new namespace not yet visible to the attributes", 1, "missing", "later", "ok", true},
		{"namespace already archives elsewhere", 1, "exists", "exists", "elsewhere", true},
		{"namespace refused", 1, "denied", "ok", "ok", false},
		{"archival refused", 1, "exists", "ok", "down", false},
		{"existing attribute has another type", 1, "exists", "conflict", "ok", false},
		{"server error", 1, "exists", "down", "ok", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			out, err := runJobScript(t, a, "temporal", fake, "FAKE_DIR="+state,
				"FAKE_READY_AFTER="+strconv.Itoa(tc.readyAfter), "FAKE_NAMESPACE="+tc.namespace, "FAKE_CREATE="+tc.create, "FAKE_ARCHIVAL="+tc.archival)
			if tc.wantOK {
				require.NoError(t, err, "output:\n%s", out)
			} else {
				require.Error(t, err, "output:\n%s", out)
			}
			calls, rerr := os.ReadFile(filepath.Join(state, "calls"))
			require.NoError(t, rerr)
			lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
			want := tc.readyAfter + 3 // health until ready, describe, archival, attributes
			if tc.namespace != "exists" {
				want++ // create
			}
			if tc.create == "later" {
				want += 2 // the attributes again, until the namespace is visible
			}
			if tc.namespace == "denied" {
				require.Len(t, lines, want-2, "calls:\n%s", calls)
				assert.Contains(t, lines[len(lines)-1], "operator namespace create --address temporal:7233 --namespace default --retention 24h"+
					" --history-archival-state enabled --history-uri file:///var/lib/temporal/archival/history")
				return
			}
			if tc.archival == "down" {
				require.Len(t, lines, want-1, "calls:\n%s", calls)
				return
			}
			assert.Contains(t, string(calls), "operator namespace update --address temporal:7233 --namespace default"+
				" --history-archival-state enabled --history-uri file:///var/lib/temporal/archival/history\n")
			require.Len(t, lines, want, "calls:\n%s", calls)
			assert.Equal(t,
				"operator search-attribute create --address temporal:7233 --namespace default --name ClaimStatus --type Keyword --name ApprovalDeadline --type Datetime",
				lines[len(lines)-1])
		})
	}
}

// No call to the compose stack's Temporal frontend is anonymous: the
// server checks JWTs with its own claim mapper and authorizer against the
// public key temporal-jwks serves (never the private one), and every program
// that reaches it sends a token of its own from a required variable. The
// Web UI, which can only forward a signed-in user's OIDC token, is not
// started by default.
func TestTemporalFrontendIsNotAnonymous(t *testing.T) {
	p := loadRepo(t)
	tmp := service(t, p, "temporal")
	assert.Equal(t, "durableclaims", env(t, tmp, "TEMPORAL_AUTH_AUTHORIZER"), "durableclaims' authorizer (temporalserver/authz)")
	assert.Equal(t, "durableclaims", env(t, tmp, "TEMPORAL_AUTH_CLAIM_MAPPER"))
	assert.Equal(t, "true", env(t, tmp, "USE_INTERNAL_FRONTEND"), "the server's own system workers need the internal frontend once the public one asks for tokens")
	assert.Equal(t, "true", env(t, tmp, "SKIP_DEFAULT_NAMESPACE_CREATION"), "auto-setup's creation would be refused: temporal-admin-tools creates it")
	u, err := url.Parse(env(t, tmp, "TEMPORAL_JWT_KEY_SOURCE1"))
	require.NoError(t, err)
	assert.Equal(t, "temporal-jwks", u.Hostname())
	assert.Equal(t, types.ServiceConditionHealthy, tmp.DependsOn["temporal-jwks"].Condition, "the key set is there before the server fetches it")

	jwks := service(t, p, "temporal-jwks")
	assert.Empty(t, jwks.Ports, "the key set is for the compose network only")
	var mounts []string
	for _, v := range jwks.Volumes {
		mounts = append(mounts, filepath.Base(v.Source))
		assert.True(t, v.ReadOnly, "temporal-jwks mounts %s read-only", v.Source)
	}
	assert.Equal(t, []string{"jwks.json"}, mounts, "the public key set only, never signing-key.jwk")
	assert.Equal(t, "/usr/share/nginx/html/jwks.json", jwks.Volumes[0].Target)
	assert.Equal(t, "/jwks.json", u.Path)

	tokens := map[string]string{}
	for _, name := range p.ServiceNames() {
		s := service(t, p, name)
		if name == "temporal" || name == "temporal-ui" || s.Environment["TEMPORAL_ADDRESS"] == nil {
			continue
		}
		key := env(t, s, "TEMPORAL_API_KEY")
		assert.NotEmpty(t, key, "%s reaches the frontend with no token", name)
		assert.Equal(t, "false", env(t, s, "TEMPORAL_TLS"), "%s: the compose network's gRPC is plaintext", name)
		if other, dup := tokens[key]; dup {
			t.Errorf("%s and %s share a token: one identity per program", name, other)
		}
		tokens[key] = name
	}
	assert.Equal(t, map[string]string{"test-admin-token": "temporal-admin-tools", "test-worker-token": "worker",
		"test-starter-token": "starter", "test-claimsctl-token": "claimsctl"}, tokens)

	def := loadRepoDefault(t)
	assert.NotContains(t, def.ServiceNames(), "temporal-ui", "the UI needs OIDC set up first")
}

// A broken compose document must fail to load, so the tests above cannot pass
// on a file that `docker compose` would reject.
func TestInvalidComposeIsRejected(t *testing.T) {
	cases := map[string]string{
		"yaml syntax": "services:\n  worker:\n    image: [unclosed\n",
		"schema: replicas not a number": `services:
  worker:
    image: durableclaims:local
    deploy:
      replicas: two
`,
		"schema: unknown service key": `services:
  worker:
    image: durableclaims:local
    replica: 2
`,
		"depends_on an undefined service": `services:
  worker:
    image: durableclaims:local
    depends_on:
      stripesim:
        condition: service_healthy
`,
		"undefined named volume": `services:
  worker:
    image: durableclaims:local
    volumes:
      - claims-data:/var/lib/durableclaims
`,
		"required variable unset": `services:
  worker:
    image: durableclaims:${TAG:?set TAG}
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := load(t, t.TempDir(), types.ConfigFile{Filename: "docker-compose.yml", Content: []byte(doc)})
			assert.Error(t, err)
		})
	}

	t.Run("control: a valid document loads", func(t *testing.T) {
		p, err := load(t, t.TempDir(), types.ConfigFile{Filename: "docker-compose.yml", Content: []byte(
			"services:\n  worker:\n    image: durableclaims:local\n    deploy:\n      replicas: 2\n")})
		require.NoError(t, err)
		assert.Equal(t, 2, *service(t, p, "worker").Deploy.Replicas)
	})
}

// hostPath returns the host path that a bind mount of s shows at
// containerPath (the deepest such mount), and whether it is read-only.
func hostPath(s types.ServiceConfig, containerPath string) (string, bool) {
	best := -1
	var host string
	var ro bool
	for _, v := range s.Volumes {
		if v.Type != types.VolumeTypeBind {
			continue
		}
		target := strings.TrimSuffix(v.Target, "/")
		rel, ok := "", containerPath == target
		if r, cut := strings.CutPrefix(containerPath, target+"/"); cut {
			rel, ok = r, true
		}
		if ok && len(target) > best {
			best, host, ro = len(target), filepath.Join(v.Source, filepath.FromSlash(rel)), v.ReadOnly
		}
	}
	return host, ro
}

// flagValue returns --name=value or --name value from a command line.
func flagValue(cmd []string, name, def string) string {
	for i, a := range cmd {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(cmd) {
			return cmd[i+1]
		}
	}
	return def
}

func publishesTarget(s types.ServiceConfig, target int) bool {
	for _, p := range s.Ports {
		if int(p.Target) == target && p.Published != "" {
			return true
		}
	}
	return false
}

func TestPublishedHostPortsAreUnique(t *testing.T) {
	p := loadRepo(t)
	owner := map[string]string{}
	for _, s := range p.AllServices() {
		for _, port := range s.Ports {
			if port.Published == "" {
				continue
			}
			key := port.HostIP + ":" + port.Published + "/" + port.Protocol
			if prev, ok := owner[key]; ok {
				t.Errorf("host port %s is published by both %s and %s", key, prev, s.Name)
			}
			owner[key] = s.Name
		}
	}
}

// The compose file's Temporal server runs with the dynamic config every
// server in this project gets (testbed/serversettings), from a file it
// mounts where DYNAMIC_CONFIG_FILE_PATH points.
func TestTemporalDynamicConfig(t *testing.T) {
	p := loadRepo(t)
	tmp := service(t, p, "temporal")
	path := env(t, tmp, "DYNAMIC_CONFIG_FILE_PATH")
	require.NotEmpty(t, path, "temporal: DYNAMIC_CONFIG_FILE_PATH")
	var source string
	for _, v := range tmp.Volumes {
		if v.Type == types.VolumeTypeBind && v.Target == filepath.Join("/etc/temporal", path) {
			source = v.Source
			assert.True(t, v.ReadOnly, "the dynamic config is mounted read-only")
		}
	}
	require.NotEmpty(t, source, "temporal mounts nothing at /etc/temporal/%s", path)
	raw, err := os.ReadFile(source)
	require.NoError(t, err)
	var file map[string][]struct {
		Value       any            `yaml:"value"`
		Constraints map[string]any `yaml:"constraints"`
	}
	require.NoError(t, decodeStrict(raw, &file), source)
	for key, want := range serversettings.DynamicConfig() {
		require.Len(t, file[key], 1, "%s sets %s once", source, key)
		assert.EqualValues(t, want, file[key][0].Value, "%s: %s", source, key)
		assert.Empty(t, file[key][0].Constraints, "%s: %s applies everywhere", source, key)
	}
}
