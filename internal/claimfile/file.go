// Package claimfile is the claim file: one self-contained, versioned JSON
// dossier per closed claim, written by the run's last step, kept in the
// blob store for years after Temporal forgets the run, each a leaf of an
// append-only Merkle log (RFC 6962) whose signed checkpoints let anyone
// check a dossier offline with nothing but the dossier, a proof, the
// checkpoint and the public keys. docs/records.md says what it answers.
package claimfile

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Schema names this version of the dossier's shape (docs/claim-file.schema.json).
const Schema = "durableclaims.claim-file/v1"

// File is one claim's dossier.
type File struct {
	Schema  string `json:"schema"`
	ClaimID string `json:"claim_id"`
	// The run that decided the claim, as the Temporal server reported it.
	Namespace  string `json:"namespace"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	TaskQueue  string `json:"task_queue"`
	// TraceID is the claim's OpenTelemetry trace, from the trace context
	// its start carried (absent when the claim was started untraced):
	// what an operator opens to see the run's spans (docs/operations.md).
	TraceID string `json:"trace_id,omitempty"`
	// Outcome and, in plain words, its basis: what the claimant's letter says.
	Outcome string `json:"outcome"`
	Basis   string `json:"basis"`
	// Record is the run's audit record exactly as the workflow wrote it
	// (approvals with every receipt, coverage, model outputs by hash,
	// decision attempts, payment, notice, close); RecordSHA256 its digest
	// in the claims store's audit ledger.
	Record       json.RawMessage `json:"record"`
	RecordSHA256 string          `json:"record_sha256"`
	// Input is what the run was started with: the claim as submitted and the
	// options the starter asked for (which may only tighten the insurer's).
	Input json.RawMessage `json:"input,omitempty"`
	// Steps is every activity the run executed, from its history: intake's
	// claim, policy and rules as read, each model turn and tool call with
	// its result, the assessment, the approval's notices, the payment.
	Steps []Step `json:"steps"`
	// Messages are the signals and updates the run received: every decision
	// receipt as sent, accepted or refused.
	Messages []Message `json:"messages,omitempty"`
	// Timeline is every event of the run's history up to the last step,
	// with its time.
	Timeline []Event `json:"timeline"`
	// Keys are the public keys that verified the receipts, with their owners.
	Keys []Key `json:"keys,omitempty"`
	// Documents are the claimant's uploads, by reference.
	Documents []Document `json:"documents,omitempty"`
	// FinalTask says what the history above does not hold: the last
	// workflow task's local steps (notify, close, this file), which reach
	// the history when that task completes; their results are in Record.
	FinalTask   string    `json:"final_task"`
	WrittenAt   time.Time `json:"written_at"`
	RetainUntil time.Time `json:"retain_until"`
}

// Step is one activity of the run.
type Step struct {
	Activity    string          `json:"activity"`
	Local       bool            `json:"local,omitempty"`
	ScheduledAt time.Time       `json:"scheduled_at,omitzero"`
	ClosedAt    time.Time       `json:"closed_at,omitzero"`
	Attempt     int32           `json:"attempt,omitempty"`
	Worker      string          `json:"worker,omitempty"`
	Outcome     string          `json:"outcome"`
	Input       json.RawMessage `json:"input,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	Failure     string          `json:"failure,omitempty"`
}

