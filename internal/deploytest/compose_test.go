// Package deploytest checks the deployment files at the repository root
// (docker-compose.yml, Dockerfile, .dockerignore) and the monitoring files
// under deploy/ (Prometheus config and alert rules, Grafana provisioning and
// dashboard) without a Docker engine: docker-compose.yml is loaded with
// compose-go, exactly as `docker compose` would parse, validate and
// interpolate it, the Dockerfile is parsed as text, and every PromQL
// expression is checked against the metrics the worker exports.
package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

const (
	projectName = "durableclaims"
	imageBinDir = "/usr/local/bin"
	// distroless "nonroot"; the data directories must be owned by it.
	nonrootUID = "65532"
)

// binaries maps each binary the image must ship to the package that builds it.
var binaries = map[string]string{
	"worker":    "./worker",
	"starter":   "./starter",
	"claimsctl": "./claimsctl",
	"stripesim": "./stripesim/cmd/stripesim",
	"modelsim":  "./modelsim/cmd/modelsim", // for MODEL_PROVIDER=openai without an account
	"httpcheck": "./deploy/httpcheck",      // health probe for the distroless image
}

// notShipped lists main packages that are deliberately left out of the image.
var notShipped = map[string]bool{
	"./bench": true, // a benchmark harness for `make bench`, not a service
	"./soak":  true, // the chaos soak for `make soak`, not a service
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

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
	"CODEC_KEYS_FILE":        "/srv/durableclaims-test/codec-keys.json",
	"GRAFANA_ADMIN_PASSWORD": "test-grafana-password",
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
		[]string{"postgresql", "temporal", "temporal-admin-tools", "temporal-ui", "stripesim", "worker", "starter", "claimsctl",
			"prometheus", "grafana"},
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
	case !built && !versionTag.MatchString(tag):
		return fmt.Sprintf("tag %q is not an exact version", tag)
	case !built && regexp.MustCompile(`^v?\d+$`).MatchString(tag):
		return fmt.Sprintf("tag %q is a floating major version", tag)
	}
	return ""
}

