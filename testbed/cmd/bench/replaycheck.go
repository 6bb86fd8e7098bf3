package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// replayCheckWorkload is the replay-check workload (-only replaycheck, opt-in: it parks
// -replaycheck-open claims first): `claimsctl replay-check` as a deploy
// runs it, a process of its own, against that many open claims (each
// parked for a decision, a history of some 25 events) and -replaycheck-closed
// closed ones; its wall time and peak RSS (the kernel's maxrss of the
// process) are the figures. Run at -replaycheck-concurrency values, each
// against the same runs.
type replayCheckWorkload struct {
	open, closed int   // -replaycheck-open, -replaycheck-closed
	concurrency  []int // -replaycheck-concurrency
}

func (*replayCheckWorkload) names() []string { return []string{"replaycheck"} }

func (r *replayCheckWorkload) flags(fs *flag.FlagSet) {
	r.concurrency = []int{4, 16}
	fs.IntVar(&r.open, "replaycheck-open", 10000, "the replaycheck workload (-only replaycheck): claims parked, open runs for claimsctl replay-check")
	fs.IntVar(&r.closed, "replaycheck-closed", 100, "the replaycheck workload: recently closed runs checked beside the open ones")
	fs.Func("replaycheck-concurrency", "the replaycheck workload: claimsctl replay-check --concurrency values, comma-separated (default 4,16)", func(v string) error {
		r.concurrency = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				return fmt.Errorf("%q: want positive whole numbers", v)
			}
			r.concurrency = append(r.concurrency, n)
		}
		return nil
	})
}

func (r *replayCheckWorkload) run(ctx context.Context, e *env, res *results) error {
	if err := r.measure(ctx, e, res); err != nil {
		return fmt.Errorf("replaycheck: %w", err)
	}
	return nil
}

func (r *replayCheckWorkload) measure(ctx context.Context, e *env, res *results) error {
	prefix := fmt.Sprintf("bench-replay-%d-", seq.Add(1))
	begin := time.Now()
	pace, err := e.park(ctx, prefix, 0, r.open)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  %d parked after %s (bin/starter at %.0f a minute)\n", r.open, time.Since(begin).Round(time.Second), pace)
	ctl := filepath.Join(filepath.Dir(e.o.workerBin), "claimsctl")
	for _, conc := range r.concurrency {
		cmd := exec.CommandContext(ctx, ctl, "replay-check", "--quiet", "--json", "--closed", fmt.Sprint(r.closed),
			"--concurrency", fmt.Sprint(conc), "--query", fmt.Sprintf("WorkflowId STARTS_WITH %q", "bench-"))
		cmd.Env = append(os.Environ(), "TEMPORAL_ADDRESS="+e.server.FrontendHostPort(), "TEMPORAL_NAMESPACE=default", "LOG_LEVEL=warn")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		t := time.Now()
		out, err := cmd.Output()
		took := time.Since(t)
		if err != nil {
			return fmt.Errorf("claimsctl replay-check: %w: %.500s%.500s", err, out, stderr.String())
		}
		var rep struct {
			Open, Closed, Replayed int
			Events                 int64
			Failures               []any
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			return fmt.Errorf("claimsctl replay-check: %w: %.500s", err, out)
		}
		if len(rep.Failures) > 0 || rep.Open < r.open {
			return fmt.Errorf("claimsctl replay-check: %d failures, %d open listed (want %d): %.500s", len(rep.Failures), rep.Open, r.open, out)
		}
		var rssKiB int64
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			rssKiB = ru.Maxrss
		}
		tag := fmt.Sprintf("replaycheck_c%d", conc)
		res.Values[tag+"_seconds"] = took.Seconds()
		res.Values[tag+"_runs"] = float64(rep.Replayed)
		res.Values[tag+"_runs_per_s"] = float64(rep.Replayed) / took.Seconds()
		res.Values[tag+"_events"] = float64(rep.Events)
		res.Values[tag+"_peak_rss_mib"] = float64(rssKiB) / 1024
		fmt.Fprintf(os.Stderr, "  replay-check, %d at once: %d runs (%d open, %d closed), %d events in %.1f s (%.0f runs/s), peak RSS %.1f MiB\n",
			conc, rep.Replayed, rep.Open, rep.Closed, rep.Events, took.Seconds(), float64(rep.Replayed)/took.Seconds(), float64(rssKiB)/1024)
	}
	return nil
}