// Message is a signal or an update the run received.
type Message struct {
	Kind    string          `json:"kind"` // signal | update
	Name    string          `json:"name"`
	At      time.Time       `json:"at"`
	From    string          `json:"from,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
	Outcome string          `json:"outcome,omitempty"` // an update's answer: accepted, or the refusal
}

// Event is one history event.
type Event struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Type   string    `json:"type"`
	Detail string    `json:"detail,omitempty"`
	// BuildID is, for a completed workflow task, the build of the worker
	// that completed it, as the server recorded it: the builds a record's
	// decisions may name.
	BuildID string `json:"build_id,omitempty"`
}

// Key is a public key that signed a receipt in the record, as a JWK, and
// whose it is: an approver's own, or a service's that vouches for them.
type Key struct {
	ID       string          `json:"kid"`
	Approver string          `json:"approver,omitempty"`
	Service  string          `json:"service,omitempty"`
	JWK      json.RawMessage `json:"jwk"`
}

// Document is one of the claimant's uploads.
type Document struct {
	Name   string `json:"name"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// FromHistory fills the file's input, steps, messages and timeline from
// the run's history, decoding payloads with dc (the worker's: it decrypts
// what the codec encrypted, so the file is readable without the keys).
func (f *File) FromHistory(events []*historypb.HistoryEvent, dc converter.DataConverter) {
	r := &historyReader{f: f, dc: dc, scheduled: map[int64]int{}, updates: map[string]int{}}
	for _, e := range events {
		f.Timeline = append(f.Timeline, r.read(e))
	}
}

// historyReader fills a file from a history, event by event.
type historyReader struct {
	f         *File
	dc        converter.DataConverter
	scheduled map[int64]int  // an activity's scheduled event ID → its step
	updates   map[string]int // an update's ID → its message
}

// decode reads payloads as JSON: one payload as itself, several as an
// array, one that does not decode as a note saying so.
func (r *historyReader) decode(p *commonpb.Payloads) json.RawMessage {
	if p == nil || len(p.GetPayloads()) == 0 {
		return nil
	}
	var out []json.RawMessage
	for _, one := range p.GetPayloads() {
		var raw json.RawMessage
		if err := r.dc.FromPayload(one, &raw); err != nil || !json.Valid(raw) {
			raw, _ = json.Marshal(fmt.Sprintf("(not readable: %v)", err))
		}
		out = append(out, raw)
	}
	if len(out) == 1 {
		return out[0]
	}
	b, _ := json.Marshal(out)
	return b
}

// read takes in one event, and returns its line of the timeline.
func (r *historyReader) read(e *historypb.HistoryEvent) Event {
	f := r.f
	at := e.GetEventTime().AsTime()
	ev := Event{ID: e.GetEventId(), At: at, Type: strings.TrimPrefix(e.GetEventType().String(), "EVENT_TYPE_")}
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
		a := e.GetWorkflowExecutionStartedEventAttributes()
		f.Input = r.decode(a.GetInput())
		f.TraceID = telemetry.TraceID(a.GetHeader())
		ev.Detail = a.GetWorkflowType().GetName() + " by " + a.GetIdentity()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
		enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED, enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		r.activity(e, &ev)
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		r.marker(e, &ev)
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
		enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		r.message(e, &ev)
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		a := e.GetTimerStartedEventAttributes()
		ev.Detail = "timer " + a.GetTimerId() + " for " + a.GetStartToFireTimeout().AsDuration().String()
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		ev.BuildID = taskBuildID(e.GetWorkflowTaskCompletedEventAttributes())
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
		ev.Detail = "a worker died with the task; another ran it again from history"
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		ev.Detail = e.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage()
	}
	return ev
}

