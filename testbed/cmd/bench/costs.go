package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/workflows"
)

// The cost of a claim, by the way it ends: one claim down each path, and
// for each its history events, history bytes and Temporal Cloud billable
// Actions (actions.go). Events and bytes are what the server stores;
// Actions are what Temporal Cloud bills, and they are not the same count:
// workflow tasks and results are free, a workflow task's local activities
// are one Action together.

// costPaths are the paths measured, in the order printed.
var costPaths = []string{"auto", "approved", "rejected", "expired"}

// pathCost is one claim's cost.
type pathCost struct {
	WorkflowID string      `json:"workflow_id"`
	Events     int         `json:"events"`
	Bytes      int64       `json:"bytes"`
	Actions    actionCount `json:"actions"`
}

// costs runs one claim down each path and records what each cost.
func (e *env) costs(ctx context.Context, res *results) error {
	ids, err := e.runPaths(ctx)
	if err != nil {
		return fmt.Errorf("cost per claim: %w", err)
	}
	if res.Costs, err = pathCosts(ctx, e.client, ids); err != nil {
		return fmt.Errorf("cost per claim: %w", err)
	}
	for _, p := range costPaths {
		if c, ok := res.Costs[p]; ok {
			fmt.Fprintf(os.Stderr, "  %-8s claim: %d events, %d bytes, %d billable actions\n", p, c.Events, c.Bytes, c.Actions.Total)
		}
	}
	return nil
}

// pathCosts reads the events, bytes and billable Actions of each path's
// workflow (ids: path → workflow ID, latest run), which must have closed.
func pathCosts(ctx context.Context, c client.Client, ids map[string]string) (map[string]pathCost, error) {
	out := map[string]pathCost{}
	for path, id := range ids {
		d, err := c.DescribeWorkflow(ctx, id, "")
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", path, id, err)
		}
		info := d.RawResponse.GetWorkflowExecutionInfo()
		if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return nil, fmt.Errorf("%s (%s) is still running: its cost is not final", path, id)
		}
		events, err := history(ctx, c, id, info.GetExecution().GetRunId())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out[path] = pathCost{WorkflowID: id, Events: len(events), Bytes: info.GetHistorySizeBytes(), Actions: billableActions(events)}
	}
	return out, nil
}

// runPaths runs one claim down each of costPaths at once and returns their
// workflow IDs once all have ended as the path says: auto-approved and
// paid; approved by adjuster-17's signed signal and paid; rejected by the
// same; and expired, nobody deciding, with the approval and escalation
// TTLs shortened to 2 s by the claim's options (as scripts/record-histories.sh
// records it), which takes about 5 s.
func (e *env) runPaths(ctx context.Context) (map[string]string, error) {
	n := seq.Add(1)
	ids := map[string]string{}
	for _, p := range costPaths {
		ids[p] = fmt.Sprintf("bench-path-%s-%d", p, n)
	}
	run := map[string]func(id string) error{
		"auto": func(id string) error {
			return e.runPath(ctx, id, "640.00", workflows.Options{}, "", workflows.StatusPaid)
		},
		"approved": func(id string) error {
			return e.runPath(ctx, id, "1840.00", workflows.Options{}, approvals.Approve, workflows.StatusPaid)
		},
		"rejected": func(id string) error {
			return e.runPath(ctx, id, "1840.00", workflows.Options{}, approvals.Reject, workflows.StatusRejected)
		},
		"expired": func(id string) error {
			return e.runPath(ctx, id, "2500.00", workflows.Options{Approval: approvals.Policy{TTL: 2 * time.Second, EscalationTTL: 2 * time.Second}},
				"", workflows.StatusExpired)
		},
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, p := range costPaths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run[p](ids[p]); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s path: %w", p, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}

// runPath starts claim id with the options given; if verdict is set, waits
// for it to park and sends adjuster-17's signed decision; then checks the
// claim ended in status want.
func (e *env) runPath(ctx context.Context, id, amount string, opts workflows.Options, verdict approvals.Verdict, want string) error {
	run, err := e.startClaimOn(ctx, e.store, e.client, workflows.TaskQueue, id, amount, opts)
	if err != nil {
		return err
	}
	if verdict != "" {
		if err := e.waitStatus(ctx, id, workflows.StatusWaiting, time.Minute); err != nil {
			return err
		}
		in, err := e.decision(ctx, id, verdict)
		if err != nil {
			return err
		}
		signal := approvals.SignalApprove
		if verdict == approvals.Reject {
			signal = approvals.SignalReject
		}
		if err := e.client.SignalWorkflow(ctx, id, "", signal, in); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return outcome(wctx, run, want)
}

// decision is adjuster-17's signed decision on the request claim id waits
// on; a rejection carries the reason it must have.
func (e *env) decision(ctx context.Context, id string, verdict approvals.Verdict) (approvals.Input, error) {
	return e.decisionOn(ctx, e.client, id, verdict)
}

// decisionOn is decision for a claim on the server c reaches.
func (e *env) decisionOn(ctx context.Context, c client.Client, id string, verdict approvals.Verdict) (approvals.Input, error) {
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return approvals.Input{}, err
	}
	var s workflows.Status
	if err := v.Get(&s); err != nil || s.Approval == nil {
		return approvals.Input{}, fmt.Errorf("%s: no request awaiting decision (%v)", id, err)
	}
	r := approvals.Receipt{Subject: e.key.Approver, ClaimID: id, RequestSHA256: s.Approval.RequestSHA256, Verdict: verdict, Audience: s.Audience}
	if verdict == approvals.Reject {
		r.Reason = "bench: the cost of a rejected claim"
	}
	if r, err = approvals.NewReceipt(r, time.Now(), approvals.DefaultReceiptTTL); err != nil {
		return approvals.Input{}, err
	}
	tok, err := approvals.Sign(e.key, r)
	return approvals.Input{Receipt: tok}, err
}

// printCosts prints the cost per claim, by path.
func (r *results) printCosts(w io.Writer) {
	if len(r.Costs) == 0 {
		return
	}
	fmt.Fprintf(w, "\ncost per claim, by path (one claim each; Temporal Cloud billable actions estimated from its history, bench/actions.go):\n\n")
	fmt.Fprintf(w, "| %-8s | %6s | %7s | %16s | %-86s | %-24s |\n", "path", "events", "bytes", "billable actions", "of which", "+ heartbeats (estimated)")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 10), strings.Repeat("-", 8), strings.Repeat("-", 9), strings.Repeat("-", 18), strings.Repeat("-", 88), strings.Repeat("-", 26))
	for _, p := range costPaths {
		c, ok := r.Costs[p]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "| %-8s | %6d | %7d | %16d | %-86s | %-24d |\n", p, c.Events, c.Bytes, c.Actions.Total, c.Actions.breakdown(), c.Actions.HeartbeatsEstimated)
	}
	fmt.Fprintln(w, "not in the count (not in history): queries (1 action each), rejected updates, activity heartbeats (estimated apart)")
}

// breakdown is "start 1, activity attempts 2, …".
func (c actionCount) breakdown() string {
	var parts []string
	for _, k := range actionKinds {
		if n := c.ByKind[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	return strings.Join(parts, ", ")
}
