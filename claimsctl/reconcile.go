package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// ExitUnmatched is claimsctl reconcile's exit code when anything did not
// match: scripts and cron tell a discrepancy from a failure (1) this way.
const ExitUnmatched = 3

// reconcile runs ReconcileWorkflow now, waits for its report and prints it.
// It returns ExitUnmatched when the report has a discrepancy.
func reconcile(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	sinceFlag := fs.String("since", "24h", "start of the window: a duration back from now (24h) or an RFC 3339 time")
	untilFlag := fs.String("until", "", "end of the window, likewise (default: now)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	maxEntries := fs.Int("max-entries", 0, "entries kept in the report (default 1000)")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("reconcile: unexpected arguments %q", fs.Args())
	}
	now := time.Now()
	since, err := parseWhen(*sinceFlag, now)
	if err != nil {
		return 0, fmt.Errorf("reconcile: --since: %w", err)
	}
	var until time.Time
	if *untilFlag != "" {
		if until, err = parseWhen(*untilFlag, now); err != nil {
			return 0, fmt.Errorf("reconcile: --until: %w", err)
		}
	}
	if !until.IsZero() && !since.Before(until) {
		return 0, fmt.Errorf("reconcile: --since %s is not before --until %s", since.Format(time.RFC3339), until.Format(time.RFC3339))
	}
	if until.IsZero() && !since.Before(now) {
		return 0, fmt.Errorf("reconcile: --since %s is in the future", since.Format(time.RFC3339))
	}
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	run, err := c.ExecuteWorkflow(ctx, workflows.ReconcileStartOptions(now), workflows.ReconcileWorkflowType,
		workflows.ReconcileInput{Since: since.UTC(), Until: until.UTC(), MaxEntries: *maxEntries})
	if err != nil {
		return 0, fmt.Errorf("reconcile: start: %w", err)
	}
	var rep workflows.ReconcileReport
	if err := run.Get(ctx, &rep); err != nil {
		return 0, fmt.Errorf("reconcile: %s: %w", run.GetID(), err)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return 0, err
		}
	} else {
		printReport(out, rep)
	}
	if rep.Unmatched > 0 {
		return ExitUnmatched, nil
	}
	return 0, nil
}

// parseWhen reads "24h" (that long before now) or an RFC 3339 time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: give a positive duration back from now", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither a duration (24h) nor an RFC 3339 time (2026-11-29T10:00:00Z)", s)
	}
	return t, nil
}

func printReport(out io.Writer, rep workflows.ReconcileReport) {
	fmt.Fprintf(out, "reconciliation %s: %s .. %s\n", rep.ID, rep.Since.Format(time.RFC3339), rep.Until.Format(time.RFC3339))
	fmt.Fprintf(out, "%d transfers in the window, %d claims checked\n\n", rep.TransfersScanned, rep.ClaimsChecked)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tCOUNT")
	for _, c := range activities.ReconcileCategories {
		fmt.Fprintf(tw, "%s\t%d\n", c, rep.Counts[c])
	}
	tw.Flush()
	if len(rep.Entries) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CATEGORY\tCLAIM\tTRANSFERS\tDETAIL")
		for _, e := range rep.Entries {
			printEntry(tw, e)
		}
		tw.Flush()
	}
	if rep.Truncated {
		fmt.Fprintf(out, "(entries truncated: %d not matched, %d listed; --json or the reconciliations table in the claims store for the report)\n",
			rep.Unmatched, len(rep.Entries))
	}
	if len(rep.InFlight) > 0 {
		fmt.Fprintf(out, "\nin flight (claim open, transfer recent; the next run judges them):\n")
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		for _, e := range rep.InFlight {
			printEntry(tw, e)
		}
		tw.Flush()
	}
	fmt.Fprintln(out)
	if rep.Unmatched == 0 {
		fmt.Fprintln(out, "all matched")
	} else {
		fmt.Fprintf(out, "%d not matched\n", rep.Unmatched)
	}
}

func printEntry(w io.Writer, e activities.ReconcileEntry) {
	trs := make([]string, len(e.TransferIDs))
	for i, id := range e.TransferIDs {
		trs[i] = fmt.Sprintf("%s (%s %s)", id, claim.FormatAmount(e.AmountsMinor[i], e.Currency), e.Currency)
	}
	if len(trs) == 0 {
		trs = []string{"-"}
	}
	id := e.ClaimID
	if id == "" {
		id = "(no claim)"
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", strings.ToUpper(e.Category), id, strings.Join(trs, ", "), e.Detail)
}

// schedule creates or updates the claims-reconcile schedule, as the worker
// does at start (--every 0 deletes it), and shows its next runs.
func schedule(ctx context.Context, args []string, out io.Writer) error {
	def, err := config.Duration("RECONCILE_EVERY", workflows.DefaultReconcileEvery)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	every := fs.Duration("every", def, "how often to reconcile (0 deletes the schedule)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("schedule: unexpected arguments %q", fs.Args())
	}
	if *every < 0 {
		return fmt.Errorf("schedule: --every %s is negative (0 deletes the schedule)", *every)
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	did, err := workflows.EnsureReconcileSchedule(ctx, c, *every)
	if err != nil {
		return err
	}
	if *every == 0 {
		fmt.Fprintf(out, "%s: %s\n", workflows.ReconcileScheduleID, did)
		return nil
	}
	fmt.Fprintf(out, "%s: %s, every %s, over the last %s\n", workflows.ReconcileScheduleID, did, *every, 2*(*every))
	if desc, err := c.ScheduleClient().GetHandle(ctx, workflows.ReconcileScheduleID).Describe(ctx); err == nil {
		for _, t := range desc.Info.NextActionTimes {
			fmt.Fprintf(out, "  next run %s\n", t.UTC().Format(time.RFC3339))
		}
	}
	return nil
}
