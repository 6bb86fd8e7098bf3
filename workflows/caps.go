package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// capError is a cap the run hit: never retried, always dead-lettered.
type capError struct{ cap, msg string }

func (e *capError) Error() string { return "cap reached (" + e.cap + "): " + e.msg }

func capErr(cap, format string, args ...any) error {
	return &capError{cap: cap, msg: fmt.Sprintf(format, args...)}
}

// ErrCap is the DeadLetter.ErrorType of a run stopped by one of its caps.
const ErrCap = "CapReached"

// isErrorType reports whether err is (or wraps) an application error of typ.
func isErrorType(err error, typ string) bool {
	var appErr *temporal.ApplicationError
	return errors.As(err, &appErr) && appErr.Type() == typ
}

// exec runs one activity under the run's caps: it refuses to start past the
// age or step cap, gives the activity no more retries than steps are left,
// and counts the attempts it took.
func (r *claimRun) exec(ctx workflow.Context, p stepPlan, fn, in any, out interface{ Attempts() int32 }) error {
	if age := workflow.Now(ctx).Sub(r.started); age >= r.caps.MaxAge {
		return capErr("age", "the run is %s old, its cap is %s", age.Round(time.Second), r.caps.MaxAge)
	}
	left := r.caps.MaxSteps - r.stepsExecuted
	if left <= 0 {
		return capErr("steps", "%d activity executions, retries included", r.stepsExecuted)
	}
	local := p.runsLocal(r.pending)
	rp := p.retry(local)
	cut := rp.MaximumAttempts == 0 || int(rp.MaximumAttempts) > left
	if cut {
		rp.MaximumAttempts = int32(left)
	}
	var f workflow.Future
	if local {
		lo := *p.local
		lo.RetryPolicy = &rp
		f = workflow.ExecuteLocalActivity(workflow.WithLocalActivityOptions(ctx, lo), fn, in)
	} else {
		ro := *p.remote
		ro.RetryPolicy = &rp
		f = workflow.ExecuteActivity(workflow.WithActivityOptions(ctx, ro), fn, in)
	}
	err := f.Get(ctx, out)
	r.ran(p, local, out)
	if err != nil {
		var actErr *temporal.ActivityError
		if cut && errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED {
			r.stepsExecuted = r.caps.MaxSteps
			return capErr("steps", "%d activity executions, retries included; the last: %v", r.caps.MaxSteps, err)
		}
		return err
	}
	r.stepsExecuted += int(out.Attempts())
	return nil
}

// model runs a model activity under the spend cap as well.
func (r *claimRun) model(ctx workflow.Context, p stepPlan, fn, in any, out interface{ Attempts() int32 }) error {
	if r.spendMicros >= r.caps.MaxModelSpendMicros {
		return capErr("model spend", "spent %d of %d micro-dollars", r.spendMicros, r.caps.MaxModelSpendMicros)
	}
	return r.exec(ctx, p, fn, in, out)
}

// used accounts for a model answer: recorded for the audit, counted
// against the spend cap (checked before the next call).
func (r *claimRun) used(step claim.Step, turn int, model, sum string, u activities.Usage) {
	use := ModelUse{Step: int(step), Turn: turn, Model: model, OutputSHA256: sum, TokensIn: u.TokensIn, TokensOut: u.TokensOut}
	cost := r.price.Cost(u.TokensIn, u.TokensOut)
	if r.agent { // runs before the loop recorded no per-call cost
		use.CostMicros = cost
	}
	r.models = append(r.models, use)
	r.tokensIn += u.TokensIn
	r.tokensOut += u.TokensOut
	r.spendMicros += cost
}
