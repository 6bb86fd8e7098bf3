package deploy

// The Dockerfile and .dockerignore: one image that builds every shipped
// binary statically and runs it as the nonroot user.

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	imageBinDir = "/usr/local/bin"
	// distroless "nonroot"; the data directories must be owned by it.
	nonrootUID = "65532"
)

// binaries maps each binary the image must ship to the package that builds it.
var binaries = map[string]string{
	"worker":    "./worker",
	"starter":   "./starter",
	"claimsctl": "./claimsctl",
	"stripesim": "./testbed/cmd/stripesim",
	"modelsim":  "./testbed/cmd/modelsim", // for MODEL_PROVIDER=openai without an account
	"httpcheck": "./deploy/httpcheck",     // health probe for the distroless image
}

// notShipped lists main packages that are deliberately left out of the image.
var notShipped = map[string]bool{
	"./testbed/cmd/bench":     true, // a benchmark harness for `make bench`, not a service
	"./testbed/cmd/soak":      true, // the chaos soak for `make soak`, not a service
	"./testbed/cmd/cluster":   true, // a local Temporal server on PostgreSQL for `make cluster`, not a service
	"./testbed/cmd/casecover": true, // a helper of `make mutate`, not a service
	"./temporalserver":        true, // its own module, in its own image: deploy/temporal/Dockerfile (TestTemporalServerImage)
}

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

// temporalService builds an image of its own, the Temporal server with
// durableclaims' authorizer (TestTemporalServerImage); every other built
// service shares the one image of ./Dockerfile.
const temporalService = "temporal"

func readDockerfile(t *testing.T, root string, p *types.Project) []stage {
	t.Helper()
	var path string
	for _, s := range p.AllServices() {
		if s.Build == nil || s.Name == temporalService {
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
		if s.Build == nil || s.Name == temporalService {
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
		if s.Build == nil || s.Name == temporalService {
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

// The Temporal server's image: temporalserver/ (its own module, pinned to
// the server version the compose stack and make cluster run) built with
// the same Go as go.mod wants, onto the auto-setup image of that version,
// as the binary its entrypoint starts.
func TestTemporalServerImage(t *testing.T) {
	root := repoRoot(t)
	tmp := service(t, loadRepo(t), temporalService)
	require.NotNil(t, tmp.Build)
	assert.Equal(t, root, tmp.Build.Context)
	b, err := os.ReadFile(filepath.Join(root, "deploy", "temporal", "Dockerfile"))
	require.NoError(t, err)
	stages := parseDockerfile(string(b))
	require.Len(t, stages, 2)
	build, final := stages[0], stages[1]

	m := regexp.MustCompile(`^golang:(\d+)\.(\d+)\.(\d+)-bookworm$`).FindStringSubmatch(build.image)
	require.NotNil(t, m, "build stage must be an exact golang:X.Y.Z-bookworm tag, got %q", build.image)
	gomod, err := os.ReadFile(filepath.Join(root, "temporalserver", "go.mod"))
	require.NoError(t, err)
	gm := goDirective.FindStringSubmatch(string(gomod))
	require.NotNil(t, gm, "temporalserver/go.mod go directive")
	assert.GreaterOrEqual(t, version(m[1:]), version(gm[1:]))
	server := regexp.MustCompile(`(?m)^\s*(?:require )?go\.temporal\.io/server (v1\.(\d+)\.\d+)$`).FindStringSubmatch(string(gomod))
	require.NotNil(t, server, "temporalserver/go.mod requires go.temporal.io/server directly")

	builds := goBuilds(build)
	require.Len(t, builds, 1)
	assert.Equal(t, ".", builds[0].pkg)
	assert.Contains(t, builds[0].flags, "-trimpath")
	assert.Equal(t, "/out/temporal-server", builds[0].out)

	assert.True(t, strings.HasPrefix(final.image, "temporalio/auto-setup:1."+server[2]+"."), "the image's server line %q is the module's %s", final.image, server[1])
	copied := false
	for _, in := range final.ins {
		if in.cmd == "COPY" && in.args == "--from=build /out/temporal-server /usr/local/bin/temporal-server" {
			copied = true
		}
	}
	assert.True(t, copied, "the image's temporal-server is ours")
}
