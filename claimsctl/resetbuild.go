package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// resetBuild is `claimsctl reset-build BUILD_ID`: after a bad build was
// rolled back (its ramp removed, or the previous version made current
// again), the claims it started or moved on are recorded in a way the
// build they go back to may not replay. It resets each open claim run the
// build completed a workflow task for to just before the first such task
// (the server's auto-reset point for that build), so the build now serving
// takes it up from there. Steps after that point run again under their
// idempotency keys (a payment already made is replayed by the provider,
// never made twice); signals and updates received since are applied again.
// Runs the build only failed (a nondeterminism error) have no such point:
// they need no reset and are left alone. Where the build's first task on
// the run was a retry, the reset goes further back, and a run an earlier
// reset left assigned to the build is repaired (resetPoint says why). The
// reset's request ID is derived from the run and the build, so running the
// command twice resets once.
//
// It refuses a build the deployment still routes claims to (current or
// ramping: resetting every claim it runs would ask the model again for
// each), and it leaves alone, listing them for a human, runs that paid
// after the reset point: the payment would run again under its key, and a
// model that answers differently the second time would ask the provider
// for another amount (--include-paid resets them too; with a model that
// answers alike, the provider replays the transfer).
func resetBuild(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("reset-build", flag.ContinueOnError)
	query := fs.String("query", "", "a visibility query narrowing the runs (ANDed with open claim workflows)")
	dryRun := fs.Bool("dry-run", false, "list what would be reset, reset nothing")
	includePaid := fs.Bool("include-paid", false, "also reset runs that paid after the reset point (see above)")
	force := fs.Bool("force", false, "reset even though the deployment still routes claims to the build")
	deployment := fs.String("deployment", config.Get("WORKER_DEPLOYMENT", config.DefaultDeploymentName), "the Worker Deployment the build belongs to")
	usage := errors.New("usage: claimsctl reset-build BUILD_ID [--query Q] [--dry-run] [--include-paid] [--force]")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usage
	}
	build := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usage
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if !*force {
		d, err := c.WorkerDeploymentClient().GetHandle(*deployment).Describe(ctx, client.WorkerDeploymentDescribeOptions{})
		var notFound *serviceerror.NotFound
		switch {
		case errors.As(err, &notFound):
		case err != nil:
			return fmt.Errorf("reading deployment %s's routing: %w (--force resets without looking)", *deployment, err)
		default:
			rc := d.Info.RoutingConfig
			if rc.CurrentVersion != nil && rc.CurrentVersion.BuildID == build {
				return fmt.Errorf("build %s is deployment %s's current version: roll it back first (temporal worker deployment set-current-version), or --force", build, *deployment)
			}
			// A ramp "removed" with the CLI's --delete stays at 0 %.
			if rc.RampingVersion != nil && rc.RampingVersion.BuildID == build && rc.RampingVersionPercentage > 0 {
				return fmt.Errorf("build %s is ramping in deployment %s: remove its ramp first (temporal worker deployment set-ramping-version --delete), or --force", build, *deployment)
			}
		}
	}
	q := fmt.Sprintf(`ExecutionStatus = "Running" AND WorkflowType = %q`, workflows.WorkflowType)
	if *query != "" {
		q += " AND (" + *query + ")"
	}
	var ids []*commonpb.WorkflowExecution
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace(), Query: q, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return err
		}
		for _, ex := range resp.GetExecutions() {
			ids = append(ids, ex.GetExecution())
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	var (
		mu                     sync.Mutex
		reset, untouched, held int
		errs                   []error
		wg                     sync.WaitGroup
		sem                    = make(chan struct{}, 8)
	)
	for _, ex := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			line, what, err := resetRun(ctx, c, ex, build, *dryRun, *includePaid)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", ex.GetWorkflowId(), err))
			case what == runReset:
				reset++
				fmt.Fprintln(out, line)
			case what == runHeld:
				held++
				fmt.Fprintln(out, line)
			default:
				untouched++
			}
		}()
	}
	wg.Wait()
	verb := "reset"
	if *dryRun {
		verb = "would reset"
	}
	fmt.Fprintf(out, "%s %d of %d open claim runs that build %s worked on; %d it never completed a task for (or closed since)\n", verb, reset, len(ids), build, untouched)
	if held > 0 {
		fmt.Fprintf(out, "left %d runs that paid after the reset point: check them (claimsctl payments CLAIM), then --include-paid\n", held)
	}
	return errors.Join(errs...)
}

// What resetRun did with a run.
const (
	runUntouched = iota
	runReset
	runHeld // paid after the reset point; not reset without --include-paid
)

