package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Where a claim's worker milliseconds go: the claims worker's CPU profile
// over the floor workload's claim row, each sample put in a step (the
// outermost of this project's activities on its stack, or the SDK's
// machinery it ran in) and a part (what the time was spent on), scaled to
// the worker's CPU a claim measured from /proc in the same run.

// stack is one stack of a `go tool pprof -traces` listing: its CPU time
// and its frames, leaf first.
type stack struct {
	value  time.Duration
	frames []string
}

// parseTraces reads `go tool pprof -traces` output: blocks separated by
// "-----------+---…" lines, the first line of each "<value> <leaf frame>",
// then one frame a line.
func parseTraces(out []byte) []stack {
	var traces []stack
	var cur stack
	flush := func() {
		if cur.value > 0 {
			traces = append(traces, cur)
		}
		cur = stack{}
	}
	inTrace := false
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inTrace = true
			continue
		}
		if !inTrace || strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if cur.value == 0 {
			d, err := time.ParseDuration(f[0])
			if err != nil {
				continue
			}
			cur.value = d
			f = f[1:]
		}
		if len(f) > 0 {
			cur.frames = append(cur.frames, f[0])
		}
	}
	flush()
	return traces
}

// activityFrame is a method of activities.Activities: the step.
var activityFrame = regexp.MustCompile(`durableclaims/activities\.\(\*Activities\)\.([A-Z][A-Za-z]*)`)

