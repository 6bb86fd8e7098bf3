// Package pgserver runs a throwaway PostgreSQL from Debian's postgresql
// package: initdb into a directory, pg_ctl start on a free loopback port,
// databases made on demand, stop, restart. Tests, the soak, the benchmark
// and `make cluster` use it; nothing here is for production.
//
// PostgreSQL refuses to run as root, so as root the server runs as the
// postgres user the Debian package creates (through runuser), in a
// directory handed to that user. It trusts connections from 127.0.0.1
// only, as the superuser "claims": a local, throwaway cluster.
package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// User is the superuser of every cluster started here.
const User = "claims"

// Server is one running PostgreSQL cluster.
type Server struct {
	Dir  string // the data directory (and the server's log, postgres.log)
	Port int
	bin  string
	as   string // the OS user the server runs as ("" = this process's)

	mu      sync.Mutex
	running bool
}

// Options tune Start. The zero value is a fresh cluster on a free port.
type Options struct {
	// Port to listen on; 0 picks a free one.
	Port int
	// Settings are extra postgresql.conf settings (name → value), such as
	// max_connections.
	Settings map[string]string
}

// BinDir finds initdb and pg_ctl: $PG_BINDIR, then the newest
// /usr/lib/postgresql/*/bin (Debian's layout).
func BinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("PostgreSQL's initdb was not found in /usr/lib/postgresql/*/bin: " +
		"apt-get install -y postgresql (Debian), or set PG_BINDIR")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start initialises a cluster in dir (which must be empty or not exist)
// and starts it. Stop it with Stop.
func Start(ctx context.Context, dir string, opts Options) (*Server, error) {
	if err := unitguard.Refuse("PostgreSQL"); err != nil {
		return nil, err
	}
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Port: opts.Port, bin: bin}
	if os.Geteuid() == 0 {
		s.as = "postgres"
	}
	if s.Port == 0 {
		if s.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if s.as != "" {
		if err := s.handOver(dir); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if _, err := s.run(ctx, "initdb", "-D", data, "-U", User, "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"); err != nil {
		return nil, err
	}
	conf := map[string]string{
		"listen_addresses":        "'127.0.0.1'",
		"port":                    strconv.Itoa(s.Port),
		"unix_socket_directories": "'" + dir + "'",
		"max_connections":         "200",
		"fsync":                   "on",
		"logging_collector":       "off",
	}
	for k, v := range opts.Settings {
		conf[k] = v
	}
	var b strings.Builder
	keys := make([]string, 0, len(conf))
	for k := range conf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s = %s\n", k, conf[k])
	}
	if err := s.appendFile(filepath.Join(data, "postgresql.conf"), b.String()); err != nil {
		return nil, err
	}
	if err := s.Restart(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// handOver gives dir, and every parent the postgres user cannot enter, to
// that user: a test's temporary directory is root's, mode 0700.
func (s *Server) handOver(dir string) error {
	u, err := user.Lookup(s.as)
	if err != nil {
		return fmt.Errorf("pgserver: running as root needs the %q user (Debian's postgresql package makes it): %w", s.as, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	for p := filepath.Dir(dir); p != "/" && p != "."; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			// Let others pass through (not list) this directory.
			if err := os.Chmod(p, fi.Mode().Perm()|0o001); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Server) appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// run runs one of PostgreSQL's programs, as the postgres user when this
// process is root.
func (s *Server) run(ctx context.Context, prog string, args ...string) (string, error) {
	path := filepath.Join(s.bin, prog)
	var cmd *exec.Cmd
	if s.as != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.as, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = s.Dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("pgserver: %s %s: %w\n%s", prog, strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Restart starts the server if it is stopped (and waits until it accepts
// connections); a running server is stopped first.
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		if err := s.stopLocked(ctx, "fast"); err != nil {
			return err
		}
	}
	if _, err := s.run(ctx, "pg_ctl", "-D", filepath.Join(s.Dir, "data"), "-l", filepath.Join(s.Dir, "postgres.log"),
		"-w", "-t", "60", "start"); err != nil {
		return err
	}
	s.running = true
	return nil
}

// Kill stops the server the way a crash would (immediate mode: no
// checkpoint, recovery from the WAL at the next start).
func (s *Server) Kill(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked(ctx, "immediate")
}

// Stop shuts the server down cleanly. The data directory stays.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.stopLocked(ctx, "fast")
}

func (s *Server) stopLocked(ctx context.Context, mode string) error {
	if !s.running {
		return nil
	}
	_, err := s.run(ctx, "pg_ctl", "-D", filepath.Join(s.Dir, "data"), "-m", mode, "-w", "-t", "60", "stop")
	if err == nil {
		s.running = false
	}
	return err
}

// URL is the connection URL of database db.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.Port, db)
}

// CreateDatabase makes an empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgserver: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgserver: create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// PostmasterPID is the process ID PostgreSQL wrote in the data directory
// of the cluster under dir (Start's dir), or 0 if there is none. The file
// outlives a crash: the process may be gone.
func PostmasterPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
