// Package story reads a claim's run back from its event history: each
// step's activity, attempts and recorded output, the signals, the workflow
// tasks lost to dead workers, and the result. claimsctl show narrates it;
// the adjuster inbox shows a claim's triage turns, tool calls and
// documents from it.
package story

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/telemetry"
	"github.com/durableclaims/durableclaims/workflows"
)

// stepOf maps activity types to the step they implement.
var stepOf = map[string]claim.Step{
	"LoadClaim": claim.StepIntake, "TriageClaim": claim.StepTriage, "TriageTurn": claim.StepTriage, "CallTool": claim.StepTriage,
	"AssessClaim":  claim.StepAssess,
	"OpenApproval": claim.StepApproval, "RemindApprovers": claim.StepApproval, "EscalateApproval": claim.StepApproval,
	"PayClaimant": claim.StepPay, "NotifyClaimant": claim.StepNotify, "CloseClaim": claim.StepClose, "WriteAudit": claim.StepAudit,
}

// Step is one activity of a run as its history tells it, with the
// output it recorded (decrypted when codec keys are configured).
type Step struct {
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

// Story is a claim run read from its event history.
type Story struct {
	ClaimID string `json:"claim_id"`
	// TraceID is the claim's OpenTelemetry trace, from the trace context
	// its start carried; empty when it was started untraced.
	TraceID string                 `json:"trace_id,omitempty"`
	State   string                 `json:"state"`
	Result  *workflows.ClaimResult `json:"result,omitempty"`
	Steps   []*Step                `json:"steps"`
	Signals []string               `json:"signals,omitempty"`
	// Pending is the approval a running claim waits on, from its status.
	Pending    *approvals.Approval `json:"pending_approval,omitempty"`
	TaskLosses []string            `json:"workflow_task_losses,omitempty"`
}

// Read reads a claim's run from its event history, decoding recorded
// outputs with dc (the clients' data converter: it decrypts when codec keys
// are configured), and asks a running claim for its status.
func Read(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (*Story, error) {
	s, err := ReadHistory(ctx, c, dc, id)
	if err != nil || s.Result != nil {
		return s, err
	}
	s.State = "still running"
	if v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus); err == nil {
		var st workflows.Status
		if v.Get(&st) == nil {
			s.State = fmt.Sprintf("%s at step %d (%s)", st.State, st.Step, st.StepName)
			s.Pending = st.Approval
		}
	}
	return s, nil
}

// ReadHistory is Read without the status query, for a caller that has
// queried it already: State and Pending stay empty while the claim runs.
func ReadHistory(ctx context.Context, c client.Client, dc converter.DataConverter, id string) (*Story, error) {
	s := &Story{ClaimID: id}
	byID := map[int64]*Step{}
	output := func(p *commonpb.Payloads) json.RawMessage {
		var raw json.RawMessage
		if p == nil || dc.FromPayloads(p, &raw) != nil {
			return nil
		}
		return raw
	}
	add := func(r *Step) {
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
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			s.TraceID = telemetry.TraceID(e.GetWorkflowExecutionStartedEventAttributes().GetHeader())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			typ := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			r := &Step{Activity: typ, Step: int(stepOf[typ]), StepName: stepOf[typ].String(), Outcome: "scheduled"}
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
			r := &Step{Activity: data.ActivityType, Step: int(stepOf[data.ActivityType]), StepName: stepOf[data.ActivityType].String(),
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
	return s, nil
}
