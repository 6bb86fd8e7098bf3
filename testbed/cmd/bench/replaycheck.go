package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The replay-check workload (-only replaycheck, opt-in: it parks
// -replaycheck-open claims first): `claimsctl replay-check` as a deploy
// runs it, a process of its own, against that many open claims (each
// parked for a decision, a history of some 25 events) and -replaycheck-closed
// closed ones; its wall time and peak RSS (the kernel's maxrss of the
// process) are the figures. Run at -replaycheck-concurrency values, each
// against the same runs.
func (e *env) replayCheck(ctx context.Context, res *results) error {
	prefix := fmt.Sprintf("bench-replay-%d-", seq.Add(1))
	begin := time.Now()
	pace, err := e.park(ctx, prefix, 0, e.o.replayOpen)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  %d parked after %s (bin/starter at %.0f a minute)\n", e.o.replayOpen, time.Since(begin).Round(time.Second), pace)
	ctl := filepath.Join(filepath.Dir(e.o.workerBin), "claimsctl")
	for _, conc := range e.o.replayConcurrency {
		cmd := exec.CommandContext(ctx, ctl, "replay-check", "--quiet", "--json", "--closed", fmt.Sprint(e.o.replayClosed),
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
		if len(rep.Failures) > 0 || rep.Open < e.o.replayOpen {
			return fmt.Errorf("claimsctl replay-check: %d failures, %d open listed (want %d): %.500s", len(rep.Failures), rep.Open, e.o.replayOpen, out)
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
