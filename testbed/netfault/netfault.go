// Package netfault puts toxiproxy (v2.12.0, bin/toxiproxy-server, built by
// make toxiproxy) between a program and what it connects to, and breaks the
// connection on demand: added latency, a bandwidth limit, a reset, a
// half-open connection that never answers, a partition. The fault soak and
// the partition tests drive it; every proxy listens on 127.0.0.1 only.
package netfault

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/durableclaims/durableclaims/testbed/unitguard"
)

// Version is the toxiproxy the Makefile builds (tools/toxiproxy pins it).
const Version = "v2.12.0"

// Bin finds the toxiproxy server: $TOXIPROXY_BIN, else bin/toxiproxy-server
// under root (the module root).
func Bin(root string) (string, error) {
	p := os.Getenv("TOXIPROXY_BIN")
	if p == "" {
		p = filepath.Join(root, "bin", "toxiproxy-server")
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("the toxiproxy server is needed: make toxiproxy builds bin/toxiproxy-server (or set TOXIPROXY_BIN): %w", err)
	}
	return p, nil
}

// Server is a running toxiproxy server and its API client.
type Server struct {
	cmd  *exec.Cmd
	done chan struct{}
	api  *toxiproxy.Client
	Addr string // its HTTP API, 127.0.0.1:PORT
}

