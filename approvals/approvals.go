// Package approvals parks a workflow until a human decides: the approval
// request and its hash, the decision and who made it, the rules a decision
// must pass, the TTL and escalation policy, and the workflow-side wait. Any
// workflow can use it; nothing here knows about claims beyond the request.
//
// Waiting is a state, not a thread: the wait is a durable timer and a signal
// channel in the workflow's history. No activity, goroutine or worker slot is
// held, and the worker may come and go while a claim waits for days.
package approvals

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
)

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

// Verdict is what a decision says.
type Verdict string

const (
	Approve Verdict = "approve"
	Reject  Verdict = "reject"
	// Handoff hands the request to a named colleague (the receipt's
	// assign_to): recorded, the wait goes on, the deadline keeps running.
	// Only the decide update carries it.
	Handoff Verdict = "handoff"
	// Hold is a final outcome only: when nobody decided by the second
	// deadline the wait stays open for the supervisors, flagged overdue
	// (Hooks.Overdue), until a person decides or the run's age cap ends it.
	// Where a regulator's clock runs, silence may not deny a claim.
	Hold Verdict = "hold"
)

// Stage is where a wait is: with the adjusters, or escalated to supervisors.
type Stage string

const (
	StageWaiting   Stage = "waiting"
	StageEscalated Stage = "escalated"
)

// Request is what the approver is asked to decide. Its canonical JSON (the
// struct's fields in declaration order, no HTML escaping surprises: plain
// encoding/json) is hashed; a decision may cite the hash to prove which
// request it saw.
type Request struct {
	ClaimID     string         `json:"claim_id"`
	Payee       string         `json:"payee"`
	PayeeName   string         `json:"payee_name"`
	AmountMinor int64          `json:"amount_minor"`
	Amount      string         `json:"amount"`
	Currency    string         `json:"currency"`
	Rationale   string         `json:"rationale"`
	Coverage    claim.Coverage `json:"coverage"`
	// Reasons says why a human is needed (over the threshold, fraud signals).
	Reasons []string `json:"reasons"`
}

// Canonical is the exact document the hash covers.
func (r Request) Canonical() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // only plain fields: cannot fail
	}
	return b
}

// SHA256 is the hex SHA-256 of Canonical.
func (r Request) SHA256() string {
	sum := sha256.Sum256(r.Canonical())
	return hex.EncodeToString(sum[:])
}

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

// Decision is an accepted decision, with the request the approver was shown.
type Decision struct {
	Verdict       Verdict   `json:"verdict"`
	Approver      string    `json:"approver"`
	Role          string    `json:"role,omitempty"`
	Note          string    `json:"note,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	Channel       string    `json:"channel"`
	Stage         Stage     `json:"stage"`
	DecidedAt     time.Time `json:"decided_at"`
	Request       Request   `json:"request"`
	RequestSHA256 string    `json:"request_sha256"`
	// HashBound is true when the decision cited the request's hash; a
	// decision without one is accepted from the CLI, and the audit says so.
	HashBound bool `json:"hash_bound"`
	// AmountMinor is the payout the decision approves: the request's, or
	// less when the approver lowered it. Approved is then the request as
	// approved (the lower amount, the approver's reason) and ApprovedSHA256
	// its hash.
	AmountMinor    int64    `json:"amount_minor,omitempty"`
	Approved       *Request `json:"approved,omitempty"`
	ApprovedSHA256 string   `json:"approved_sha256,omitempty"`
	// Proof says what proved the approver: ProofReceipt (a signed receipt,
	// kept in Receipt so anyone can verify it again), ProofUnauthenticated
	// (a plain decision accepted under the development switch), or empty
	// for runs started before receipts.
	Proof     string `json:"proof,omitempty"`
	KeyID     string `json:"kid,omitempty"`
	VouchedBy string `json:"vouched_by,omitempty"`
	ReceiptID string `json:"jti,omitempty"`
	Receipt   string `json:"receipt,omitempty"`
	// BuildID is the build of the worker that processed the workflow task
	// the decision was accepted in, and PolicyVersion the version of the
	// insurer's policy the run follows (Gate.Stamp); empty for runs that
	// recorded neither.
	BuildID       string `json:"build_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
}

// Proofs of a decision.
const (
	ProofReceipt         = "receipt"
	ProofUnauthenticated = "unauthenticated"
)

// Attempt is one decision attempt, accepted or refused: the audit trail.
// For a refused attempt, Approver is who it claimed to be.
type Attempt struct {
	At            time.Time `json:"at"`
	Channel       string    `json:"channel"`
	Name          string    `json:"name"`
	Approver      string    `json:"approver,omitempty"`
	Role          string    `json:"role,omitempty"`
	Decision      Verdict   `json:"decision,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	PayloadSHA256 string    `json:"payload_sha256,omitempty"`
	KeyID         string    `json:"kid,omitempty"`
	ReceiptID     string    `json:"jti,omitempty"`
	Accepted      bool      `json:"accepted"`
	// Code is the refusal's stable name (unsigned, unknown-key, expired…).
	Code    string `json:"code,omitempty"`
	Refusal string `json:"refusal,omitempty"`
	// Payload is the raw payload, cut to 128 bytes, for refused attempts.
	Payload string `json:"payload,omitempty"`
	// BuildID and PolicyVersion: as Decision's, for the task that accepted
	// or refused the attempt.
	BuildID       string `json:"build_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
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
