// Package testenv gives integration tests real processes: a Temporal dev
// server of their own on a free port, the project's binaries built fresh,
// stripesim, and workers that can be killed and restarted. Tests that need a
// server start one here; none assumes one is running, and none skips.
package testenv

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/testbed/serversettings"
	"github.com/durableclaims/durableclaims/testbed/stripesim"
	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// TemporalCLI finds the Temporal CLI: $TEMPORAL, then PATH, then GOPATH/bin
// (where `make temporal-cli` installs it). A missing CLI fails the test with
// the command that installs it.
func TemporalCLI(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TEMPORAL"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(out)), "bin", "temporal")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("the Temporal CLI is needed to start a dev server: run `make temporal-cli` " +
		"(go install github.com/temporalio/cli/cmd/temporal@v1.5.1) or set TEMPORAL=/path/to/temporal")
	return ""
}

// DevServer starts a Temporal dev server on a free port with the project's
// search attributes registered, and stops it when the test ends.
func DevServer(t testing.TB) *testsuite.DevServer {
	t.Helper()
	require.NoError(t, unitguard.Refuse("a Temporal dev server"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := testsuite.StartDevServer(ctx, testsuite.DevServerOptions{
		ExistingPath:  TemporalCLI(t),
		ClientOptions: &client.Options{Namespace: "default", Logger: quietSDKLogger()},
		LogLevel:      "error",
		Stdout:        io.Discard,
		Stderr:        io.Discard,
		ExtraArgs:     serversettings.DevServerArgs(),
	})
	require.NoError(t, err, "start the Temporal dev server")
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// Stripe runs stripesim in-process on a free port, persisting under dir.
func Stripe(t testing.TB) (*stripesim.Server, string) {
	t.Helper()
	sim, err := stripesim.Open(stripesim.Config{DBPath: filepath.Join(t.TempDir(), "stripesim.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { srv.Close(); sim.Close() })
	return sim, srv.URL
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
	buildOut  []byte
)

// Binaries builds worker, starter and claimsctl once per test process and
// returns the directory holding them.
func Binaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "durableclaims-bin-")
		if buildErr != nil {
			return
		}
		root := ModuleRoot(t)
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./worker", "./starter", "./claimsctl", "./inbox")
		cmd.Dir = root
		buildOut, buildErr = cmd.CombinedOutput()
	})
	require.NoError(t, buildErr, "go build: %s", buildOut)
	return binDir
}

// ModuleRoot is the repository root.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// Run runs a command to completion and returns its combined output.
func Run(t testing.TB, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// RunStdout runs a command to completion and returns its standard output
// alone (standard error goes to the test log).
func RunStdout(t testing.TB, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

// Supervised is a worker process restarted whenever it dies, as a process
// supervisor (systemd, Kubernetes) would do.
type Supervised struct {
	t       testing.TB
	mu      sync.Mutex
	cmd     *exec.Cmd
	kills   int
	stopped bool
	done    chan struct{}
	log     *bytes.Buffer
}

// Supervise starts path with args and env, restarting it when it exits
// until Stop. Its output is kept and printed if the test fails.
func Supervise(t testing.TB, env []string, path string, args ...string) *Supervised {
	t.Helper()
	require.NoError(t, unitguard.Refuse(filepath.Base(path)+", supervised"))
	s := &Supervised{t: t, done: make(chan struct{}), log: &bytes.Buffer{}}
	started := make(chan struct{})
	go func() {
		defer close(s.done)
		first := true
		for {
			cmd := exec.Command(path, args...)
			cmd.Env = append(os.Environ(), env...)
			w := &lockedWriter{mu: &s.mu, b: s.log}
			cmd.Stdout, cmd.Stderr = w, w
			s.mu.Lock()
			if s.stopped {
				s.mu.Unlock()
				return
			}
			err := cmd.Start()
			s.cmd = cmd
			s.mu.Unlock()
			if first {
				close(started)
				first = false
			}
			if err != nil {
				t.Errorf("start %s: %v", path, err)
				return
			}
			_ = cmd.Wait() // how it ended is read from ProcessState
			s.mu.Lock()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
				s.kills++
			}
			stopped := s.stopped
			s.mu.Unlock()
			if stopped {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	<-started
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(path), s.Output())
		}
	})
	return s
}

// Kills counts exits by SIGKILL.
func (s *Supervised) Kills() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kills
}

// Output is everything the process printed, across restarts.
func (s *Supervised) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Stop sends SIGTERM (a graceful drain) and waits.
func (s *Supervised) Stop() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		<-s.done
		return
	}
	s.stopped = true
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.mu.Lock()
		_ = s.cmd.Process.Kill()
		s.mu.Unlock()
		<-s.done
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// Kill sends SIGKILL to the running process (a crash: no drain, no goodbye
// to the server); the supervisor starts it again.
func (s *Supervised) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
}

// Keys are a test's payload keys (every program here encrypts claim data by
// default): Env names their file for the programs it runs
// (CODEC_KEYS_FILE=…), Client reads and writes what they do, and CodecURL
// is a codec server for the Temporal CLI (--codec-endpoint).
type Keys struct {
	Env      string
	Client   client.Client
	CodecURL string
}

// PayloadKeys makes a key file under dir, a client of hostPort's namespace
// that uses it, and a codec server, all stopped when the test ends.
func PayloadKeys(t testing.TB, dir, hostPort, namespace string) Keys {
	t.Helper()
	path := filepath.Join(dir, "codec-keys.json")
	kr, err := codec.CreateFile(path, "test")
	require.NoError(t, err)
	dc, fc := config.ConvertersFor(kr)
	c, err := client.Dial(client.Options{HostPort: hostPort, Namespace: namespace, Logger: quietSDKLogger(),
		DataConverter: dc, FailureConverter: fc})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cd, err := codec.New(kr)
	require.NoError(t, err)
	srv := httptest.NewServer(converter.NewPayloadCodecHTTPHandler(cd))
	t.Cleanup(srv.Close)
	return Keys{Env: codec.EnvKeysFile + "=" + path, Client: c, CodecURL: srv.URL}
}

// ClientFor is a client of namespace on the Temporal server env names
// (TEMPORAL_ADDRESS), with the payload keys env names (CODEC_KEYS_FILE):
// what the programs run with env read and write.
func ClientFor(t testing.TB, env []string, namespace string) client.Client {
	t.Helper()
	o := client.Options{Namespace: namespace, Logger: quietSDKLogger()}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "TEMPORAL_ADDRESS="); ok {
			o.HostPort = v
		}
	}
	o.DataConverter, o.FailureConverter = Converters(t, env)
	c, err := client.Dial(o)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// Converters are the data and failure converters of the programs run with
// env: encrypted with the keys CODEC_KEYS_FILE names, or plain without.
func Converters(t testing.TB, env []string) (converter.DataConverter, converter.FailureConverter) {
	t.Helper()
	var kr *codec.Keyring
	for _, kv := range env {
		if path, ok := strings.CutPrefix(kv, codec.EnvKeysFile+"="); ok {
			var err error
			kr, err = codec.LoadFile(path)
			require.NoError(t, err)
		}
	}
	return config.ConvertersFor(kr)
}
