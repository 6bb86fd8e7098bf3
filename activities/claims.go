package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
)

// LoadClaimInput is step 1's input: the claim as it was started. After an
// approval, Keys are the key IDs that signed it: intake says which of them
// the approver directory no longer lists (revoked since they signed).
type LoadClaimInput struct {
	Claim claim.Claim `json:"claim"`
	Keys  []string    `json:"keys,omitempty"`
}

// LoadClaimResult is the claim as the system of record holds it, with its
// policy (nil when the policy is unknown), who amended it, and the
// insurer's rules the worker holds: recorded in history, they are what the
// run works by.
type LoadClaimResult struct {
	Claim   claim.Claim   `json:"claim"`
	Status  string        `json:"status"`
	Version int64         `json:"version"`
	Policy  *claim.Policy `json:"policy,omitempty"`
	// AmendedBy lists who amended the claim: none of them may approve it.
	AmendedBy []string       `json:"amended_by,omitempty"`
	Rules     *insurer.Rules `json:"rules,omitempty"`
	// Revoked lists the input's Keys the directory no longer lists.
	Revoked []string `json:"revoked,omitempty"`
	Meta
}

// ErrNotRegistered is the error type of a claim the system of record does
// not hold: it is refused, never registered by the run that names it.
const ErrNotRegistered = "ClaimNotRegistered"

// LoadClaim is step 1: read the claim from the system of record and its
// policy. The system of record decides what exists: a claim it does not
// hold is refused (the starter, or an intake API, registers claims; a
// workflow started by hand does not). The record wins over the input: it
// may have been amended since the start.
func (a *Activities) LoadClaim(ctx context.Context, in LoadClaimInput) (LoadClaimResult, error) {
	if err := in.Claim.Validate(); err != nil {
		return LoadClaimResult{}, invalid("%v", err)
	}
	point := claim.StepKey(in.Claim.ID, claim.StepIntake) // a crash point only: reads need no key
	a.fault(ctx, point, BeforeEffect)
	rec, err := a.Store.GetClaim(ctx, in.Claim.ID)
	if errors.Is(err, store.ErrNotFound) {
		return LoadClaimResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("claim %s is not registered in the claims system of record: register it with the starter; nothing was done", in.Claim.ID),
			ErrNotRegistered, nil)
	}
	if err != nil {
		return LoadClaimResult{}, err
	}
	if err := a.checkDocuments(ctx, &rec.Claim); err != nil {
		return LoadClaimResult{}, err
	}
	a.fault(ctx, point, AfterEffect)
	rules := a.Rules
	res := LoadClaimResult{Claim: rec.Claim, Status: rec.Status, Version: rec.Version, AmendedBy: rec.AmendedBy, Rules: &rules, Meta: meta(ctx)}
	if len(in.Keys) > 0 {
		book, err := authority.Load(a.ApproversFile)
		if err != nil {
			return LoadClaimResult{}, err // retryable: fixing the file lets the claim carry on
		}
		for _, kid := range in.Keys {
			if _, ok := book.Signer(kid); !ok {
				res.Revoked = append(res.Revoked, kid)
			}
		}
	}
	if p, ok := a.Policies[rec.Claim.PolicyID]; ok {
		res.Policy = &p
	}
	return res, nil
}

// CloseInput is step 8's input.
type CloseInput struct {
	Key         claim.IdempotencyKey `json:"key"`
	ClaimID     string               `json:"claim_id"`
	Outcome     string               `json:"outcome"`
	TransferID  string               `json:"transfer_id,omitempty"`
	PayoutMinor int64                `json:"payout_minor"`
}

// CloseResult says whether the close had already been recorded.
type CloseResult struct {
	Replayed bool `json:"replayed"`
	// ClosedAt is when the system of record closed the claim, the same on
	// every replay: the audit record is stamped with it.
	ClosedAt time.Time `json:"closed_at"`
	Meta
}

