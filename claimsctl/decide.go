package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"go.opentelemetry.io/otel/attribute"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/workflows"
)

// decide signs a receipt as receipt does and sends it with the claim's
// decide update, the one step an approver at a shell takes. The answer is
// one line for a person ("approved claim-0045: 1,250.00 USD by
// adjuster-17"), or with --output json the decision the claim recorded,
// for scripts, as the Temporal CLI prints; a refused decision exits 1 with
// the claim's reason, its first cause first.
func decide(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("decide", flag.ContinueOnError)
	f := receiptFlags(fs)
	output := fs.String("output", "text", "text: one line; json: the decision as the claim recorded it")
	fs.StringVar(output, "o", "text", "short for --output")
	if err := parseInterspersed(fs, args); err != nil {
		return 0, err
	}
	if fs.NArg() != 2 || *f.key == "" || (*output != "text" && *output != "json") {
		return 0, errors.New("usage: claimsctl decide approve|reject|handoff CLAIM --key FILE [--as APPROVER] [--reason …] [--note …] " +
			"[--amount 1400.00] [--to COLLEAGUE] [--output text|json]")
	}
	id := fs.Arg(1)
	r, tok, err := f.sign(ctx, approvals.Verdict(fs.Arg(0)), id, io.Discard)
	if err != nil {
		return 0, err
	}
	c, err := dial(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, span := telemetry.StartDecision(ctx, c, id, r.Subject, "claimsctl")
	defer span.End()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: approvals.UpdateDecide,
		Args: []any{approvals.DecideInput{Receipt: tok}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	var d approvals.Decision
	if err == nil {
		err = h.Get(ctx, &d)
	}
	span.SetAttributes(attribute.String(telemetry.AttrVerdict, string(r.Verdict)), attribute.Bool("claim.decision.accepted", err == nil))
	if code := approvals.RefusalCode(err); code != "" {
		why := approvals.RefusalMessage(err)
		if *output == "json" {
			_ = json.NewEncoder(out).Encode(map[string]string{"claim_id": id, "refused": code, "reason": why})
			return 1, nil
		}
		return 0, fmt.Errorf("%s refused the decision: %s (%s)", id, why, code)
	}
	if err != nil {
		return 0, fmt.Errorf("decide %s: %w", id, err)
	}
	if *output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return 0, enc.Encode(d)
	}
	var st *workflows.Status
	if d.Verdict == approvals.Approve {
		if s, err := claimStatus(ctx, id); err == nil {
			st = &s
		}
	}
	fmt.Fprintln(out, decisionLine(id, d, r.AssignTo, st))
	return 0, nil
}

// decisionLine is a decision the claim accepted, in one line: the verdict,
// the claim, the amount as money, who; for an approval that four eyes
// still wait on (st, the claim's status after it), how many of how many.
func decisionLine(id string, d approvals.Decision, to string, st *workflows.Status) string {
	cur := d.Request.Currency
	asked := claim.FormatMoney(d.Request.AmountMinor, cur)
	switch d.Verdict {
	case approvals.Reject:
		line := fmt.Sprintf("rejected %s: %s by %s", id, asked, d.Approver)
		if d.Reason != "" {
			line += ": " + d.Reason
		}
		return line
	case approvals.Handoff:
		return fmt.Sprintf("handed %s on: %s, from %s to %s", id, asked, d.Approver, to)
	}
	line := fmt.Sprintf("approved %s: %s by %s", id, asked, d.Approver)
	if d.AmountMinor > 0 && d.AmountMinor < d.Request.AmountMinor {
		line = fmt.Sprintf("approved %s: %s of the %s asked, by %s", id, claim.FormatMoney(d.AmountMinor, cur), asked, d.Approver)
	}
	if st != nil && st.Approval != nil && st.Approval.Decision == nil && st.Approval.Quorum > 1 {
		line += fmt.Sprintf("; %d of %d approvals, another approver must agree", len(st.Approval.Votes), st.Approval.Quorum)
	}
	return line
}