func TestCheckImageRef(t *testing.T) {
	for ref, want := range map[string]bool{
		"postgres:16.13":                    true,
		"temporalio/auto-setup:1.29.7":      true,
		"registry:5000/team/app:1.2.3":      true,
		"temporalio/ui:2.51.0@sha256:abcd":  true,
		"postgres":                          false,
		"postgres:latest":                   false,
		"postgres:16":                       false,
		"registry:5000/team/app":            false,
		"temporalio/admin-tools:bookworm-x": false,
		"":                                  false,
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
	assert.True(t, strings.HasPrefix(tmp.Image, "temporalio/auto-setup:1.29."), "temporal image %q", tmp.Image)
	assert.Equal(t, "postgres12", env(t, tmp, "DB"))
	assert.Equal(t, "postgresql", env(t, tmp, "POSTGRES_SEEDS"))
	assert.Equal(t, env(t, pg, "POSTGRES_USER"), env(t, tmp, "POSTGRES_USER"))
	assert.Equal(t, env(t, pg, "POSTGRES_PASSWORD"), env(t, tmp, "POSTGRES_PWD"))
	assert.Equal(t, types.ServiceConditionHealthy, tmp.DependsOn["postgresql"].Condition)
	assert.True(t, publishes(tmp, 7233), "temporal must publish 7233")

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

func TestWorkerWiring(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")

	require.NotNil(t, w.Deploy)
	require.NotNil(t, w.Deploy.Replicas)
	assert.Equal(t, 2, *w.Deploy.Replicas)
	assert.Empty(t, w.ContainerName, "container_name prevents running 2 replicas")
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

// The claims DB and the mail spool are shared state: every worker replica and
// the tools must see the same files.
func TestClaimsStoreIsShared(t *testing.T) {
	p := loadRepo(t)
	w := service(t, p, "worker")
	dbVol, dbTarget := volumeFor(w, env(t, w, "CLAIMS_DB"))
	require.NotEmpty(t, dbVol, "CLAIMS_DB %q must be on a named volume", env(t, w, "CLAIMS_DB"))
	mailVol, _ := volumeFor(w, env(t, w, "MAIL_SPOOL"))
	assert.Equal(t, dbVol, mailVol, "MAIL_SPOOL must be on the claims volume")
	assert.Contains(t, p.VolumeNames(), dbVol)
	assert.Empty(t, p.Volumes[dbVol].Driver, "a local volume: workers share one host")

	for _, name := range []string{"starter", "claimsctl"} {
		s := service(t, p, name)
		assert.Equal(t, env(t, w, "CLAIMS_DB"), env(t, s, "CLAIMS_DB"), name)
		assert.Equal(t, env(t, w, "TEMPORAL_ADDRESS"), env(t, s, "TEMPORAL_ADDRESS"), name)
		assert.Equal(t, env(t, w, "TEMPORAL_NAMESPACE"), env(t, s, "TEMPORAL_NAMESPACE"), name)
		assert.Equal(t, dbVol, namedVolumeAt(s, dbTarget), "%s must mount %s at %s", name, dbVol, dbTarget)
	}
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
	require.Equal(t, []string{"/bin/sh", "-c"}, []string(a.Entrypoint))
	require.Len(t, a.Command, 1)
	script := a.Command[0]

	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	bin := t.TempDir()
	fake := `#!/bin/sh
echo "$*" >> "$FAKE_DIR/calls"
case "$1 $2 $3" in
"operator namespace describe")
	n=$(cat "$FAKE_DIR/describes" 2>/dev/null || echo 0)
	n=$((n + 1))
	echo "$n" > "$FAKE_DIR/describes"
	[ "$n" -ge "$FAKE_READY_AFTER" ] ;;
"operator search-attribute create")
	case "$FAKE_CREATE" in
	ok) echo "Search attributes have been added" ;;
	exists) echo "Error: unable to add search attributes: Search attribute ClaimStatus already exists." >&2; exit 1 ;;
	conflict) echo "Error: search attribute ClaimStatus already exists and has different type Text" >&2; exit 1 ;;
	*) echo "Error: failed reaching server: connection refused" >&2; exit 1 ;;
	esac ;;
*) echo "unexpected: $*" >&2; exit 64 ;;
esac
`
	require.NoError(t, os.WriteFile(filepath.Join(bin, "temporal"), []byte(fake), 0o755))
	cases := []struct {
		name       string
		readyAfter int
		create     string
		wantOK     bool
	}{
		{"fresh namespace", 1, "ok", true},
		{"server not ready at first", 2, "ok", true},
		{"attributes already exist", 1, "exists", true},
		{"existing attribute has another type", 1, "conflict", false},
		{"server error", 1, "down", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			state := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, sh, "-c", script)
			cmd.Env = []string{
				"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"FAKE_DIR=" + state,
				"FAKE_READY_AFTER=" + strconv.Itoa(tc.readyAfter),
				"FAKE_CREATE=" + tc.create,
			}
			for k, v := range a.Environment {
				if v != nil {
					cmd.Env = append(cmd.Env, k+"="+*v)
				}
			}
			out, err := cmd.CombinedOutput()
			if tc.wantOK {
				require.NoError(t, err, "output:\n%s", out)
			} else {
				require.Error(t, err, "output:\n%s", out)
			}
			calls, rerr := os.ReadFile(filepath.Join(state, "calls"))
			require.NoError(t, rerr)
			lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
			require.Len(t, lines, tc.readyAfter+1, "calls:\n%s", calls)
			assert.Equal(t,
				"operator search-attribute create --address temporal:7233 --namespace default --name ClaimStatus --type Keyword --name ApprovalDeadline --type Datetime",
				lines[len(lines)-1])
		})
	}
}

// ---- Dockerfile ----

type instruction struct {
	cmd  string // upper-cased: FROM, RUN, COPY, ...
	args string
}

type stage struct {
	name, image string
	ins         []instruction
}

// parseDockerfile splits a Dockerfile into stages of instructions, joining
// backslash continuations and dropping comments.
func parseDockerfile(text string) []stage {
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			var s stage
			words := strings.Fields(in.args)
			for i := 0; i < len(words); i++ {
				switch {
				case strings.HasPrefix(words[i], "--"):
				case strings.EqualFold(words[i], "AS") && i+1 < len(words):
					s.name = words[i+1]
					i++
				case s.image == "":
					s.image = words[i]
				}
			}
			stages = append(stages, s)
		}
		if len(stages) > 0 {
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// shellWords splits s like a POSIX shell would for simple commands
// (whitespace, single and double quotes, backslash escapes).
func shellWords(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(s):
			inWord = true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

type goBuild struct {
	out, pkg string
	flags    []string
	mounts   []string
}

// goBuilds returns every `go build` in the stage's RUN instructions.
func goBuilds(s stage) []goBuild {
	var builds []goBuild
	for _, in := range s.ins {
		if in.cmd != "RUN" {
			continue
		}
		words := shellWords(in.args)
		var mounts []string
		for len(words) > 0 && strings.HasPrefix(words[0], "--") {
			mounts = append(mounts, words[0])
			words = words[1:]
		}
		var seg []string
		segments := [][]string{}
		for _, w := range words {
			if w == "&&" || w == ";" || w == "||" {
				segments = append(segments, seg)
				seg = nil
				continue
			}
			seg = append(seg, w)
		}
		segments = append(segments, seg)
		for _, seg := range segments {
			if len(seg) < 2 || seg[0] != "go" || seg[1] != "build" {
				continue
			}
			b := goBuild{mounts: mounts}
			for i := 2; i < len(seg); i++ {
				switch {
				case seg[i] == "-o" && i+1 < len(seg):
					b.out = seg[i+1]
					i++
				case strings.HasPrefix(seg[i], "-"):
					b.flags = append(b.flags, seg[i])
				default:
					b.pkg = seg[i]
				}
			}
			builds = append(builds, b)
		}
	}
	return builds
}

func readDockerfile(t *testing.T, root string, p *types.Project) []stage {
	t.Helper()
	var path string
	for _, s := range p.AllServices() {
		if s.Build == nil {
			continue
		}
		df := s.Build.Dockerfile
		if !filepath.IsAbs(df) {
			df = filepath.Join(s.Build.Context, df)
		}
		if path == "" {
			path = df
		}
		assert.Equal(t, path, df, "all built services must use one Dockerfile (one image)")
	}
	require.Equal(t, filepath.Join(root, "Dockerfile"), path)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	stages := parseDockerfile(string(b))
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage build expected")
	return stages
}

func TestBuiltServicesShareOneImage(t *testing.T) {
	root := repoRoot(t)
	p := loadRepo(t)
	images := map[string]bool{}
	var built []string
	for _, s := range p.AllServices() {
		if s.Build == nil {
			continue
		}
		built = append(built, s.Name)
		images[s.Image] = true
		assert.Equal(t, root, s.Build.Context, "%s: build context must be the module root", s.Name)
		assert.DirExists(t, s.Build.Context)
	}
	sort.Strings(built)
	assert.Equal(t, []string{"claimsctl", "starter", "stripesim", "worker"}, built)
	assert.Len(t, images, 1, "built services must share one image name so it is built once: %v", images)
	readDockerfile(t, root, p)
}

var goDirective = regexp.MustCompile(`(?m)^go\s+(\d+)\.(\d+)(?:\.(\d+))?\s*$`)

func TestDockerfileBuildStage(t *testing.T) {
	root := repoRoot(t)
	stages := readDockerfile(t, root, loadRepo(t))
	build := stages[0]

	m := regexp.MustCompile(`^golang:(\d+)\.(\d+)\.(\d+)-bookworm$`).FindStringSubmatch(build.image)
	require.NotNil(t, m, "build stage must be an exact golang:X.Y.Z-bookworm tag, got %q", build.image)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	gm := goDirective.FindStringSubmatch(string(gomod))
	require.NotNil(t, gm, "go.mod go directive")
	assert.GreaterOrEqual(t, version(m[1:]), version(gm[1:]),
		"builder Go %s.%s.%s is older than go.mod's go %s.%s", m[1], m[2], m[3], gm[1], gm[2])

	envs := map[string]string{}
	for _, in := range build.ins {
		if in.cmd == "ENV" {
			for _, kv := range shellWords(in.args) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					envs[k] = v
				}
			}
		}
	}
	assert.Equal(t, "0", envs["CGO_ENABLED"], "static binaries for distroless/static")

	builds := goBuilds(build)
	byOut := map[string]goBuild{}
	for _, b := range builds {
		assert.Contains(t, b.flags, "-trimpath", "go build %s", b.pkg)
		assert.Contains(t, strings.Join(b.mounts, " "), "type=cache,target=/go/pkg/mod", "go build %s: module cache mount", b.pkg)
		require.True(t, strings.HasPrefix(b.out, "/out/"), "go build %s -o %q", b.pkg, b.out)
		byOut[strings.TrimPrefix(b.out, "/out/")] = b
	}
	for bin, pkg := range binaries {
		if assert.Contains(t, byOut, bin, "Dockerfile must build %s", bin) {
			assert.Equal(t, pkg, byOut[bin].pkg, "package for %s", bin)
		}
	}

	// Every package the Dockerfile builds that already exists must be a main
	// package, and every main package of the repo's binary directories must
	// be built.
	built := map[string]bool{}
	for _, b := range builds {
		built[b.pkg] = true
		hasGo, isMain := goPackage(t, filepath.Join(root, filepath.FromSlash(b.pkg)))
		if !hasGo {
			t.Logf("%s has no Go files yet; docker build needs them", b.pkg)
			continue
		}
		assert.True(t, isMain, "%s is built into the image but is not package main", b.pkg)
	}
	for _, pkg := range mainPackages(t, root) {
		assert.True(t, built[pkg] || notShipped[pkg], "main package %s is not built by the Dockerfile (build it, or list it in notShipped)", pkg)
	}
}

func version(parts []string) int {
	v := 0
	for i := 0; i < 3; i++ {
		n := 0
		if i < len(parts) && parts[i] != "" {
			n, _ = strconv.Atoi(parts[i])
		}
		v = v*1000 + n
	}
	return v
}

var packageMain = regexp.MustCompile(`(?m)^package main\b`)

// goPackage reports whether dir holds non-test Go files and whether they are
// package main. A missing directory has no Go files.
func goPackage(t *testing.T, dir string) (hasGo, isMain bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		hasGo = true
		if packageMain.Match(b) {
			return true, true
		}
	}
	return hasGo, false
}

// mainPackages lists the repo's binary directories: top-level directories
// and <dir>/cmd/<name> directories that hold package main.
func mainPackages(t *testing.T, root string) []string {
	t.Helper()
	var candidates []string
	top, err := os.ReadDir(root)
	require.NoError(t, err)
	for _, e := range top {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" || e.Name() == "vendor" {
			continue
		}
		candidates = append(candidates, e.Name())
		cmds, _ := filepath.Glob(filepath.Join(root, e.Name(), "cmd", "*"))
		for _, c := range cmds {
			rel, err := filepath.Rel(root, c)
			require.NoError(t, err)
			candidates = append(candidates, filepath.ToSlash(rel))
		}
	}
	var mains []string
	for _, c := range candidates {
		if _, isMain := goPackage(t, filepath.Join(root, c)); isMain {
			mains = append(mains, "./"+c)
		}
	}
	return mains
}

