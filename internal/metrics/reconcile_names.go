package metrics

// Reconciliation against the payment provider (activities.ReconcilePayments).
const (
	// ReconciliationDiscrepancies counts claims or transfers the last run
	// did not match, by category (orphaned, duplicate, missing,
	// amount_mismatch); each run adds its counts, zeros included, so every
	// category has a series to alert on.
	ReconciliationDiscrepancies = "reconciliation_discrepancies" // counter {category}
	// ReconciliationLastRunUnmatched is how many entries the latest run did
	// not match: alert when it is above zero.
	ReconciliationLastRunUnmatched = "reconciliation_last_run_unmatched" // gauge
)
