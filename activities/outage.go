package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/model"
)

// ErrDependencyDown is the error type of a step whose dependency (the
// model provider, Stripe) failed its first attempts for being unavailable:
// the step hands the wait back to the workflow (from versionOutage), which
// waits on a durable timer and runs the step again, instead of burning its
// retries against an outage and dead-lettering the claim. Its details are
// the dependency's name and the attempt that handed it back.
const ErrDependencyDown = "DependencyDown"

// The dependencies a claim waits on.
const (
	DependencyModel  = "model"
	DependencyStripe = "stripe"
)

// OutageAfter is how many attempts of a step fail for an unavailable
// dependency before the step hands the wait back: one quick retry for a
// blip, then the workflow waits. With a fallback model, its attempts come
// first (after FallbackAfter failures of the primary).
const OutageAfter = 2

// outage turns the error of an attempt that found dep unavailable, from
// attempt OutageAfter on, into a wait handed back to a workflow that waits
// (waits: the input's WaitsOutOutages). Any other error is returned as it is.
func (a *Activities) outage(ctx context.Context, dep string, waits bool, err error) error {
	if err == nil || !waits || !unavailable(dep, err) || !activity.IsActivity(ctx) {
		return err
	}
	after := OutageAfter
	if dep == DependencyModel && a.Fallback != nil {
		fb := a.FallbackAfter
		if fb <= 0 {
			fb = DefaultFallbackAfter
		}
		after += fb // the fallback is asked first
	}
	n := activity.GetInfo(ctx).Attempt
	if int(n) < after {
		return err
	}
	logger(ctx).Warn("dependency unavailable: the step hands its wait back to the workflow", "dependency", dep, "attempt", n, "error", err)
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("%s unavailable (attempt %d): %v", dep, n, err), ErrDependencyDown, err, dep, n)
}

// unavailable says whether err is dep being down or unreachable, rather
// than a refusal, a conflict or the attempt given up.
func unavailable(dep string, err error) bool {
	if errors.Is(err, context.Canceled) {
		return false // the attempt was given up (its lease ran out): not the dependency's answer
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		switch dep {
		case DependencyModel:
			return appErr.Type() == model.ErrModelUnavailable
		case DependencyStripe:
			return appErr.Type() == errStripeUnavailable
		}
		return false
	}
	// A network error or a timeout reaching Stripe (classifyStripe passes
	// them as they are).
	return dep == DependencyStripe
}