// workerSteps name the SDK's machinery a sample ran in when none of this
// project's activities is on its stack, in order: first match wins.
var workerSteps = []profileCategory{
	{"gc", "garbage collection", []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge"}},
	{"workflow", "workflow tasks (the SDK, replay, the workflow's code)", []string{"go.temporal.io/sdk/internal.(*workflow", "go.temporal.io/sdk/internal.(*coroutineState)", "durableclaims/workflows", "go.temporal.io/sdk/internal.(*workflowTaskPoller)"}},
	{"activity", "activity tasks (the SDK around an activity: poll, encode, complete)", []string{"go.temporal.io/sdk/internal.(*activityTaskHandlerImpl)", "go.temporal.io/sdk/internal.(*activityTaskPoller)", "go.temporal.io/sdk/internal.(*localActivity", "go.temporal.io/sdk/internal.(*activityWorker)"}},
	{"sdk", "the SDK otherwise (pollers, heartbeats, metrics)", []string{"go.temporal.io/"}},
	{"other", "other (the runtime, gRPC's own goroutines)", nil},
}

// workerParts say what a sample's time was spent on, first match wins:
// GC, then the store, the claim file and encryption before the
// serialisation and transports they call.
var workerParts = []profileCategory{
	{"gc", "GC", []string{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcDrain"}},
	{"store", "claims store", []string{"database/sql.", "github.com/jackc/pgx", "durableclaims/internal/store.", "modernc.org/sqlite"}},
	{"claimfile", "claim file", []string{"durableclaims/internal/claimfile.", "durableclaims/activities.(*Activities).writeClaimFile", "durableclaims/internal/blobs."}},
	{"crypto", "encryption and signatures", []string{"durableclaims/internal/codec.", "crypto/", "golang.org/x/crypto", "github.com/go-jose"}},
	{"http", "HTTP (Stripe, model)", []string{"github.com/stripe/stripe-go", "net/http.", "github.com/openai/openai-go"}},
	{"grpc", "gRPC", []string{"google.golang.org/grpc"}},
	{"encoding", "JSON and protobuf", []string{"encoding/json.", "google.golang.org/protobuf", "github.com/gogo/protobuf", "go.temporal.io/sdk/converter."}},
	{"own", "our code", []string{"durableclaims/"}},
	{"sdk", "SDK", []string{"go.temporal.io/"}},
	{"runtime", "runtime", []string{"runtime.", "syscall."}},
	{"other", "other", nil},
}

// whereCell is one step's time in one part.
type whereCell struct{ step, part string }

// classifyWhere sorts each trace by step and part.
func classifyWhere(traces []stack) (map[whereCell]time.Duration, time.Duration) {
	cells := map[whereCell]time.Duration{}
	var total time.Duration
	for _, t := range traces {
		total += t.value
		step := ""
		for i := len(t.frames) - 1; i >= 0 && step == ""; i-- { // the outermost activity
			if m := activityFrame.FindStringSubmatch(t.frames[i]); m != nil {
				step = m[1]
			}
		}
		if step == "" {
			step = firstMatch(t.frames, workerSteps)
		}
		cells[whereCell{step, firstMatch(t.frames, workerParts)}] += t.value
	}
	return cells, total
}

func firstMatch(frames []string, cats []profileCategory) string {
	for _, c := range cats {
		for _, want := range c.frames {
			for _, f := range frames {
				if strings.Contains(f, want) {
					return c.key
				}
			}
		}
	}
	return cats[len(cats)-1].key
}

// recordWhere summarises the profiles at paths into res under "where_":
// where_<step>__<part>_ms, each a share of the worker's msPerClaim.
func recordWhere(res *results, paths []string, msPerClaim float64) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("reading the worker's profile needs the go command on PATH: %w", err)
	}
	out, err := exec.Command(goBin, append([]string{"tool", "pprof", "-traces"}, paths...)...).Output()
	if err != nil {
		return fmt.Errorf("go tool pprof -traces %s: %w", strings.Join(paths, " "), err)
	}
	cells, total := classifyWhere(parseTraces(out))
	if total == 0 {
		return fmt.Errorf("%s: no samples", strings.Join(paths, " "))
	}
	for c, d := range cells {
		res.Values["where_"+c.step+"__"+c.part+"_ms"] = msPerClaim * d.Seconds() / total.Seconds()
	}
	res.Values["where_worker_ms"] = msPerClaim
	return nil
}

// printWhere prints where the worker's milliseconds of a claim go: a row
// a step (largest first), a column a part; parts under 0.05 ms a claim
// in every step are left out.
func (r *results) printWhere(w io.Writer) {
	total, ok := r.Values["where_worker_ms"]
	if !ok {
		return
	}
	steps := map[string]map[string]float64{}
	partSum := map[string]float64{}
	for k, v := range r.Values {
		rest, ok := strings.CutPrefix(k, "where_")
		if !ok {
			continue
		}
		step, part, ok := strings.Cut(strings.TrimSuffix(rest, "_ms"), "__")
		if !ok {
			continue
		}
		if steps[step] == nil {
			steps[step] = map[string]float64{}
		}
		steps[step][part] += v
		partSum[part] += v
	}
	var parts []profileCategory
	for _, p := range workerParts {
		if partSum[p.key] >= 0.05 {
			parts = append(parts, p)
		}
	}
	sum := func(step string) (s float64) {
		for _, v := range steps[step] {
			s += v
		}
		return s
	}
	order := slices.Collect(maps.Keys(steps))
	slices.SortFunc(order, func(a, b string) int {
		if d := sum(b) - sum(a); d != 0 {
			if d > 0 {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "\nwhere the claims worker's %.1f ms of CPU a claim go (its CPU profile over the claim row's last repetition):\n\n", total)
	fmt.Fprint(&b, "| step | ms a claim |")
	for _, p := range parts {
		fmt.Fprintf(&b, " %s |", p.label)
	}
	fmt.Fprint(&b, "\n|---|---|")
	for range parts {
		fmt.Fprint(&b, "---|")
	}
	fmt.Fprintln(&b)
	for _, s := range order {
		fmt.Fprintf(&b, "| %s | %.2f |", stepLabel(s), sum(s))
		for _, p := range parts {
			if v := steps[s][p.key]; v >= 0.05 {
				fmt.Fprintf(&b, " %.2f |", v)
			} else {
				fmt.Fprint(&b, " |")
			}
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintf(&b, "| **all** | **%.2f** |", total)
	for _, p := range parts {
		fmt.Fprintf(&b, " %.2f |", partSum[p.key])
	}
	fmt.Fprintln(&b)
	_, _ = w.Write(b.Bytes())
}

// stepLabel names a step: an activity by its method, the SDK's machinery
// by its category's label.
func stepLabel(step string) string {
	for _, c := range workerSteps {
		if c.key == step {
			return c.label
		}
	}
	return "`" + step + "`"
}
