// Package crash kills the worker process, for real, at a chosen point of a
// chosen claim: the demo and the crash tests use it to show that a claim
// resumes where it stopped and pays once. Off unless --crash-at is given:
// the worker then adds the injector's activity interceptor (Interceptor)
// and wraps the activities' Mailer (Mailer); activities know nothing of it.
//
// Each point fires once. That it fired is written (and synced) to a state
// file before the kill, a line a kill, so the restarted worker carries on.
package crash

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Phase is a point around a side-effecting activity.
type Phase string

const (
	// BeforeEffect is after the activity started, before it touched the world.
	BeforeEffect Phase = "before-effect"
	// AfterEffect is after the world changed, before the activity's result
	// reaches the server: the window in which a crash leaves an effect the
	// history does not know of.
	AfterEffect Phase = "after-effect"
)

// Point is where to crash: a claim's step, before or after its side effect.
// Sub narrows it to one activity within the step ("turn2", "turn1/lookup_policy"
// in the triage loop); without it, the step's first activity that reaches
// the phase.
type Point struct {
	WorkflowID string
	Step       claim.Step
	Sub        string
	Phase      Phase
}

func (p Point) String() string {
	step := fmt.Sprint(int(p.Step))
	if p.Sub != "" {
		step += "/" + p.Sub
	}
	return fmt.Sprintf("%s:%s:%s", p.WorkflowID, step, p.Phase)
}

// key is the idempotency key the point fires at.
func (p Point) key() claim.IdempotencyKey {
	k := claim.StepKey(p.WorkflowID, p.Step)
	if p.Sub != "" {
		for _, part := range strings.Split(p.Sub, "/") {
			k = k.Sub(part)
		}
	}
	return k
}

// matches says whether the point fires at key: its own key, or, without a
// Sub, any activity within its step.
func (p Point) matches(key claim.IdempotencyKey) bool {
	if p.Sub != "" {
		return key == p.key()
	}
	return key.Within(p.key())
}

// Parse reads "claim-0042:7,claim-0043:6:after-effect,claim-0044:2/turn2".
// The phase defaults to before-effect.
func Parse(spec string) ([]Point, error) {
	var out []Point
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" {
			return nil, fmt.Errorf("crash point %q: want CLAIM:STEP[/SUB][:before-effect|after-effect]", item)
		}
		stepPart, sub, _ := strings.Cut(parts[1], "/")
		step, err := strconv.Atoi(stepPart)
		if err != nil || step < int(claim.StepIntake) || step > int(claim.StepAudit) {
			return nil, fmt.Errorf("crash point %q: step must be 1 to 9", item)
		}
		p := Point{WorkflowID: parts[0], Step: claim.Step(step), Sub: sub, Phase: BeforeEffect}
		if len(parts) == 3 {
			switch ph := Phase(parts[2]); ph {
			case BeforeEffect, AfterEffect:
				p.Phase = ph
			default:
				return nil, fmt.Errorf("crash point %q: phase must be before-effect or after-effect", item)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Injector kills the process at its points; see Interceptor and Mailer for
// where it is told about side effects.
type Injector struct {
	points    []Point
	stateFile string
	log       *slog.Logger
	mu        sync.Mutex
	// batch and wait: see Batch. held are the points reached and waiting
	// for the kill; killed is closed by it.
	batch  int
	wait   time.Duration
	held   []Point
	timer  *time.Timer
	killed chan struct{}
	// kill is the process kill; tests replace it. beforeKill runs first
	// (see BeforeKill).
	kill       func()
	beforeKill func()
}

// New returns an injector for points, remembering fired points in stateFile.
func New(points []Point, stateFile string, log *slog.Logger) *Injector {
	return &Injector{points: points, stateFile: stateFile, log: log, batch: 1, killed: make(chan struct{}), kill: func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}}
}

// Batch makes one kill interrupt up to n claims, each at its own point: a
// point reached is held (its activity waits) until n points are, or until
// wait has passed since the first was, and then all of them are
// remembered, on one line of the state file, and the process is killed
// once. The bench's peers workload kills a hundred claims at a point with
// ten kills this way. n <= 1 kills at each point as it is reached.
func (i *Injector) Batch(n int, wait time.Duration) *Injector {
	i.batch, i.wait = max(n, 1), wait
	return i
}

// BeforeKill makes f the last thing done before each kill: the worker
// exports the spans it holds, so a trace shows what the killed worker did
// up to the kill (a real SIGKILL loses what was buffered).
func (i *Injector) BeforeKill(f func()) *Injector {
	i.beforeKill = f
	return i
}

// At kills the process if (key, phase) is an armed point that has not fired
// (with a batch: once the batch is full, holding the caller until then).
func (i *Injector) At(_ context.Context, key claim.IdempotencyKey, phase Phase) {
	for _, p := range i.points {
		if p.Phase != phase || !p.matches(key) {
			continue
		}
		i.mu.Lock()
		fired, err := i.fired()
		if err != nil {
			i.mu.Unlock()
			i.log.Error("crash state unreadable; not crashing", "error", err)
			return
		}
		if fired[p.String()] {
			i.mu.Unlock()
			return
		}
		killed := i.killed
		if slices.Contains(i.held, p) {
			// Reached again while held (a retry of the held attempt):
			// it waits for the same kill.
			i.mu.Unlock()
			<-killed
			return
		}
		i.held = append(i.held, p)
		if i.batch > 1 {
			i.log.Info("crash injection: point reached, held for the batch", "point", p.String(), "key", string(key), "held", len(i.held), "batch", i.batch)
		}
		switch {
		case len(i.held) >= i.batch:
			i.fireLocked()
		case len(i.held) == 1:
			i.timer = time.AfterFunc(i.wait, func() {
				i.mu.Lock()
				defer i.mu.Unlock()
				if i.killed == killed { // not a later batch's
					i.fireLocked()
				}
			})
		}
		i.mu.Unlock()
		<-killed // the process is gone by then, but in tests
		return
	}
}

// fireLocked remembers the held points and kills the process; i.mu is held.
func (i *Injector) fireLocked() {
	if len(i.held) == 0 {
		return
	}
	pts := i.held
	i.held = nil
	if i.timer != nil {
		i.timer.Stop()
		i.timer = nil
	}
	names := make([]string, len(pts))
	for k, p := range pts {
		names[k] = p.String()
	}
	line := strings.Join(names, " ")
	if err := i.remember(line); err != nil {
		i.log.Error("crash state unwritable; not crashing", "error", err)
	} else {
		i.log.Warn("crash injection: killing this worker with SIGKILL", "points", line)
		if i.beforeKill != nil {
			i.beforeKill()
		}
		i.kill()
	}
	close(i.killed)
	i.killed = make(chan struct{})
}

func (i *Injector) fired() (map[string]bool, error) {
	f, err := os.Open(i.stateFile)
	if errors.Is(err, os.ErrNotExist) {
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
		for _, p := range strings.Fields(sc.Text()) { // a line a kill: the points it interrupted
			out[p] = true
		}
	}
	return out, sc.Err()
}

// remember appends a kill's line (its points) to the state file, synced.
func (i *Injector) remember(line string) error {
	f, err := os.OpenFile(i.stateFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
