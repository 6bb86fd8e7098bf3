package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
)

// TriageInput is step 2's input.
type TriageInput struct {
	Key   claim.IdempotencyKey `json:"key"`
	Claim claim.Claim          `json:"claim"`
}

// ModelResult wraps a model answer with what the audit needs. The
// transcript stays in history only while it is small; past
// TranscriptInlineMax it goes to the blob store and history keeps a
// reference, so a long prompt cannot bloat every claim's checkpoint.
type ModelResult[T any] struct {
	Output T      `json:"output"`
	Model  string `json:"model"`
	// PromptVersion names the instructions the model answered under
	// (Model.PromptVersion) and BuildID the build of the worker that asked
	// (Activities.BuildID); empty in results recorded before they were.
	PromptVersion string `json:"prompt_version,omitempty"`
	BuildID       string `json:"build_id,omitempty"`
	Usage         Usage  `json:"usage"`
	OutputSHA256  string `json:"output_sha256"`
	// Deterministic: as TurnResult's (the assessment's, from the rules
	// model as the primary; unset in older results and the single triage).
	Deterministic bool       `json:"deterministic,omitempty"`
	Transcript    string     `json:"transcript,omitempty"`
	TranscriptRef *blobs.Ref `json:"transcript_ref,omitempty"`
	Meta
}

// DefaultTranscriptInlineMax is the largest transcript kept in history.
const DefaultTranscriptInlineMax = 2 << 10

// TriageResult is step 2's recorded answer.
type TriageResult = ModelResult[Triage]

// AssessResult is step 4's recorded answer.
type AssessResult = ModelResult[Assessment]

// AssessInput is step 4's input.
type AssessInput struct {
	Key claim.IdempotencyKey `json:"key"`
	AssessRequest
	// Price estimates the call's cost in its result (zero: not estimated).
	Price Price `json:"price,omitzero"`
	// WaitsForBudget: as TurnInput's.
	WaitsForBudget bool `json:"waits_for_budget,omitempty"`
	// WaitsOutOutages: as TurnInput's.
	WaitsOutOutages bool `json:"waits_out_outages,omitempty"`
}

// TriageClaim is step 2: the model classifies the claim.
func (a *Activities) TriageClaim(ctx context.Context, in TriageInput) (TriageResult, error) {
	if err := requireKey(in.Key); err != nil {
		return TriageResult{}, err
	}
	if _, _, err := a.forClaim(ctx, in.Claim.ID); err != nil {
		return TriageResult{}, err
	}
	ctx = withBudgetKey(ctx, in.Key.String(), attempt(ctx) > 1)
	m, _ := a.modelFor(ctx, "triage")
	res, err := callModel(ctx, a, m, in.Key, in.Claim.ID, func() (Reply[Triage], error) { return m.Triage(ctx, in.Claim) })
	if err == nil {
		countModelCall(ctx, res.Model, "triage", res.Usage)
	}
	return res, err
}

// AssessClaim is step 4: the model recommends a payout.
func (a *Activities) AssessClaim(ctx context.Context, in AssessInput) (AssessResult, error) {
	if err := requireKey(in.Key); err != nil {
		return AssessResult{}, err
	}
	if _, _, err := a.forClaim(ctx, in.Claim.ID); err != nil {
		return AssessResult{}, err // the insurer's model is not anyone's to spend
	}
	ctx = withBudgetKey(ctx, in.Key.String(), attempt(ctx) > 1)
	if in.WaitsForBudget {
		ctx = withDurableWait(ctx)
	}
	m, fallback := a.modelFor(ctx, "assess")
	res, err := callModel(ctx, a, m, in.Key, in.Claim.ID, func() (Reply[Assessment], error) { return m.Assess(ctx, in.AssessRequest) })
	if err != nil {
		return res, a.outage(ctx, DependencyModel, in.WaitsOutOutages, withAttempt(ctx, err))
	}
	res.Deterministic = deterministic(m, fallback)
	res.Usage.CostMicros = in.Price.Cost(res.Usage.TokensIn, res.Usage.TokensOut)
	countModelCall(ctx, res.Model, "assess", res.Usage)
	return res, nil
}