// activity follows a regular activity's step: scheduled, started (which
// attempt, on which worker), and how it ended.
func (r *historyReader) activity(e *historypb.HistoryEvent, ev *Event) {
	f, at := r.f, ev.At
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		a := e.GetActivityTaskScheduledEventAttributes()
		r.scheduled[e.GetEventId()] = len(f.Steps)
		f.Steps = append(f.Steps, Step{Activity: a.GetActivityType().GetName(), ScheduledAt: at, Outcome: "scheduled", Input: r.decode(a.GetInput())})
		ev.Detail = a.GetActivityType().GetName()
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		a := e.GetActivityTaskStartedEventAttributes()
		if i, ok := r.scheduled[a.GetScheduledEventId()]; ok {
			f.Steps[i].Attempt, f.Steps[i].Worker, f.Steps[i].Outcome = a.GetAttempt(), a.GetIdentity(), "started"
			if lf := a.GetLastFailure(); lf != nil {
				f.Steps[i].Failure = lf.GetMessage()
			}
			ev.Detail = fmt.Sprintf("%s attempt %d on %s", f.Steps[i].Activity, a.GetAttempt(), a.GetIdentity())
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		a := e.GetActivityTaskCompletedEventAttributes()
		if i, ok := r.scheduled[a.GetScheduledEventId()]; ok {
			f.Steps[i].Outcome, f.Steps[i].Output, f.Steps[i].ClosedAt = "completed", r.decode(a.GetResult()), at
			ev.Detail = f.Steps[i].Activity
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		a := e.GetActivityTaskFailedEventAttributes()
		if i, ok := r.scheduled[a.GetScheduledEventId()]; ok {
			f.Steps[i].Outcome, f.Steps[i].Failure, f.Steps[i].ClosedAt = "failed", a.GetFailure().GetMessage(), at
			ev.Detail = f.Steps[i].Activity + ": " + a.GetFailure().GetMessage()
		}
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		a := e.GetActivityTaskTimedOutEventAttributes()
		if i, ok := r.scheduled[a.GetScheduledEventId()]; ok {
			f.Steps[i].Outcome, f.Steps[i].Failure, f.Steps[i].ClosedAt = "timed out", a.GetFailure().GetMessage(), at
			ev.Detail = f.Steps[i].Activity
		}
	}
}

// marker reads a marker: a local activity's is a step of its own.
func (r *historyReader) marker(e *historypb.HistoryEvent, ev *Event) {
	m := e.GetMarkerRecordedEventAttributes()
	ev.Detail = m.GetMarkerName()
	if m.GetMarkerName() != "LocalActivity" {
		return
	}
	var data struct {
		ActivityType string
		Attempt      int32
	}
	if r.dc.FromPayloads(m.GetDetails()["data"], &data) != nil {
		return
	}
	s := Step{Activity: data.ActivityType, Local: true, Attempt: data.Attempt, ClosedAt: ev.At, Outcome: "completed",
		Output: r.decode(m.GetDetails()["result"])}
	if fl := m.GetFailure(); fl != nil {
		s.Outcome, s.Failure, s.Output = "failed", fl.GetMessage(), nil
	}
	r.f.Steps = append(r.f.Steps, s)
	ev.Detail = "local " + data.ActivityType
}

// message reads what was sent to the run: a signal, or an update and how
// it was answered.
func (r *historyReader) message(e *historypb.HistoryEvent, ev *Event) {
	f, at := r.f, ev.At
	switch e.GetEventType() {
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
		a := e.GetWorkflowExecutionSignaledEventAttributes()
		f.Messages = append(f.Messages, Message{Kind: "signal", Name: a.GetSignalName(), At: at, From: a.GetIdentity(), Input: r.decode(a.GetInput())})
		ev.Detail = a.GetSignalName() + " from " + a.GetIdentity()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
		a := e.GetWorkflowExecutionUpdateAcceptedEventAttributes()
		req := a.GetAcceptedRequest()
		r.updates[req.GetMeta().GetUpdateId()] = len(f.Messages)
		f.Messages = append(f.Messages, Message{Kind: "update", Name: req.GetInput().GetName(), At: at,
			From: req.GetMeta().GetIdentity(), Input: r.decode(req.GetInput().GetArgs()), Outcome: "accepted"})
		ev.Detail = req.GetInput().GetName() + " from " + req.GetMeta().GetIdentity()
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
		a := e.GetWorkflowExecutionUpdateCompletedEventAttributes()
		if i, ok := r.updates[a.GetMeta().GetUpdateId()]; ok {
			if fl := a.GetOutcome().GetFailure(); fl != nil {
				f.Messages[i].Outcome = "refused: " + fl.GetMessage()
			} else {
				f.Messages[i].Outcome = "answered"
			}
		}
	}
}

// taskBuildID is the build that completed a workflow task, read as the SDK
// reads it for workflow.GetInfo(ctx).GetCurrentBuildID() on replay: the
// deployment version's, else the worker version stamp's.
func taskBuildID(a *historypb.WorkflowTaskCompletedEventAttributes) string {
	if id := a.GetDeploymentVersion().GetBuildId(); id != "" {
		return id
	}
	//lint:ignore SA1019 the SDK reads the deprecated fields too
	if _, id, ok := strings.Cut(a.GetWorkerDeploymentVersion(), "."); ok && id != "" {
		return id
	}
	//lint:ignore SA1019 the SDK reads the deprecated fields too
	return a.GetWorkerVersion().GetBuildId()
}
