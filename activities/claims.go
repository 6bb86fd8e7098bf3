package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/insurer"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/review"
	"github.com/durableclaims/durableclaims/internal/statute"
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
	// PolicyVersion is Rules' version (insurer.Rules.Version): recorded
	// with them, so the run names the policy it follows from its history.
	PolicyVersion string `json:"policy_version,omitempty"`
	// Revoked lists the input's Keys the directory no longer lists.
	Revoked []string `json:"revoked,omitempty"`
	// Review is what the review rules read (nil before they existed).
	Review *review.Facts `json:"review,omitempty"`
	// Audience is what decision receipts for this claim must carry as
	// their "aud": this worker's namespace and insurer deployment
	// (approvals.Audience). Recorded here, not read by the workflow from
	// its own info, so a replay anywhere checks receipts as the run did.
	Audience string `json:"audience,omitempty"`
	// Law is the claim's jurisdiction's rules, from its policy (the rule
	// set's default where the policy names none), and ReceivedAt when the
	// system of record registered the claim: the notice of claim its
	// clocks start from. Nil where the worker applies no jurisdiction rules.
	Law        *statute.Recorded `json:"law,omitempty"`
	ReceivedAt time.Time         `json:"received_at,omitzero"`
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
//
// Intake is where a claim is bound to its run, so it runs only as a local
// activity of this worker's own claim workflow, for the claim the workflow
// is named after: called as a regular activity, by anyone's workflow, it
// refuses and reads nothing. A closed claim is refused (ErrClaimClosed): a
// new run for it ends at once.
func (a *Activities) LoadClaim(ctx context.Context, in LoadClaimInput) (LoadClaimResult, error) {
	c, ok := a.caller(ctx)
	switch {
	case !ok || !c.Local:
		return LoadClaimResult{}, a.refuse(ctx, c, in.Claim.ID, "not-local", ErrForeignRun,
			"LoadClaim runs only inside the claim workflow of this worker, as a local activity; nothing was read")
	case c.WorkflowID != in.Claim.ID:
		return LoadClaimResult{}, a.refuse(ctx, c, in.Claim.ID, "other-claim", ErrForeignRun,
			"LoadClaim: workflow %s reads only its own claim, not %s", c.WorkflowID, in.Claim.ID)
	}
	if err := in.Claim.Validate(); err != nil {
		return LoadClaimResult{}, invalid("%v", err)
	}
	rec, err := a.Store.TakeClaim(ctx, in.Claim.ID, c.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return LoadClaimResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("claim %s is not registered in the claims system of record: register it with the starter; nothing was done", in.Claim.ID),
			ErrNotRegistered, nil)
	case errors.Is(err, store.ErrClosed):
		return LoadClaimResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("claim %s is closed (%s): its outcome is recorded, and no run takes it again; nothing was done", in.Claim.ID, rec.Status),
			ErrClaimClosed, nil)
	case err != nil:
		return LoadClaimResult{}, err
	}
	texts, err := a.checkDocuments(ctx, rec.Claim)
	if err != nil {
		return LoadClaimResult{}, err
	}
	rules := a.Rules
	res := LoadClaimResult{Claim: rec.Claim, Status: rec.Status, Version: rec.Version, AmendedBy: rec.AmendedBy, Rules: &rules, Meta: meta(ctx),
		PolicyVersion: rules.Version(), Audience: approvals.Audience(c.Namespace, a.Rules.Deployment)}
	p, ok := a.Policies[rec.Claim.PolicyID]
	if ok {
		res.Policy = &p
	}
	if res.Review, err = a.review(ctx, rec.Claim, res.Policy, texts, time.Time{}); err != nil {
		return LoadClaimResult{}, err
	}
	if a.Law.Version != "" {
		code := ""
		if res.Policy != nil {
			code = res.Policy.Jurisdiction
		}
		law, err := a.Law.Record(code)
		if err != nil {
			// The worker checks its policies against its rules when it
			// starts; a file changed since is fixed, then the claim goes on.
			return LoadClaimResult{}, fmt.Errorf("claim %s: policy %s: %w", rec.Claim.ID, rec.Claim.PolicyID, err)
		}
		res.Law, res.ReceivedAt = &law, rec.CreatedAt.UTC()
	}
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
	return res, nil
}