// callModel makes one model call to m (the primary, or the fallback:
// modelFor) and writes it to the usage ledger, which is how tests (and
// invoices) show a resumed run did not ask again. The result names m.
func callModel[T any](ctx context.Context, a *Activities, m Model, key claim.IdempotencyKey, claimID string, call func() (Reply[T], error)) (ModelResult[T], error) {
	reply, err := call()
	if err != nil {
		return ModelResult[T]{}, err
	}
	res := ModelResult[T]{Output: reply.Output, Model: m.Name(), PromptVersion: m.PromptVersion(), BuildID: a.BuildID,
		Usage: reply.Usage, Meta: meta(ctx)}
	if res.Transcript, res.TranscriptRef, err = a.keepTranscript(ctx, key, reply.Transcript); err != nil {
		return ModelResult[T]{}, err
	}
	if res.OutputSHA256, err = a.ledgerModelCall(ctx, claimID, key, res.Model, res.Usage, res.Output); err != nil {
		return ModelResult[T]{}, err
	}
	logger(ctx).Info("model answered", "key", key, "model", res.Model, "prompt_version", res.PromptVersion, "output_sha256", res.OutputSHA256[:12])
	return res, nil
}

// keepTranscript puts a small transcript in the result (and so in history)
// and a large one in the blob store, by reference.
func (a *Activities) keepTranscript(ctx context.Context, key claim.IdempotencyKey, t []byte) (inline string, ref *blobs.Ref, err error) {
	switch {
	case len(t) <= a.transcriptLimit():
		return string(t), nil, nil
	case a.Blobs == nil:
		return "", nil, nil // unit tests: only small transcripts are kept
	}
	r, err := a.putTranscript(ctx, key, "attempt", t)
	if err != nil {
		return "", nil, err
	}
	return "", &r, nil
}

// transcriptLimit is the largest transcript or conversation kept in history.
func (a *Activities) transcriptLimit() int {
	if a.TranscriptInlineMax > 0 {
		return a.TranscriptInlineMax
	}
	return DefaultTranscriptInlineMax
}

// putTranscript stores a transcript too large for history under
// transcripts/<key>/<name>-<attempt>.json.
func (a *Activities) putTranscript(ctx context.Context, key claim.IdempotencyKey, name string, b []byte) (blobs.Ref, error) {
	return a.Blobs.Put(ctx, fmt.Sprintf("transcripts/%s/%s-%d.json", fileSafe(string(key)), name, attempt(ctx)), bytes.NewReader(b))
}

// ledgerModelCall writes one model call to the usage ledger and returns the
// SHA-256 of its output, which the audit record cites.
func (a *Activities) ledgerModelCall(ctx context.Context, claimID string, key claim.IdempotencyKey, provider string, u Usage, output any) (string, error) {
	b, err := json.Marshal(output)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	sum := hex.EncodeToString(h[:])
	if err := a.Store.RecordModelCall(ctx, store.ModelCall{CallID: uuid.NewString(), ClaimID: claimID, Key: key, Provider: provider, Attempt: attempt(ctx),
		TokensIn: u.TokensIn, TokensOut: u.TokensOut, OutputSHA256: sum}); err != nil {
		return "", err
	}
	return sum, nil
}

// withAttempt adds to a wait for model capacity handed back to the
// workflow the attempt that handed it back: the attempts before it (failed
// and retried: timeouts, 5xx) ran, and the workflow charges them to the
// run's step cap.
func withAttempt(ctx context.Context, err error) error {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrModelBudgetWait {
		return err
	}
	var wait time.Duration
	_ = appErr.Details(&wait)
	return temporal.NewNonRetryableApplicationError(appErr.Message(), ErrModelBudgetWait, nil, wait, activity.GetInfo(ctx).Attempt)
}
