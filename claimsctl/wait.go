package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/workflows"
)

// wait blocks until every claim's ClaimStatus is one of --status, or, with
// --closed, until its run has ended. Scripts (the demo) use it instead of
// sleeping.
func wait(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("wait", flag.ContinueOnError)
	statuses := fs.String("status", "", "comma-separated ClaimStatus values to wait for (waiting, escalated, paid, …)")
	closed := fs.Bool("closed", false, "wait until the run has ended")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *statuses == "" && !*closed {
		return fmt.Errorf("wait: give --status or --closed")
	}
	want := strings.Split(*statuses, ",")
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, id := range fs.Args() {
		for {
			desc, err := c.DescribeWorkflow(ctx, id, "")
			if err == nil {
				info := desc.RawResponse.GetWorkflowExecutionInfo()
				var status string
				if p := info.GetSearchAttributes().GetIndexedFields()[workflows.ClaimStatusKey.GetName()]; p != nil {
					_ = converter.GetDefaultDataConverter().FromPayload(p, &status)
				}
				ended := info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
				if (*closed && ended) || (*statuses != "" && slices.Contains(want, status)) {
					fmt.Fprintf(out, "%s: %s\n", id, status)
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait: %s did not get there within %s", id, *timeout)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}
