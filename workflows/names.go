// Package workflows holds ClaimWorkflow: the nine steps of a claim as
// deterministic workflow code. Everything that touches the world is an
// activity (package activities); pure logic (coverage arithmetic, clamping,
// routing) stays here and is recomputed on replay.
package workflows

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Names other programs rely on (docs/design.md, "Names other programs rely
// on"). Do not rename.
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

// WorkflowTaskTimeout is how long a worker has to finish one workflow task,
// local activities included. It bounds how long a claim waits after its
// worker dies mid-task before another worker takes over (the default 10 s
// made recovery after a kill the slowest step; see docs/performance.md).
// A local activity that runs longer keeps its task alive with heartbeats.
const WorkflowTaskTimeout = 4 * time.Second

// StartOptions are the options every program starting a claim uses: the
// claim ID as workflow ID, ClaimStatus set from the start (no upsert
// event), and the workflow task timeout. A claim runs to an outcome once:
// a run that completed (paid, rejected, expired, withdrawn, dead-lettered)
// is never started again. A run that failed did nothing: it was refused at
// intake (an unregistered claim, an input that loosens the policy) or ended
// by an operator. Such a claim may be started again, so nobody who can
// reach the frontend can block a real claim by starting a bad run under
// its ID first; every side effect is keyed by the claim, so a repeat of a
// terminated run's steps is a replay, never a second effect.
func StartOptions(claimID string) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       claimID,
		TaskQueue:                TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK quietly hands back the existing run, and a
		// starter could not tell that nothing new was started.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowTaskTimeout:                      WorkflowTaskTimeout,
		TypedSearchAttributes:                    temporal.NewSearchAttributes(ClaimStatusKey.ValueSet(StatusRunning)),
	}
}

// ClaimInput starts a claim. Options carry the operations settings that
// workflow code must not read from the environment.
type ClaimInput struct {
	Claim   claim.Claim `json:"claim"`
	Options Options     `json:"options"`
}

// Options are per-claim settings, fixed at start so replays see the same.
// The insurer's policy is the worker's (see internal/insurer): an option may
// only tighten it (a lower limit, shorter waits, reject on expiry, lower
// caps); a looser one ends the run at once (ErrLooserThanPolicy). Zero means
// the policy's value.
type Options struct {
	// AutoApproveLimitMinor is the largest payout paid without a human, in
	// minor units of the claim's currency.
	AutoApproveLimitMinor int64 `json:"auto_approve_limit_minor,omitempty"`
	// FourEyesAboveMinor is the payout above which two approvers must agree.
	FourEyesAboveMinor int64 `json:"four_eyes_above_minor,omitempty"`
	// Approval is the wait's TTL and escalation policy.
	Approval approvals.Policy `json:"approval"`
	// Caps bound the run; a run that hits one is dead-lettered.
	Caps Caps `json:"caps"`
	// ModelPrice turns model usage into spend.
	ModelPrice ModelPrice `json:"model_price"`
	// HistoryBudgetBytes is the history size past which the run warns (a
	// log line and claim_history_budget_exceeded); default 64 KiB.
	HistoryBudgetBytes int64 `json:"history_budget_bytes,omitempty"`
}

// DefaultHistoryBudgetBytes is the per-claim history budget.
const DefaultHistoryBudgetBytes = 64 << 10

// Caps bound a run so it never loops or spends forever.
type Caps struct {
	// MaxSteps counts activity executions, retries included (default 100).
	MaxSteps int `json:"max_steps,omitempty"`
	// MaxModelSpendMicros caps model spend in millionths of a dollar
	// (default 2,000,000: $2).
	MaxModelSpendMicros int64 `json:"max_model_spend_micros,omitempty"`
	// MaxPayoutMinor caps the payout, in minor units of the claim's
	// currency (0: coverage is the only limit).
	MaxPayoutMinor int64 `json:"max_payout_minor,omitempty"`
	// MaxAge caps the run's wall-clock age, approval waits included
	// (default 30 days).
	MaxAge time.Duration `json:"max_age,omitempty"`
	// MaxTriageTurns caps the model turns of step 2's agent loop; the last
	// turn offers no tools (default 6).
	MaxTriageTurns int `json:"max_triage_turns,omitempty"`
	// MaxTriageTokens caps the tokens (in and out) step 2 may use (default
	// 40,000). Hitting it, the turn cap or the spend cap in triage sends the
	// claim to a human instead of dead-lettering it.
	MaxTriageTokens int64 `json:"max_triage_tokens,omitempty"`
}

