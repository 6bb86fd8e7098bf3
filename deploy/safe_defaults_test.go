package deploy

// Safe defaults of docker-compose.yml: what `docker compose up` exposes
// when the operator sets nothing but the variables the file requires.
// Nothing is reachable from other hosts, no simulator or admin endpoint is
// published, no password has a default, payloads are always encrypted, and
// the insurer's configuration is read-only to the workers.

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loopback is the only host address docker-compose.yml may publish on.
const loopback = "127.0.0.1"

// insurerConfigDir is where the workers find the insurer's configuration
// (approver directory, policy) in their containers, read-only.
const insurerConfigDir = "/etc/durableclaims"

// codecServices read or write workflow payloads, so they need the payload
// keys (CODEC_KEYS_FILE) to encrypt and decrypt them.
var codecServices = []string{"worker", "starter", "claimsctl", "codec-server"}

// loopbackPublished lists the services that publish a port on the host, and
// the container port each publishes: the UIs and the Temporal frontend the
// tools on the host use. Nothing else is published.
var loopbackPublished = map[string]uint32{
	"temporal":    7233,
	"temporal-ui": 8080,
	"prometheus":  9090,
	"grafana":     3000,
}

func TestPublishedPortsBindLoopbackOnly(t *testing.T) {
	p := loadRepo(t)
	publishers := map[string][]int{}
	for _, s := range p.AllServices() {
		assert.NotEqual(t, "host", s.NetworkMode, "service %s: host networking publishes every port on every interface", s.Name)
		for _, port := range s.Ports {
			// A port with no published host port gets an ephemeral one,
			// which is just as reachable: every entry counts.
			assert.Equal(t, loopback, port.HostIP,
				"service %s publishes container port %d (host port %q) on all interfaces; bind it to %s",
				s.Name, port.Target, port.Published, loopback)
			publishers[s.Name] = append(publishers[s.Name], int(port.Target))
		}
	}
	want := map[string][]int{}
	for name, port := range loopbackPublished {
		want[name] = []int{int(port)}
	}
	assert.Equal(t, want, publishers, "services publishing host ports (on %s), and which container ports", loopback)
}

// stripesim's /_sim endpoints (reset, failure injection, key expiry) have no
// authentication, so it must not be reachable from the host: the worker and
// claimsctl reach it over the compose network.
func TestStripesimIsNotPublished(t *testing.T) {
	p := loadRepo(t)
	sim := service(t, p, "stripesim")
	assert.Empty(t, sim.Ports, "stripesim must publish no port: its /_sim admin endpoints are unauthenticated")
	assert.NotEqual(t, "host", sim.NetworkMode)

	simHost, simPort := hostPort(t, "STRIPESIM_ADDR", env(t, sim, "STRIPESIM_ADDR"))
	assert.Contains(t, []string{"0.0.0.0", "", "::"}, simHost, "stripesim must listen on the compose network")
	for _, name := range []string{"worker", "claimsctl"} {
		s := service(t, p, name)
		u, err := url.Parse(env(t, s, "STRIPE_API_BASE"))
		require.NoError(t, err, name)
		assert.Equal(t, "stripesim", u.Hostname(), "%s must reach stripesim by its service name", name)
		assert.Equal(t, strconv.Itoa(simPort), u.Port(), "%s: STRIPE_API_BASE port", name)
		assert.Contains(t, strings.Split(env(t, sim, "STRIPESIM_API_KEYS"), ","), env(t, s, "STRIPE_SECRET_KEY"),
			"stripesim must accept %s's key", name)
		assert.True(t, sharesNetwork(s, sim), "%s and stripesim must share a network", name)
	}
}

func sharesNetwork(a, b types.ServiceConfig) bool {
	for n := range a.Networks {
		if _, ok := b.Networks[n]; ok {
			return true
		}
	}
	return false
}

// Prometheus' lifecycle API (POST /-/quit, /-/reload) and admin API (delete
// series, snapshots) change state without authentication; the receivers
// accept samples from anyone. Configuration is reloaded with SIGHUP instead.
func TestPrometheusHasNoStateChangingEndpoints(t *testing.T) {
	p := loadRepo(t)
	prom := service(t, p, "prometheus")
	args := append(append([]string{}, prom.Entrypoint...), prom.Command...)
	for _, flag := range []string{
		"--web.enable-lifecycle",
		"--web.enable-admin-api",
		"--web.enable-remote-write-receiver",
		"--web.enable-otlp-receiver",
	} {
		for _, a := range args {
			assert.False(t, a == flag || strings.HasPrefix(a, flag+"="), "prometheus must not run with %s (it has no authentication)", a)
		}
	}
}