func TestDockerfileRuntimeStage(t *testing.T) {
	root := repoRoot(t)
	p := loadRepo(t)
	stages := readDockerfile(t, root, p)
	build, final := stages[0], stages[len(stages)-1]
	require.NotEmpty(t, build.name, "build stage needs a name for COPY --from")

	assert.Empty(t, checkImageRef(final.image, true), "runtime image %q", final.image)
	assert.True(t, strings.HasPrefix(final.image, "gcr.io/distroless/static-debian12:") || strings.HasPrefix(final.image, "debian:bookworm"),
		"runtime image %q", final.image)

	var copiesBins bool
	var chownCopies []string
	var user string
	for _, in := range final.ins {
		words := shellWords(in.args)
		switch in.cmd {
		case "COPY":
			if len(words) >= 3 && words[0] == "--from="+build.name && strings.HasPrefix(words[1], "/out") &&
				strings.TrimSuffix(words[len(words)-1], "/") == imageBinDir {
				copiesBins = true
			}
			for _, w := range words {
				if strings.HasPrefix(w, "--chown="+nonrootUID) {
					chownCopies = append(chownCopies, strings.TrimSuffix(words[len(words)-1], "/"))
				}
			}
		case "USER":
			user = in.args
		}
	}
	assert.True(t, copiesBins, "runtime stage must COPY --from=%s /out/ %s/", build.name, imageBinDir)
	assert.NotContains(t, []string{"", "0", "root", "0:0"}, user, "runtime must not run as root")

	// Compose commands and healthchecks must name binaries the image has.
	builtBins := map[string]bool{}
	for _, b := range goBuilds(build) {
		builtBins[imageBinDir+"/"+strings.TrimPrefix(b.out, "/out/")] = true
	}
	var mkdirs string
	for _, in := range build.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "mkdir") {
			mkdirs += " " + in.args
		}
	}
	for _, s := range p.AllServices() {
		if s.Build == nil {
			continue
		}
		require.NotEmpty(t, s.Command, "%s must choose its binary", s.Name)
		assert.True(t, builtBins[s.Command[0]], "%s runs %s, which the image does not build", s.Name, s.Command[0])
		if s.HealthCheck != nil && len(s.HealthCheck.Test) > 1 && s.HealthCheck.Test[0] == "CMD" {
			assert.True(t, builtBins[s.HealthCheck.Test[1]], "%s healthcheck runs %s, which the image does not build", s.Name, s.HealthCheck.Test[1])
		}
		// Named volumes are seeded from the image: the mount point must exist
		// there owned by the nonroot user, or SQLite cannot create its files.
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeVolume {
				continue
			}
			assert.Contains(t, mkdirs, v.Target, "%s: build stage must create %s", s.Name, v.Target)
			var owned bool
			for _, dst := range chownCopies {
				owned = owned || v.Target == dst || strings.HasPrefix(v.Target, dst+"/")
			}
			assert.True(t, owned, "%s: %s must be copied with --chown=%s", s.Name, v.Target, nonrootUID)
		}
	}
}

func TestDockerignoreKeepsSources(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	require.NoError(t, err)
	needed := []string{"go.mod", "go.sum"}
	for _, pkg := range binaries {
		needed = append(needed, strings.TrimPrefix(pkg, "./")+"/main.go")
	}
	for _, line := range strings.Split(string(b), "\n") {
		pat := strings.TrimSpace(line)
		if pat == "" || strings.HasPrefix(pat, "#") || strings.HasPrefix(pat, "!") {
			continue
		}
		for _, n := range needed {
			assert.False(t, ignored(pat, n), ".dockerignore pattern %q excludes %s", pat, n)
		}
	}
	assert.True(t, ignored("**/*.db", "var/claims.db"))
	assert.True(t, ignored("var", "var/mail/x.eml"))
	assert.False(t, ignored("var", "worker/main.go"))
}

// ignored approximates Docker's matcher: a pattern excludes a path if it
// matches the path or one of its parent directories; "**/" matches any depth.
func ignored(pattern, path string) bool {
	pattern = strings.TrimPrefix(filepath.Clean(pattern), "/")
	parts := strings.Split(path, "/")
	for i := 1; i <= len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		if ok, _ := filepath.Match(pattern, prefix); ok {
			return true
		}
		if rest, ok := strings.CutPrefix(pattern, "**/"); ok {
			if m, _ := filepath.Match(rest, parts[i-1]); m {
				return true
			}
		}
	}
	return false
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

func TestParseDockerfileCatchesMissingBinary(t *testing.T) {
	stages := parseDockerfile(`FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
# comment
RUN --mount=type=cache,target=/go/pkg/mod \
    go build -trimpath -ldflags="-s -w" -o /out/worker ./worker && \
    go build -trimpath -o /out/starter ./starter
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
`)
	require.Len(t, stages, 2)
	assert.Equal(t, "build", stages[0].name)
	assert.Equal(t, "golang:1.26.8-bookworm", stages[0].image)
	builds := goBuilds(stages[0])
	require.Len(t, builds, 2)
	assert.Equal(t, goBuild{out: "/out/worker", pkg: "./worker", flags: []string{"-trimpath", "-ldflags=-s -w"}, mounts: []string{"--mount=type=cache,target=/go/pkg/mod"}}, builds[0])
	assert.Equal(t, "./starter", builds[1].pkg)
	for _, b := range builds {
		assert.NotEqual(t, "./claimsctl", b.pkg)
	}
}

// ---- Prometheus and Grafana ----

const (
	workerJob     = "worker"        // scrape job of the worker replicas in prometheus.yml
	dashboardUID  = "durableclaims" // deploy/grafana/dashboards/durableclaims.json
	datasourceUID = "prometheus"    // provisioned Prometheus datasource
)

var (
	promDir      = filepath.Join("deploy", "prometheus")
	grafanaDir   = filepath.Join("deploy", "grafana")
	dashboardRel = filepath.Join(grafanaDir, "dashboards", "durableclaims.json")
)