// Cap defaults.
const (
	DefaultMaxSteps            = 100
	DefaultMaxModelSpendMicros = 2_000_000
	DefaultMaxAge              = 30 * 24 * time.Hour
	DefaultMaxTriageTurns      = 6
	DefaultMaxTriageTokens     = 40_000
)

func (c Caps) withDefaults() Caps {
	if c.MaxSteps <= 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxModelSpendMicros <= 0 {
		c.MaxModelSpendMicros = DefaultMaxModelSpendMicros
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultMaxAge
	}
	if c.MaxTriageTurns <= 0 {
		c.MaxTriageTurns = DefaultMaxTriageTurns
	}
	if c.MaxTriageTokens <= 0 {
		c.MaxTriageTokens = DefaultMaxTriageTokens
	}
	return c
}

// ModelPrice is a model's price in millionths of a dollar per million
// tokens (defaults: $2.50 in, $10 out); the activities estimate each call's
// cost with it.
type ModelPrice = activities.Price

func priceWithDefaults(p ModelPrice) ModelPrice {
	if p.InMicrosPerMTok <= 0 {
		p.InMicrosPerMTok = 2_500_000
	}
	if p.OutMicrosPerMTok <= 0 {
		p.OutMicrosPerMTok = 10_000_000
	}
	return p
}

// DefaultAutoApproveLimit is the auto-approve threshold in major units.
const DefaultAutoApproveLimit = "1000"

// Status is the answer to the status query.
type Status struct {
	ClaimID string `json:"claim_id"`
	// ReviewOf, on a review claim, is the claim it reviews and the
	// claimant's request (claim.Review).
	ReviewOf    *claim.Review `json:"review_of,omitempty"`
	Step        int           `json:"step"`
	StepName    string        `json:"step_name"`
	State       string        `json:"state"`
	Amount      string        `json:"amount"`
	AmountMinor int64         `json:"amount_minor"`
	Currency    string        `json:"currency"`
	Payout      string        `json:"payout,omitempty"`
	PayoutMinor int64         `json:"payout_minor"`
	// Approval is the pending (or last) approval: the request, its SHA-256,
	// the stage and the deadline.
	Approval *approvals.Approval `json:"approval,omitempty"`
	// Audience is what a decision receipt for this claim must carry as its
	// "aud" (approvals.Audience: the namespace and the insurer deployment);
	// empty for runs before receipts named it (approvals.ReceiptAudience).
	Audience string              `json:"audience,omitempty"`
	Attempts []approvals.Attempt `json:"decision_attempts,omitempty"`
	// AttemptsDropped counts refused attempts past the trail's bound.
	AttemptsDropped int    `json:"decision_attempts_dropped,omitempty"`
	TransferID      string `json:"transfer_id,omitempty"`
	Reason          string `json:"reason,omitempty"`
	// Version is the claim's version in the system of record, as last read.
	Version int64 `json:"version"`
	// WaitingOn is the dependency the current step waits for to come back
	// ("model", "stripe"), since WaitingSince; empty when it waits on none.
	WaitingOn    string    `json:"waiting_on,omitempty"`
	WaitingSince time.Time `json:"waiting_since,omitzero"`
	// StepsExecuted counts activity executions, retries included.
	StepsExecuted int `json:"steps_executed"`
	// ModelSpendMicros is the model spend so far, in millionths of a dollar.
	ModelSpendMicros int64 `json:"model_spend_micros"`
	TokensIn         int64 `json:"tokens_in"`
	TokensOut        int64 `json:"tokens_out"`
	// ModelCalls is every recorded model call: step, turn, tokens, cost.
	ModelCalls []ModelUse `json:"model_calls,omitempty"`
	// ToolCalls counts the triage agent's tool calls.
	ToolCalls int `json:"tool_calls,omitempty"`
	// PolicyVersion is the version of the insurer's policy the run follows,
	// as intake recorded it; Decided what decided the outcome, once it is
	// decided. Both from versionProvenance on.
	PolicyVersion string   `json:"policy_version,omitempty"`
	Decided       *Decided `json:"decided,omitempty"`
}

