package activities

import (
	"context"

	"github.com/durableclaims/durableclaims/internal/metrics"
)

// DefaultFallbackAfter is how many attempts of a model step its primary
// model fails before the step asks the fallback (MODEL_FALLBACK_AFTER).
const DefaultFallbackAfter = 3

// modelFor is the model this attempt of a model step asks: the primary
// (Model), or, where the insurer allows failover (Fallback set), the
// fallback once the primary has failed FallbackAfter attempts of the step.
// An attempt after the first runs only because the one before failed in a
// way the step's retry policy retries (a 5xx, a timeout, an unreachable
// provider, a rate limit past what the call may wait); a refusal the retry
// cannot fix (a 4xx, an answer that breaks the schema every time it is
// asked again) ends the step at once, so it never reaches the fallback. A
// wait for capacity handed back to the workflow starts the step again at
// its first attempt, with the primary: a rate limit is not a failure.
//
// The switch is inside the activity, one model per attempt: the workflow
// schedules the same activity either way, and the result it records names
// the model that answered.
func (a *Activities) modelFor(ctx context.Context, step string) (m Model, fallback bool) {
	if a.Fallback == nil {
		return a.Model, false
	}
	after := a.FallbackAfter
	if after <= 0 {
		after = DefaultFallbackAfter
	}
	n := attempt(ctx)
	if n <= after {
		return a.Model, false
	}
	from, to := a.Model.Name(), a.Fallback.Name()
	metrics.Activity(ctx, metrics.ModelFailovers, map[string]string{"from": from, "to": to, "step": step})
	logger(ctx).Warn("model failover: the primary failed, the fallback is asked", "step", step, "from", from, "to", to,
		"attempt", n, "primary_attempts", after)
	return a.Fallback, true
}

// deterministic says whether m's answers are free and the same when asked
// again. A fallback's never are: asked again after a crash, the step starts
// at its first attempt, with the primary.
func deterministic(m Model, fallback bool) bool {
	d, ok := m.(Deterministic)
	return ok && d.Deterministic() && !fallback
}
