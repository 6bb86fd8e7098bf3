// Package decision is the record of a human's decision on a claim, and
// its proof: the request an approver is shown and its hash, the decision
// and who made it, every attempt, the wait as it stood and ended, and the
// signed receipt that proves the approver (receipt.go). It is what the
// workflow records and the claim file verifies: pure data and checks, no
// workflow code. The workflow-side wait, the gate and its rule book are
// package approvals, which names these types as its own.
package decision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
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
	// (approvals.Hooks.Overdue), until a person decides or the run's age
	// cap ends it. Where a regulator's clock runs, silence may not deny a
	// claim.
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

// Approval is one wait: the request, where it stands, and how it ended.
// The workflow's status query reports it as is.
type Approval struct {
	Request       Request   `json:"request"`
	RequestSHA256 string    `json:"request_sha256"`
	RequestedAt   time.Time `json:"requested_at"`
	Stage         Stage     `json:"stage"`
	Deadline      time.Time `json:"deadline"`
	Reminded      bool      `json:"reminded,omitempty"`
	Decision      *Decision `json:"decision,omitempty"`
	// Expired: nobody decided by the second deadline; the policy's final
	// outcome applied (a Decision by "policy" when it approves).
	Expired bool `json:"expired,omitempty"`
	// Capped: the run's age cap ended the wait first.
	Capped bool `json:"capped,omitempty"`
	// DueBy is a deadline outside the wait that its decision is due by (a
	// regulator's decision clock), for whoever lists it; zero: none.
	DueBy time.Time `json:"due_by,omitzero"`
	// DueUnder names what sets DueBy (a jurisdiction: US-CA).
	DueUnder string `json:"due_under,omitempty"`
	// OverdueAt: nobody decided by the second deadline and the policy
	// holds the wait open (FinalOutcome hold): when it became overdue.
	OverdueAt time.Time `json:"overdue_at,omitzero"`
	// Voided says why an accepted approval no longer holds (the claim
	// changed while it waited).
	Voided string `json:"voided,omitempty"`
	// Interrupted: the wait ended before anyone decided, because the claim
	// changed in the system of record (withdrawn, amended) while it waited;
	// Voided says how. Nothing was decided.
	Interrupted bool `json:"interrupted,omitempty"`
	// Quorum is how many approvers must agree: 2 above the four-eyes
	// threshold. Votes are the approvals accepted so far; the wait goes on
	// until Quorum of them agree (a rejection ends it at once).
	Quorum int        `json:"quorum,omitempty"`
	Votes  []Decision `json:"votes,omitempty"`
	// The wait's timeline, as planned when it opened: the reminder (zero
	// when there is none), the escalation to supervisors, and the final
	// outcome. Deadline is the current stage's.
	RemindAt    time.Time `json:"remind_at,omitempty"`
	EscalatesAt time.Time `json:"escalates_at,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitempty"`
	// Handoffs record requests handed to a named colleague; the deadline
	// keeps running.
	Handoffs []HandedOn `json:"handoffs,omitempty"`
	// Rev counts the changes of the run's waits (opened, a vote, a
	// hand-off, escalated, ended) up to this one's last: what the approval
	// queue orders the run's writes by (Hooks.OnChange).
	Rev  int64 `json:"rev,omitempty"`
	open bool
}

// Open says whether the wait still takes decisions.
func (a *Approval) Open() bool { return a.open }

// SetOpen opens the wait to decisions or ends it: the gate's to say
// (package approvals). It is not recorded: a record read back is closed.
func (a *Approval) SetOpen(open bool) { a.open = open }

// Listing is the wait as an inbox lists it: no decision, no receipts, each
// vote by its approver only, and the rationale cut short.
func (a *Approval) Listing() Approval {
	l := *a
	l.Decision = nil
	l.Votes = nil
	for _, v := range a.Votes {
		l.Votes = append(l.Votes, Decision{Verdict: v.Verdict, Approver: v.Approver, Role: v.Role, DecidedAt: v.DecidedAt, AmountMinor: v.AmountMinor})
	}
	if len(l.Request.Rationale) > 512 {
		l.Request.Rationale = strings.ToValidUTF8(l.Request.Rationale[:512], "") + "…"
	}
	return l
}

// HandedOn records an approver handing the request to a named colleague.
type HandedOn struct {
	From      string    `json:"from"`
	To        string    `json:"to"`
	Note      string    `json:"note,omitempty"`
	At        time.Time `json:"at"`
	ReceiptID string    `json:"jti"`
}

// AssignedTo is who the request was last handed to, if anyone.
func (a *Approval) AssignedTo() string {
	if n := len(a.Handoffs); n > 0 {
		return a.Handoffs[n-1].To
	}
	return ""
}

// PayoutMinor is what the approval lets the run pay: the least amount any
// of its approvers approved (an approver may lower it, never raise it).
func (a *Approval) PayoutMinor() int64 {
	amount := a.Request.AmountMinor
	for _, v := range a.Votes {
		if v.AmountMinor > 0 && v.AmountMinor < amount {
			amount = v.AmountMinor
		}
	}
	return amount
}
