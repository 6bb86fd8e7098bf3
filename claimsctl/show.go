package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// stepOf maps activity types to the step they implement.
var stepOf = map[string]claim.Step{
	"LoadClaim": claim.StepIntake, "TriageClaim": claim.StepTriage, "TriageTurn": claim.StepTriage, "CallTool": claim.StepTriage,
	"AssessClaim":  claim.StepAssess,
	"OpenApproval": claim.StepApproval, "RemindApprovers": claim.StepApproval, "EscalateApproval": claim.StepApproval,
	"PayClaimant": claim.StepPay, "NotifyClaimant": claim.StepNotify, "CloseClaim": claim.StepClose, "WriteAudit": claim.StepAudit,
}

// stepRecord is one activity of a run as its history tells it, with the
// output it recorded (decrypted when codec keys are configured).
type stepRecord struct {
	Step        int             `json:"step"`
	StepName    string          `json:"step_name"`
	Activity    string          `json:"activity"`
	Local       bool            `json:"local"`
	Attempt     int32           `json:"attempt"`
	Worker      string          `json:"worker,omitempty"`
	LastFailure string          `json:"last_failure,omitempty"`
	Outcome     string          `json:"outcome"`
	Output      json.RawMessage `json:"output,omitempty"`
	Reread      bool            `json:"reread,omitempty"` // the claim read again after an approval wait
}

// story is a claim run read from its event history.
type story struct {
	ClaimID string                 `json:"claim_id"`
	State   string                 `json:"state"`
	Result  *workflows.ClaimResult `json:"result,omitempty"`
	Steps   []*stepRecord          `json:"steps"`
	Signals []string               `json:"signals,omitempty"`
	// Pending is the approval a running claim waits on, from its status.
	Pending    *approvals.Approval `json:"pending_approval,omitempty"`
	TaskLosses []string            `json:"workflow_task_losses,omitempty"`
	ModelCalls map[string]int      `json:"model_calls"`
}

func show(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	c, err := dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	st, err := store.Open(config.ClaimsDB())
	if err != nil {
		return err
	}
	defer st.Close()
	for _, id := range fs.Args() {
		s, err := readStory(ctx, c, id)
		if err != nil {
			return err
		}
		calls, err := st.ModelCalls(ctx, id)
		if err != nil {
			return err
		}
		s.ModelCalls = map[string]int{"triage": 0, "assess": 0}
		for _, mc := range calls {
			switch {
			case mc.Key.Within(claim.StepKey(id, claim.StepTriage)):
				s.ModelCalls["triage"]++
			case mc.Key.Within(claim.StepKey(id, claim.StepAssess)):
				s.ModelCalls["assess"]++
			}
		}
		if *asJSON {
			if err := json.NewEncoder(out).Encode(s); err != nil {
				return err
			}
			continue
		}
		s.print(out)
	}
	return nil
}

func readStory(ctx context.Context, c client.Client, id string) (*story, error) {
	dc, err := config.DataConverter() // decrypts when codec keys are configured
	if err != nil {
		return nil, err
	}
	s := &story{ClaimID: id}
	byID := map[int64]*stepRecord{}
	output := func(p *commonpb.Payloads) json.RawMessage {
		var raw json.RawMessage
		if p == nil || dc.FromPayloads(p, &raw) != nil {
			return nil
		}
		return raw
	}
	add := func(r *stepRecord) {
		if r.Activity == "LoadClaim" && len(s.Steps) > 0 {
			r.Reread = true
			r.Step, r.StepName = int(claim.StepApproval), claim.StepApproval.String()
		}
		s.Steps = append(s.Steps, r)
	}
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, fmt.Errorf("history of %s: %w", id, err)
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			typ := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			r := &stepRecord{Activity: typ, Step: int(stepOf[typ]), StepName: stepOf[typ].String(), Outcome: "scheduled"}
			byID[e.GetEventId()] = r
			add(r)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := e.GetActivityTaskStartedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.Attempt, r.Worker, r.Outcome = a.GetAttempt(), a.GetIdentity(), "started"
				if f := a.GetLastFailure(); f != nil {
					r.LastFailure = f.GetMessage()
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := e.GetActivityTaskCompletedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.Outcome, r.Output = "completed", output(a.GetResult())
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := e.GetActivityTaskFailedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.Outcome = "failed: " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := e.GetActivityTaskTimedOutEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.Outcome = "timed out: " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			// A local activity: its result is recorded with the workflow
			// task that ran it.
			m := e.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "LocalActivity" {
				continue
			}
			var data struct {
				ActivityType string
				Attempt      int32
			}
			if dc.FromPayloads(m.GetDetails()["data"], &data) != nil {
				continue
			}
			r := &stepRecord{Activity: data.ActivityType, Step: int(stepOf[data.ActivityType]), StepName: stepOf[data.ActivityType].String(),
				Local: true, Attempt: data.Attempt, Outcome: "completed", Output: output(m.GetDetails()["result"])}
			if f := m.GetFailure(); f != nil {
				r.Outcome, r.Output = "failed: "+f.GetMessage(), nil
			}
			add(r)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a := e.GetWorkflowExecutionSignaledEventAttributes()
			s.Signals = append(s.Signals, fmt.Sprintf("%s at %s from %s", a.GetSignalName(), e.GetEventTime().AsTime().Format(time.TimeOnly), a.GetIdentity()))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			if e.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				s.TaskLosses = append(s.TaskLosses, "workflow task waited on a dead worker's sticky queue; another worker took it and rebuilt the run from history")
			} else {
				s.TaskLosses = append(s.TaskLosses, "workflow task timed out (its worker died mid-task, local steps included); another worker ran it again")
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			s.TaskLosses = append(s.TaskLosses, "workflow task failed: "+e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			var res workflows.ClaimResult
			if err := dc.FromPayloads(e.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res); err == nil {
				s.Result, s.State = &res, res.Status
			}
		}
	}
	if s.Result == nil {
		s.State = "still running"
		if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus); err == nil {
			var st workflows.Status
			if v.Get(&st) == nil {
				s.State = fmt.Sprintf("%s at step %d (%s)", st.State, st.Step, st.StepName)
				s.Pending = st.Approval
			}
		}
	}
	return s, nil
}

