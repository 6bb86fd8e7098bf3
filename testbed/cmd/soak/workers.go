package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// supervisor keeps one worker process running, restarting it whenever it
// dies, as systemd or Kubernetes would.
type supervisor struct {
	name    string
	bin     string
	env     []string
	logPath string
	log     *slog.Logger

	mu       sync.Mutex
	proc     *process
	stopping bool
	starts   int
	pids     []int          // every process it started
	exits    map[string]int // how often processes ended each way ("ended by signal 9 (killed)", …)
	done     chan struct{}
}

func newSupervisor(name, bin, dir string, env []string, log *slog.Logger) *supervisor {
	return &supervisor{name: name, bin: bin, env: env, logPath: filepath.Join(dir, name+".log"),
		log: log.With("worker", name), exits: map[string]int{}, done: make(chan struct{})}
}

// run is the supervisor loop; it returns once stop was called and the last
// process has exited.
func (s *supervisor) run() {
	defer close(s.done)
	for {
		p, ok := s.launch()
		if !ok {
			return
		}
		began := time.Now()
		<-p.done
		how := p.exitDescription()
		s.mu.Lock()
		s.exits[how]++
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return
		}
		s.log.Info("worker died; restarting", "pid", p.pid(), "how", how, "lived", time.Since(began).Round(time.Millisecond))
		time.Sleep(restartDelay(p, time.Since(began)))
	}
}

// restartDelay is short after a kill, as a supervisor would restart at once;
// longer after a worker that failed on its own right after starting (it
// cannot dial while the dev server restarts), so it does not spin.
func restartDelay(p *process, lived time.Duration) time.Duration {
	if !p.killedBySIGKILL() && lived < 2*time.Second {
		return time.Second
	}
	return 100 * time.Millisecond
}

func (s *supervisor) launch() (*process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, false
	}
	p, err := spawn(s.bin, nil, s.env, s.logPath)
	if err != nil {
		// Cannot happen for a binary that started before; say so and retry.
		s.log.Error("worker did not start", "error", err)
		p = nil
	}
	s.starts++
	s.proc = p
	if p != nil {
		s.pids = append(s.pids, p.pid())
	}
	return p, p != nil
}

// kill SIGKILLs the running worker, if one is running, and returns its pid.
func (s *supervisor) kill() (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping || s.proc == nil || s.proc.exited() {
		return 0, false
	}
	if err := s.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, false
	}
	return s.proc.pid(), true
}

// stop drains the worker with SIGTERM (SIGKILL after grace) and ends the
// supervisor loop.
func (s *supervisor) stop(grace time.Duration) {
	s.mu.Lock()
	s.stopping = true
	p := s.proc
	s.mu.Unlock()
	if p != nil {
		p.stop(grace)
	}
	<-s.done
}

// ran reports whether pid is one of the processes it started.
func (s *supervisor) ran(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.pids, pid)
}

// restarts counts processes started after the first.
func (s *supervisor) restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.starts-1, 0)
}

func (s *supervisor) exitCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.exits))
	for k, v := range s.exits {
		out[k] = v
	}
	return out
}

// kill is one SIGKILL the killer delivered.
type kill struct {
	At     time.Time `json:"at"`
	Worker string    `json:"worker"`
	PID    int       `json:"pid"`
}

// chaos is the record of everything the soak did to the system, used to
// tell a repeated step caused by it from one that is a bug.
type chaos struct {
	mu       sync.Mutex
	kills    []kill
	restarts []serverRestart
	// faults are the -faults soak's network faults as they happened.
	faults []faultWindow
	// reset holds the claims a rollback reset (claimsctl reset-build): the
	// steps after the reset point ran again, the model's among them.
	reset map[string]bool
}

func (c *chaos) addReset(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reset == nil {
		c.reset = map[string]bool{}
	}
	c.reset[id] = true
}

func (c *chaos) wasReset(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reset[id]
}

// serverRestart is a window a server was down: the Temporal server
// ("temporal") or PostgreSQL ("postgres").
type serverRestart struct {
	Component string    `json:"component"`
	StopAt    time.Time `json:"stop_at"`
	ReadyAt   time.Time `json:"ready_at"`
	Forced    bool      `json:"forced_sigkill"`
}

func (c *chaos) addFault(f faultWindow) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, f)
}

func (c *chaos) faultLog() []faultWindow {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]faultWindow(nil), c.faults...)
	slices.SortFunc(out, func(a, b faultWindow) int { return a.From.Compare(b.From) })
	return out
}

// faultIn reports whether a network fault was on in [from, to], or healed
// just before it (a worker's connections take some seconds to recover),
// on worker's links, or on any worker's when worker is "".
func (c *chaos) faultIn(worker string, from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	const catchUp = 10 * time.Second
	for _, f := range c.faults {
		if (worker == "" || f.Worker == worker) && !f.From.After(to) && !f.To.Add(catchUp).Before(from) {
			return true
		}
	}
	return false
}

func (c *chaos) addKill(k kill) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kills = append(c.kills, k)
}

func (c *chaos) addRestart(r serverRestart) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restarts = append(c.restarts, r)
}

func (c *chaos) snapshot() ([]kill, []serverRestart) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]kill(nil), c.kills...), append([]serverRestart(nil), c.restarts...)
}

// killedPID reports whether the killer SIGKILLed pid by the time by.
func (c *chaos) killedPID(pid int, by time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.kills {
		if k.PID == pid && !k.At.After(by) {
			return true
		}
	}
	return false
}

// killIn reports whether any worker was killed in [from, to].
func (c *chaos) killIn(from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.kills {
		if !k.At.Before(from) && !k.At.After(to) {
			return true
		}
	}
	return false
}

// restartOverlaps reports whether a server was down at some point in
// [from, to], or came back just before it (workers and timers catch up for a
// few seconds after the server returns).
func (c *chaos) restartOverlaps(from, to time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	const catchUp = 10 * time.Second
	for _, r := range c.restarts {
		if !r.StopAt.After(to) && !r.ReadyAt.Add(catchUp).Before(from) {
			return true
		}
	}
	return false
}

// killer SIGKILLs a random worker every min..max until ctx ends.
func killer(ctx context.Context, workers []*supervisor, minGap, maxGap time.Duration, rec *chaos, log *slog.Logger) {
	for {
		gap := minGap + time.Duration(rand.Int64N(int64(maxGap-minGap)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(gap):
		}
		w := workers[rand.IntN(len(workers))]
		if pid, ok := w.kill(); ok {
			rec.addKill(kill{At: time.Now(), Worker: w.name, PID: pid})
			log.Debug("killed a worker", "worker", w.name, "pid", pid)
		}
	}
}