func TestGrafanaAdminPasswordHasNoDefault(t *testing.T) {
	p := loadRepo(t)
	graf := service(t, p, "grafana")
	assert.Equal(t, requiredVars["GRAFANA_ADMIN_PASSWORD"], env(t, graf, "GF_SECURITY_ADMIN_PASSWORD"),
		"grafana's admin password must come from GRAFANA_ADMIN_PASSWORD")
	_, file := graf.Environment["GF_SECURITY_ADMIN_PASSWORD__FILE"]
	assert.False(t, file, "a password file would override GRAFANA_ADMIN_PASSWORD")
	assert.Equal(t, "false", env(t, graf, "GF_USERS_ALLOW_SIGN_UP"))
	if v, ok := graf.Environment["GF_AUTH_ANONYMOUS_ENABLED"]; ok && v != nil {
		assert.NotEqual(t, "true", strings.ToLower(*v), "anonymous access to grafana")
	}

	assertRequired(t, "GRAFANA_ADMIN_PASSWORD")
}

// assertRequired checks that docker-compose.yml does not load when name is
// unset or empty, with an error naming it, and loads when it is set.
func assertRequired(t *testing.T, name string) {
	t.Helper()
	for _, unset := range []bool{true, false} {
		e := repoEnv()
		what := "empty"
		if unset {
			delete(e, name)
			what = "unset"
		} else {
			e[name] = ""
		}
		for _, profiles := range [][]string{nil, {"*"}} {
			_, err := loadRepoWith(t, e, profiles...)
			if assert.Error(t, err, "docker-compose.yml must not load with %s %s (profiles %v): it has no safe default", name, what, profiles) {
				assert.Contains(t, err.Error(), "required variable "+name+" is missing a value", "with %s %s", name, what)
			}
		}
	}
	_, err := loadRepoWith(t, repoEnv())
	assert.NoError(t, err, "control: loads with %s set", name)
}

func TestComposeRequiresSecretsFromTheEnvironment(t *testing.T) {
	require.Contains(t, requiredVars, "GRAFANA_ADMIN_PASSWORD")
	require.Contains(t, requiredVars, "CODEC_KEYS_FILE")

	// What `docker compose` says to an operator who set nothing: every
	// missing variable at once, each with a pointer to the instructions.
	_, err := loadRepoWith(t, types.Mapping{})
	require.Error(t, err, "docker-compose.yml must not load with an empty environment")
	names := make([]string, 0, len(requiredVars))
	for name := range requiredVars {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		msg := "required variable " + name + " is missing a value: "
		if assert.Contains(t, err.Error(), msg, "the error must name %s", name) {
			reason, _, _ := strings.Cut(err.Error()[strings.Index(err.Error(), msg)+len(msg):], "\n")
			assert.Contains(t, reason, "deploy/README.md", "the message for %s must say where to read how to set it", name)
		}
	}

	for _, name := range names {
		t.Run(name, func(t *testing.T) { assertRequired(t, name) })
	}
}

// secretPath is where a service's secret appears in its containers.
func secretPath(s types.ServiceSecretConfig) string {
	switch {
	case s.Target == "":
		return "/run/secrets/" + s.Source
	case path.IsAbs(s.Target):
		return s.Target
	default:
		return "/run/secrets/" + s.Target
	}
}

// providedFile returns the host file that s sees at containerPath, through
// a compose secret or a read-only bind mount, and how.
func providedFile(p *types.Project, s types.ServiceConfig, containerPath string) (host, how string) {
	for _, sec := range s.Secrets {
		if secretPath(sec) == containerPath {
			def, ok := p.Secrets[sec.Source]
			if !ok || bool(def.External) || def.File == "" {
				return "", "secret " + sec.Source + " is not a file"
			}
			return def.File, "secret " + sec.Source
		}
	}
	if h, ro := hostPath(s, containerPath); h != "" {
		if !ro {
			return "", "a writable bind mount"
		}
		return h, "read-only bind mount"
	}
	return "", "nothing"
}

// The payload keys come from a file the operator names (no default, no
// inline copy in the compose file or the environment), mounted read-only
// into exactly the services that encode or decode payloads.
func TestCodecKeysAreRequired(t *testing.T) {
	p := loadRepo(t)
	keysFile := requiredVars["CODEC_KEYS_FILE"]
	found := 0
	for _, name := range codecServices {
		s, err := p.GetService(name)
		if err != nil {
			if name == "codec-server" {
				continue // optional: the stack has no codec server (yet)
			}
			require.NoError(t, err, name)
		}
		found++
		inContainer := env(t, s, "CODEC_KEYS_FILE")
		assert.True(t, path.IsAbs(inContainer), "%s: CODEC_KEYS_FILE %q", name, inContainer)
		host, how := providedFile(p, s, inContainer)
		assert.Equal(t, keysFile, host,
			"%s: CODEC_KEYS_FILE=%s must be the operator's key file (${CODEC_KEYS_FILE}) through a secret or a read-only bind mount, got %s",
			name, inContainer, how)
		if v, ok := s.Environment["CODEC_KEYS"]; ok && v != nil {
			assert.Empty(t, *v, "%s: keys inline in the environment show in `docker inspect`", name)
		}
		_, onVolume := volumeFor(s, inContainer)
		assert.Empty(t, onVolume, "%s: the key file must not live on a data volume", name)
	}
	assert.GreaterOrEqual(t, found, 3)

	// Services that never touch payloads do not get the keys.
	for _, s := range p.AllServices() {
		if slicesContains(codecServices, s.Name) {
			continue
		}
		for _, sec := range s.Secrets {
			assert.NotEqual(t, keysFile, p.Secrets[sec.Source].File, "%s does not need the payload keys", s.Name)
		}
		for _, v := range s.Volumes {
			assert.NotEqual(t, keysFile, v.Source, "%s does not need the payload keys", s.Name)
		}
	}

	assertRequired(t, "CODEC_KEYS_FILE")
}