// knownMetrics is every series the alerts and the dashboard may use: what a
// worker's /metrics serves (Temporal SDK, durableclaims' own, Go runtime)
// plus Prometheus' `up`. Each maps its labels to their allowed values (nil:
// any value). A name that is not here (a typo, a unit suffix the exporter
// does not add) would make a panel silently empty or an alert never fire.
//
// Histograms are listed by base name and expand to _bucket (with le), _count
// and _sum. The history size histogram is claim_history_bytes: its name
// already ends in the unit, so the OpenTelemetry Prometheus exporter adds no
// second "_bytes" (claim_history_bytes_bytes_bucket would be unknown here).
var knownMetrics = func() map[string]map[string][]string {
	sdk := []string{"namespace", "client_name", "worker_type", "workflow_type", "activity_type", "task_queue"}
	temporal := append(append([]string{}, sdk...), "poller_type", "operation", "failure_reason", "status_code")
	steps := []string{"intake", "triage", "coverage", "assess", "approval", "pay", "notify", "close", "audit"}
	tools := []string{"stripe", "email", "ledger"}
	m := map[string]map[string][]string{}
	add := func(name string, base []string, labels map[string][]string) {
		l := map[string][]string{"job": {workerJob}, "instance": nil}
		for _, b := range base {
			l[b] = nil
		}
		for k, v := range labels {
			l[k] = v
		}
		m[name] = l
	}
	hist := func(name string, base []string, labels map[string][]string) {
		add(name+"_count", base, labels)
		add(name+"_sum", base, labels)
		add(name+"_bucket", base, labels)
		m[name+"_bucket"]["le"] = nil
	}
	// Temporal SDK (go.temporal.io/sdk internal/common/metrics names).
	for _, c := range []string{"temporal_workflow_completed_total", "temporal_workflow_failed_total",
		"temporal_workflow_canceled_total", "temporal_workflow_continue_as_new_total",
		"temporal_activity_execution_failed_total", "temporal_workflow_task_execution_failed_total",
		"temporal_request_failure_total", "temporal_long_request_failure_total"} {
		add(c, temporal, nil)
	}
	for _, g := range []string{"temporal_sticky_cache_size", "temporal_worker_task_slots_available",
		"temporal_worker_task_slots_used", "temporal_num_pollers"} {
		add(g, temporal, nil)
	}
	for _, h := range []string{"temporal_activity_execution_latency_seconds", "temporal_activity_schedule_to_start_latency_seconds",
		"temporal_workflow_task_execution_latency_seconds", "temporal_workflow_task_schedule_to_start_latency_seconds",
		"temporal_workflow_task_replay_latency_seconds", "temporal_workflow_endtoend_latency_seconds",
		"temporal_activity_succeed_endtoend_latency_seconds", "temporal_request_latency_seconds"} {
		hist(h, temporal, nil)
	}
	// durableclaims (internal/metrics); recorded through the SDK handler,
	// so they carry its tags too.
	add("idempotency_replays_total", sdk, map[string][]string{"tool": tools, "by": {"lookup", "provider"}})
	add("idempotency_conflicts_total", sdk, map[string][]string{"tool": tools})
	add("claim_resumes_total", sdk, map[string][]string{"kind": {"activity", "replay"}})
	add("claims_completed_total", sdk, map[string][]string{"status": {"paid", "rejected", "withdrawn", "expired", "dead-lettered"}})
	add("approvals_waiting", sdk, map[string][]string{"stage": {"waiting", "escalated"}})
	add("approvals_escalated_total", sdk, nil)
	add("approvals_expired_total", sdk, nil)
	hist("claim_step_duration_seconds", sdk, map[string][]string{"step": steps, "outcome": nil})
	hist("claim_history_bytes", sdk, map[string][]string{"step": steps})
	hist("claim_history_events", sdk, map[string][]string{"step": steps})
	add("claim_history_budget_exceeded_total", sdk, map[string][]string{"step": steps})
	add("reconciliation_discrepancies_total", sdk, map[string][]string{"category": {"missing", "orphaned", "duplicate", "amount_mismatch"}})
	add("reconciliation_last_run_unmatched", sdk, nil)
	add("model_calls_total", sdk, map[string][]string{"provider": nil, "step": {"triage", "assess"}})
	add("model_tokens_total", sdk, map[string][]string{"provider": nil, "direction": {"in", "out"}})
	add("model_cost_micros_total", sdk, map[string][]string{"provider": nil})
	add("triage_tool_calls_total", sdk, map[string][]string{"tool": {"lookup_policy", "get_document_text", "prior_claims", "flag_fraud_signal", "unknown"},
		"outcome": {"ok", "refused"}})
	add("triage_reviews_total", sdk, map[string][]string{"cause": {"cap", "model"}})
	// Go runtime and process collectors; Prometheus' own per-target series.
	add("go_goroutines", nil, nil)
	add("process_resident_memory_bytes", nil, nil)
	add("up", nil, nil)
	return m
}()

// promFunctions are the PromQL functions and aggregations the files may call.
var promFunctions = map[string]bool{}

func init() {
	for _, f := range strings.Fields(`sum min max avg count count_values stddev stdvar topk bottomk quantile group
		rate irate increase delta idelta deriv resets changes histogram_quantile absent absent_over_time
		vector scalar time timestamp clamp clamp_min clamp_max abs ceil floor round sqrt exp ln log2 log10
		sort sort_desc label_replace label_join predict_linear
		avg_over_time min_over_time max_over_time sum_over_time count_over_time last_over_time quantile_over_time`) {
		promFunctions[f] = true
	}
}

var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true, "inf": true, "nan": true,
}

type promToken struct {
	kind byte // 'i' identifier, 's' string, 'n' number or duration, 'v' Grafana variable, 'p' punctuation
	text string
}