func (s *story) print(out io.Writer) {
	r := s.Result
	if r != nil {
		line := fmt.Sprintf("%s: %s", s.ClaimID, r.Status)
		if r.TransferID != "" {
			line += fmt.Sprintf(", %s %s paid by transfer %s", r.Payout, r.Currency, r.TransferID)
		}
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		fmt.Fprintln(out, line)
	} else {
		fmt.Fprintf(out, "%s: %s\n", s.ClaimID, s.State)
	}
	currency := "usd"
	if r != nil && r.Currency != "" {
		currency = r.Currency
	}
	line := func(rec *stepRecord) {
		fmt.Fprintf(out, "  step %d %-9s %s\n", rec.Step, rec.StepName, rec.describe(currency))
	}
	for step := claim.StepIntake; step <= claim.StepAudit; step++ {
		for _, rec := range s.Steps {
			if rec.Step == int(step) && !rec.Reread {
				line(rec)
			}
		}
		switch {
		case step == claim.StepCoverage && len(s.Steps) > 2:
			fmt.Fprintf(out, "  step 3 %-9s computed in workflow code: no I/O, nothing to checkpoint\n", step)
		case step == claim.StepApproval && r != nil && r.Approval != nil:
			ap := r.Approval
			if d := ap.Decision; d != nil {
				fmt.Fprintf(out, "  step 5 %-9s parked %s (%s), then %sd by %s via %s%s\n", step,
					d.DecidedAt.Sub(ap.RequestedAt).Round(time.Millisecond), d.Stage, d.Verdict, d.Approver, d.Channel, proof(d))
			} else if ap.Expired {
				fmt.Fprintf(out, "  step 5 %-9s nobody decided: escalated, then expired at %s\n", step, ap.Deadline.Format(time.RFC3339))
			}
			quorum(out, ap)
		case step == claim.StepApproval && r == nil && s.Pending != nil && s.Pending.Decision == nil:
			ap := s.Pending
			fmt.Fprintf(out, "  step 5 %-9s waiting (%s) for a decision on %s %s, request sha256 %s, deadline %s\n", step, ap.Stage,
				ap.Request.Amount, strings.ToUpper(ap.Request.Currency), ap.RequestSHA256[:12], ap.Deadline.Format(time.RFC3339))
			quorum(out, ap)
		}
		for _, rec := range s.Steps {
			if rec.Step == int(step) && rec.Reread {
				line(rec)
			}
		}
	}
	for _, sig := range s.Signals {
		fmt.Fprintf(out, "  signal %s\n", sig)
	}
	for _, w := range s.TaskLosses {
		fmt.Fprintf(out, "  %s\n", w)
	}
	fmt.Fprintf(out, "  model calls: %d (triage %d, assess %d)\n", s.ModelCalls["triage"]+s.ModelCalls["assess"], s.ModelCalls["triage"], s.ModelCalls["assess"])
}

// proof says what proved a decision's approver.
func proof(d *approvals.Decision) string {
	switch d.Proof {
	case approvals.ProofReceipt:
		if d.VouchedBy != "" {
			return fmt.Sprintf(" (receipt signed by %s's key %s)", d.VouchedBy, d.KeyID)
		}
		return fmt.Sprintf(" (receipt signed with %s)", d.KeyID)
	case approvals.ProofUnauthenticated:
		return " (UNAUTHENTICATED: accepted under the development switch)"
	}
	return ""
}

