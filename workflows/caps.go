package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
)

// The caps a run can hit, as DeadLetter.Cap names them.
const (
	CapSteps          = "steps"
	CapAge            = "age"
	CapPayout         = "payout"
	CapModelSpend     = "model spend"
	CapModelCapacity  = "model capacity"
	CapApprovalRounds = "approval rounds"
	CapDependency     = "dependency outage"
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
