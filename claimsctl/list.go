package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// claimRow is one claim as visibility lists it.
type claimRow struct {
	ClaimID          string     `json:"claim_id"`
	RunID            string     `json:"run_id"`
	ClaimStatus      string     `json:"claim_status"`
	Execution        string     `json:"execution"`
	Started          time.Time  `json:"started"`
	ApprovalDeadline *time.Time `json:"approval_deadline,omitempty"`
	Closed           *time.Time `json:"closed,omitempty"`
}

func listClaims(ctx context.Context, c client.Client, query string) ([]claimRow, error) {
	q := fmt.Sprintf("WorkflowType = %q", workflows.WorkflowType)
	if query != "" {
		q += " AND " + query
	}
	var rows []claimRow
	var token []byte
	dc := converter.GetDefaultDataConverter()
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			return nil, err
		}
		for _, e := range resp.GetExecutions() {
			r := claimRow{ClaimID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId(),
				Execution: e.GetStatus().String(), Started: e.GetStartTime().AsTime()}
			sa := e.GetSearchAttributes().GetIndexedFields()
			if p := sa[workflows.ClaimStatusKey.GetName()]; p != nil {
				_ = dc.FromPayload(p, &r.ClaimStatus)
			}
			if p := sa[workflows.ApprovalDeadlineKey.GetName()]; p != nil {
				var d time.Time
				if dc.FromPayload(p, &d) == nil {
					r.ApprovalDeadline = &d
				}
			}
			if e.GetCloseTime() != nil {
				t := e.GetCloseTime().AsTime()
				r.Closed = &t
			}
			rows = append(rows, r)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return rows, nil
		}
	}
}

// list prints claims from visibility, newest first.
func list(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	status := fs.String("status", "", "only claims with this ClaimStatus (running, waiting, escalated, paid, …)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	q := ""
	if *status != "" {
		q = fmt.Sprintf("%s = %q", workflows.ClaimStatusKey.GetName(), *status)
	}
	rows, err := listClaims(ctx, c, q)
	if err != nil {
		return err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Started.After(rows[j].Started) })
	if *asJSON {
		return json.NewEncoder(out).Encode(rows)
	}
	fmt.Fprintf(out, "%-28s %-14s %-10s %-20s %s\n", "CLAIM", "STATUS", "RUN", "STARTED", "APPROVAL DEADLINE")
	for _, r := range rows {
		deadline := ""
		if r.ApprovalDeadline != nil && (r.ClaimStatus == workflows.StatusWaiting || r.ClaimStatus == workflows.StatusEscalated) {
			deadline = r.ApprovalDeadline.Format(time.RFC3339)
		}
		fmt.Fprintf(out, "%-28s %-14s %-10s %-20s %s\n", r.ClaimID, r.ClaimStatus, r.Execution, r.Started.Format(time.RFC3339), deadline)
	}
	return nil
}

// stuckClaim is a run that needs a look.
type stuckClaim struct {
	ClaimID     string        `json:"claim_id"`
	ClaimStatus string        `json:"claim_status"`
	Why         string        `json:"why"`
	Idle        time.Duration `json:"idle_ns"`
	LastEvent   time.Time     `json:"last_event"`
}

// stuck finds running claims with no step progress for more than factor ×
// the p95 step time of recently completed claims (at least floor), and
// waits past their deadline (a wait ends at its deadline on its own, unless
// no worker is running). It exits 3 when it finds any.
func stuck(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("stuck", flag.ContinueOnError)
	factor := fs.Float64("factor", 10, "stuck when idle longer than this many p95 step times")
	floor := fs.Duration("floor", 30*time.Second, "never call a claim stuck before it has been idle this long")
	sample := fs.Int("sample", 50, "recently completed claims to learn the p95 step time from")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()

	p95, err := stepP95(ctx, c, *sample)
	if err != nil {
		return 0, err
	}
	threshold := max(time.Duration(*factor*float64(p95)), *floor)
	now := time.Now()
	var found []stuckClaim

	running, err := listClaims(ctx, c, "ExecutionStatus = 'Running'")
	if err != nil {
		return 0, err
	}
	for _, r := range running {
		if r.ClaimStatus == workflows.StatusWaiting || r.ClaimStatus == workflows.StatusEscalated {
			if r.ApprovalDeadline != nil && now.Sub(*r.ApprovalDeadline) > *floor {
				found = append(found, stuckClaim{ClaimID: r.ClaimID, ClaimStatus: r.ClaimStatus, Idle: now.Sub(*r.ApprovalDeadline),
					Why: fmt.Sprintf("wait past its deadline %s (is any worker running?)", r.ApprovalDeadline.Format(time.RFC3339))})
			}
			continue
		}
		last, err := lastEvent(ctx, c, r.ClaimID, r.RunID)
		if err != nil {
			return 0, err
		}
		if idle := now.Sub(last); idle > threshold {
			found = append(found, stuckClaim{ClaimID: r.ClaimID, ClaimStatus: r.ClaimStatus, Idle: idle, LastEvent: last,
				Why: fmt.Sprintf("no step progress for %s (threshold %s = %.0f × p95 step %s)", idle.Round(time.Second), threshold.Round(time.Second), *factor, p95.Round(time.Millisecond))})
		}
	}
	if *asJSON {
		if err := json.NewEncoder(out).Encode(found); err != nil {
			return 0, err
		}
	} else {
		fmt.Fprintf(out, "p95 step time %s over recent claims; stuck after %s idle\n", p95.Round(time.Millisecond), threshold.Round(time.Second))
		if len(found) == 0 {
			fmt.Fprintln(out, "no stuck claims")
		}
		for _, s := range found {
			fmt.Fprintf(out, "%s  %s  %s\n", s.ClaimID, s.ClaimStatus, s.Why)
		}
	}
	if len(found) > 0 {
		return 3, nil
	}
	return 0, nil
}

// lastEvent is the time of a run's newest history event.
func lastEvent(ctx context.Context, c client.Client, id, runID string) (time.Time, error) {
	resp, err := c.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace: namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}, MaximumPageSize: 1,
	})
	if err != nil {
		return time.Time{}, err
	}
	events := resp.GetHistory().GetEvents()
	if len(events) == 0 {
		return time.Time{}, fmt.Errorf("%s has no history", id)
	}
	return events[0].GetEventTime().AsTime(), nil
}

// stepP95 learns the p95 time between steps (between consecutive completed
// workflow tasks) from recently completed claims, leaving out approval
// waits: those are days by design.
func stepP95(ctx context.Context, c client.Client, sample int) (time.Duration, error) {
	done, err := listClaims(ctx, c, "ExecutionStatus = 'Completed'")
	if err != nil {
		return 0, err
	}
	sort.Slice(done, func(i, j int) bool { return done[i].Started.After(done[j].Started) })
	var gaps []time.Duration
	for _, r := range done[:min(sample, len(done))] {
		var prev time.Time
		waiting := false
		it := c.GetWorkflowHistory(ctx, r.ClaimID, r.RunID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			e, err := it.Next()
			if err != nil {
				return 0, err
			}
			switch e.GetEventType() {
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				waiting = true
			case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
				at := e.GetEventTime().AsTime()
				if !prev.IsZero() && !waiting {
					gaps = append(gaps, at.Sub(prev))
				}
				prev, waiting = at, false
			}
		}
	}
	if len(gaps) == 0 {
		return time.Second, nil // nothing to learn from yet: assume a second
	}
	slices.Sort(gaps)
	return gaps[len(gaps)*95/100], nil
}

func namespace() string { return config.Get("TEMPORAL_NAMESPACE", "default") }