// quorum prints a four-eyes approval's votes so far.
func quorum(out io.Writer, ap *approvals.Approval) {
	if ap.Quorum < 2 {
		return
	}
	var who []string
	for _, v := range ap.Votes {
		who = append(who, v.Approver)
	}
	fmt.Fprintf(out, "         %-9s four eyes: %d of %d approvals (%s)\n", "", len(ap.Votes), ap.Quorum, strings.Join(who, ", "))
}

// describe says what a step did and what it recorded.
func (rec *stepRecord) describe(currency string) string {
	var b strings.Builder
	if rec.Attempt > 1 {
		fmt.Fprintf(&b, "RESUMED: attempt %d on %s after %q; ", rec.Attempt, rec.Worker, rec.LastFailure)
	}
	b.WriteString(rec.Outcome)
	if rec.Local {
		b.WriteString(" (local)")
	}
	if detail := rec.detail(currency); detail != "" {
		b.WriteString(": " + detail)
	}
	return b.String()
}

func (rec *stepRecord) detail(currency string) string {
	if rec.Output == nil {
		return ""
	}
	switch rec.Activity {
	case "LoadClaim":
		var o activities.LoadClaimResult
		if json.Unmarshal(rec.Output, &o) == nil {
			what := "claim"
			if rec.Reread {
				what = "claim re-read after the wait"
			}
			return fmt.Sprintf("%s version %d, %s %s, %s", what, o.Version, o.Claim.Amount(), o.Claim.Currency, o.Status)
		}
	case "TriageClaim":
		var o activities.TriageResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return fmt.Sprintf("%s, %s severity, fraud score %d (%s, output %s)", o.Output.Category, o.Output.Severity, o.Output.FraudScore, o.Model, short(o.OutputSHA256))
		}
	case "TriageTurn":
		var o activities.TurnResult
		if json.Unmarshal(rec.Output, &o) == nil {
			cost := fmt.Sprintf("%d+%d tokens, $%.6f", o.Usage.TokensIn, o.Usage.TokensOut, float64(o.Usage.CostMicros)/1e6)
			if t := o.Triage; t != nil {
				what := fmt.Sprintf("%s, %s severity, fraud score %d", t.Category, t.Severity, t.FraudScore)
				if t.NeedsReview {
					what = "needs a human: " + t.ReviewReason
				}
				return fmt.Sprintf("%s (%s, %s, output %s)", what, o.Model, cost, short(o.OutputSHA256))
			}
			names := make([]string, 0, len(o.ToolCalls))
			for _, tc := range o.ToolCalls {
				names = append(names, tc.Name)
			}
			return fmt.Sprintf("asks for %s (%s, %s)", strings.Join(names, ", "), o.Model, cost)
		}
	case "CallTool":
		var o activities.ToolResult
		if json.Unmarshal(rec.Output, &o) == nil {
			content := o.Content
			if len(content) > 80 {
				content = content[:77] + "..."
			}
			return fmt.Sprintf("tool %s: %s", o.Name, content)
		}
	case "AssessClaim":
		var o activities.AssessResult
		if json.Unmarshal(rec.Output, &o) == nil {
			what := fmt.Sprintf("recommends %s %s", claim.FormatAmount(o.Output.RecommendedMinor, currency), currency)
			if o.Output.NeedsReview {
				what += ", asks for a human"
			}
			cost := ""
			if o.Usage.CostMicros > 0 {
				cost = fmt.Sprintf(", %d+%d tokens, $%.6f", o.Usage.TokensIn, o.Usage.TokensOut, float64(o.Usage.CostMicros)/1e6)
			}
			return fmt.Sprintf("%s (%s%s, output %s)", what, o.Model, cost, short(o.OutputSHA256))
		}
	case "OpenApproval":
		var o activities.OpenApprovalResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return fmt.Sprintf("approver directory read (%d approvers)", len(o.Approvers))
		}
	case "RemindApprovers":
		return "reminder to the adjusters"
	case "EscalateApproval":
		return "escalation notice to the supervisors"
	case "PayClaimant":
		var o activities.PayResult
		if json.Unmarshal(rec.Output, &o) == nil {
			s := "transfer " + o.TransferID
			if o.Replayed {
				s += fmt.Sprintf(" REPLAYED (the original transfer, found by %s; no new money moved)", o.ReplayedBy)
			}
			return s
		}
	case "NotifyClaimant":
		var o activities.NotifyResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "message " + o.MessageID
		}
	case "CloseClaim":
		var o activities.CloseResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "closed at " + o.ClosedAt.Format(time.RFC3339)
		}
	case "WriteAudit":
		var o activities.AuditResult
		if json.Unmarshal(rec.Output, &o) == nil {
			return "audit record " + short(o.SHA256)
		}
	}
	return ""
}

func short(sum string) string { return sum[:min(12, len(sum))] }
