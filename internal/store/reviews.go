package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// A claimant may ask for a person to review a claim the rules decided
// alone against them (docs/law.md, "A person for an automated decision").
// The store knows what decided a closed claim from its audit record (step
// 9, `<id>:step9`): who decided (decided.by), what it paid, and when it was
// decided (the law section's decided_at, or the close's time where no
// jurisdiction's rules applied).

// Why a review request is refused: each an error of its own, so callers
// tell them apart (errors.Is). An unknown claim is ErrNotFound.
var (
	// ErrReviewNotClosed: the claim is still in its run (amend or
	// withdraw it instead), or its record is not yet written.
	ErrReviewNotClosed = errors.New("the claim is not decided yet")
	// ErrReviewByPerson: a person's signed decision decided it; the
	// claimant's route is the insurer's appeal, named in the letter.
	ErrReviewByPerson = errors.New("a person decided the claim")
	// ErrReviewNotAdverse: the automated outcome paid what was claimed,
	// or nothing was decided (the claimant withdrew it).
	ErrReviewNotAdverse = errors.New("nothing was decided against the claimant")
	// ErrReviewWindow: asked after the review window ended.
	ErrReviewWindow = errors.New("the review window has ended")
	// ErrReviewInvalid: no reason, nobody asking, or a claim whose review
	// claim's ID would be too long.
	ErrReviewInvalid = errors.New("the request is incomplete")
)

// ReviewRequest is a claimant's request for a person to review a claim's
// automated outcome.
type ReviewRequest struct {
	ClaimID string
	// By is who asks (the claimant, or the agent who took their call);
	// Reason why, in their words.
	By, Reason string
	// WindowEnds says when the review window of a claim decided at
	// decidedAt ends: under the jurisdiction the claim was decided under
	// ("" where no jurisdiction's rules applied). The window is the
	// insurer's (its rule sets, or its policy): the store only applies it.
	WindowEnds func(jurisdiction string, decidedAt time.Time) (time.Time, error)
}

// Review is a recorded request and the review claim it registered.
type Review struct {
	ClaimID      string    `json:"claim_id"`
	ReviewID     string    `json:"review_id"`
	By           string    `json:"requested_by"`
	At           time.Time `json:"requested_at"`
	Reason       string    `json:"reason"`
	DecidedBy    string    `json:"decided_by"`
	DecidedAt    time.Time `json:"decided_at"`
	WindowEnds   time.Time `json:"window_ends"`
	ClaimedMinor int64     `json:"claimed_minor"`
	PaidMinor    int64     `json:"paid_minor"`
}

