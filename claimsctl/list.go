package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
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
	return listClaimsLimit(ctx, c, query, 0)
}

// listClaimsLimit is listClaims stopping after limit rows (0: all).
func listClaimsLimit(ctx context.Context, c client.Client, query string, limit int) ([]claimRow, error) {
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
			if limit > 0 && len(rows) == limit {
				return rows, nil
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return rows, nil
		}
	}
}

// list prints claims: those waiting for a decision from the approval
// queue (oldest deadline first, a page at a time, with counts), any other
// status from visibility (newest first, the first --limit).
func list(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	status := fs.String("status", "", "only claims with this ClaimStatus (running, waiting, escalated, paid, …)")
	limit := fs.Int("limit", 50, "at most this many rows")
	after := fs.String("after", "", "waiting claims: the page after this one (the cursor the last page printed)")
	currency := fs.String("currency", "", "waiting claims: only in this currency")
	approver := fs.String("approver", "", "waiting claims: only those this approver may decide now (APPROVERS_FILE)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *limit <= 0 || *limit > 10000 {
		return fmt.Errorf("--limit %d: want 1 to 10000", *limit)
	}
	if *status == workflows.StatusWaiting || *status == workflows.StatusEscalated {
		return listQueue(ctx, out, *status, *currency, *approver, *after, *limit, *asJSON)
	}
	if *after != "" || *currency != "" || *approver != "" {
		return errors.New("--after, --currency and --approver apply to --status waiting or escalated")
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	q, all := "", fmt.Sprintf("WorkflowType = %q", workflows.WorkflowType)
	if *status != "" {
		q = fmt.Sprintf("%s = %q", workflows.ClaimStatusKey.GetName(), *status)
		all += " AND " + q
	}
	total, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace(), Query: all})
	if err != nil {
		return err
	}
	rows, err := listClaimsLimit(ctx, c, q, *limit)
	if err != nil {
		return err
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Started.After(rows[j].Started) })
	if *asJSON {
		return json.NewEncoder(out).Encode(rows)
	}
	fmt.Fprintf(out, "%d claims; the %d newest:\n", total.GetCount(), len(rows))
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