// The audit record and what it names are package audit's: the claim file
// reads the record the workflow writes by the same types.
type (
	// AuditRecord is what step 9 writes to the ledger (audit.Record).
	AuditRecord = audit.Record
	// ModelUse identifies a model answer without repeating it.
	ModelUse = audit.ModelUse
	// Decided says what decided a claim's outcome, and on what.
	Decided = audit.Decided
	// LawRecord is the audit record's law section (audit.Law).
	LawRecord = audit.Law
)

// How a decision was made (Decided.By).
const (
	DecidedByRules    = audit.DecidedByRules
	DecidedByApprover = audit.DecidedByApprover
	DecidedByPolicy   = audit.DecidedByPolicy
)

// ClaimResult is how a claim ended.
type ClaimResult struct {
	ClaimID         string `json:"claim_id"`
	Status          string `json:"status"`
	Reason          string `json:"reason,omitempty"`
	PayoutMinor     int64  `json:"payout_minor"`
	Payout          string `json:"payout"`
	Currency        string `json:"currency"`
	TransferID      string `json:"transfer_id,omitempty"`
	PaymentReplayed bool   `json:"payment_replayed,omitempty"`
	// Approval is the last approval; Approvals every one (an approval is
	// voided and a new one raised when the claim changes while waiting).
	Approval         *approvals.Approval   `json:"approval,omitempty"`
	Approvals        []*approvals.Approval `json:"approvals,omitempty"`
	Attempts         []approvals.Attempt   `json:"decision_attempts,omitempty"`
	AttemptsDropped  int                   `json:"decision_attempts_dropped,omitempty"`
	StepsExecuted    int                   `json:"steps_executed"`
	ModelSpendMicros int64                 `json:"model_spend_micros"`
	// DeadLetter says where a dead-lettered run stopped and which side
	// effects may or may not have happened.
	DeadLetter *DeadLetter `json:"dead_letter,omitempty"`
	// PolicyVersion and Decided: as Status's.
	PolicyVersion string   `json:"policy_version,omitempty"`
	Decided       *Decided `json:"decided,omitempty"`
}

// DeadLetter describes a run that stopped because a step exhausted its
// retries or failed in a way no retry fixes.
type DeadLetter struct {
	Step      int    `json:"step"`
	StepName  string `json:"step_name"`
	Error     string `json:"error"`
	ErrorType string `json:"error_type,omitempty"`
	// Cap names the cap that stopped the run (ErrorType ErrCap): CapSteps,
	// CapAge, CapPayout, CapModelSpend, CapModelCapacity, CapApprovalRounds.
	Cap            string   `json:"cap,omitempty"`
	UnknownEffects []string `json:"unknown_effects,omitempty"`
}

// Registry is what workflows are registered on: a worker, or a replayer
// checking histories against this build's code.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers every workflow of this project under its name, as
// every worker and every replay of their histories must, each with its
// Worker Versioning behaviour (docs/design.md, "Deploying while claims
// wait"):
//
//   - ClaimWorkflow auto-upgrades: a claim waits for an adjuster for up to
//     four days and may live thirty, far longer than any build is kept
//     running; pinned, every build would have to serve until its last
//     claim closed. Its next workflow task goes to the deployment's current
//     (or ramping) build, and workflow.GetVersion carries every change to
//     its command sequence across that move (versions.go).
//   - ReconcileWorkflow is pinned: it runs for seconds to minutes and ends,
//     so a run finishes on the build that started it and a new build takes
//     the next scheduled run; the old build drains within one run.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(ClaimWorkflow, workflow.RegisterOptions{Name: WorkflowType,
		VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	r.RegisterWorkflowWithOptions(ReconcileWorkflow, workflow.RegisterOptions{Name: ReconcileWorkflowType,
		VersioningBehavior: workflow.VersioningBehaviorPinned})
}