// lexPromQL splits a PromQL expression (with Grafana's $variables) into tokens.
func lexPromQL(expr string) ([]promToken, error) {
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
	}
	var toks []promToken
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
				}
				b.WriteByte(expr[j])
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			toks = append(toks, promToken{'s', b.String()})
			i = j + 1
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				k := strings.IndexByte(expr[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unterminated ${ at %d", i)
				}
				j += k + 1
			} else {
				for j < len(expr) && isIdent(expr[j], false) && expr[j] != ':' {
					j++
				}
			}
			toks = append(toks, promToken{'v', expr[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			j := i
			for j < len(expr) && (expr[j] == '.' || isIdent(expr[j], false) && expr[j] != ':' ||
				(expr[j] == '+' || expr[j] == '-') && (expr[j-1] == 'e' || expr[j-1] == 'E')) {
				j++
			}
			toks = append(toks, promToken{'n', expr[i:j]})
			i = j
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			toks = append(toks, promToken{'i', expr[i:j]})
			i = j
		default:
			op := string(c)
			if i+1 < len(expr) {
				switch two := expr[i : i+2]; two {
				case "=~", "!~", "!=", "==", ">=", "<=":
					op = two
				}
			}
			if len(op) == 1 && !strings.Contains("(){}[],+-*/%^=<>@:", op) {
				return nil, fmt.Errorf("unexpected %q at %d", op, i)
			}
			toks = append(toks, promToken{'p', op})
			i += len(op)
		}
	}
	return toks, nil
}

type promMatcher struct{ label, op, value string }

type promSelector struct {
	metric   string
	matchers []promMatcher
}

// parsePromQL extracts the series selectors and the grouping labels (by,
// without, on, ignoring, group_left/right) of expr, and reports calls of
// unknown functions, malformed selectors and unbalanced brackets. It is not
// a full PromQL parser: it is exactly strict enough for what the dashboards
// and alerts need to be right about, which is names.
func parsePromQL(expr string) (sels []promSelector, grouping []string, problems []string) {
	toks, err := lexPromQL(expr)
	if err != nil {
		return nil, nil, []string{err.Error()}
	}
	next := func(i int) promToken {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return promToken{}
	}
	var stack []string
	closer := map[string]string{"(": ")", "[": "]", "{": "}"}
	for i := 0; i < len(toks); i++ {
		tok := toks[i]
		switch {
		case tok.kind == 'i' && promKeywords[tok.text]:
			switch tok.text {
			case "by", "without", "on", "ignoring", "group_left", "group_right":
				if next(i).text != "(" {
					if tok.text == "group_left" || tok.text == "group_right" {
						continue
					}
					problems = append(problems, fmt.Sprintf("%s without a label list", tok.text))
					continue
				}
				j := i + 2
				for ; j < len(toks) && toks[j].text != ")"; j++ {
					switch {
					case toks[j].kind == 'i':
						grouping = append(grouping, toks[j].text)
					case toks[j].text != ",":
						problems = append(problems, fmt.Sprintf("%s (...): unexpected %q", tok.text, toks[j].text))
					}
				}
				if j >= len(toks) {
					problems = append(problems, fmt.Sprintf("%s (...) is not closed", tok.text))
				}
				i = j
			}
		case tok.kind == 'i' && (next(i).text == "(" || next(i).text == "by" || next(i).text == "without"):
			if !promFunctions[tok.text] {
				problems = append(problems, fmt.Sprintf("unknown function %q", tok.text))
			}
		case tok.kind == 'i':
			sel := promSelector{metric: tok.text}
			if next(i).text == "{" {
				j := i + 2
				for ; j < len(toks) && toks[j].text != "}"; j++ {
					if toks[j].text == "," {
						continue
					}
					if j+2 >= len(toks) || toks[j].kind != 'i' || toks[j+1].kind != 'p' ||
						!map[string]bool{"=": true, "!=": true, "=~": true, "!~": true}[toks[j+1].text] ||
						(toks[j+2].kind != 's' && toks[j+2].kind != 'v') {
						problems = append(problems, fmt.Sprintf("%s: malformed label matcher at %q", tok.text, toks[j].text))
						break
					}
					sel.matchers = append(sel.matchers, promMatcher{toks[j].text, toks[j+1].text, toks[j+2].text})
					j += 2
				}
				if j >= len(toks) || toks[j].text != "}" {
					problems = append(problems, fmt.Sprintf("%s: selector is not closed", tok.text))
					for j < len(toks) && toks[j].text != "}" {
						j++
					}
				}
				i = j
			}
			sels = append(sels, sel)
		case tok.text == "{":
			problems = append(problems, "a selector without a metric name")
			stack = append(stack, "{")
		case tok.text == "(" || tok.text == "[":
			stack = append(stack, tok.text)
		case tok.text == ")" || tok.text == "]" || tok.text == "}":
			if len(stack) == 0 || closer[stack[len(stack)-1]] != tok.text {
				problems = append(problems, fmt.Sprintf("unbalanced %q", tok.text))
				continue
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		problems = append(problems, fmt.Sprintf("unclosed %q", strings.Join(stack, "")))
	}
	return sels, grouping, problems
}

var plainLabelValue = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// checkPromQL returns the metrics expr reads and what is wrong with it:
// unknown metrics, functions or labels, and label values the worker never
// exports.
func checkPromQL(expr string) (metrics []string, problems []string) {
	sels, grouping, problems := parsePromQL(expr)
	if len(sels) == 0 && len(problems) == 0 {
		problems = append(problems, "reads no metric")
	}
	allowed := map[string]bool{}
	for _, s := range sels {
		metrics = append(metrics, s.metric)
		labels, ok := knownMetrics[s.metric]
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown metric %q", s.metric))
			continue
		}
		for l := range labels {
			allowed[l] = true
		}
		for _, m := range s.matchers {
			values, ok := labels[m.label]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s has no label %q", s.metric, m.label))
				continue
			}
			if values == nil || strings.Contains(m.value, "$") {
				continue
			}
			alts := []string{m.value}
			if m.op == "=~" || m.op == "!~" {
				alts = strings.Split(m.value, "|")
			}
			for _, v := range alts {
				if (m.op == "=" || m.op == "!=" || plainLabelValue.MatchString(v)) && !slicesContains(values, v) {
					problems = append(problems, fmt.Sprintf("%s{%s}: %q is not one of %v", s.metric, m.label, v, values))
				}
			}
		}
	}
	for _, g := range grouping {
		if len(allowed) > 0 && !allowed[g] {
			problems = append(problems, fmt.Sprintf("grouping label %q is on none of %v", g, metrics))
		}
	}
	return metrics, problems
}

func slicesContains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func TestPromQLChecker(t *testing.T) {
	good := []string{
		`sum by (tool) (increase(idempotency_conflicts_total[15m])) > 0 or sum by (tool) (idempotency_conflicts_total unless idempotency_conflicts_total offset 15m) > 0`,
		`histogram_quantile(0.95, sum by (le, step) (rate(claim_history_bytes_bucket{job="worker", instance=~"$instance"}[$__rate_interval])))`,
		`sum(rate(claim_resumes_total{kind="activity"}[15m])) / sum(rate(claims_completed_total[15m])) > 0.2`,
		`absent(up{job="worker"} == 1)`,
		`60 * sum by (tool, by) (rate(idempotency_replays_total{tool=~"stripe|email"}[5m]))`,
		`claims_completed_total{status!="paid"} / ignoring(status) group_left sum(claims_completed_total) # comment`,
		`sum(idempotency_conflicts_total{job="worker"}) or vector(0)`,
	}
	for _, e := range good {
		_, problems := checkPromQL(e)
		assert.Empty(t, problems, e)
	}
	bad := map[string]string{
		`rate(claims_complete_total[5m])`:                                      "unknown metric",
		`rat(claims_completed_total[5m])`:                                      "unknown function",
		`claims_completed_total{status="dead_lettered"}`:                       "not one of",
		`claims_completed_total{stauts="paid"}`:                                "no label",
		`idempotency_replays_total{tool=~"stripe|mail"}`:                       "not one of",
		`up{job="prometheus"}`:                                                 "not one of",
		`sum by (tool) (claim_resumes_total)`:                                  "grouping label",
		`sum(rate(claims_completed_total[5m])`:                                 "unclosed",
		`claims_completed_total{status="paid"`:                                 "not closed",
		`claims_completed_total{status=paid}`:                                  "malformed",
		`{__name__="up"}`:                                                      "without a metric name",
		`histogram_quantile(0.95, rate(claim_history_bytes_bytes_bucket[5m]))`: "unknown metric",
		`rate(claims_completed_total[5m]))`:                                    "unbalanced",
		`claims_completed_total{status="paid}`:                                 "unterminated",
		`vector(1)`:                                                            "reads no metric",
	}
	for e, want := range bad {
		_, problems := checkPromQL(e)
		assert.Contains(t, strings.Join(problems, "; "), want, e)
	}
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

var promDuration = regexp.MustCompile(`^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$`)

// parsePromDuration parses Prometheus' duration syntax (1h30m, 15s, 1d).
func parsePromDuration(s string) (time.Duration, error) {
	m := promDuration.FindStringSubmatch(s)
	if s == "" || m == nil {
		return 0, fmt.Errorf("%q is not a Prometheus duration", s)
	}
	units := []time.Duration{365 * 24 * time.Hour, 7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second, time.Millisecond}
	var d time.Duration
	for i, part := range m[1:] {
		if part == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimRight(part, "ywdhms"))
		if err != nil {
			return 0, err
		}
		d += time.Duration(n) * units[i]
	}
	return d, nil
}

// decodeStrict decodes YAML the way Prometheus and Grafana read their files:
// an unknown (misspelt) key is an error, not silently ignored.
func decodeStrict(doc []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	return dec.Decode(v)
}

type promConfig struct {
	Global struct {
		ScrapeInterval     string            `yaml:"scrape_interval"`
		ScrapeTimeout      string            `yaml:"scrape_timeout"`
		EvaluationInterval string            `yaml:"evaluation_interval"`
		ExternalLabels     map[string]string `yaml:"external_labels"`
	} `yaml:"global"`
	RuleFiles     []string     `yaml:"rule_files"`
	Alerting      yaml.Node    `yaml:"alerting"`
	ScrapeConfigs []promScrape `yaml:"scrape_configs"`
}

type promScrape struct {
	JobName        string `yaml:"job_name"`
	MetricsPath    string `yaml:"metrics_path"`
	Scheme         string `yaml:"scheme"`
	ScrapeInterval string `yaml:"scrape_interval"`
	ScrapeTimeout  string `yaml:"scrape_timeout"`
	DNSSDConfigs   []struct {
		Names           []string `yaml:"names"`
		Type            string   `yaml:"type"`
		Port            int      `yaml:"port"`
		RefreshInterval string   `yaml:"refresh_interval"`
	} `yaml:"dns_sd_configs"`
	StaticConfigs []struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels"`
	} `yaml:"static_configs"`
	RelabelConfigs       yaml.Node `yaml:"relabel_configs"`
	MetricRelabelConfigs yaml.Node `yaml:"metric_relabel_configs"`
}

