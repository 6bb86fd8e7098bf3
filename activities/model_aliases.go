package activities

import "github.com/durableclaims/durableclaims/model"

// The model providers and the values they exchange live in package model;
// these aliases keep activities' names, so the workflow code, the tests and
// recorded histories see the same types and JSON shapes as before.
type (
	Model         = model.Model
	Deterministic = model.Deterministic
	Reply[T any]  = model.Reply[T]
	Usage         = model.Usage
	Triage        = model.Triage
	Assessment    = model.Assessment
	AssessRequest = model.AssessRequest
	Message       = model.Message
	ToolCall      = model.ToolCall
	TurnRequest   = model.TurnRequest
	Turn          = model.Turn
	RulesModel    = model.RulesModel
)

// The triage agent's tools (model.Tools).
const (
	ToolLookupPolicy    = model.ToolLookupPolicy
	ToolGetDocumentText = model.ToolGetDocumentText
	ToolPriorClaims     = model.ToolPriorClaims
	ToolFlagFraudSignal = model.ToolFlagFraudSignal
)

// Tools lists the tools in the order they are offered.
var Tools = model.Tools

// ReviewTriage is model.ReviewTriage.
func ReviewTriage(reason string) Triage { return model.ReviewTriage(reason) }

// ReviewAssessment is model.ReviewAssessment.
func ReviewAssessment(coveredMinor int64, why string) Assessment {
	return model.ReviewAssessment(coveredMinor, why)
}

// ErrModelBudgetWait is the error type of a model step that hands a wait
// for capacity back to its workflow (model.ErrModelBudgetWait).
const ErrModelBudgetWait = model.ErrModelBudgetWait

var withDurableWait = model.WithDurableWait

var withBudgetKey = model.WithBudgetKey

// MaxBudgetWait bounds one durable wait for model capacity (model.MaxBudgetWait).
const MaxBudgetWait = model.MaxBudgetWait
