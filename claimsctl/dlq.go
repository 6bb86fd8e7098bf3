package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v76"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/worker/provenance"
	"github.com/durableclaims/durableclaims/workflows"
)

func dlq(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: claimsctl dlq list [--json] | claimsctl dlq redrive CLAIM")
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	switch args[0] {
	case "list":
		return dlqList(ctx, c, len(args) > 1 && args[1] == "--json", out)
	case "redrive":
		if len(args) != 2 {
			return errors.New("usage: claimsctl dlq redrive CLAIM")
		}
		return redrive(ctx, c, args[1], out)
	}
	return fmt.Errorf("dlq: unknown subcommand %q", args[0])
}

type deadClaim struct {
	ClaimID string `json:"claim_id"`
	RunID   string `json:"run_id"`
	workflows.DeadLetter
}

// ErrForeignHistory is the dead letter of a run a worker terminated
// because a stranger answered one of its workflow tasks (worker/provenance).
const ErrForeignHistory = "ForeignHistory"

// deadLettered lists the claims that ended dead-lettered, and the claim
// runs a worker terminated as tampered.
func deadLettered(ctx context.Context, c client.Client) ([]deadClaim, error) {
	var out []deadClaim
	err := listRuns(ctx, c, fmt.Sprintf("%s = %q", workflows.ClaimStatusKey.GetName(), workflows.StatusDeadLettered), func(d deadClaim) error {
		var r workflows.ClaimResult
		if err := c.GetWorkflow(ctx, d.ClaimID, d.RunID).Get(ctx, &r); err == nil && r.DeadLetter != nil {
			d.DeadLetter = *r.DeadLetter
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = listRuns(ctx, c, fmt.Sprintf("WorkflowType = %q AND ExecutionStatus = 'Terminated'", workflows.WorkflowType), func(d deadClaim) error {
		reason, err := terminatedFor(ctx, c, d.ClaimID, d.RunID)
		if err != nil {
			return err
		}
		if _, tampered := provenance.ResetPoint(reason); tampered {
			d.StepName, d.ErrorType, d.Error = "history", ErrForeignHistory, reason
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

func listRuns(ctx context.Context, c client.Client, query string, each func(deadClaim) error) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			return err
		}
		for _, e := range resp.GetExecutions() {
			if err := each(deadClaim{ClaimID: e.GetExecution().GetWorkflowId(), RunID: e.GetExecution().GetRunId()}); err != nil {
				return err
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return nil
		}
	}
}

// terminatedFor is the reason a terminated run was terminated for: its
// last event.
func terminatedFor(ctx context.Context, c client.Client, id, runID string) (string, error) {
	resp, err := c.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
		Namespace: namespace(), Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID}, MaximumPageSize: 1})
	if err != nil {
		return "", err
	}
	for _, e := range resp.GetHistory().GetEvents() {
		return e.GetWorkflowExecutionTerminatedEventAttributes().GetReason(), nil
	}
	return "", nil
}

func dlqList(ctx context.Context, c client.Client, asJSON bool, out io.Writer) error {
	dead, err := deadLettered(ctx, c)
	if err != nil {
		return err
	}
	if asJSON {
		return json.NewEncoder(out).Encode(dead)
	}
	if len(dead) == 0 {
		fmt.Fprintln(out, "no dead-lettered claims")
	}
	for _, d := range dead {
		fmt.Fprintf(out, "%s  step %d (%s)  %s: %s\n", d.ClaimID, d.Step, d.StepName, d.ErrorType, d.Error)
		for _, u := range d.UnknownEffects {
			fmt.Fprintf(out, "    outcome unknown: %s\n", u)
		}
	}
	return nil
}

// redrive restarts a dead-lettered claim from its failed step by resetting
// the run to the workflow task that scheduled that step: every step before it
// stays recorded and is not run again. It refuses while a payment outcome is
// unknown at the provider, and for runs stopped by a cap (the same input
// would hit the same cap).
func redrive(ctx context.Context, c client.Client, id string, out io.Writer) error {
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return err
	}
	runID := desc.RawResponse.GetWorkflowExecutionInfo().GetExecution().GetRunId()
	if desc.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
		return redriveTampered(ctx, c, id, runID, out)
	}
	var r workflows.ClaimResult
	if err := c.GetWorkflow(ctx, id, runID).Get(ctx, &r); err != nil {
		return fmt.Errorf("%s has not finished: %w", id, err)
	}
	if r.Status != workflows.StatusDeadLettered || r.DeadLetter == nil {
		return fmt.Errorf("%s is %s, not dead-lettered", id, r.Status)
	}
	dl := r.DeadLetter
	if dl.ErrorType == workflows.ErrCap {
		return fmt.Errorf("%s stopped at a cap (%s); a redrive would hit it again: start a new claim with a higher cap", id, dl.Error)
	}
	if claim.Step(dl.Step) == claim.StepPay {
		if err := paymentSettled(ctx, id, r); err != nil {
			return fmt.Errorf("refusing to redrive %s: %w", id, err)
		}
	}
	resetTo, err := taskBefore(ctx, c, id, runID)
	if err != nil {
		return err
	}
	resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 namespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    fmt.Sprintf("claimsctl dlq redrive: retry step %d (%s) after %s", dl.Step, dl.StepName, dl.ErrorType),
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: redriven from step %d (%s) as run %s\n", id, dl.Step, dl.StepName, resp.GetRunId())
	return nil
}