// MaxScannedText is how much of each text document the rules read.
const MaxScannedText = 64 << 10

// review reads what the review rules weigh; prior claims count those
// registered before until (zero: any time).
func (a *Activities) review(ctx context.Context, c claim.Claim, p *claim.Policy, texts []string, until time.Time) (*review.Facts, error) {
	since := time.Now().Add(-time.Duration(a.Rules.PriorClaimsWindow))
	n, err := a.Store.CountPriorClaims(ctx, c.ID, c.Claimant.Email, c.Claimant.StripeAccount, since, until)
	if err != nil {
		return nil, err
	}
	r := &review.Facts{PriorClaims: n}
	if p == nil {
		return r, nil
	}
	words := strings.ToLower(strings.Join(append([]string{c.Description}, texts...), "\n"))
	for _, category := range p.ExcludedCategories {
		var hit []string
		for _, term := range a.Rules.ExclusionTerms[category] {
			if strings.Contains(words, strings.ToLower(term)) {
				hit = append(hit, term)
			}
		}
		if len(hit) > 0 {
			r.Exclusions = append(r.Exclusions, review.ExclusionHit{Category: category, Terms: hit})
		}
	}
	return r, nil
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

// CloseClaim is step 8: record the outcome in the system of record, once,
// for the run that owns the claim. An outcome needs its facts: paid needs
// the claim's payout paid by that transfer, withdrawn a claim the store
// says was withdrawn.
func (a *Activities) CloseClaim(ctx context.Context, in CloseInput) (CloseResult, error) {
	if err := requireKey(in.Key); err != nil {
		return CloseResult{}, err
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return CloseResult{}, err
	}
	if err := a.outcomeHolds(ctx, c, rec, in.Outcome, in.TransferID, in.PayoutMinor); err != nil {
		return CloseResult{}, err
	}
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
	return CloseResult{Replayed: replayed, ClosedAt: closedAt.UTC(), Meta: meta(ctx)}, nil
}

// AuditInput is step 9's input: the run's audit record, already rendered by
// the workflow (activities do not know workflow types).
type AuditInput struct {
	Key     claim.IdempotencyKey `json:"key"`
	ClaimID string               `json:"claim_id"`
	Record  json.RawMessage      `json:"record"`
}

// AuditResult identifies what was stored: the audit record, and the
// claim file with its place in the claim-file log.
type AuditResult struct {
	SHA256   string `json:"sha256"`
	Replayed bool   `json:"replayed"`
	// ClaimFile is the dossier's URI, digest and log index (empty on a
	// worker that writes none).
	ClaimFile *ClaimFileRef `json:"claim_file,omitempty"`
	Meta
}

// ClaimFileRef names a stored claim file.
type ClaimFileRef struct {
	URI      string `json:"uri"`
	SHA256   string `json:"sha256"`
	LogIndex uint64 `json:"log_index"`
}

// WriteAudit is step 9: store the audit record under its key, once.
func (a *Activities) WriteAudit(ctx context.Context, in AuditInput) (AuditResult, error) {
	if err := requireKey(in.Key); err != nil {
		return AuditResult{}, err
	}
	if !json.Valid(in.Record) {
		return AuditResult{}, invalid("audit record for %s is not JSON", in.ClaimID)
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return AuditResult{}, err
	}
	if err := agreesWithRecord(in, rec); err != nil {
		logger(ctx).Warn("audit record refused", "key", in.Key, "error", err)
		return AuditResult{}, nonRetryable(err, ErrContradictsRecord)
	}
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
	res := AuditResult{SHA256: sum, Replayed: replayed, Meta: meta(ctx)}
	if a.ClaimFiles.History != nil && a.Blobs != nil {
		f, err := a.writeClaimFile(ctx, c, in, sum)
		if err != nil {
			return AuditResult{}, err
		}
		res.ClaimFile = &ClaimFileRef{URI: f.URI, SHA256: f.SHA256, LogIndex: f.LogIndex}
	}
	return res, nil
}

// agreesWithRecord: an audit record states the outcome the claims store
// holds. A final outcome is written only once the claim is closed with it
// (step 8 before step 9); a dead letter only while the claim is not closed.
// Anything else is a run acting on a view that is no longer true: a worker
// that lost its workflow task and ran its local activities on regardless,
// its stale run dead-lettering a claim another worker had just paid.
func agreesWithRecord(in AuditInput, rec store.Record) error {
	var r struct {
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(in.Record, &r); err != nil || r.Outcome == "" {
		return fmt.Errorf("audit record for %s names no outcome", in.ClaimID)
	}
	switch {
	case r.Outcome == outcomeDeadLettered && rec.Closed():
		return fmt.Errorf("a dead letter for claim %s, which is closed %s under %s: this run's view is stale", in.ClaimID, rec.Status, rec.ClosedKey)
	case r.Outcome != outcomeDeadLettered && !rec.Closed():
		return fmt.Errorf("claim %s audited %s, but the claims store has not closed it", in.ClaimID, r.Outcome)
	case r.Outcome != outcomeDeadLettered && r.Outcome != rec.Status:
		return fmt.Errorf("claim %s audited %s, but the claims store closed it %s under %s", in.ClaimID, r.Outcome, rec.Status, rec.ClosedKey)
	}
	return nil
}

// outcomeDeadLettered is a dead-lettered run's outcome in its audit record.
const outcomeDeadLettered = "dead-lettered"

func ledgerConflict(ctx context.Context, key claim.IdempotencyKey, err error) error {
	logger(ctx).Error("ALERT: ledger key reused for a different record", "alert", "idempotency_conflict", "tool", metrics.ToolLedger, "key", key, "error", err)
	metrics.Activity(ctx, metrics.IdempotencyConflicts, map[string]string{"tool": metrics.ToolLedger})
	return nonRetryable(err, ErrIdempotencyConflict)
}

// ledgerReplay counts a ledger write found already made under its key.
func ledgerReplay(ctx context.Context) {
	metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolLedger, "by": "lookup"})
}

