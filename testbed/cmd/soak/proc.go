package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// process is one child process and the channel closed when it has exited.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // cmd.Wait's error, valid once done is closed
}

// spawn starts bin in its own process group, output appended to logPath.
//
// Its own group, so a Ctrl-C in the terminal reaches only the soak, which
// then stops its children in order (workers before the server they talk to).
// Pdeathsig, so that a soak killed outright does not leave a dev server and
// workers running on a shared machine.
func spawn(bin string, args, env []string, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup signals the process's whole group (it leads it: Setpgid).
func (p *process) signalGroup(sig syscall.Signal) {
	_ = syscall.Kill(-p.pid(), sig)
}

// stop sends SIGTERM and waits up to grace for a clean exit, then SIGKILLs.
// It reports whether SIGKILL was needed.
func (p *process) stop(grace time.Duration) (forced bool) {
	if p.exited() {
		return false
	}
	p.signalGroup(syscall.SIGTERM)
	select {
	case <-p.done:
		return false
	case <-time.After(grace):
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.done
	return true
}

// killedBySIGKILL reports whether the process ended by SIGKILL.
func (p *process) killedBySIGKILL() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// exitDescription says how the process ended, for the log.
func (p *process) exitDescription() string {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		return fmt.Sprintf("ended by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case ok:
		return fmt.Sprintf("exited with status %d", ws.ExitStatus())
	}
	return p.cmd.ProcessState.String()
}

// childEnv is the soak's environment without Temporal client settings
// (TEMPORAL_ADDRESS, TEMPORAL_API_KEY, TLS, profiles): a user's settings for
// some other cluster must not leak into workers or CLI calls aimed at the
// soak's own dev server. TEMPORAL (the CLI's path) is harmless and kept.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TEMPORAL_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// freePorts reserves n distinct free TCP ports on 127.0.0.1. The listeners
// are held until all are chosen so the same port is not handed out twice.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tail returns the last n bytes of a log file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-n, 0)
	b := make([]byte, st.Size()-off)
	n2, _ := f.ReadAt(b, off) // a short read still shows what there is
	return string(b[:n2])
}
