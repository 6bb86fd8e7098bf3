package replaycheck

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// ExitWouldBreak is replay-check's exit code when a run of the namespace
// does not replay on this build: the deploy stops there.
const ExitWouldBreak = 3

// Command is `claimsctl replay-check` and `worker replay-check`: it
// replays the namespace's open runs and its most recently closed ones
// against this binary's workflow code, with interceptors the workflow
// interceptors the binary's worker runs (the worker's own check replays
// exactly what it would run), and returns the exit code: 0 every run
// replays, ExitWouldBreak one does not; an error is never a pass.
func Command(ctx context.Context, args []string, out io.Writer, dial func(context.Context) (client.Client, error),
	interceptors []interceptor.WorkerInterceptor) (int, error) {
	fs := flag.NewFlagSet("replay-check", flag.ContinueOnError)
	fs.SetOutput(out)
	closed := fs.Int("closed", 100, "the most recently closed runs checked beside every open one (0: none)")
	query := fs.String("query", "", `a visibility query narrowing the runs (e.g. 'WorkflowId STARTS_WITH "claim-"')`)
	queue := fs.String("task-queue", config.Get("CLAIMS_TASK_QUEUE", workflows.TaskQueue), "the claims' task queue: every run on it is checked, with every run of this build's workflow types")
	concurrency := fs.Int("concurrency", 0, "histories downloaded and replayed at once (default 2 × the CPUs)")
	keepGoing := fs.Bool("keep-going", false, "check every run instead of stopping at the first that breaks")
	allowEmpty := fs.Bool("allow-empty", false, "pass when there is nothing to check (a new namespace); otherwise no runs found is an error: a wrong namespace or query would pass")
	timeout := fs.Duration("timeout", 30*time.Minute, "give up (exit 1, not a pass) after this long")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	files := fs.String("histories", "", "replay the history files (*.json) in this directory and its folders instead of the namespace's runs: the committed corpus (a folder per workflow version), or histories exported with temporal workflow show --output json, each named after its workflow ID (--closed, --query and --task-queue do not apply)")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("replay-check: unexpected arguments %q", fs.Args())
	}
	if *closed < 0 {
		return 0, fmt.Errorf("replay-check: --closed %d: want 0 or more", *closed)
	}
	dc, fc, err := config.Converters() // decrypt payloads and failures when codec keys are configured
	if err != nil {
		return 0, err
	}
	o := Options{TaskQueue: *queue, Closed: *closed, Query: *query, Concurrency: *concurrency, KeepGoing: *keepGoing,
		DataConverter: dc, FailureConverter: fc, Interceptors: interceptors}
	if !*quiet {
		o.Progress = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *timeout)
	defer cancel()
	var rep Report
	var checkErr error
	if *files != "" {
		paths, err := HistoryFiles(*files)
		if err != nil {
			return 0, err
		}
		if len(paths) == 0 {
			return 0, fmt.Errorf("replay-check: no *.json histories in %s or its folders", *files)
		}
		rep, checkErr = CheckFiles(paths, o)
	} else {
		c, err := dial(ctx)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		rep, checkErr = Check(ctx, c, o)
	}
	if err := printReport(out, rep, *files != "", *asJSON); err != nil {
		return 0, err
	}
	switch {
	case len(rep.Failures) > 0:
		return ExitWouldBreak, nil
	case checkErr != nil:
		return 0, fmt.Errorf("replay-check: %w (not a pass)", checkErr)
	case rep.Replayed == 0 && !*allowEmpty:
		return 0, fmt.Errorf("replay-check: no run to replay (%d listed, %d without a completed task, %d gone): check the namespace and --query, or pass --allow-empty for a new namespace",
			rep.Open+rep.Closed, rep.Skipped, rep.Gone)
	}
	return 0, nil
}

// printReport prints what a check found, as text or JSON.
func printReport(out io.Writer, rep Report, files, asJSON bool) error {
	if asJSON {
		type failure struct {
			WorkflowID   string `json:"workflow_id"`
			RunID        string `json:"run_id"`
			WorkflowType string `json:"workflow_type"`
			Status       string `json:"status"`
			Error        string `json:"error"`
			Event        string `json:"event,omitempty"`
		}
		report := struct {
			Open            int       `json:"open"`
			Closed          int       `json:"closed"`
			Replayed        int       `json:"replayed"`
			Skipped         int       `json:"skipped_no_task_yet"`
			Gone            int       `json:"gone"`
			Events          int64     `json:"events"`
			Seconds         float64   `json:"seconds"`
			Stopped         bool      `json:"stopped_at_first_failure"`
			Failures        []failure `json:"failures"`
			FailuresDropped int       `json:"failures_dropped,omitempty"`
		}{rep.Open, rep.Closed, rep.Replayed, rep.Skipped, rep.Gone, rep.Events, rep.Took.Seconds(), rep.Stopped, []failure{}, rep.FailuresDropped}
		for _, f := range rep.Failures {
			report.Failures = append(report.Failures, failure{f.WorkflowID, f.RunID, f.WorkflowType, f.Status, f.Err.Error(), f.Event})
		}
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	if files {
		fmt.Fprintf(out, "replayed %d history files, %d events, in %.1f s\n", rep.Replayed, rep.Events, rep.Took.Seconds())
	} else {
		fmt.Fprintf(out, "replayed %d runs (%d open, %d recently closed listed), %d events, in %.1f s\n",
			rep.Replayed, rep.Open, rep.Closed, rep.Events, rep.Took.Seconds())
	}
	if rep.Skipped+rep.Gone > 0 {
		fmt.Fprintf(out, "not replayed: %d with no completed workflow task yet, %d deleted since listed\n", rep.Skipped, rep.Gone)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(out, "WOULD BREAK: %s\n", f)
	}
	if rep.FailuresDropped > 0 {
		fmt.Fprintf(out, "… and %d more\n", rep.FailuresDropped)
	}
	switch {
	case len(rep.Failures) == 0:
		fmt.Fprintln(out, "every run replays on this build")
	case rep.Stopped:
		fmt.Fprintln(out, "stopped at the first run that breaks (--keep-going checks them all): do not deploy this build")
	default:
		fmt.Fprintf(out, "%d runs would break: do not deploy this build\n", len(rep.Failures)+rep.FailuresDropped)
	}
	return nil
}
