// Package whatif replays closed claims on a candidate model, prompt or
// insurer policy and says which decisions would change: what the run saw is
// read from its claim file, triage and assessment ask the candidate, and the
// claim workflow's own routing rules (workflows.RouteClaim) decide. It runs
// as its own workflows on its own task queue, served by a worker that holds
// no payment provider, no mailer and a read-only claims store: nothing it
// does can pay, write or notify. docs/whatif.md says how to use it.
package whatif

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/workflows"
)

// Recorded is what a closed run saw and decided, from its claim file: the
// claim as decided, its policy and the insurer's rules as intake read them,
// every tool answer, the model's triage and assessment, and what the
// humans did.
type Recorded struct {
	ClaimID    string `json:"claim_id"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	// Outcome is how the run ended: paid, rejected, expired, withdrawn,
	// dead-lettered.
	Outcome string `json:"outcome"`
	// Claim is the version the run decided on (the last read).
	Claim         claim.Claim       `json:"claim"`
	ClaimVersion  int64             `json:"claim_version"`
	Policy        *claim.Policy     `json:"policy,omitempty"`
	Rules         *insurer.Rules    `json:"rules,omitempty"`
	PolicyVersion string            `json:"policy_version,omitempty"`
	Options       workflows.Options `json:"options"`
	Review        *review.Facts     `json:"review,omitempty"`
	// Tools are the tool calls the triage agent made, with their answers;
	// Flags the fraud signals it raised.
	Tools []ToolAnswer `json:"tools,omitempty"`
	Flags []string     `json:"flags,omitempty"`
	// Triage and Assessment are the model's last answers; nil when the run
	// did not get that far (or a cap left the model out).
	Triage     *activities.Triage     `json:"triage,omitempty"`
	Assessment *activities.Assessment `json:"assessment,omitempty"`
	Coverage   claim.Coverage         `json:"coverage"`
	// Usage is the recorded model's: the model, its prompt version, the
	// calls, tokens, cost and time.
	Usage Usage `json:"usage"`
	// PayoutMinor is what was paid (0 unless paid).
	PayoutMinor int64              `json:"payout_minor"`
	Decided     *workflows.Decided `json:"decided,omitempty"`
	// Human is what the approvers did; nil when nobody was asked.
	Human *Human `json:"human,omitempty"`
}

// ToolAnswer is one tool call and its answer. Source says where a what-if's
// answer came from: SourceRecorded, SourceLive or SourceSimulated.
type ToolAnswer struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
	Source    string `json:"source,omitempty"`
}

// Where a what-if's tool answer came from.
const (
	// SourceRecorded: the recorded run made the same call; its answer.
	SourceRecorded = "recorded"
	// SourceLive: read now from the claims store or the blob store.
	SourceLive = "live"
	// SourceSimulated: a tool that writes (flag_fraud_signal), answered as
	// it would answer, with nothing written.
	SourceSimulated = "simulated"
)

// Usage is what a model's answers for one claim cost.
type Usage struct {
	Model         string `json:"model"`
	PromptVersion string `json:"prompt_version,omitempty"`
	Calls         int    `json:"calls"`
	TokensIn      int64  `json:"tokens_in"`
	TokensOut     int64  `json:"tokens_out"`
	CostMicros    int64  `json:"cost_micros"`
	// Latency is the time the calls took where it is known: a call run as
	// a local activity records only when it ended (LatencyKnown false).
	Latency      time.Duration `json:"latency_ns"`
	LatencyKnown bool          `json:"latency_known"`
}

// Human is what the approvers did with the claim.
type Human struct {
	// Reasons are why they were asked (the last request's).
	Reasons        []string `json:"reasons"`
	RequestedMinor int64    `json:"requested_minor"`
	// Verdict is the last decision's: approve, reject, or "" when nobody
	// decided (Expired says whether the policy's final outcome applied).
	Verdict        approvals.Verdict `json:"verdict,omitempty"`
	Expired        bool              `json:"expired,omitempty"`
	ApprovedMinor  int64             `json:"approved_minor,omitempty"`
	Lowered        bool              `json:"lowered,omitempty"`
	HandedOn       bool              `json:"handed_on,omitempty"`
	Approvers      []string          `json:"approvers,omitempty"`
	RejectedReason string            `json:"rejected_reason,omitempty"`
}

// Intervened says a human changed what the rules proposed: lowered the
// payout, rejected the claim, or handed it on to a colleague.
func (h *Human) Intervened() bool {
	return h != nil && (h.Lowered || h.Verdict == approvals.Reject || h.HandedOn)
}

// Intervention names it, "" when there was none.
func (h *Human) Intervention() string {
	if h == nil {
		return ""
	}
	var what []string
	if h.HandedOn {
		what = append(what, "handed on")
	}
	switch {
	case h.Verdict == approvals.Reject:
		what = append(what, "rejected")
	case h.Lowered:
		what = append(what, "lowered")
	}
	return strings.Join(what, ", ")
}

// The activities whose recorded results the what-if reads.
const (
	actLoadClaim   = "LoadClaim"
	actTriageTurn  = "TriageTurn"
	actTriageClaim = "TriageClaim"
	actCallTool    = "CallTool"
	actAssessClaim = "AssessClaim"
)

// FromClaimFile reads what a run saw from its claim file.
func FromClaimFile(f claimfile.File) (Recorded, error) {
	r := Recorded{ClaimID: f.ClaimID, WorkflowID: f.WorkflowID, RunID: f.RunID, Outcome: f.Outcome}
	var in workflows.ClaimInput
	if len(f.Input) > 0 {
		if err := json.Unmarshal(f.Input, &in); err != nil {
			return r, fmt.Errorf("claim file of %s: input: %w", f.ClaimID, err)
		}
	}
	r.Claim, r.Options = in.Claim, in.Options
	var audit workflows.AuditRecord
	if err := json.Unmarshal(f.Record, &audit); err != nil {
		return r, fmt.Errorf("claim file of %s: record: %w", f.ClaimID, err)
	}
	r.ClaimVersion, r.PayoutMinor, r.Coverage, r.Decided = audit.ClaimVersion, audit.PayoutMinor, audit.Coverage, audit.Decided
	if r.Outcome == "" {
		r.Outcome = audit.Outcome
	}
	args := map[string]activities.ToolCall{} // by call ID, from the turns that asked
	loads := 0
	for _, s := range f.Steps {
		if s.Outcome != "completed" || len(s.Output) == 0 {
			continue
		}
		var err error
		switch s.Activity {
		case actLoadClaim:
			var lc activities.LoadClaimResult
			if err = json.Unmarshal(s.Output, &lc); err == nil {
				if loads++; loads == 1 {
					r.Rules, r.PolicyVersion = lc.Rules, lc.PolicyVersion
				}
				r.Claim, r.ClaimVersion, r.Policy = lc.Claim, lc.Version, orPolicy(lc.Policy, r.Policy)
				if lc.Review != nil {
					r.Review = lc.Review
				}
			}
		case actTriageTurn:
			var t activities.TurnResult
			if err = json.Unmarshal(s.Output, &t); err == nil {
				for _, c := range t.ToolCalls {
					args[c.ID] = c
				}
				if t.Triage != nil {
					r.Triage = t.Triage
				}
				r.Usage.add(t.Model, t.PromptVersion, t.Usage, s)
			}
		case actTriageClaim:
			var t activities.TriageResult
			if err = json.Unmarshal(s.Output, &t); err == nil {
				r.Triage = &t.Output
				r.Usage.add(t.Model, t.PromptVersion, t.Usage, s)
			}
		case actCallTool:
			var t activities.ToolResult
			if err = json.Unmarshal(s.Output, &t); err == nil {
				call := args[t.CallID]
				r.Tools = append(r.Tools, ToolAnswer{Name: t.Name, Arguments: call.Arguments, Content: t.Content, IsError: t.IsError})
				if t.Name == activities.ToolFlagFraudSignal && !t.IsError {
					r.Flags = append(r.Flags, flagged(t.Content))
				}
			}
		case actAssessClaim:
			var as activities.AssessResult
			if err = json.Unmarshal(s.Output, &as); err == nil {
				r.Assessment = &as.Output
				r.Usage.add(as.Model, as.PromptVersion, as.Usage, s)
			}
		}
		if err != nil {
			return r, fmt.Errorf("claim file of %s: %s's result: %w", f.ClaimID, s.Activity, err)
		}
	}
	if loads == 0 {
		return r, fmt.Errorf("claim file of %s: the run never read its claim (intake failed): nothing to compare", f.ClaimID)
	}
	r.Human = humanOf(audit.Approvals)
	return r, nil
}

func orPolicy(p, was *claim.Policy) *claim.Policy {
	if p != nil {
		return p
	}
	return was
}

// flagged is the signal a flag_fraud_signal answer names.
func flagged(content string) string {
	var f struct {
		Signal string `json:"signal"`
	}
	_ = json.Unmarshal([]byte(content), &f)
	return f.Signal
}

func (u *Usage) add(model, prompt string, used activities.Usage, s claimfile.Step) {
	if model != "" {
		u.Model, u.PromptVersion = model, prompt
	}
	u.Calls++
	u.TokensIn += used.TokensIn
	u.TokensOut += used.TokensOut
	u.CostMicros += used.CostMicros
	if !s.Local && !s.ScheduledAt.IsZero() && !s.ClosedAt.IsZero() {
		u.Latency += s.ClosedAt.Sub(s.ScheduledAt)
		u.LatencyKnown = true
	}
}

// humanOf reads what the approvers did from the run's approvals; nil when
// none was raised.
func humanOf(all []*approvals.Approval) *Human {
	if len(all) == 0 {
		return nil
	}
	h := &Human{}
	for _, a := range all {
		if len(a.Handoffs) > 0 {
			h.HandedOn = true
		}
	}
	last := all[len(all)-1]
	h.Reasons, h.RequestedMinor, h.Expired = last.Request.Reasons, last.Request.AmountMinor, last.Expired
	for _, v := range last.Votes {
		if v.Approver != "" && !slices.Contains(h.Approvers, v.Approver) {
			h.Approvers = append(h.Approvers, v.Approver)
		}
	}
	if d := last.Decision; d != nil {
		h.Verdict = d.Verdict
		if d.Approver != "" && !slices.Contains(h.Approvers, d.Approver) {
			h.Approvers = append(h.Approvers, d.Approver)
		}
		switch d.Verdict {
		case approvals.Approve:
			h.ApprovedMinor = last.PayoutMinor()
			h.Lowered = h.ApprovedMinor < last.Request.AmountMinor
		case approvals.Reject:
			h.RejectedReason = d.Reason
		}
	}
	return h
}
