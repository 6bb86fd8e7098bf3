// Package deploytest checks the deployment files at the repository root
// (docker-compose.yml, Dockerfile, .dockerignore) without a Docker engine:
// docker-compose.yml is loaded with compose-go, exactly as `docker compose`
// would parse, validate and interpolate it, and the Dockerfile is parsed as
// text.
package deploytest

import (
	"bufio"
	"context"
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
	"httpcheck": "./deploy/httpcheck", // health probe for the distroless image
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details := types.ConfigDetails{
		WorkingDir:  workingDir,
		ConfigFiles: []types.ConfigFile{file},
		Environment: types.Mapping{},
	}
	return loader.LoadWithContext(ctx, details, func(o *loader.Options) {
		o.SetProjectName(projectName, true)
		o.ResourceLoaders = nil
		o.Profiles = profiles
	})
}

// loadRepo loads ../../docker-compose.yml with every profile enabled.
func loadRepo(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	p, err := load(t, root, types.ConfigFile{Filename: filepath.Join(root, "docker-compose.yml")}, "*")
	require.NoError(t, err, "docker-compose.yml must load and validate")
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
		[]string{"postgresql", "temporal", "temporal-admin-tools", "temporal-ui", "stripesim", "worker", "starter", "claimsctl"},
		p.ServiceNames())
}

func TestToolsAreNotStartedByDefault(t *testing.T) {
	p := loadRepo(t)
	for _, name := range []string{"starter", "claimsctl"} {
		assert.Contains(t, service(t, p, name).Profiles, "tools", "%s must sit in the tools profile", name)
	}

	root := repoRoot(t)
	def, err := load(t, root, types.ConfigFile{Filename: filepath.Join(root, "docker-compose.yml")})
	require.NoError(t, err)
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
