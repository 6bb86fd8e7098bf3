// Package metrics names durableclaims' own metrics and records them through
// the Temporal SDK's metrics handler: activity.GetMetricsHandler in
// activities, workflow.GetMetricsHandler in workflows (silent during replay,
// so a replayed step is never counted twice). The worker exports them with
// the SDK's own metrics (worker/metricsprom).
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
	// ApprovalsOverdue counts waits nobody decided by their second
	// deadline and held open for a person (approvals.Hold).
	ApprovalsOverdue = "approvals_overdue" // counter
	// StatutoryBreaches counts a regulator's clocks (acknowledge, decide,
	// pay, status) that ran out before their event, judged when a claim
	// ends: each is an alert.
	StatutoryBreaches = "statutory_breaches" // counter {clock, jurisdiction}
	// DependencyWaits counts steps that found a dependency down and began
	// to wait for it on durable timers (from versionOutage): one per step
	// and outage, however long the wait.
	DependencyWaits = "dependency_waits" // counter {dependency}
	// DependencyCallsRefused counts calls a worker did not make because
	// its last calls found the dependency down (a circuit breaker).
	DependencyCallsRefused = "dependency_calls_refused" // counter {dependency, reason}
	ClaimStepDuration      = "claim_step_duration"      // histogram {step, outcome}
	ClaimHistoryBytes      = "claim_history_bytes"      // histogram {step}
	ClaimHistoryEvents     = "claim_history_events"     // histogram {step}
	HistoryBudgetCrossed   = "claim_history_budget_exceeded"
	// ActivityRefusals counts calls an activity refused because the caller
	// had no authority for them: a foreign run, a closed claim, a payout the
	// store and the receipts do not allow. Each is an alert.
	ActivityRefusals = "activity_refusals" // counter {activity, code}
	// DeploymentUnknownBuilds is how many builds the Worker Deployment's
	// routing sends claims to that never ran as a worker on this claims
	// store: anything but 0 is an alert (someone routed claims to a build
	// of their own).
	DeploymentUnknownBuilds = "deployment_unknown_builds" // gauge
	// ForeignWorkflowTasks counts runs found, after a replay failure, to
	// hold a workflow task completion this deployment did not sign
	// (worker/provenance): someone answered a claim's task with commands
	// of their own. Each is an alert.
	ForeignWorkflowTasks = "foreign_workflow_tasks" // counter

	// The model, counted where it is called (every real call, resumed runs
	// included: what the provider bills).
	ModelCalls      = "model_calls"       // counter {provider, step}
	ModelWaits      = "model_rate_waits"  // counter {reason: budget|provider, or either -handed-back}
	ModelTokens     = "model_tokens"      // counter {provider, direction: in|out}
	ModelCostMicros = "model_cost_micros" // counter {provider}: estimated, millionths of a dollar
	// ModelFailovers counts model calls sent to the fallback model after
	// the primary failed MODEL_FALLBACK_AFTER attempts (activities.modelFor).
	ModelFailovers  = "model_failovers"   // counter {from, to, step}
	TriageToolCalls = "triage_tool_calls" // counter {tool, outcome: ok|refused}
	TriageReviews   = "triage_reviews"    // counter {cause: cap|model}: triage handed to a human
)

// Tools, for the idempotency metrics.
const (
	ToolStripe = "stripe"
	ToolEmail  = "email"
	ToolLedger = "ledger"
)