// queueRow is one waiting claim as the approval queue lists it.
type queueRow struct {
	ClaimID    string    `json:"claim_id"`
	RunID      string    `json:"run_id"`
	Stage      string    `json:"stage"`
	Deadline   time.Time `json:"deadline"`
	Amount     string    `json:"amount"`
	Currency   string    `json:"currency"`
	Quorum     int       `json:"quorum"`
	Voters     []string  `json:"voters,omitempty"`
	AssignedTo string    `json:"assigned_to,omitempty"`
	PayeeName  string    `json:"payee_name,omitempty"`
	Reasons    []string  `json:"reasons,omitempty"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// queuePage is what --json prints for waiting claims.
type queuePage struct {
	Counts store.QueueCounts `json:"counts"`
	Claims []queueRow        `json:"claims"`
	// Next is the --after of the next page; empty on the last.
	Next string `json:"next,omitempty"`
}

func listQueue(ctx context.Context, out io.Writer, stage, currency, approver, after string, limit int, asJSON bool) error {
	f := store.QueueFilter{Stage: stage, Currency: strings.ToLower(currency)}
	if approver != "" {
		book, err := authority.Load(config.ApproversFile())
		if err != nil {
			return err
		}
		ap, ok := book.Approvers.Find(approver)
		if !ok {
			return fmt.Errorf("--approver %s: not in the approver directory", approver)
		}
		f.Viewer = store.ViewerOf(ap)
	}
	var cur *store.QueueCursor
	if after != "" {
		c, err := store.ParseQueueCursor(after)
		if err != nil {
			return fmt.Errorf("--after: %v", err)
		}
		cur = &c
	}
	st, err := openStore()
	if err != nil {
		return err
	}
	defer st.Close()
	rows, err := st.ApprovalQueue(ctx, f, cur, limit+1)
	if err != nil {
		return err
	}
	counts, err := st.CountQueue(ctx, f)
	if err != nil {
		return err
	}
	p := queuePage{Counts: counts, Claims: []queueRow{}}
	if len(rows) > limit {
		rows = rows[:limit]
		last := rows[len(rows)-1]
		p.Next = store.CursorAfter(last).String()
	}
	for _, r := range rows {
		q := queueRow{ClaimID: r.ClaimID, RunID: r.RunID, Stage: r.Stage, Deadline: r.Deadline, Amount: claim.FormatAmount(r.AmountMinor, r.Currency),
			Currency: r.Currency, Quorum: r.Quorum, Voters: r.Voters, AssignedTo: r.AssignedTo, UpdatedAt: r.UpdatedAt}
		var a approvals.Approval
		if json.Unmarshal(r.Summary, &a) == nil {
			q.PayeeName, q.Reasons = a.Request.PayeeName, a.Request.Reasons
		}
		p.Claims = append(p.Claims, q)
	}
	if asJSON {
		return json.NewEncoder(out).Encode(p)
	}
	fmt.Fprintf(out, "%d waiting for a decision (%d waiting, %d escalated); %d match; from the approval queue, oldest deadline first:\n",
		counts.Total, counts.ByStage[workflows.StatusWaiting], counts.ByStage[workflows.StatusEscalated], counts.Matching)
	fmt.Fprintf(out, "%-28s %-10s %-20s %14s %-4s %s\n", "CLAIM", "STAGE", "DEADLINE", "AMOUNT", "CUR", "VOTES / HANDED TO")
	for _, r := range p.Claims {
		who := ""
		if r.Quorum > 1 {
			who = fmt.Sprintf("%d of %d %s", len(r.Voters), r.Quorum, strings.Join(r.Voters, ","))
		}
		if r.AssignedTo != "" {
			who = strings.TrimSpace(who + " → " + r.AssignedTo)
		}
		fmt.Fprintf(out, "%-28s %-10s %-20s %14s %-4s %s\n", r.ClaimID, r.Stage, r.Deadline.Format(time.RFC3339), r.Amount, r.Currency, who)
	}
	if p.Next != "" {
		fmt.Fprintf(out, "next page: claimsctl list --status %s --after %s\n", stage, p.Next)
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
	// WaitingOn is the dependency the claim waits for ("model", "stripe"),
	// Idle then counting from when it began to wait.
	WaitingOn string `json:"waiting_on,omitempty"`
}

// overdueWaits are the waits past their deadline by more than floor, from
// the approval queue: oldest deadline first, so only the overdue are read.
func overdueWaits(ctx context.Context, st *store.Store, now time.Time, floor time.Duration) ([]stuckClaim, error) {
	var found []stuckClaim
	var cur *store.QueueCursor
	for {
		page, err := st.ApprovalQueue(ctx, store.QueueFilter{}, cur, 500)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if now.Sub(r.Deadline) <= floor {
				return found, nil
			}
			found = append(found, stuckClaim{ClaimID: r.ClaimID, ClaimStatus: r.Stage, Idle: now.Sub(r.Deadline),
				Why: fmt.Sprintf("wait past its deadline %s (is any worker running?)", r.Deadline.Format(time.RFC3339))})
		}
		if len(page) < 500 {
			return found, nil
		}
		next := store.CursorAfter(page[len(page)-1])
		cur = &next
	}
}

// dependencyWaits are the claims waiting for a dependency that is down
// (the model provider, Stripe), and how many wait for each since when: their
// status says so. Each claim at work is asked (at most maxRead), so this
// needs a worker to answer.
func dependencyWaits(ctx context.Context, c client.Client, now time.Time, maxRead int) ([]stuckClaim, map[string]*outage, bool, error) {
	atWork := fmt.Sprintf("ExecutionStatus = 'Running' AND %s = %q", workflows.ClaimStatusKey.GetName(), workflows.StatusRunning)
	working, err := listClaimsLimit(ctx, c, atWork, maxRead+1)
	if err != nil {
		return nil, nil, false, err
	}
	readAll := len(working) <= maxRead
	working = working[:min(len(working), maxRead)]
	var found []stuckClaim
	outages := map[string]*outage{}
	for _, r := range working {
		dep, since, ok := waitingOn(ctx, c, r.ClaimID, r.RunID)
		if !ok {
			continue
		}
		found = append(found, stuckClaim{ClaimID: r.ClaimID, ClaimStatus: r.ClaimStatus, Idle: now.Sub(since), WaitingOn: dep,
			Why: fmt.Sprintf("waiting for %s since %s (%s)", dep, since.Format(time.RFC3339), now.Sub(since).Round(time.Second))})
		o := outages[dep]
		if o == nil {
			o = &outage{Dependency: dep, Since: since}
			outages[dep] = o
		}
		o.Claims++
		if since.Before(o.Since) {
			o.Since = since
		}
	}
	return found, outages, readAll, nil
}

// outage is how many claims wait for one dependency, the first since when.
type outage struct {
	Dependency string
	Claims     int
	Since      time.Time
}

// line says it to an operator: of every claim at work, or (readAll false)
// of the newest maxRead only, which it says, so that a catastrophe week's
// count is never read as all of them.
func (o *outage) line(now time.Time, readAll bool, maxRead int) string {
	if readAll {
		return fmt.Sprintf("%d waiting for %s, the first since %s (%s)", o.Claims, o.Dependency, o.Since.Format(time.RFC3339), now.Sub(o.Since).Round(time.Second))
	}
	return fmt.Sprintf("at least %d waiting for %s, the first of them since %s (%s): only the newest %d claims at work were read (--max)",
		o.Claims, o.Dependency, o.Since.Format(time.RFC3339), now.Sub(o.Since).Round(time.Second), maxRead)
}

// waitingOn asks a claim's status what dependency it waits for, if any;
// a claim that does not answer in 2 s (no worker) is taken as not waiting.
func waitingOn(ctx context.Context, c client.Client, id, runID string) (string, time.Time, bool) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := c.QueryWorkflow(qctx, id, runID, workflows.QueryStatus)
	if err != nil {
		return "", time.Time{}, false
	}
	var st workflows.Status
	if v.Get(&st) != nil || st.WaitingOn == "" {
		return "", time.Time{}, false
	}
	return st.WaitingOn, st.WaitingSince, true
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
	maxRead := fs.Int("max", 500, "read the last event of at most this many claims at work")
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
	st, err := openStore()
	if err != nil {
		return 0, err
	}
	defer st.Close()
	found, err := overdueWaits(ctx, st, now, *floor)
	if err != nil {
		return 0, err
	}
	waits, outages, readAll, err := dependencyWaits(ctx, c, now, *maxRead)
	if err != nil {
		return 0, err
	}
	found = append(found, waits...)
	waiting := map[string]bool{}
	for _, w := range waits {
		waiting[w.ClaimID] = true
	}
	// Claims at work: only those started before the threshold can have been
	// idle that long, so only their last event is read (at most --max).
	old := fmt.Sprintf("ExecutionStatus = 'Running' AND %s = %q AND StartTime < %q", workflows.ClaimStatusKey.GetName(),
		workflows.StatusRunning, now.Add(-threshold).UTC().Format(time.RFC3339Nano))
	running, err := listClaimsLimit(ctx, c, old, *maxRead)
	if err != nil {
		return 0, err
	}
	for _, r := range running {
		if waiting[r.ClaimID] {
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
	if len(running) == *maxRead && !*asJSON {
		fmt.Fprintf(out, "read the last event of the first %d claims older than %s only (--max)\n", *maxRead, threshold.Round(time.Second))
	}
	if *asJSON {
		if err := json.NewEncoder(out).Encode(found); err != nil {
			return 0, err
		}
	} else {
		fmt.Fprintf(out, "p95 step time %s over recent claims; stuck after %s idle\n", p95.Round(time.Millisecond), threshold.Round(time.Second))
		for _, dep := range slices.Sorted(maps.Keys(outages)) {
			fmt.Fprintln(out, outages[dep].line(now, readAll, *maxRead))
		}
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
