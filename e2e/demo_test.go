package e2e

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/testenv"
)

// After make demo, a person's next commands are claimsctl's, typed in the
// same directory with nothing set: they must find the claims, the records
// and the keys the demo made, because the demo's stack is every program's
// own default (var/). The demo runs here as make demo runs it (its
// scripts, the examples, the binaries, in a directory of their own, on
// free ports), kept up with claim-0045 waiting; then claimsctl runs with an
// environment that names nothing but the Temporal frontend's moved port.
func TestTheToolsFindWhatTheDemoMade(t *testing.T) {
	dir := demoCopy(t)
	port := func() string { return freePort(t) }
	temporal, ui := port(), port()
	_, uiPort, err := net.SplitHostPort(ui)
	require.NoError(t, err)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TEMPORAL=" + testenv.TemporalCLI(t)}
	inbox, jaegerUI := port(), port()
	demo := startDemo(t, dir, append(env, "DEMO_KEEP=1", "DEMO_TEMPORAL_ADDRESS="+temporal, "DEMO_UI_PORT="+uiPort,
		"DEMO_STRIPESIM_ADDR="+port(), "DEMO_INBOX_ADDR="+inbox, "DEMO_CODEC_ADDR="+port(),
		"DEMO_JAEGER_OTLP_GRPC_ADDR="+port(), "DEMO_JAEGER_OTLP_HTTP_ADDR="+port(), "DEMO_JAEGER_UI_ADDR="+jaegerUI,
		"DEMO_JAEGER_QUERY_GRPC_ADDR="+port(), "DEMO_JAEGER_HEALTH_ADDR="+port()))
	demo.waitFor(t, "claim-0045 waits for you", 4*time.Minute)
	assert.Contains(t, demo.output(), "claim-0042: 1 transfer, total 1840.00 usd")
	// The demo's Jaeger holds claim-0043's trace, at the link it printed.
	m := regexp.MustCompile(`(?m)^    http://` + regexp.QuoteMeta(inbox) + `/traces/([0-9a-f]{32}) `).FindStringSubmatch(demo.output())
	require.NotNil(t, m, "the demo prints claim-0043's trace link:\n%s", demo.output())
	jaegerHolds(t, "http://"+jaegerUI, m[1])

	ctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(dir, "bin", "claimsctl"), args...)
		cmd.Dir, cmd.Env = dir, append(env, "TEMPORAL_ADDRESS="+temporal)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "claimsctl %s: %s", strings.Join(args, " "), out)
		return string(out)
	}
	require.Eventually(t, func() bool { return strings.Contains(ctl("list", "--status", "waiting"), "claim-0045") },
		testTimeout, pollEvery, "claim-0045 waits in the approval queue of the demo's claims store")
	assert.Contains(t, ctl("list", "--status", "waiting"), "1 waiting for a decision")
	audit := ctl("audit", "claim-0042")
	assert.Contains(t, audit, "from the audit record (step 9); outcome paid")
	assert.Contains(t, audit, "decision: approve by adjuster-17")
	assert.Contains(t, ctl("show", "claim-0042"), "model calls: 3 (triage 2, assess 1)", "the demo's model-usage ledger")
	assert.Contains(t, ctl("verify", "claim-0042"), "claim-0042: claim file, log of 3 files, checkpoints up to 3: verifies",
		"the demo made the ledger key and signed a checkpoint")
}

// demoCopy lays out what make demo runs in a directory of the test's own:
// scripts/, examples/, bin/ with the binaries the demo starts (Jaeger's
// too) and Jaeger's configuration.
func demoCopy(t *testing.T) string {
	root, dir := testenv.ModuleRoot(t), t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(dir, "examples"), os.DirFS(filepath.Join(root, "examples"))))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "scripts"), 0o755))
	for _, f := range []string{"demo.sh", "lib.sh"} {
		b, err := os.ReadFile(filepath.Join(root, "scripts", f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "scripts", f), b, 0o755))
	}
	bin := filepath.Join(dir, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, b := range []string{"worker", "starter", "claimsctl", "inbox"} {
		require.NoError(t, os.Symlink(filepath.Join(testenv.Binaries(t), b), filepath.Join(bin, b)))
	}
	require.NoError(t, os.Symlink(jaegerBin(t), filepath.Join(bin, "jaeger")))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "deploy", "jaeger"), 0o755))
	cfg, err := os.ReadFile(filepath.Join(root, "deploy", "jaeger", "local.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deploy", "jaeger", "local.yaml"), cfg, 0o644))
	for _, build := range [][]string{{"-o", bin + "/", "./testbed/cmd/stripesim"}, {"-o", filepath.Join(bin, "codec-server"), "./codecserver"}} {
		cmd := exec.Command("go", append([]string{"build"}, build...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go build: %s", out)
	}
	return dir
}

// runningDemo is scripts/demo.sh running in its own process group, which
// the test ends (the script's trap takes its stack down).
type runningDemo struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func startDemo(t *testing.T, dir string, env []string) *runningDemo {
	d := &runningDemo{}
	cmd := exec.Command("bash", filepath.Join(dir, "scripts", "demo.sh"))
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	w.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(r)
		for s.Scan() {
			d.mu.Lock()
			d.out.Write(append(s.Bytes(), '\n'))
			d.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		// The stack's processes may outlive the script by a moment.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-done:
		case <-time.After(10 * time.Second): // a process that left the group holds the pipe
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", d.output())
		}
	})
	return d
}

func (d *runningDemo) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

func (d *runningDemo) waitFor(t *testing.T, line string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(d.output(), line) }, timeout, 200*time.Millisecond,
		"the demo never printed %q:\n%s", line, d.output())
}