// checkPromConfig checks that prometheus.yml scrapes every replica of the
// worker service on its metrics port every 15 s.
func checkPromConfig(doc []byte, workerService string, metricsPort int) (cfg promConfig, problems []string) {
	if err := decodeStrict(doc, &cfg); err != nil {
		return cfg, []string{err.Error()}
	}
	var jobs []promScrape
	for _, sc := range cfg.ScrapeConfigs {
		if sc.JobName == workerJob {
			jobs = append(jobs, sc)
		}
	}
	if len(jobs) != 1 {
		return cfg, []string{fmt.Sprintf("want one scrape job %q, have %d", workerJob, len(jobs))}
	}
	job := jobs[0]
	interval := job.ScrapeInterval
	if interval == "" {
		interval = cfg.Global.ScrapeInterval
	}
	if d, err := parsePromDuration(interval); err != nil || d != 15*time.Second {
		problems = append(problems, fmt.Sprintf("job %s scrapes every %q, want 15s", workerJob, interval))
	}
	if job.MetricsPath != "" && job.MetricsPath != "/metrics" {
		problems = append(problems, fmt.Sprintf("metrics_path %q: the worker serves /metrics", job.MetricsPath))
	}
	if job.Scheme != "" && job.Scheme != "http" {
		problems = append(problems, fmt.Sprintf("scheme %q: the worker serves plain http", job.Scheme))
	}
	if len(job.StaticConfigs) > 0 {
		problems = append(problems, "static targets reach one replica only; discover the replicas with dns_sd_configs")
	}
	if len(job.DNSSDConfigs) == 0 {
		problems = append(problems, "no dns_sd_configs: the replicas are not discovered")
	}
	for _, sd := range job.DNSSDConfigs {
		// Compose's DNS serves A records per replica, no SRV records, and
		// Prometheus' default type is SRV.
		if sd.Type != "A" {
			problems = append(problems, fmt.Sprintf("dns_sd type %q: compose DNS answers A records", sd.Type))
		}
		if sd.Port != metricsPort {
			problems = append(problems, fmt.Sprintf("dns_sd port %d, but the worker's METRICS_ADDR listens on %d", sd.Port, metricsPort))
		}
		if len(sd.Names) != 1 || sd.Names[0] != workerService {
			problems = append(problems, fmt.Sprintf("dns_sd names %v, want [%s]", sd.Names, workerService))
		}
	}
	if len(cfg.RuleFiles) == 0 {
		problems = append(problems, "no rule_files: alerts are not loaded")
	}
	return cfg, problems
}

type promRule struct {
	Alert         string            `yaml:"alert"`
	Record        string            `yaml:"record"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for"`
	KeepFiringFor string            `yaml:"keep_firing_for"`
	Labels        map[string]string `yaml:"labels"`
	Annotations   map[string]string `yaml:"annotations"`
}

type promRuleFile struct {
	Groups []struct {
		Name     string     `yaml:"name"`
		Interval string     `yaml:"interval"`
		Limit    int        `yaml:"limit"`
		Rules    []promRule `yaml:"rules"`
	} `yaml:"groups"`
}

// alertSpecs lists the alerts alerts.yml must define: severity, the
// metrics each must read, and its `for` (empty: fires at once).
var alertSpecs = map[string]struct {
	severity string
	reads    []string
	forDur   string
}{
	"IdempotencyConflict":   {"critical", []string{"idempotency_conflicts_total"}, ""},
	"ClaimsDeadLettered":    {"warning", []string{"claims_completed_total"}, ""},
	"PaymentDiscrepancy":    {"critical", []string{"reconciliation_last_run_unmatched", "reconciliation_discrepancies_total"}, ""},
	"ApprovalsPastDeadline": {"warning", []string{"approvals_waiting"}, "1h"},
	"ResumeRateHigh":        {"warning", []string{"claim_resumes_total", "claims_completed_total"}, "15m"},
	"HistoryBudgetExceeded": {"warning", []string{"claim_history_budget_exceeded_total"}, ""},
	"ModelAnswersUnusable":  {"warning", []string{"triage_reviews_total"}, ""},
	"WorkerDown":            {"critical", []string{"up"}, "1m"},
	"WorkersAbsent":         {"critical", []string{"up"}, "2m"},
}

// checkRules checks an alert rule file: the expected alerts, each with a
// severity, a summary and a runbook description, over known metrics only.
// It returns the metrics the rules read.
func checkRules(doc []byte) (read map[string]bool, problems []string) {
	var rf promRuleFile
	if err := decodeStrict(doc, &rf); err != nil {
		return nil, []string{err.Error()}
	}
	read = map[string]bool{}
	seen := map[string]int{}
	for _, g := range rf.Groups {
		if g.Name == "" {
			problems = append(problems, "a rule group without a name")
		}
		for _, r := range g.Rules {
			if r.Alert == "" || r.Record != "" {
				problems = append(problems, fmt.Sprintf("rule %q%q: only alerting rules expected", r.Alert, r.Record))
				continue
			}
			seen[r.Alert]++
			metrics, ps := checkPromQL(r.Expr)
			for _, p := range ps {
				problems = append(problems, fmt.Sprintf("%s: %s", r.Alert, p))
			}
			for _, m := range metrics {
				read[m] = true
			}
			if r.For != "" {
				if _, err := parsePromDuration(r.For); err != nil {
					problems = append(problems, fmt.Sprintf("%s: for: %v", r.Alert, err))
				}
			}
			for _, key := range []string{"summary", "description"} {
				text := strings.TrimSpace(r.Annotations[key])
				if text == "" {
					problems = append(problems, fmt.Sprintf("%s: no %s annotation", r.Alert, key))
				}
				if strings.Count(text, "{{") != strings.Count(text, "}}") {
					problems = append(problems, fmt.Sprintf("%s: %s has unbalanced {{ }}", r.Alert, key))
				}
			}
			spec, ok := alertSpecs[r.Alert]
			if !ok {
				problems = append(problems, fmt.Sprintf("unexpected alert %s: add it to alertSpecs", r.Alert))
				continue
			}
			if r.Labels["severity"] != spec.severity {
				problems = append(problems, fmt.Sprintf("%s: severity %q, want %q", r.Alert, r.Labels["severity"], spec.severity))
			}
			if r.For != spec.forDur {
				problems = append(problems, fmt.Sprintf("%s: for %q, want %q", r.Alert, r.For, spec.forDur))
			}
			for _, m := range spec.reads {
				if !slicesContains(metrics, m) {
					problems = append(problems, fmt.Sprintf("%s: must read %s", r.Alert, m))
				}
			}
		}
	}
	for name := range alertSpecs {
		if seen[name] != 1 {
			problems = append(problems, fmt.Sprintf("alert %s defined %d times, want once", name, seen[name]))
		}
	}
	sort.Strings(problems)
	return read, problems
}

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  *grafanaDS `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string     `json:"refId"`
		Expr       string     `json:"expr"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // of a collapsed row
}

type grafanaDashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDS      `json:"datasource"`
			Current    struct {
				Value json.RawMessage `json:"value"`
			} `json:"current"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardMetrics are the series the dashboard must chart.
var dashboardMetrics = []string{
	"claims_completed_total", "claim_step_duration_seconds_bucket",
	"claim_history_bytes_bucket", "claim_history_events_bucket", "claim_history_budget_exceeded_total",
	"idempotency_replays_total", "idempotency_conflicts_total", "claim_resumes_total",
	"approvals_waiting", "approvals_escalated_total", "approvals_expired_total",
	"reconciliation_discrepancies_total", "reconciliation_last_run_unmatched",
	"go_goroutines", "process_resident_memory_bytes", "up",
	"temporal_activity_execution_latency_seconds_bucket", "temporal_activity_execution_failed_total",
	"temporal_activity_schedule_to_start_latency_seconds_bucket", "temporal_worker_task_slots_available",
}

var labelValuesQuery = regexp.MustCompile(`^\s*label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// checkDashboard checks a dashboard JSON: its uid, that every panel queries
// the Prometheus datasource dsUID (directly or through the DS_PROMETHEUS
// variable) with expressions over known metrics, and that panels do not
// overlap. It returns the metrics the panels read.
func checkDashboard(doc []byte, dsUID string) (read map[string]bool, problems []string) {
	var d grafanaDashboard
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, []string{err.Error()}
	}
	if d.UID != dashboardUID {
		problems = append(problems, fmt.Sprintf("uid %q, want %q", d.UID, dashboardUID))
	}
	if d.Title == "" {
		problems = append(problems, "no title")
	}
	if d.SchemaVersion < 36 {
		problems = append(problems, fmt.Sprintf("schemaVersion %d predates datasource uids (36)", d.SchemaVersion))
	}
	read = map[string]bool{}
	vars := map[string]string{} // datasource variable -> uid it selects
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			_ = json.Unmarshal(v.Query, &q)
			if q != "prometheus" {
				problems = append(problems, fmt.Sprintf("variable %s: datasource type %q, want prometheus", v.Name, q))
			}
			var cur string
			_ = json.Unmarshal(v.Current.Value, &cur)
			vars[v.Name] = cur
		case "query":
			var q string
			if json.Unmarshal(v.Query, &q) != nil {
				var obj struct{ Query string }
				_ = json.Unmarshal(v.Query, &obj)
				q = obj.Query
			}
			m := labelValuesQuery.FindStringSubmatch(q)
			if m == nil {
				problems = append(problems, fmt.Sprintf("variable %s: query %q is not label_values(selector, label)", v.Name, q))
				continue
			}
			metrics, ps := checkPromQL(m[1])
			for _, p := range ps {
				problems = append(problems, fmt.Sprintf("variable %s: %s", v.Name, p))
			}
			for _, mt := range metrics {
				if _, ok := knownMetrics[mt][m[2]]; !ok {
					problems = append(problems, fmt.Sprintf("variable %s: %s has no label %q", v.Name, mt, m[2]))
				}
			}
		}
	}
	// resolve returns the uid a panel's datasource selects: literal, or the
	// current value of a datasource variable ($NAME or ${NAME}).
	resolve := func(ds *grafanaDS) string {
		uid, name := ds.UID, ""
		switch {
		case strings.HasPrefix(uid, "${") && strings.HasSuffix(uid, "}"):
			name = uid[2 : len(uid)-1]
		case strings.HasPrefix(uid, "$"):
			name = uid[1:]
		default:
			return uid
		}
		if v, ok := vars[name]; ok {
			return v
		}
		return "undefined variable " + uid
	}
	badDS := map[string]bool{}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var rects []rect
	ids := map[int]bool{}
	var walk func(panels []grafanaPanel, top bool)
	walk = func(panels []grafanaPanel, top bool) {
		for _, p := range panels {
			if ids[p.ID] {
				problems = append(problems, fmt.Sprintf("panel id %d used twice", p.ID))
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				problems = append(problems, fmt.Sprintf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g))
			}
			if top {
				for _, r := range rects {
					if g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H {
						problems = append(problems, fmt.Sprintf("panels %q and %q overlap", r.title, p.Title))
					}
				}
				rects = append(rects, rect{p.Title, g.X, g.Y, g.W, g.H})
			}
			if p.Type == "row" {
				walk(p.Panels, false)
				continue
			}
			if p.Title == "" {
				problems = append(problems, fmt.Sprintf("panel %d has no title", p.ID))
			}
			if len(p.Targets) == 0 {
				problems = append(problems, fmt.Sprintf("panel %q has no queries", p.Title))
			}
			for _, tg := range p.Targets {
				ds := tg.Datasource
				if ds == nil {
					ds = p.Datasource
				}
				if ds == nil || ds.Type != "prometheus" || resolve(ds) != dsUID {
					what := fmt.Sprintf("%+v", ds)
					if ds != nil {
						what = fmt.Sprintf("%s %q (resolves to %q)", ds.Type, ds.UID, resolve(ds))
					}
					if !badDS[what] {
						badDS[what] = true
						problems = append(problems, fmt.Sprintf("panel %q query %s (and maybe others): datasource %s is not the provisioned prometheus %q",
							p.Title, tg.RefID, what, dsUID))
					}
				}
				metrics, ps := checkPromQL(tg.Expr)
				for _, pr := range ps {
					problems = append(problems, fmt.Sprintf("panel %q query %s: %s", p.Title, tg.RefID, pr))
				}
				for _, m := range metrics {
					read[m] = true
				}
			}
		}
	}
	walk(d.Panels, true)
	for _, m := range dashboardMetrics {
		if !read[m] {
			problems = append(problems, fmt.Sprintf("no panel charts %s", m))
		}
	}
	return read, problems
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	require.NoError(t, err)
	return b
}

// workerMetricsPort is the port the worker's METRICS_ADDR listens on, on
// all interfaces and exposed to the compose network.
func workerMetricsPort(t *testing.T, p *types.Project) int {
	t.Helper()
	w := service(t, p, "worker")
	host, port := hostPort(t, "METRICS_ADDR", env(t, w, "METRICS_ADDR"))
	assert.Contains(t, []string{"0.0.0.0", "", "::"}, host, "the worker must serve metrics on all interfaces, or prometheus cannot reach it")
	assert.Contains(t, []string(w.Expose), strconv.Itoa(port), "worker must expose its metrics port")
	return port
}

func TestMonitoringServices(t *testing.T) {
	root := repoRoot(t)
	def := loadRepoDefault(t)
	for _, name := range []string{"prometheus", "grafana"} {
		assert.Contains(t, def.ServiceNames(), name, "`docker compose up` must start %s", name)
	}

	p := loadRepo(t)
	workerMetricsPort(t, p)

	prom := service(t, p, "prometheus")
	assert.Regexp(t, `^prom/prometheus:v3\.\d+\.\d+$`, prom.Image)
	cfgPath := flagValue(prom.Command, "config.file", "/etc/prometheus/prometheus.yml")
	host, ro := hostPath(prom, cfgPath)
	assert.Equal(t, filepath.Join(root, promDir, "prometheus.yml"), host, "prometheus must load deploy/prometheus/prometheus.yml")
	assert.True(t, ro, "prometheus config must be mounted read-only")
	assert.True(t, mountsNamedVolume(prom, flagValue(prom.Command, "storage.tsdb.path", "/prometheus")), "TSDB on a named volume")
	_, listen := hostPort(t, "--web.listen-address", flagValue(prom.Command, "web.listen-address", "0.0.0.0:9090"))
	assert.True(t, publishesTarget(prom, listen), "prometheus must publish its UI port %d", listen)
	assert.NotContains(t, prom.DependsOn, "worker", "monitoring must start even when the workers cannot (WorkerDown)")
	require.NotNil(t, prom.HealthCheck, "grafana waits for a healthy prometheus")

	// rule_files resolve, through the mounts, to files in the repo.
	var cfg promConfig
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), &cfg))
	var rules []string
	for _, rf := range cfg.RuleFiles {
		if !strings.HasPrefix(rf, "/") {
			rf = filepath.ToSlash(filepath.Join(filepath.Dir(cfgPath), rf))
		}
		h, _ := hostPath(prom, rf)
		require.NotEmpty(t, h, "rule file %s is not mounted into prometheus", rf)
		matches, err := filepath.Glob(h)
		require.NoError(t, err)
		assert.NotEmpty(t, matches, "rule file %s (%s) does not exist", rf, h)
		rules = append(rules, matches...)
	}
	assert.Contains(t, rules, filepath.Join(root, promDir, "alerts.yml"))

	graf := service(t, p, "grafana")
	assert.Regexp(t, `^grafana/grafana:11\.\d+\.\d+$`, graf.Image)
	require.Contains(t, graf.DependsOn, "prometheus")
	assert.Equal(t, types.ServiceConditionHealthy, graf.DependsOn["prometheus"].Condition)
	assert.True(t, publishes(graf, 3000), "grafana must publish 3000")
	provDir := "/etc/grafana/provisioning"
	if v, ok := graf.Environment["GF_PATHS_PROVISIONING"]; ok && v != nil {
		provDir = *v
	}
	host, ro = hostPath(graf, provDir)
	assert.Equal(t, filepath.Join(root, grafanaDir, "provisioning"), host, "grafana provisioning must come from deploy/grafana/provisioning")
	assert.True(t, ro, "provisioning must be mounted read-only")
	if v, ok := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; ok && v != nil {
		host, _ := hostPath(graf, *v)
		assert.Equal(t, filepath.Join(root, dashboardRel), host, "the home dashboard must be the mounted durableclaims.json")
	}
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

