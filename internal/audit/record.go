// Package audit is the audit record: what the claim workflow writes to
// the ledger when a claim ends (step 9), and what the claim file carries
// and claimsctl verify read back. One type for both, so a field the
// workflow records is a field the verifier sees.
package audit

import (
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/decision"
	"github.com/durableclaims/durableclaims/internal/letters"
	"github.com/durableclaims/durableclaims/internal/statute"
)

// Record is what step 9 of the claim workflow writes to the ledger, and
// what the claim file carries and verifies.
type Record struct {
	ClaimID    string `json:"claim_id"`
	WorkflowID string `json:"workflow_id"`
	// ReviewOf, on a review claim, names the claim whose automated outcome
	// it reviews and the claimant's request: who, when, why.
	ReviewOf        *claim.Review        `json:"review_of,omitempty"`
	Outcome         string               `json:"outcome"`
	Reason          string               `json:"reason,omitempty"`
	PayoutMinor     int64                `json:"payout_minor"`
	Currency        string               `json:"currency"`
	TransferID      string               `json:"transfer_id,omitempty"`
	PaymentReplayed bool                 `json:"payment_replayed,omitempty"`
	Coverage        claim.Coverage       `json:"coverage"`
	Models          []ModelUse           `json:"models,omitempty"`
	Approvals       []*decision.Approval `json:"approvals,omitempty"`
	Attempts        []decision.Attempt   `json:"decision_attempts,omitempty"`
	AttemptsDropped int                  `json:"decision_attempts_dropped,omitempty"`
	ClaimVersion    int64                `json:"claim_version"`
	NotificationID  string               `json:"notification_id,omitempty"`
	ClosedAt        time.Time            `json:"closed_at"`
	// PolicyVersion is the version of the insurer's policy the run
	// follows, Decided what decided the outcome (runs from the claim
	// workflow's versionProvenance on; records of runs before keep their
	// bytes).
	PolicyVersion string   `json:"policy_version,omitempty"`
	Decided       *Decided `json:"decided,omitempty"`
	// Law is the jurisdiction's clocks and letters (runs from the claim
	// workflow's versionLaw on, where the worker applies jurisdiction
	// rules).
	Law *Law `json:"law,omitempty"`
}

// ModelUse identifies a model answer without repeating it.
type ModelUse struct {
	Step int `json:"step"`
	// Turn numbers the calls of step 2's agent loop.
	Turn  int    `json:"turn,omitempty"`
	Model string `json:"model"`
	// PromptVersion names what the model answered under and BuildID the
	// build of the worker that asked (from versionProvenance on).
	PromptVersion string `json:"prompt_version,omitempty"`
	BuildID       string `json:"build_id,omitempty"`
	OutputSHA256  string `json:"output_sha256"`
	TokensIn      int64  `json:"tokens_in"`
	TokensOut     int64  `json:"tokens_out"`
	// CostMicros is the estimated cost of the call in millionths of a dollar.
	CostMicros int64 `json:"cost_micros,omitempty"`
}

// Decided says what decided a claim's outcome, and on what: the build of
// the worker that decided (the build the run's history records for the
// workflow task that decided), the version of the insurer's policy the run
// follows, and the model answers the decision rests on.
type Decided struct {
	// By is "rules" (within the auto-approve limit with no review reason,
	// or rejected by the coverage or the assessment), "approver" (a person:
	// the approvals say who, with the receipt) or "policy" (nobody decided
	// by the deadline: the policy's final outcome).
	By      string           `json:"by"`
	Verdict decision.Verdict `json:"verdict"`
	// BuildID is the decision's build: for a person's decision the build
	// that accepted it (the decision's build_id).
	BuildID       string `json:"build_id,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	// ModelAnswers are the output_sha256 of the model answers the decision
	// rests on, as model_calls lists them: the triage's answer and the
	// assessment (none when a cap or the coverage left the model out).
	ModelAnswers []string `json:"model_answers,omitempty"`
}

// How a decision was made (Decided.By).
const (
	DecidedByRules    = "rules"
	DecidedByApprover = "approver"
	DecidedByPolicy   = "policy"
)

// Law is the audit record's law section: what an examiner checks.
type Law struct {
	Jurisdiction   string               `json:"jurisdiction"`
	RuleSet        string               `json:"rule_set"`
	NoticeAt       time.Time            `json:"notice_at"`
	AcknowledgedAt *time.Time           `json:"acknowledged_at"`
	ProofOfLossAt  *time.Time           `json:"proof_of_loss_at"`
	DecidedAt      *time.Time           `json:"decided_at"`
	AcceptedAt     *time.Time           `json:"accepted_at,omitempty"`
	PaidAt         *time.Time           `json:"paid_at"`
	Clocks         []statute.ClockState `json:"clocks"`
	Letters        []letters.Sent       `json:"letters,omitempty"`
	// Breaches names each clock that ran out before its event.
	Breaches []string `json:"breaches,omitempty"`
}