// redriveTampered resets a run a worker terminated because a stranger
// answered one of its workflow tasks to that answer: it is dropped with
// all that followed, the signals sent since are applied again, and the
// task is done again by the claim's own code.
func redriveTampered(ctx context.Context, c client.Client, id, runID string, out io.Writer) error {
	reason, err := terminatedFor(ctx, c, id, runID)
	if err != nil {
		return err
	}
	resetTo, ok := provenance.ResetPoint(reason)
	if !ok {
		return fmt.Errorf("%s was terminated (%q), not dead-lettered: start it again if it should run", id, reason)
	}
	resp, err := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{
		Namespace:                 namespace(),
		WorkflowExecution:         &commonpb.WorkflowExecution{WorkflowId: id, RunId: runID},
		Reason:                    fmt.Sprintf("claimsctl dlq redrive: drop what a stranger wrote from event %d on", resetTo),
		WorkflowTaskFinishEventId: resetTo,
		RequestId:                 uuid.NewString(),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: redriven from event %d, the stranger's answer dropped, as run %s\n", id, resetTo, resp.GetRunId())
	return nil
}

// paymentSettled asks the provider what happened to the claim's payment. A
// failed query, or a transfer under the key that pays something else, means
// nobody knows whether money moved: a human must look first.
func paymentSettled(ctx context.Context, id string, r workflows.ClaimResult) error {
	sc := activities.NewStripeClient(activities.StripeConfig{SecretKey: config.Get("STRIPE_SECRET_KEY", ""), APIBase: config.Get("STRIPE_API_BASE", "")})
	params := &stripe.TransferListParams{TransferGroup: stripe.String(id)}
	params.Context = ctx
	it := sc.Transfers.List(params)
	key := string(claim.StepKey(id, claim.StepPay))
	for it.Next() {
		tr := it.Transfer()
		if tr.Metadata["idempotency_key"] == key && (tr.Amount != r.PayoutMinor && r.PayoutMinor != 0) {
			return fmt.Errorf("transfer %s under %s pays %d, the claim's payout is %d: payment outcome disputed", tr.ID, key, tr.Amount, r.PayoutMinor)
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("payment outcome unknown: the provider did not answer: %w", err)
	}
	return nil
}

// taskBefore finds the workflow task that scheduled the run's last
// activity (the one whose failure dead-lettered it: nothing is scheduled
// after that): resetting to it runs that step again.
func taskBefore(ctx context.Context, c client.Client, id, runID string) (int64, error) {
	var lastTask, resetTo int64
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return 0, err
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			lastTask = e.GetEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			resetTo = lastTask
		}
	}
	if resetTo == 0 {
		return 0, fmt.Errorf("no activity in the history of %s to run again", id)
	}
	return resetTo, nil
}