// checkDocuments makes sure every document is a reference to this claim's
// folder in the blob store and still holds what the claim says (a changed
// one is refused), and returns the text of those that are text, for the
// rules to read. The worker never reads a local path: a claim is the
// claimant's words, and a path in it could name any file on this machine.
func (a *Activities) checkDocuments(ctx context.Context, c claim.Claim) ([]string, error) {
	var texts []string
	for i, d := range c.Documents {
		if d.URI == "" {
			return nil, invalid("documents[%d] (%s): the worker never reads a local path (%q); documents are read only "+
				"from the blob store by reference, which the starter stores them in", i, d.Name, d.Path)
		}
		if a.Blobs == nil {
			continue
		}
		if err := a.Blobs.CheckDocument(c.DocumentsOf(), d.URI); err != nil {
			return nil, invalid("documents[%d] (%s): %v", i, d.Name, err)
		}
		head, err := a.Blobs.VerifyHead(ctx, blobs.Ref{URI: d.URI, SHA256: d.SHA256, Size: d.Size}, MaxScannedText)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) || errors.Is(err, blobs.ErrChanged) || errors.Is(err, blobs.ErrNotTheClaims) {
				return nil, invalid("documents[%d] (%s): %v", i, d.Name, err)
			}
			return nil, err
		}
		if text, ok := asText(head, len(head) < int(d.Size)); ok {
			texts = append(texts, text)
		}
	}
	return texts, nil
}

// asText is b as text, or false for binary content (a photo, a PDF).
// A character cut in two at the end of a truncated read is dropped.
func asText(b []byte, truncated bool) (string, bool) {
	for i := 0; truncated && i < utf8.UTFMax-1 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", false
	}
	return string(b), true
}
