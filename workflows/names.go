// Package workflows holds ClaimWorkflow: the nine steps of a claim as
// deterministic workflow code. Everything that touches the world is an
// activity (package activities); pure logic (coverage arithmetic, clamping,
// routing) stays here and is recomputed on replay.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Names other programs rely on (DESIGN.md). Do not rename.
const (
	TaskQueue    = "claims"
	WorkflowType = "ClaimWorkflow"
	QueryStatus  = "status"
)

// Search attributes, registered on the namespace
// (--search-attribute ClaimStatus=Keyword --search-attribute ApprovalDeadline=Datetime).
var (
	ClaimStatusKey      = temporal.NewSearchAttributeKeyKeyword("ClaimStatus")
	ApprovalDeadlineKey = temporal.NewSearchAttributeKeyTime("ApprovalDeadline")
)

// ClaimStatus values.
const (
	StatusRunning      = "running"
	StatusWaiting      = "waiting"
	StatusEscalated    = "escalated"
	StatusPaid         = "paid"
	StatusRejected     = "rejected"
	StatusWithdrawn    = "withdrawn"
	StatusExpired      = "expired"
	StatusDeadLettered = "dead-lettered"
)

// ClaimInput starts a claim. Options carry the operations settings that
// workflow code must not read from the environment.
type ClaimInput struct {
	Claim   claim.Claim `json:"claim"`
	Options Options     `json:"options"`
}

// Options are per-claim settings, fixed at start so replays see the same.
type Options struct {
	// AutoApproveLimitMinor is the largest payout paid without a human, in
	// minor units of the claim's currency (default DefaultAutoApproveLimit).
	AutoApproveLimitMinor int64 `json:"auto_approve_limit_minor,omitempty"`
	// Approval is the wait's TTL and escalation policy.
	Approval approvals.Policy `json:"approval"`
}

// DefaultAutoApproveLimit is the auto-approve threshold in major units.
const DefaultAutoApproveLimit = "1000"

// Status is the answer to the status query.
type Status struct {
	ClaimID     string `json:"claim_id"`
	Step        int    `json:"step"`
	StepName    string `json:"step_name"`
	State       string `json:"state"`
	Amount      string `json:"amount"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Payout      string `json:"payout,omitempty"`
	PayoutMinor int64  `json:"payout_minor"`
	// Approval is the pending (or last) approval: the request, its SHA-256,
	// the stage and the deadline.
	Approval   *approvals.Approval `json:"approval,omitempty"`
	Attempts   []approvals.Attempt `json:"decision_attempts,omitempty"`
	TransferID string              `json:"transfer_id,omitempty"`
	Reason     string              `json:"reason,omitempty"`
}

// ClaimResult is how a claim ended.
type ClaimResult struct {
	ClaimID         string              `json:"claim_id"`
	Status          string              `json:"status"`
	Reason          string              `json:"reason,omitempty"`
	PayoutMinor     int64               `json:"payout_minor"`
	Payout          string              `json:"payout"`
	Currency        string              `json:"currency"`
	TransferID      string              `json:"transfer_id,omitempty"`
	PaymentReplayed bool                `json:"payment_replayed,omitempty"`
	Approval        *approvals.Approval `json:"approval,omitempty"`
	Attempts        []approvals.Attempt `json:"decision_attempts,omitempty"`
	// DeadLetter says where a dead-lettered run stopped and which side
	// effects may or may not have happened.
	DeadLetter *DeadLetter `json:"dead_letter,omitempty"`
}

// DeadLetter describes a run that stopped because a step exhausted its
// retries or failed in a way no retry fixes.
type DeadLetter struct {
	Step           int      `json:"step"`
	StepName       string   `json:"step_name"`
	Error          string   `json:"error"`
	ErrorType      string   `json:"error_type,omitempty"`
	UnknownEffects []string `json:"unknown_effects,omitempty"`
}

// AuditRecord is what step 9 writes to the ledger.
type AuditRecord struct {
	ClaimID         string              `json:"claim_id"`
	WorkflowID      string              `json:"workflow_id"`
	Outcome         string              `json:"outcome"`
	Reason          string              `json:"reason,omitempty"`
	PayoutMinor     int64               `json:"payout_minor"`
	Currency        string              `json:"currency"`
	TransferID      string              `json:"transfer_id,omitempty"`
	PaymentReplayed bool                `json:"payment_replayed,omitempty"`
	Coverage        claim.Coverage      `json:"coverage"`
	Models          []ModelUse          `json:"models,omitempty"`
	Approval        *approvals.Approval `json:"approval,omitempty"`
	Attempts        []approvals.Attempt `json:"decision_attempts,omitempty"`
	NotificationID  string              `json:"notification_id,omitempty"`
	ClosedAt        time.Time           `json:"closed_at"`
}

// ModelUse identifies a model answer without repeating it.
type ModelUse struct {
	Step         int    `json:"step"`
	Model        string `json:"model"`
	OutputSHA256 string `json:"output_sha256"`
	TokensIn     int64  `json:"tokens_in"`
	TokensOut    int64  `json:"tokens_out"`
}
