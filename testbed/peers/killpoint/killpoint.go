// Package killpoint is the contract's kill point (testbed/peers/README.md)
// for the Go peers: at PEER_CRASH, once per claim, the process records the
// claim in PEER_CRASH_STATE (synced) and SIGKILLs itself. With
// PEER_CRASH_BATCH=N one kill interrupts up to N claims, each held at the
// point until N are there or PEER_CRASH_WAIT has passed since the first
// was; the kill's claims are one line of the state file. durableclaims'
// worker holds and kills its own points the same way (worker/crash,
// --crash-batch); a peer imports nothing of the product, so this is its
// own.
package killpoint

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Points are where the contract kills.
var Points = []string{"after-pay", "in-notify"}

// Killer is a configured kill point; the zero value and nil never kill.
type Killer struct {
	point string
	file  string
	batch int
	wait  time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	held   []string
	timer  *time.Timer
	killed chan struct{}
	// kill is the SIGKILL; tests replace it.
	kill func()
}

// FromEnv reads PEER_CRASH, PEER_CRASH_STATE, PEER_CRASH_BATCH (default 1)
// and PEER_CRASH_WAIT (default 2s).
func FromEnv(log *slog.Logger) (*Killer, error) {
	k := &Killer{point: os.Getenv("PEER_CRASH"), file: os.Getenv("PEER_CRASH_STATE"), batch: 1, wait: 2 * time.Second,
		log: log, killed: make(chan struct{}), kill: func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }}
	switch {
	case k.point == "":
		return k, nil
	case !slices.Contains(Points, k.point):
		return nil, fmt.Errorf("PEER_CRASH: want empty, after-pay or in-notify, not %q", k.point)
	case k.file == "":
		return nil, fmt.Errorf("PEER_CRASH=%s needs PEER_CRASH_STATE", k.point)
	}
	if v := os.Getenv("PEER_CRASH_BATCH"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("PEER_CRASH_BATCH: want a whole number >= 1, not %q", v)
		}
		k.batch = n
	}
	if v := os.Getenv("PEER_CRASH_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("PEER_CRASH_WAIT: want a positive duration, not %q", v)
		}
		k.wait = d
	}
	return k, nil
}

// At is the kill point named point, reached by claim: it returns at once
// unless the point is armed and the claim's kill has not fired; then it
// holds the caller until the batch is killed (which, but in tests, ends
// the process).
func (k *Killer) At(point, claim string) {
	if k == nil || k.point == "" || k.point != point {
		return
	}
	k.mu.Lock()
	fired, err := k.fired()
	if err != nil {
		k.mu.Unlock()
		k.log.Error("kill point: the state is unreadable, not killing", "error", err)
		return
	}
	if fired[claim] {
		k.mu.Unlock()
		return
	}
	killed := k.killed
	if slices.Contains(k.held, claim) { // reached again while held: the same kill
		k.mu.Unlock()
		<-killed
		return
	}
	k.held = append(k.held, claim)
	switch {
	case len(k.held) >= k.batch:
		k.fireLocked()
	case len(k.held) == 1:
		k.timer = time.AfterFunc(k.wait, func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			if k.killed == killed { // not a later batch's
				k.fireLocked()
			}
		})
	}
	k.mu.Unlock()
	<-killed
}

func (k *Killer) fireLocked() {
	if len(k.held) == 0 {
		return
	}
	claims := k.held
	k.held = nil
	if k.timer != nil {
		k.timer.Stop()
		k.timer = nil
	}
	line := strings.Join(claims, " ")
	if err := k.remember(line); err != nil {
		k.log.Error("kill point: cannot record the kill, not killing", "error", err)
	} else {
		k.log.Warn("kill point: SIGKILL", "point", k.point, "claims", line)
		k.kill()
	}
	close(k.killed)
	k.killed = make(chan struct{})
}

func (k *Killer) fired() (map[string]bool, error) {
	f, err := os.Open(k.file)
	if os.IsNotExist(err) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		for _, id := range strings.Fields(sc.Text()) {
			out[id] = true
		}
	}
	return out, sc.Err()
}

func (k *Killer) remember(line string) error {
	f, err := os.OpenFile(k.file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if err == nil {
		err = f.Sync()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(k.file)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