// RequestReview records a claimant's request for a person to review the
// claim's automated outcome and, in the same transaction, registers the
// review claim `<id>-review`: the original's claimant, policy and
// documents, for the amount still in dispute, with what the original
// claimed and paid (claim.Review). One review per claim: a second request
// returns the first, with existed true, and changes nothing.
func (s *Store) RequestReview(ctx context.Context, req ReviewRequest) (rv Review, existed bool, err error) {
	if err := claim.CheckReviewText("who asks", req.By, claim.MaxNameLen); err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %v: %w", req.ClaimID, err, ErrReviewInvalid)
	}
	if err := claim.CheckReviewText("a reason", req.Reason, claim.MaxReviewReasonLen); err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %v: %w", req.ClaimID, err, ErrReviewInvalid)
	}
	t, err := s.begin(ctx)
	if err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %w", req.ClaimID, err)
	}
	defer t.Rollback()
	var closedKey sql.NullString
	var status string
	err = t.lock(ctx, `SELECT status, closed_key FROM claims WHERE id = ?`, req.ClaimID).Scan(&status, &closedKey)
	if errors.Is(err, sql.ErrNoRows) {
		return Review{}, false, fmt.Errorf("store: claim %s: %w", req.ClaimID, ErrNotFound)
	}
	if err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %w", req.ClaimID, err)
	}
	if held, err := s.reviewTx(ctx, t, req.ClaimID); err == nil {
		return held, true, nil
	} else if !errors.Is(err, ErrNotFound) {
		return Review{}, false, err
	}
	orig, err := s.getClaimTx(ctx, t, req.ClaimID)
	if err != nil {
		return Review{}, false, err
	}
	if orig.Claim.ReviewOf != nil {
		return Review{}, false, fmt.Errorf("store: claim %s is the review of %s, which a person decides: %w", req.ClaimID, orig.Claim.ReviewOf.Of, ErrReviewByPerson)
	}
	if closedKey.String == "" {
		return Review{}, false, fmt.Errorf("store: claim %s is %s, still in its run: amend or withdraw it instead: %w", req.ClaimID, status, ErrReviewNotClosed)
	}
	rec, err := closedRecord(ctx, t, req.ClaimID)
	if err != nil {
		return Review{}, false, err
	}
	rv = Review{ClaimID: req.ClaimID, ReviewID: claim.ReviewID(req.ClaimID), By: req.By, At: s.stamp(), Reason: req.Reason,
		ClaimedMinor: orig.Claim.AmountMinor, PaidMinor: rec.PayoutMinor}
	if err := reviewable(orig, rec, &rv); err != nil {
		return Review{}, false, err
	}
	jurisdiction := ""
	if rec.Law != nil {
		jurisdiction = rec.Law.Jurisdiction
	}
	if rv.WindowEnds, err = req.WindowEnds(jurisdiction, rv.DecidedAt); err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: its window: %w", req.ClaimID, err)
	}
	rv.WindowEnds = rv.WindowEnds.UTC().Truncate(time.Microsecond)
	if !rv.At.Before(rv.WindowEnds) {
		return Review{}, false, fmt.Errorf("store: claim %s was decided %s: a review could be asked for until %s: %w", req.ClaimID,
			rv.DecidedAt.Format(time.RFC3339), rv.WindowEnds.Format(time.RFC3339), ErrReviewWindow)
	}
	c := orig.Claim
	c.ID, c.AmountMinor = rv.ReviewID, rv.ClaimedMinor-rv.PaidMinor
	c.ReviewOf = &claim.Review{Of: rv.ClaimID, ClaimedMinor: rv.ClaimedMinor, PaidMinor: rv.PaidMinor, By: rv.By, At: rv.At, Reason: rv.Reason}
	if err := c.Validate(); err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %v: %w", req.ClaimID, err, ErrReviewInvalid)
	}
	body, err := json.Marshal(c)
	if err != nil {
		return Review{}, false, err
	}
	now := s.ts(rv.At)
	res, err := t.exec(ctx, `INSERT INTO claims (id, body, status, version, created_at, updated_at)
		VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT(id) DO NOTHING`, c.ID, string(body), StatusOpen, now, now)
	if err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %w", req.ClaimID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Review{}, false, fmt.Errorf("store: review of %s: claim %s is already registered as a claim of its own: %w", req.ClaimID, c.ID, ErrConflict)
	}
	if _, err := t.exec(ctx, `INSERT INTO reviews (claim_id, review_id, requested_by, requested_at, reason, decided_by, decided_at, window_ends)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, rv.ClaimID, rv.ReviewID, rv.By, now, rv.Reason, rv.DecidedBy, s.ts(rv.DecidedAt), s.ts(rv.WindowEnds)); err != nil {
		return Review{}, false, fmt.Errorf("store: review of %s: %w", req.ClaimID, err)
	}
	return rv, false, t.Commit()
}

// closedRecord reads the audit record step 9 wrote for a closed claim.
func closedRecord(ctx context.Context, t *tx, id string) (audit.Record, error) {
	var body string
	err := t.queryRow(ctx, `SELECT record FROM audit WHERE key = ?`, string(claim.StepKey(id, claim.StepAudit))).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Record{}, fmt.Errorf("store: claim %s is closed but its record is not written yet: %w", id, ErrReviewNotClosed)
	}
	if err != nil {
		return audit.Record{}, fmt.Errorf("store: review of %s: %w", id, err)
	}
	var rec audit.Record
	if err := json.Unmarshal([]byte(body), &rec); err != nil {
		return audit.Record{}, fmt.Errorf("store: review of %s: its record: %w", id, err)
	}
	return rec, nil
}

// reviewable says whether a closed claim's outcome may be reviewed: decided
// by the rules or the policy, not by a person, and against the claimant
// (less paid than claimed). It sets who decided, and when.
func reviewable(orig Record, rec audit.Record, rv *Review) error {
	id := orig.Claim.ID
	rv.DecidedBy = audit.DecidedByRules
	if rec.Decided != nil {
		rv.DecidedBy = rec.Decided.By
	}
	for _, a := range rec.Approvals {
		if a.Decision != nil && a.Voided == "" && !a.Expired {
			rv.DecidedBy = audit.DecidedByApprover
		}
	}
	switch {
	case rec.Outcome == StatusWithdrawn:
		return fmt.Errorf("store: claim %s was withdrawn: %w", id, ErrReviewNotAdverse)
	case rv.DecidedBy == audit.DecidedByApprover:
		return fmt.Errorf("store: claim %s was decided by a person's signed decision: the insurer's appeal, named in the decision letter, is the claimant's route: %w",
			id, ErrReviewByPerson)
	case rec.PayoutMinor >= orig.Claim.AmountMinor:
		return fmt.Errorf("store: claim %s was paid in full (%s %s): %w", id, claim.FormatAmount(rec.PayoutMinor, rec.Currency), rec.Currency, ErrReviewNotAdverse)
	}
	rv.DecidedAt = rec.ClosedAt
	if rec.Law != nil && rec.Law.DecidedAt != nil {
		rv.DecidedAt = *rec.Law.DecidedAt
	}
	rv.DecidedAt = rv.DecidedAt.UTC().Truncate(time.Microsecond)
	return nil
}

const reviewColumns = `r.claim_id, r.review_id, r.requested_by, r.requested_at, r.reason, r.decided_by, r.decided_at, r.window_ends, c.body`

func (s *Store) reviewTx(ctx context.Context, t *tx, claimID string) (Review, error) {
	return scanReview(t.queryRow(ctx, `SELECT `+reviewColumns+` FROM reviews r JOIN claims c ON c.id = r.review_id WHERE r.claim_id = ?`, claimID), claimID)
}

// ReviewOf returns the review requested of a claim; ErrNotFound if none.
func (s *Store) ReviewOf(ctx context.Context, claimID string) (Review, error) {
	return scanReview(s.queryRow(ctx, `SELECT `+reviewColumns+` FROM reviews r JOIN claims c ON c.id = r.review_id WHERE r.claim_id = ?`, claimID), claimID)
}

func scanReview(row *sql.Row, claimID string) (Review, error) {
	var rv Review
	var at, decided, ends stamp
	var body string
	err := row.Scan(&rv.ClaimID, &rv.ReviewID, &rv.By, &at, &rv.Reason, &rv.DecidedBy, &decided, &ends, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return Review{}, fmt.Errorf("store: review of %s: %w", claimID, ErrNotFound)
	}
	if err != nil {
		return Review{}, fmt.Errorf("store: review of %s: %w", claimID, err)
	}
	var c claim.Claim
	if err := json.Unmarshal([]byte(body), &c); err != nil || c.ReviewOf == nil {
		return Review{}, fmt.Errorf("store: review of %s: its claim %s is not a review", claimID, rv.ReviewID)
	}
	rv.At, rv.DecidedAt, rv.WindowEnds = at.Time, decided.Time, ends.Time
	rv.ClaimedMinor, rv.PaidMinor = c.ReviewOf.ClaimedMinor, c.ReviewOf.PaidMinor
	return rv, nil
}