// Start runs bin on a free loopback port, its log to logPath, with seed for
// the toxics' randomness (jitter, toxicity), and waits until it answers.
func Start(ctx context.Context, bin, logPath string, seed int64) (*Server, error) {
	if err := unitguard.Refuse("the toxiproxy server"); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-host", "127.0.0.1", "-port", port, "-seed", fmt.Sprint(seed))
	cmd.Stdout, cmd.Stderr = logf, logf
	// It dies with whoever started it, so a killed soak or test leaves no
	// proxy behind on a shared machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{cmd: cmd, done: make(chan struct{}), Addr: "127.0.0.1:" + port}
	go func() { _ = cmd.Wait(); close(s.done) }()
	s.api = toxiproxy.NewClient(s.Addr)
	for {
		if _, err := s.api.Version(); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("toxiproxy exited before it answered; see %s", logPath)
		case <-ctx.Done():
			s.Stop()
			return nil, fmt.Errorf("toxiproxy never answered on %s: %w", s.Addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends the server and every connection through it.
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// Link is one proxy: a program dials Addr instead of the upstream.
type Link struct {
	Name     string
	Addr     string // 127.0.0.1:PORT
	Upstream string
	p        *toxiproxy.Proxy
}

// Link creates a proxy named name to upstream (host:port) on a free
// loopback port.
func (s *Server) Link(name, upstream string) (*Link, error) {
	if upstream == "" {
		return nil, fmt.Errorf("link %s: no upstream", name)
	}
	p, err := s.api.CreateProxy(name, "127.0.0.1:0", upstream)
	if err != nil {
		return nil, fmt.Errorf("link %s to %s: %w", name, upstream, err)
	}
	return &Link{Name: name, Addr: p.Listen, Upstream: upstream, p: p}, nil
}

// Stream is the direction a toxic acts on: upstream is what the program
// sends, downstream what it receives.
type Stream string

const (
	Upstream   Stream = "upstream"
	Downstream Stream = "downstream"
)

// Kind names a fault, as the soak's schedule and summary print it.
type Kind string

const (
	// Latency delays every chunk in one direction (toxic "latency").
	Latency Kind = "latency"
	// Bandwidth limits one direction to a rate (toxic "bandwidth").
	Bandwidth Kind = "bandwidth"
	// Reset resets each connection (TCP RST) once it carries data, after a
	// delay (toxic "reset_peer"): a request cut off mid-way.
	Reset Kind = "reset"
	// HalfOpen lets requests through and drops every answer, the
	// connection left open (toxic "timeout" downstream, 0 ms).
	HalfOpen Kind = "half-open"
	// Partition drops everything both ways, connections left open, as a
	// network that lost its route (toxic "timeout" both ways, 0 ms).
	Partition Kind = "partition"
	// SlowAnswer delays every answer (toxic "latency" downstream), by
	// Delay±Jitter: set about the caller's own timeout, some answers come
	// after the caller gave up on a request the receiver acted on.
	SlowAnswer Kind = "slow-answer"
)

// Fault is one fault on a link; Apply adds it, the returned func removes it.
type Fault struct {
	Kind Kind `json:"kind"`
	// Delay is the added latency (Latency, SlowAnswer) or how long a
	// connection carries data before it is reset (Reset).
	Delay time.Duration `json:"delay_ns,omitempty"`
	// Jitter is added or taken off Delay at random (Latency, SlowAnswer).
	Jitter time.Duration `json:"jitter_ns,omitempty"`
	// RateKBps is the rate Bandwidth allows, in KB/s.
	RateKBps int64 `json:"rate_kbps,omitempty"`
}

func (f Fault) String() string {
	switch f.Kind {
	case Latency:
		return fmt.Sprintf("latency %s±%s", f.Delay, f.Jitter)
	case SlowAnswer:
		return fmt.Sprintf("slow-answer %s±%s", f.Delay, f.Jitter)
	case Bandwidth:
		return fmt.Sprintf("bandwidth %d KB/s", f.RateKBps)
	case Reset:
		return fmt.Sprintf("reset after %s", f.Delay)
	}
	return string(f.Kind)
}

// Validate says whether f can be applied (a known kind, a positive rate).
func (f Fault) Validate() error {
	_, err := f.toxics()
	return err
}

type toxic struct {
	typ    string
	stream Stream
	attrs  toxiproxy.Attributes
}

func (f Fault) toxics() ([]toxic, error) {
	ms := func(d time.Duration) int64 { return d.Milliseconds() }
	switch f.Kind {
	case Latency:
		// Both ways, so a request and its answer are each late.
		a := toxiproxy.Attributes{"latency": ms(f.Delay), "jitter": ms(f.Jitter)}
		return []toxic{{"latency", Upstream, a}, {"latency", Downstream, a}}, nil
	case SlowAnswer:
		return []toxic{{"latency", Downstream, toxiproxy.Attributes{"latency": ms(f.Delay), "jitter": ms(f.Jitter)}}}, nil
	case Bandwidth:
		if f.RateKBps <= 0 {
			return nil, errors.New("bandwidth needs a positive rate")
		}
		a := toxiproxy.Attributes{"rate": f.RateKBps}
		return []toxic{{"bandwidth", Upstream, a}, {"bandwidth", Downstream, a}}, nil
	case Reset:
		return []toxic{{"reset_peer", Upstream, toxiproxy.Attributes{"timeout": ms(f.Delay)}}}, nil
	case HalfOpen:
		return []toxic{{"timeout", Downstream, toxiproxy.Attributes{"timeout": 0}}}, nil
	case Partition:
		a := toxiproxy.Attributes{"timeout": 0}
		return []toxic{{"timeout", Upstream, a}, {"timeout", Downstream, a}}, nil
	}
	return nil, fmt.Errorf("unknown fault kind %q", f.Kind)
}

// Apply adds f to the link, for every connection open and to come, until
// the returned heal is called.
func (l *Link) Apply(f Fault) (heal func() error, err error) {
	ts, err := f.toxics()
	if err != nil {
		return nil, err
	}
	var names []string
	heal = func() error {
		var errs []error
		for _, n := range names {
			if err := l.p.RemoveToxic(n); err != nil && !strings.Contains(err.Error(), "not found") {
				errs = append(errs, fmt.Errorf("heal %s on %s: %w", n, l.Name, err))
			}
		}
		return errors.Join(errs...)
	}
	for _, t := range ts {
		name := fmt.Sprintf("%s_%s", f.Kind, t.stream)
		if _, err := l.p.AddToxic(name, t.typ, string(t.stream), 1, t.attrs); err != nil {
			return nil, errors.Join(fmt.Errorf("%s on %s: %w", f, l.Name, err), heal())
		}
		names = append(names, name)
	}
	return heal, nil
}