// resetRun resets one run to its reset point for build, if it has one and
// is still running, or repairs a run an earlier reset left assigned to
// build (see resetPoint).
func resetRun(ctx context.Context, c client.Client, ex *commonpb.WorkflowExecution, build string, dryRun, includePaid bool) (string, int, error) {
	d, err := c.DescribeWorkflow(ctx, ex.GetWorkflowId(), ex.GetRunId())
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return "", runUntouched, nil // gone since listed
	}
	if err != nil {
		return "", runUntouched, err
	}
	info := d.RawResponse.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		// Closed since listed: a reset would start a closed claim again.
		return "", runUntouched, nil
	}
	var point int64 // build's first completed workflow task in this run
	for _, p := range info.GetAutoResetPoints().GetPoints() {
		if p.GetBuildId() != build || p.GetRunId() != ex.GetRunId() {
			continue
		}
		if !p.GetResettable() {
			return "", runUntouched, fmt.Errorf("build %s's reset point (event %d) is not resettable", build, p.GetFirstWorkflowTaskCompletedId())
		}
		point = p.GetFirstWorkflowTaskCompletedId()
	}
	// A run an earlier reset left assigned to a build, the old way: the
	// server refuses its task completions whichever build that is (the
	// assignment follows the last stamp rebuilt, possibly the good
	// build's), and no build of a deployment is ever assigned otherwise.
	//lint:ignore SA1019 the old build-ID assignment is what strands the run (resetPoint)
	assigned := info.GetAssignedBuildId()
	stranded := point == 0 && assigned != ""
	if point == 0 && !stranded {
		return "", runUntouched, nil
	}
	h, err := readHistory(ctx, c, ex)
	if err != nil {
		return "", runUntouched, err
	}
	at, why, err := resetPoint(h, point)
	if err != nil {
		return "", runUntouched, err
	}
	if !includePaid && h.paidAfter(at) {
		return fmt.Sprintf("%s: run %s NOT reset: it paid (or was paying) after event %d, where the reset would go", ex.GetWorkflowId(), ex.GetRunId(), at), runHeld, nil
	}
	line := fmt.Sprintf("%s: run %s reset to event %d, before build %s's first workflow task", ex.GetWorkflowId(), ex.GetRunId(), at, build)
	if stranded {
		line = fmt.Sprintf("%s: run %s, left assigned to build %s by an earlier reset (the server refused every task completion), reset to event %d", ex.GetWorkflowId(), ex.GetRunId(), assigned, at)
	}
	if why != "" {
		line += " (" + why + ")"
	}
	if dryRun {
		return line, runReset, nil
	}
	sum := sha256.Sum256([]byte("claimsctl reset-build\x00" + ex.GetRunId() + "\x00" + build))
	resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 namespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: ex.GetWorkflowId(), RunId: ex.GetRunId()},
		Reason:                    "claimsctl reset-build " + build + ": the build was rolled back",
		WorkflowTaskFinishEventId: at,
		RequestId:                 hex.EncodeToString(sum[:16]),
	})
	if err != nil {
		return "", runUntouched, err
	}
	return line + " as run " + resp.GetRunId(), runReset, nil
}

// runHistory is what resetPoint and paidAfter read in a run's history.
type runHistory struct {
	// finished are the workflow tasks' completed, failed and timed-out
	// events, in order: the events a reset can go to.
	finished []int64
	// stamped is the first workflow-task-started event that carries a
	// worker's versioning stamp (0 for none).
	stamped      int64
	stampedBuild string
	// paid lists the PayClaimant activities scheduled, by their event: a
	// payment may have reached the provider whether or not its completion
	// is in history yet.
	paid []int64
}

func readHistory(ctx context.Context, c client.Client, ex *commonpb.WorkflowExecution) (runHistory, error) {
	var h runHistory
	it := c.GetWorkflowHistory(ctx, ex.GetWorkflowId(), ex.GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return h, err
		}
		id := e.GetEventId()
		switch {
		case e.GetWorkflowTaskStartedEventAttributes() != nil:
			//lint:ignore SA1019 the old stamp is what the server rebuilds the assignment from
			v := e.GetWorkflowTaskStartedEventAttributes().GetWorkerVersion()
			if h.stamped == 0 && v.GetUseVersioning() && v.GetBuildId() != "" {
				h.stamped, h.stampedBuild = id, v.GetBuildId()
			}
		case e.GetWorkflowTaskCompletedEventAttributes() != nil, e.GetWorkflowTaskFailedEventAttributes() != nil,
			e.GetWorkflowTaskTimedOutEventAttributes() != nil:
			h.finished = append(h.finished, id)
		case e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == "PayClaimant":
			h.paid = append(h.paid, id)
		}
	}
	return h, nil
}

// resetPoint is the event to reset a run to: point, the build's first
// completed workflow task (0: the latest the run allows), unless the
// history before it holds a workflow-task-started event that carries a
// worker's versioning stamp. The server writes one for a task it did not
// record as started when it was dispatched: a retried task (its second or
// later attempt, written when it ends) and an update's speculative task.
// Temporal 1.29, rebuilding the reset run from history, assigns the run
// to that stamp's build the old, build-ID way, and then refuses every task
// completion ("this workflow task was dispatched to Build ID , not …") or
// dispatch: the claim never moves again. So the reset goes back to the
// last workflow task that ended before that event. The steps between run
// again under their idempotency keys, and an update accepted between is
// applied again (a receipt older than 15 minutes is refused then, and the
// claim asks a human again).
func resetPoint(h runHistory, point int64) (at int64, why string, err error) {
	if point == 0 && h.stamped == 0 {
		return 0, "", errors.New("assigned to the build, yet no workflow task in its history carries a build's stamp: look at it by hand (temporal workflow show)")
	}
	for _, e := range h.finished {
		if point != 0 && e > point {
			break
		}
		// A reset to e keeps the events before it: the stamp must not be
		// one of them.
		if h.stamped == 0 || e < h.stamped {
			at = e
		}
	}
	if at == 0 {
		return 0, "", fmt.Errorf("no workflow task ended before event %d, a task started with build %s's stamp: a reset would leave the run assigned to that build; terminate it and start the claim again", h.stamped, h.stampedBuild)
	}
	if point != 0 && at != point {
		why = fmt.Sprintf("not %d: event %d started a task with build %s's stamp (a retry, or an update's task), and a run reset past it would stay assigned to that build", point, h.stamped, h.stampedBuild)
	}
	return at, why, nil
}

// paidAfter says whether the run completed its payment (step 6) after
// event at.
func (h runHistory) paidAfter(at int64) bool {
	for _, scheduled := range h.paid {
		if scheduled > at {
			return true
		}
	}
	return false
}
