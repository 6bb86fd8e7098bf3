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
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

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
// they need no reset and are left alone. The reset's request ID is derived
// from the run and the build, so running the command twice resets once.
func resetBuild(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("reset-build", flag.ContinueOnError)
	query := fs.String("query", "", "a visibility query narrowing the runs (ANDed with open claim workflows)")
	dryRun := fs.Bool("dry-run", false, "list what would be reset, reset nothing")
	usage := errors.New("usage: claimsctl reset-build BUILD_ID [--query Q] [--dry-run]")
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
		mu               sync.Mutex
		reset, untouched int
		errs             []error
		wg               sync.WaitGroup
		sem              = make(chan struct{}, 8)
	)
	for _, ex := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			line, did, err := resetRun(ctx, c, ex, build, *dryRun)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", ex.GetWorkflowId(), err))
			case did:
				reset++
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
	fmt.Fprintf(out, "%s %d of %d open claim runs that build %s worked on; %d it never completed a task for\n", verb, reset, len(ids), build, untouched)
	return errors.Join(errs...)
}

// resetRun resets one run to its reset point for build, if it has one.
func resetRun(ctx context.Context, c client.Client, ex *commonpb.WorkflowExecution, build string, dryRun bool) (string, bool, error) {
	d, err := c.DescribeWorkflow(ctx, ex.GetWorkflowId(), ex.GetRunId())
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
		return "", false, nil // closed and gone since listed
	}
	if err != nil {
		return "", false, err
	}
	for _, p := range d.RawResponse.GetWorkflowExecutionInfo().GetAutoResetPoints().GetPoints() {
		if p.GetBuildId() != build || p.GetRunId() != ex.GetRunId() {
			continue
		}
		if !p.GetResettable() {
			return "", false, fmt.Errorf("build %s's reset point (event %d) is not resettable", build, p.GetFirstWorkflowTaskCompletedId())
		}
		line := fmt.Sprintf("%s: run %s reset to event %d, before build %s's first workflow task", ex.GetWorkflowId(), ex.GetRunId(), p.GetFirstWorkflowTaskCompletedId(), build)
		if dryRun {
			return line, true, nil
		}
		sum := sha256.Sum256([]byte("claimsctl reset-build\x00" + ex.GetRunId() + "\x00" + build))
		resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
			Namespace:                 namespace(),
			WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: ex.GetWorkflowId(), RunId: ex.GetRunId()},
			Reason:                    "claimsctl reset-build " + build + ": the build was rolled back",
			WorkflowTaskFinishEventId: p.GetFirstWorkflowTaskCompletedId(),
			RequestId:                 hex.EncodeToString(sum[:16]),
		})
		if err != nil {
			return "", false, err
		}
		return line + " as run " + resp.GetRunId(), true, nil
	}
	return "", false, nil
}