// bindMountFor returns the bind mount that shows containerPath in s (the
// deepest one).
func bindMountFor(s types.ServiceConfig, containerPath string) (types.ServiceVolumeConfig, bool) {
	var best types.ServiceVolumeConfig
	found := false
	for _, v := range s.Volumes {
		target := strings.TrimSuffix(v.Target, "/")
		if v.Type != types.VolumeTypeBind || (containerPath != target && !strings.HasPrefix(containerPath, target+"/")) {
			continue
		}
		if !found || len(target) > len(best.Target) {
			best, found = v, true
		}
	}
	return best, found
}

// The approver directory (who may approve what, and their public keys) and
// the policy are the insurer's authority: the workers read them from a
// host directory mounted read-only, never from their own writable volume.
func TestWorkerReadsInsurerConfigFromReadOnlyMount(t *testing.T) {
	root := repoRoot(t)
	p := loadRepo(t)
	w := service(t, p, "worker")

	approvers := env(t, w, "APPROVERS_FILE")
	assert.Equal(t, insurerConfigDir+"/approvers.json", approvers)
	host, ro := hostPath(w, approvers)
	require.NotEmpty(t, host, "APPROVERS_FILE %s must be on a bind mount of the operator's config directory", approvers)
	assert.True(t, ro, "the approver directory must be mounted read-only")
	assert.Equal(t, filepath.Join(root, "deploy", "config", "approvers.json"), host,
		"by default the approver directory comes from deploy/config")
	vol, onVolume := volumeFor(w, approvers)
	assert.Empty(t, vol+onVolume, "the approver directory must not be on a data volume the worker writes")

	m, ok := bindMountFor(w, approvers)
	require.True(t, ok)
	assert.NotEqual(t, approvers, strings.TrimSuffix(m.Target, "/"),
		"mount the directory, not the file: claimsctl keygen replaces the file, and a file mount keeps the old inode")
	assert.DirExists(t, m.Source)
	assert.FileExists(t, filepath.Join(m.Source, "README.md"), "deploy/config/README.md says what goes there")
	if assert.NotNil(t, m.Bind, "bind options") {
		assert.False(t, bool(m.Bind.CreateHostPath), "a missing config directory must fail the start, not be created empty")
	}
	for _, s := range p.AllServices() {
		if v, ok := bindMountFor(s, insurerConfigDir); ok && s.Name != "worker" {
			assert.True(t, v.ReadOnly, "%s mounts the insurer's configuration writable", s.Name)
		}
	}

	// POLICY_FILE is optional: empty means the built-in defaults.
	if v, ok := w.Environment["POLICY_FILE"]; ok && v != nil && *v != "" {
		h, ro := hostPath(w, *v)
		assert.NotEmpty(t, h, "POLICY_FILE %s is not mounted", *v)
		assert.True(t, ro, "POLICY_FILE must be read-only")
	}

	// The operator points the stack at a config directory outside the
	// checkout, and at a policy file in it.
	e := repoEnv()
	e["DURABLECLAIMS_CONFIG_DIR"] = "/srv/durableclaims/config"
	e["DURABLECLAIMS_POLICY_FILE"] = insurerConfigDir + "/policy.json"
	custom, err := loadRepoWith(t, e)
	require.NoError(t, err)
	cw := service(t, custom, "worker")
	host, ro = hostPath(cw, env(t, cw, "APPROVERS_FILE"))
	assert.Equal(t, filepath.FromSlash("/srv/durableclaims/config/approvers.json"), host)
	assert.True(t, ro)
	assert.Equal(t, insurerConfigDir+"/policy.json", env(t, cw, "POLICY_FILE"))
	host, ro = hostPath(cw, env(t, cw, "POLICY_FILE"))
	assert.Equal(t, filepath.FromSlash("/srv/durableclaims/config/policy.json"), host)
	assert.True(t, ro)
}

// deploy/config ships only its README: the approver directory and policy are
// the operator's (claimsctl keygen --directory deploy/config/approvers.json),
// and must not end up in this repository by a careless `git add`.
func TestConfigDirKeepsOperatorFilesOutOfGit(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "config")
	require.DirExists(t, dir)
	gi, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
	require.NoError(t, err, "deploy/config/.gitignore keeps the operator's files out of the repository")
	assert.Contains(t, strings.Fields(string(gi)), "*")
	assert.Contains(t, strings.Fields(string(gi)), "!README.md")
}