// CloseClaim is step 8: record the outcome in the system of record, once.
func (a *Activities) CloseClaim(ctx context.Context, in CloseInput) (CloseResult, error) {
	if err := requireKey(in.Key); err != nil {
		return CloseResult{}, err
	}
	a.fault(ctx, in.Key, BeforeEffect)
	replayed, closedAt, err := a.Store.CloseClaim(ctx, in.ClaimID, in.Key, in.Outcome, in.TransferID, in.PayoutMinor)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return CloseResult{}, ledgerConflict(ctx, in.Key, err)
	}
	if replayed {
		ledgerReplay(ctx)
	}
	if err != nil {
		return CloseResult{}, err
	}
	a.fault(ctx, in.Key, AfterEffect)
	return CloseResult{Replayed: replayed, ClosedAt: closedAt.UTC(), Meta: meta(ctx)}, nil
}

// AuditInput is step 9's input: the run's audit record, already rendered by
// the workflow (activities do not know workflow types).
type AuditInput struct {
	Key     claim.IdempotencyKey `json:"key"`
	ClaimID string               `json:"claim_id"`
	Record  json.RawMessage      `json:"record"`
}

// AuditResult identifies what was stored.
type AuditResult struct {
	SHA256   string `json:"sha256"`
	Replayed bool   `json:"replayed"`
	Meta
}

// WriteAudit is step 9: store the audit record under its key, once.
func (a *Activities) WriteAudit(ctx context.Context, in AuditInput) (AuditResult, error) {
	if err := requireKey(in.Key); err != nil {
		return AuditResult{}, err
	}
	if !json.Valid(in.Record) {
		return AuditResult{}, invalid("audit record for %s is not JSON", in.ClaimID)
	}
	a.fault(ctx, in.Key, BeforeEffect)
	replayed, sum, err := a.Store.WriteAudit(ctx, in.Key, in.ClaimID, in.Record)
	if errors.Is(err, store.ErrConflict) {
		return AuditResult{}, ledgerConflict(ctx, in.Key, err)
	}
	if replayed {
		ledgerReplay(ctx)
	}
	if err != nil {
		return AuditResult{}, err
	}
	a.fault(ctx, in.Key, AfterEffect)
	return AuditResult{SHA256: sum, Replayed: replayed, Meta: meta(ctx)}, nil
}

func ledgerConflict(ctx context.Context, key claim.IdempotencyKey, err error) error {
	logger(ctx).Error("ALERT: ledger key reused for a different record", "alert", "idempotency_conflict", "tool", metrics.ToolLedger, "key", key, "error", err)
	metrics.Activity(ctx, metrics.IdempotencyConflicts, map[string]string{"tool": metrics.ToolLedger})
	return nonRetryable(err, ErrIdempotencyConflict)
}

// ledgerReplay counts a ledger write found already made under its key.
func ledgerReplay(ctx context.Context) {
	metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolLedger, "by": "lookup"})
}

// checkDocuments makes sure every document is in the blob store as the claim
// says: a reference whose content changed is refused; a document that only
// has a path the worker can read (a claim started without the starter) is
// stored now. The claim, and so the history, never holds the content.
func (a *Activities) checkDocuments(ctx context.Context, c *claim.Claim) error {
	if a.Blobs == nil {
		return nil
	}
	for i, d := range c.Documents {
		if d.URI != "" {
			if err := a.Blobs.Verify(ctx, blobs.Ref{URI: d.URI, SHA256: d.SHA256, Size: d.Size}); err != nil {
				return invalid("documents[%d] (%s): %v", i, d.Name, err)
			}
			continue
		}
		ref, err := a.Blobs.PutFile(ctx, blobs.DocumentKey(c.ID, i, d.Path), d.Path)
		if errors.Is(err, blobs.ErrTooLarge) || errors.Is(err, os.ErrNotExist) {
			return invalid("documents[%d] (%s): not in the blob store, and %v", i, d.Name, err)
		}
		if err != nil {
			return err
		}
		c.Documents[i] = claim.Document{Name: d.Name, URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}
	}
	return nil
}
