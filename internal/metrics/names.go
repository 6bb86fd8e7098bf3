// Package metrics names durableclaims' own metrics and records them through
// the Temporal SDK's metrics handler: activity.GetMetricsHandler in
// activities, workflow.GetMetricsHandler in workflows (silent during replay,
// so a replayed step is never counted twice). The worker exports them with
// the SDK's own metrics (package prom).
package metrics

// Names of durableclaims' own metrics (Prometheus adds _total to counters
// and the unit to histograms).
const (
	IdempotencyReplays   = "idempotency_replays"   // counter {tool}
	IdempotencyConflicts = "idempotency_conflicts" // counter {tool}
	ClaimResumes         = "claim_resumes"         // counter {kind: activity|replay}
	ClaimsCompleted      = "claims_completed"      // counter {status}
	ApprovalsWaiting     = "approvals_waiting"     // gauge {stage}
	ApprovalsEscalated   = "approvals_escalated"   // counter
	ApprovalsExpired     = "approvals_expired"     // counter
	ClaimStepDuration    = "claim_step_duration"   // histogram {step, outcome}
	ClaimHistoryBytes    = "claim_history_bytes"   // histogram {step}
	ClaimHistoryEvents   = "claim_history_events"  // histogram {step}
	HistoryBudgetCrossed = "claim_history_budget_exceeded"
)

// Tools, for the idempotency metrics.
const (
	ToolStripe = "stripe"
	ToolEmail  = "email"
	ToolLedger = "ledger"
)
