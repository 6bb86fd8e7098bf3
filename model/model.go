// Package model holds the claims models behind steps 2 and 4 and the
// values they exchange with the activities that call them: the Model
// interface, the offline rules model (RulesModel, the default), and the
// OpenAI-compatible provider (OpenAIModel). Nothing here records or
// retries: the activities call a Model, record its answers in history and
// the usage ledger, and the activity's retry policy retries.
//
// Package activities re-exports these names as aliases, so workflow code
// and recorded histories see the same types and JSON shapes as before.
package model

import (
	"context"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Model is the claims model behind steps 2 and 4. Its answers are not
// deterministic in general, which is why it is only ever called from an
// activity: the answer is recorded in history and a resumed run reads it.
type Model interface {
	Name() string
	// PromptVersion names what shapes the answers besides the claim and
	// the model: the instructions, tools and schemas sent (version.go).
	PromptVersion() string
	// Triage classifies in one call (runs started before the agent loop).
	Triage(ctx context.Context, c claim.Claim) (Reply[Triage], error)
	// TriageTurn is one turn of the triage agent loop: the model asks for
	// tools or answers.
	TriageTurn(ctx context.Context, req TurnRequest) (Reply[Turn], error)
	Assess(ctx context.Context, req AssessRequest) (Reply[Assessment], error)
}

// Deterministic is implemented by providers whose answers are a pure
// function of their input and free (the rules model).
type Deterministic interface{ Deterministic() bool }

// Reply is a model's answer, what it cost, and the exchange that produced
// it (prompt and raw response) for the audit.
type Reply[T any] struct {
	Output     T
	Usage      Usage
	Transcript []byte
}

// Usage is what a call cost.
type Usage struct {
	TokensIn  int64 `json:"tokens_in"`
	TokensOut int64 `json:"tokens_out"`
	// CostMicros is the estimated cost in millionths of a dollar, at the
	// price the run was started with.
	CostMicros int64 `json:"cost_micros,omitempty"`
}

// Triage classifies a claim and lists fraud signals.
type Triage struct {
	Category     string   `json:"category"`
	Severity     string   `json:"severity"`
	FraudSignals []string `json:"fraud_signals,omitempty"`
	// FraudScore is 0–100.
	FraudScore int    `json:"fraud_score"`
	Summary    string `json:"summary"`
	// NeedsReview sends the claim to a human whatever its amount: the
	// model could not classify it (no valid answer, a cap hit).
	NeedsReview  bool   `json:"needs_review,omitempty"`
	ReviewReason string `json:"review_reason,omitempty"`
}

// ReviewTriage is the triage of a claim the model could not classify: a
// human decides, and reason says why.
func ReviewTriage(reason string) Triage {
	return Triage{Category: "general", Severity: "unknown", NeedsReview: true, ReviewReason: reason, Summary: reason}
}

// AssessRequest is what the assessor sees.
type AssessRequest struct {
	Claim    claim.Claim    `json:"claim"`
	Triage   Triage         `json:"triage"`
	Coverage claim.Coverage `json:"coverage"`
}

// Assessment is the model's recommended payout; the workflow clamps it to
// the coverage, whatever the model says.
type Assessment struct {
	RecommendedMinor int64  `json:"recommended_minor"`
	Rationale        string `json:"rationale"`
	// NeedsReview sends the claim to a human whatever its amount.
	NeedsReview bool `json:"needs_review"`
}

// ReviewAssessment proposes the covered amount to a human when the model
// gave no usable assessment; why is appended to the rationale.
func ReviewAssessment(coveredMinor int64, why string) Assessment {
	return Assessment{RecommendedMinor: coveredMinor, NeedsReview: true, Rationale: why + "; the covered amount is proposed for a human to decide"}
}

// The triage agent's tools. The model asks for them by name; the workflow
// runs each as its own activity, keyed <id>:step2:turn<M>:<tool>.
const (
	ToolLookupPolicy    = "lookup_policy"
	ToolGetDocumentText = "get_document_text"
	ToolPriorClaims     = "prior_claims"
	ToolFlagFraudSignal = "flag_fraud_signal"
)

// Tools lists the tools in the order they are offered.
var Tools = []string{ToolLookupPolicy, ToolGetDocumentText, ToolPriorClaims, ToolFlagFraudSignal}

// Message is one entry of the triage conversation, in the shape of the Chat
// Completions API: the model's turns (role "assistant", with tool calls or
// its answer) and the tools' results (role "tool"). The system prompt and
// the claim itself are not stored: each provider builds them from the claim
// on every turn.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// ToolCall is one tool the model asked for.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// TurnRequest is what a model sees on one turn of the triage loop.
type TurnRequest struct {
	Claim    claim.Claim
	Turn     int
	Messages []Message
	// Final is the last turn the caps allow: no tools are offered, the model
	// must answer.
	Final bool
}

// Turn is a model's answer on one turn: either tool calls or the triage.
// Messages are what the turn adds to the conversation (the answer, and any
// corrections asked for when an answer did not satisfy the schema).
type Turn struct {
	Messages  []Message
	ToolCalls []ToolCall
	Triage    *Triage
}
