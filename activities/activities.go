// Package activities holds every call durableclaims makes to the world: the
// claims store, the model, Stripe, e-mail. Each is a method on Activities,
// whose fields are its dependencies; the workflow refers to them through a nil
// *Activities, and tests swap dependencies, never code.
//
// Every side-effecting activity takes a claim.IdempotencyKey derived from the
// workflow ID and the step, and refuses to run without one.
package activities

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/stripe/stripe-go/v76/client"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/statute"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Activities carries the dependencies of every activity.
type Activities struct {
	Store    *store.Store
	Stripe   *client.API
	Model    Model
	Mailer   Mailer
	Policies map[string]claim.Policy
	// Blobs holds claim documents and large model transcripts; nil skips
	// document checks and keeps only small transcripts (unit tests).
	Blobs *blobs.Store
	// TranscriptInlineMax is the largest model transcript kept in history
	// (default DefaultTranscriptInlineMax).
	TranscriptInlineMax int
	// ApproversFile is the approver directory with its keys (empty: the
	// sample, which has none); it is read on every approval so a changed
	// file (a new key, a revoked one) applies to the next one.
	ApproversFile string
	// Rules is the insurer's policy: intake records it in each run's
	// history.
	Rules insurer.Rules
	// Law is the jurisdictions' rules (JURISDICTION_RULES_FILE): intake
	// records the claim's in its run's history. Zero: none apply.
	Law statute.Rules
	// From is the sender of claimant e-mail; Adjusters receives approval
	// reminders and Supervisors escalations.
	From, Adjusters, Supervisors string
	// InboxURL is the adjuster inbox's public address: reminders and
	// escalations link to the claim's page there.
	InboxURL string
	// Runs tells this worker's own runs from anyone else's (authority.go).
	Runs Runs
	// ClaimFiles writes each closed claim's dossier (claimfile.go).
	ClaimFiles ClaimFiles
	// BuildID names this worker's build. Every model answer records it
	// (ModelResult, TurnResult) beside the model and its prompt version.
	// Set it to the build ID the worker's Temporal worker runs workflow
	// tasks under (worker.Options.BuildID), so that an answer and the
	// decision that rests on it (which workflow code names by
	// workflow.GetInfo(ctx).GetCurrentBuildID) name builds the same way.
	// Empty: unknown (unit tests); the worker sets it from its
	// configuration in worker/main.go.
	BuildID string
	// Fallback, where the insurer allows failover (MODEL_FALLBACK_*), is
	// the model a model step asks once Model has failed FallbackAfter
	// attempts of it (default DefaultFallbackAfter); nil: never
	// (failover.go).
	Fallback      Model
	FallbackAfter int

	// callerFn, when set, replaces the activity's info as the caller
	// (tests: the test activity environment names no claim's run).
	callerFn func(context.Context) (Caller, bool)
}

// Error types the workflow and operators branch on. Each is non-retryable:
// a retry cannot fix it.
const (
	ErrInvalidInput        = "InvalidInput"
	ErrIdempotencyConflict = "IdempotencyConflict"
	// ErrContradictsRecord: a record that disagrees with the claims store
	// it records (an audit of an outcome the claim was not closed with).
	ErrContradictsRecord = "ContradictsRecord"
	ErrPaymentRefused    = "PaymentRefused"
	ErrPaymentConfig     = "PaymentConfig"
)

func invalid(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrInvalidInput, nil)
}

func nonRetryable(err error, typ string) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), typ, err)
}

func requireKey(key claim.IdempotencyKey) error {
	if !key.Valid() {
		return invalid("idempotency key %q is missing or longer than %d bytes", key, claim.MaxKeyLen)
	}
	return nil
}

// logger returns the activity's logger: the SDK adds workflow and activity
// IDs to every line, so each names its claim.
func logger(ctx context.Context) log.Logger {
	if activity.IsActivity(ctx) {
		return activity.GetLogger(ctx)
	}
	return log.NewStructuredLogger(slog.Default())
}

func attempt(ctx context.Context) int {
	if activity.IsActivity(ctx) {
		return int(activity.GetInfo(ctx).Attempt)
	}
	return 1
}

// Meta is what every activity result says about its own execution: the
// attempt that succeeded, so the workflow can count steps executed,
// retries included, against the run's step cap.
type Meta struct {
	Attempt int32 `json:"attempt"`
}

// Attempts reports the attempt that produced the result.
func (m Meta) Attempts() int32 { return m.Attempt }

func meta(ctx context.Context) Meta { return Meta{Attempt: int32(attempt(ctx))} }