func TestPrometheusConfig(t *testing.T) {
	p := loadRepo(t)
	_, problems := checkPromConfig(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), "worker", workerMetricsPort(t, p))
	assert.Empty(t, problems)
	_, err := p.GetService("worker")
	require.NoError(t, err, "the DNS name prometheus resolves must be the worker service")
}

func TestAlertRules(t *testing.T) {
	read, problems := checkRules(readRepoFile(t, filepath.Join(promDir, "alerts.yml")))
	assert.Empty(t, problems)
	// An operator sent by an alert to the dashboard must find the series there.
	onDashboard, _ := checkDashboard(readRepoFile(t, dashboardRel), datasourceUID)
	for m := range read {
		assert.True(t, onDashboard[m], "alerts read %s but no dashboard panel charts it", m)
	}
}

type grafanaDatasources struct {
	APIVersion  int `yaml:"apiVersion"`
	Datasources []struct {
		Name      string         `yaml:"name"`
		UID       string         `yaml:"uid"`
		Type      string         `yaml:"type"`
		Access    string         `yaml:"access"`
		URL       string         `yaml:"url"`
		IsDefault bool           `yaml:"isDefault"`
		Editable  bool           `yaml:"editable"`
		JSONData  map[string]any `yaml:"jsonData"`
	} `yaml:"datasources"`
	DeleteDatasources yaml.Node `yaml:"deleteDatasources"`
}

type grafanaProviders struct {
	APIVersion int `yaml:"apiVersion"`
	Providers  []struct {
		Name                  string `yaml:"name"`
		OrgID                 int    `yaml:"orgId"`
		Folder                string `yaml:"folder"`
		FolderUID             string `yaml:"folderUid"`
		Type                  string `yaml:"type"`
		DisableDeletion       bool   `yaml:"disableDeletion"`
		AllowUIUpdates        bool   `yaml:"allowUiUpdates"`
		UpdateIntervalSeconds int    `yaml:"updateIntervalSeconds"`
		Options               struct {
			Path                      string `yaml:"path"`
			FoldersFromFilesStructure bool   `yaml:"foldersFromFilesStructure"`
		} `yaml:"options"`
	} `yaml:"providers"`
}

func TestGrafanaProvisioning(t *testing.T) {
	root := repoRoot(t)
	p := loadRepo(t)
	graf := service(t, p, "grafana")
	prom := service(t, p, "prometheus")

	var ds grafanaDatasources
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(grafanaDir, "provisioning", "datasources", "prometheus.yml")), &ds))
	assert.Equal(t, 1, ds.APIVersion)
	require.Len(t, ds.Datasources, 1)
	d := ds.Datasources[0]
	assert.Equal(t, "prometheus", d.Type)
	assert.Equal(t, datasourceUID, d.UID, "the dashboard's datasource uid")
	assert.Equal(t, "proxy", d.Access, "the browser cannot resolve compose service names; grafana must proxy")
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	assert.Equal(t, "http", u.Scheme)
	assert.Equal(t, prom.Name, u.Hostname(), "datasource must point at the prometheus service")
	_, listen := hostPort(t, "--web.listen-address", flagValue(prom.Command, "web.listen-address", "0.0.0.0:9090"))
	assert.Equal(t, strconv.Itoa(listen), u.Port(), "datasource port must be the one prometheus listens on inside the network")
	var cfg promConfig
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(promDir, "prometheus.yml")), &cfg))
	assert.Equal(t, cfg.Global.ScrapeInterval, d.JSONData["timeInterval"], "timeInterval must match the scrape interval for $__rate_interval")

	var prov grafanaProviders
	require.NoError(t, decodeStrict(readRepoFile(t, filepath.Join(grafanaDir, "provisioning", "dashboards", "durableclaims.yml")), &prov))
	assert.Equal(t, 1, prov.APIVersion)
	require.Len(t, prov.Providers, 1)
	pr := prov.Providers[0]
	assert.Equal(t, "file", pr.Type)
	host, ro := hostPath(graf, pr.Options.Path)
	assert.Equal(t, filepath.Join(root, filepath.Dir(dashboardRel)), host,
		"provider path %s must be where compose mounts deploy/grafana/dashboards", pr.Options.Path)
	assert.True(t, ro, "dashboards must be mounted read-only")
	assert.FileExists(t, filepath.Join(host, filepath.Base(dashboardRel)))
	assert.False(t, pr.AllowUIUpdates, "provisioned from the repo: UI edits would be lost on restart")
}

func TestDashboard(t *testing.T) {
	_, problems := checkDashboard(readRepoFile(t, dashboardRel), datasourceUID)
	assert.Empty(t, problems)
}

// Each check above must reject a broken file, so it cannot pass vacuously.
func TestMonitoringChecksRejectBrokenFiles(t *testing.T) {
	mutate := func(t *testing.T, doc []byte, old, new string) []byte {
		t.Helper()
		require.Contains(t, string(doc), old, "mutation target vanished; update this test")
		return []byte(strings.Replace(string(doc), old, new, 1))
	}

	prom := readRepoFile(t, filepath.Join(promDir, "prometheus.yml"))
	_, problems := checkPromConfig(prom, "worker", 9090)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"wrong port":      {"port: 9090", "port: 9100"},
		"SRV lookup":      {"type: A", "type: SRV"},
		"misspelt key":    {"dns_sd_configs:", "dns_sd_config:"},
		"wrong interval":  {"scrape_interval: 15s", "scrape_interval: 1m"},
		"other job name":  {"job_name: worker", "job_name: workers"},
		"not the service": {`names: ["worker"]`, `names: ["tasks.worker"]`},
	} {
		t.Run("prometheus.yml "+name, func(t *testing.T) {
			_, problems := checkPromConfig(mutate(t, prom, m[0], m[1]), "worker", 9090)
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}

	alerts := readRepoFile(t, filepath.Join(promDir, "alerts.yml"))
	_, problems = checkRules(alerts)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"unknown metric":    {"max(reconciliation_last_run_unmatched)", "max(reconciliation_unmatched)"},
		"bad label value":   {`status="dead-lettered"}[15m]`, `status="dead_lettered"}[15m]`},
		"missing alert":     {"alert: WorkerDown", "alert: WorkerGone"},
		"wrong severity":    {"severity: critical", "severity: page"},
		"no summary":        {"summary:", "summry:"},
		"unbalanced parens": {"max(approvals_waiting{", "max((approvals_waiting{"},
	} {
		t.Run("alerts.yml "+name, func(t *testing.T) {
			_, problems := checkRules(mutate(t, alerts, m[0], m[1]))
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}

	dash := readRepoFile(t, dashboardRel)
	_, problems = checkDashboard(dash, datasourceUID)
	require.Empty(t, problems, "control")
	for name, m := range map[string][2]string{
		"uid":                {`"uid": "durableclaims"`, `"uid": "claims"`},
		"double unit suffix": {"(rate(claim_history_bytes_bucket", "(rate(claim_history_bytes_bytes_bucket"},
		"unknown function":   {"histogram_quantile(", "histogram_quantil("},
		"datasource uid":     {`"value": "prometheus"`, `"value": "prom"`},
		"not json":           {"{", "{,"},
		"unknown label":      {"sum by (status)", "sum by (state)"},
		"variable query":     {`"query": "label_values(up{job=\"worker\"}, instance)"`, `"query": "label_values(up{job=\"worker\"}, pod)"`},
	} {
		t.Run("dashboard "+name, func(t *testing.T) {
			_, problems := checkDashboard(mutate(t, dash, m[0], m[1]), datasourceUID)
			assert.NotEmpty(t, problems)
			t.Log(problems)
		})
	}
}
