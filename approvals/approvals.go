// Package approvals parks a workflow until a human decides: the approval
// request and its hash, the decision and who made it, and its signed
// receipt (their records are package decision's, named here as
// approvals'), the rules a decision must pass, the TTL and escalation
// policy, and the workflow-side wait. Any workflow can use it; nothing
// here knows about claims beyond the request.
//
// Waiting is a state, not a thread: the wait is a durable timer and a signal
// channel in the workflow's history. No activity, goroutine or worker slot is
// held, and the worker may come and go while a claim waits for days.
package approvals

import "time"

// Names used by runbooks, `temporal workflow signal` and
// `temporal workflow update execute`.
const (
	SignalApprove = "approve"
	SignalReject  = "reject"
	// UpdateDecide is the validated update: a refused decision is answered
	// synchronously and never enters history.
	UpdateDecide = "decide"
	// SignalChanged says the claim changed in the system of record
	// (claimsctl withdraw, amend): a wait reads it again at once rather than
	// at the next decision. It carries nothing and proves nothing: the
	// workflow reads the store.
	SignalChanged = "changed"
)

// Input is the payload of the approve and reject signals: a signed decision
// receipt, {"receipt":"eyJ…"} (see Receipt; `claimsctl receipt` issues one).
//
// The other fields are the plain form that runs started before receipts
// were decided by, and that a worker with the development switch
// (ALLOW_UNSIGNED_DECISIONS) still accepts, audited as unauthenticated:
// {"approver":"adjuster-17","note":"…"} / {"approver":"adjuster-17","reason":"…"},
// optionally with "payload_sha256" (the full hash or its first 12 hex digits).
type Input struct {
	Receipt       string `json:"receipt,omitempty"`
	Approver      string `json:"approver,omitempty"`
	Note          string `json:"note,omitempty"`
	Reason        string `json:"reason,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
}

// DecideInput is the payload of the decide update: {"receipt":"eyJ…"}, the
// verdict being the receipt's. The plain form is
// {"approver":"adjuster-17","decision":"approve"|"reject","reason":"…","payload_sha256":"…"}.
type DecideInput struct {
	Receipt       string  `json:"receipt,omitempty"`
	Approver      string  `json:"approver,omitempty"`
	Decision      Verdict `json:"decision,omitempty"`
	Reason        string  `json:"reason,omitempty"`
	Note          string  `json:"note,omitempty"`
	PayloadSHA256 string  `json:"payload_sha256,omitempty"`
}

// Input is the decision's common part.
func (d DecideInput) Input() Input {
	return Input{Receipt: d.Receipt, Approver: d.Approver, Note: d.Note, Reason: d.Reason, PayloadSHA256: d.PayloadSHA256}
}

// Policy is the declarative TTL and escalation policy of a wait:
//
//	requested ──ReminderAt×TTL──▶ reminder ──TTL──▶ escalated ──EscalationTTL──▶ FinalOutcome
type Policy struct {
	// TTL is how long adjusters have before the wait escalates to the
	// supervisors (default 72 h).
	TTL time.Duration `json:"ttl"`
	// ReminderAt is the fraction of the TTL at which the adjusters are
	// reminded (default 0.5; 1 or more: no reminder).
	ReminderAt float64 `json:"reminder_at,omitempty"`
	// EscalationTTL is how long supervisors then have (default 24 h).
	EscalationTTL time.Duration `json:"escalation_ttl"`
	// FinalOutcome is what happens when nobody decided by the second
	// deadline: reject (the default; the claim ends expired, unpaid),
	// approve (paid by policy, recorded as such) or hold (the wait stays
	// open, flagged overdue, until a person decides or the age cap).
	FinalOutcome Verdict `json:"final_outcome,omitempty"`
}

// Defaults.
const (
	DefaultTTL           = 72 * time.Hour
	DefaultEscalationTTL = 24 * time.Hour
	DefaultReminderAt    = 0.5
)

// WithDefaults fills unset fields.
func (p Policy) WithDefaults() Policy {
	if p.TTL <= 0 {
		p.TTL = DefaultTTL
	}
	if p.EscalationTTL <= 0 {
		p.EscalationTTL = DefaultEscalationTTL
	}
	if p.ReminderAt <= 0 {
		p.ReminderAt = DefaultReminderAt
	}
	if p.FinalOutcome != Approve && p.FinalOutcome != Hold {
		p.FinalOutcome = Reject
	}
	return p
}
