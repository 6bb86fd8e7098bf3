package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// stepOf maps activity types to the step they implement.
var stepOf = map[string]claim.Step{
	"LoadClaim": claim.StepIntake, "TriageClaim": claim.StepTriage, "AssessClaim": claim.StepAssess,
	"OpenApproval": claim.StepApproval, "RemindApprovers": claim.StepApproval, "EscalateApproval": claim.StepApproval, "PayClaimant": claim.StepPay, "NotifyClaimant": claim.StepNotify,
	"CloseClaim": claim.StepClose, "WriteAudit": claim.StepAudit,
}

// activityRun is one activity as the history tells it.
type activityRun struct {
	typ         string
	step        claim.Step
	attempt     int32
	identity    string
	lastFailure string
	outcome     string
	result      *commonpb.Payloads
	reread      bool // a LoadClaim after an approval wait
	dc          converter.DataConverter
}

// story is a claim run read from its event history.
type story struct {
	id         string
	activities []*activityRun
	signals    []string
	wftLost    []string
	result     *workflows.ClaimResult
	state      string
}

func show(ctx context.Context, ids []string, out io.Writer) error {
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
	for _, id := range ids {
		s, err := readStory(ctx, c, id)
		if err != nil {
			return err
		}
		calls, err := st.ModelCalls(ctx, id)
		if err != nil {
			return err
		}
		s.print(out, calls)
	}
	return nil
}

func readStory(ctx context.Context, c client.Client, id string) (*story, error) {
	s := &story{id: id}
	byID := map[int64]*activityRun{}
	dc, err := config.DataConverter() // decrypts when codec keys are configured
	if err != nil {
		return nil, err
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
			r := &activityRun{typ: typ, step: stepOf[typ], outcome: "scheduled", dc: dc}
			if typ == "LoadClaim" && len(s.activities) > 0 {
				r.step, r.reread = claim.StepApproval, true
			}
			byID[e.GetEventId()] = r
			s.activities = append(s.activities, r)
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := e.GetActivityTaskStartedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.attempt, r.identity, r.outcome = a.GetAttempt(), a.GetIdentity(), "started"
				if f := a.GetLastFailure(); f != nil {
					r.lastFailure = f.GetMessage()
				}
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			a := e.GetActivityTaskCompletedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.outcome = "completed"
				r.result = a.GetResult()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			a := e.GetActivityTaskFailedEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.outcome = "failed: " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
			a := e.GetActivityTaskTimedOutEventAttributes()
			if r := byID[a.GetScheduledEventId()]; r != nil {
				r.outcome = "timed out: " + a.GetFailure().GetMessage()
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a := e.GetWorkflowExecutionSignaledEventAttributes()
			s.signals = append(s.signals, fmt.Sprintf("%s at %s from %s", a.GetSignalName(), e.GetEventTime().AsTime().Format(time.TimeOnly), a.GetIdentity()))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			if e.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
				s.wftLost = append(s.wftLost, "workflow task waited on a dead worker's sticky queue; another worker took it and rebuilt the run from history")
			} else {
				s.wftLost = append(s.wftLost, "workflow task timed out (its worker died mid-task); another worker replayed the history and carried on")
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			s.wftLost = append(s.wftLost, "workflow task failed: "+e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			var res workflows.ClaimResult
			if err := dc.FromPayloads(e.GetWorkflowExecutionCompletedEventAttributes().GetResult(), &res); err == nil {
				s.result = &res
			}
		}
	}
	if s.result == nil {
		s.state = "still running"
		if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus); err == nil {
			var st workflows.Status
			if v.Get(&st) == nil {
				s.state = fmt.Sprintf("%s at step %d (%s)", st.State, st.Step, st.StepName)
			}
		}
	}
	return s, nil
}

func (s *story) print(out io.Writer, calls []store.ModelCall) {
	r := s.result
	if r != nil {
		line := fmt.Sprintf("%s: %s", s.id, r.Status)
		if r.TransferID != "" {
			line += fmt.Sprintf(", %s %s paid by transfer %s", r.Payout, r.Currency, r.TransferID)
		}
		if r.Reason != "" {
			line += " (" + r.Reason + ")"
		}
		fmt.Fprintln(out, line)
	} else {
		fmt.Fprintf(out, "%s: %s\n", s.id, s.state)
	}
	for step := claim.StepIntake; step <= claim.StepAudit; step++ {
		for _, a := range s.activities {
			if a.step == step && !a.reread {
				fmt.Fprintf(out, "  step %d %-9s %s\n", step, step, a.describe())
			}
		}
		switch {
		case step == claim.StepCoverage && len(s.activities) > 2:
			fmt.Fprintf(out, "  step 3 %-9s computed in workflow code: no I/O, nothing to checkpoint\n", step)
		case step == claim.StepApproval && r != nil && r.Approval != nil:
			ap := r.Approval
			if d := ap.Decision; d != nil {
				fmt.Fprintf(out, "  step 5 %-9s parked %s (%s), then %sd by %s via %s\n", step,
					d.DecidedAt.Sub(ap.RequestedAt).Round(time.Millisecond), d.Stage, d.Verdict, d.Approver, d.Channel)
			} else if ap.Expired {
				fmt.Fprintf(out, "  step 5 %-9s nobody decided: escalated, then expired at %s\n", step, ap.Deadline.Format(time.RFC3339))
			}
		}
		for _, a := range s.activities {
			if a.step == step && a.reread {
				fmt.Fprintf(out, "  step %d %-9s %s\n", step, step, a.describe())
			}
		}
	}
	for _, sig := range s.signals {
		fmt.Fprintf(out, "  signal %s\n", sig)
	}
	for _, w := range s.wftLost {
		fmt.Fprintf(out, "  %s\n", w)
	}
	perKey := map[claim.IdempotencyKey]int{}
	for _, c := range calls {
		perKey[c.Key]++
	}
	fmt.Fprintf(out, "  model calls: %d (triage %d, assess %d)\n", len(calls),
		perKey[claim.StepKey(s.id, claim.StepTriage)], perKey[claim.StepKey(s.id, claim.StepAssess)])
}

func (a *activityRun) describe() string {
	var b strings.Builder
	if a.attempt > 1 {
		fmt.Fprintf(&b, "RESUMED: attempt %d on %s after %q; ", a.attempt, a.identity, a.lastFailure)
	}
	b.WriteString(a.outcome)
	switch a.typ {
	case "OpenApproval":
		b.WriteString(": approver directory read")
	case "RemindApprovers":
		b.WriteString(": reminder to the adjusters")
	case "EscalateApproval":
		b.WriteString(": escalation notice to the supervisors")
	case "LoadClaim":
		if a.reread {
			b.WriteString(": claim re-read after the wait")
		}
	}
	if a.result != nil && a.typ == "PayClaimant" {
		var pr activities.PayResult
		if a.dc.FromPayloads(a.result, &pr) == nil {
			fmt.Fprintf(&b, ", transfer %s", pr.TransferID)
			if pr.Replayed {
				fmt.Fprintf(&b, " REPLAYED (the original transfer, found by %s; no new money moved)", pr.ReplayedBy)
			}
		}
	}
	return b.String()
}
