package activities

import (
	"context"
	"slices"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/letters"
	"github.com/durableclaims/durableclaims/internal/statute"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Letters to the claimant under a jurisdiction's rules (docs/law.md): the
// acknowledgment and status letters while a claim waits (SendLetter), and
// the decision letter that is the claimant's e-mail at the end
// (NotifyClaimant with a Letter). Each is rendered from a versioned
// template (internal/letters) from facts the workflow recorded, never from
// a model's words, and sent through the outbox, once, by key. The letter
// is dated by the outbox: the time its key was first reserved, so a step
// run again renders the same bytes and the claim file's hash is that of
// the letter sent.

// LetterFacts is what the workflow says in a letter: the kind, and the
// reasons, provisions and dates it decided from. The claimant, the policy
// and the amounts claimed are the system of record's.
type LetterFacts struct {
	Kind letters.Kind `json:"kind"`
	// Law is the jurisdiction's rules intake recorded: its name, the
	// regulator and the appeal in the rights paragraph, the review window.
	Law      statute.Recorded `json:"law"`
	NoticeAt time.Time        `json:"notice_at"`
	// ApprovedMinor is what is paid (approval, partial).
	ApprovedMinor   int64     `json:"approved_minor,omitempty"`
	Reasons         []string  `json:"reasons,omitempty"`
	Provisions      []string  `json:"provisions,omitempty"`
	MoreTimeBecause []string  `json:"more_time_because,omitempty"`
	DecideBy        time.Time `json:"decide_by,omitzero"`
	// Automated: no person decided (the rules did); the letter says the
	// claimant may ask for one.
	Automated bool     `json:"automated,omitempty"`
	Cite      []string `json:"cite,omitempty"`
}

// SentLetter is a letter as the claim file keeps it (letters.Sent).
type SentLetter = letters.Sent

// LetterInput is SendLetter's input: an acknowledgment or a status letter,
// keyed under the approval step (<id>:step5:letter:…).
type LetterInput struct {
	Key     claim.IdempotencyKey `json:"key"`
	ClaimID string               `json:"claim_id"`
	Facts   LetterFacts          `json:"facts"`
}

// LetterResult is the letter sent.
type LetterResult struct {
	Letter   SentLetter `json:"letter"`
	Replayed bool       `json:"replayed,omitempty"`
	Meta
}

// LetterKeyRoot is where every acknowledgment and status letter's key
// lies: under the claim's approval step.
func LetterKeyRoot(claimID string) claim.IdempotencyKey {
	return claim.StepKey(claimID, claim.StepApproval).Sub("letter")
}

// SendLetter sends an acknowledgment or a status letter to the claimant of
// an open claim, once, for the run that owns the claim. A decision letter
// is never sent this way: it goes with the claim's outcome (NotifyClaimant),
// whose facts that activity checks.
func (a *Activities) SendLetter(ctx context.Context, in LetterInput) (LetterResult, error) {
	if err := requireKey(in.Key); err != nil {
		return LetterResult{}, err
	}
	if !slices.Contains([]letters.Kind{letters.Acknowledgment, letters.Status}, in.Facts.Kind) {
		return LetterResult{}, invalid("SendLetter sends acknowledgment and status letters, not %q: a decision letter goes with the outcome", in.Facts.Kind)
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return LetterResult{}, err
	}
	if rec.Closed() || rec.Status != store.StatusOpen || !in.Key.Within(LetterKeyRoot(in.ClaimID)) {
		return LetterResult{}, a.refuse(ctx, c, in.ClaimID, "not-waiting", ErrForeignRun,
			"claim %s is %s: no %s letter under %s", in.ClaimID, rec.Status, in.Facts.Kind, in.Key)
	}
	sent, replayed, err := a.sendLetter(ctx, in.Key, rec, in.Facts)
	return LetterResult{Letter: sent, Replayed: replayed, Meta: meta(ctx)}, err
}

// sendLetter renders the letter for the claim as the system of record
// holds it and sends it through the outbox, dated by the outbox; replayed
// says it had been sent before. What it returns is the same on every
// repeat: it goes into the claim file, which a repeat must not change.
func (a *Activities) sendLetter(ctx context.Context, key claim.IdempotencyKey, rec store.Record, f LetterFacts) (sent SentLetter, replayed bool, err error) {
	draft, err := RenderLetter(rec.Claim, f, time.Now().UTC())
	if err != nil {
		return SentLetter{}, false, err
	}
	m := Email{MessageID: messageID(key), From: a.From, To: rec.Claim.Claimant.Email, Subject: draft.Subject}
	if m.To == "" {
		return SentLetter{}, false, invalid("letter %s has no recipient", key)
	}
	reserved, err := a.reserve(ctx, key, rec.Claim.ID, m)
	if err != nil {
		return SentLetter{}, false, err
	}
	l, err := RenderLetter(rec.Claim, f, reserved.CreatedAt)
	if err != nil {
		return SentLetter{}, false, err
	}
	m.Body = l.Body
	sent = SentLetter{Kind: l.Kind, SentAt: reserved.CreatedAt.UTC(), Version: l.Version, SHA256: l.SHA256,
		MessageID: m.MessageID, Subject: l.Subject, Body: l.Body}
	if reserved.Status == store.OutboxSent {
		return sent, true, nil
	}
	if err := a.deliver(ctx, key, m); err != nil {
		return SentLetter{}, false, err
	}
	return sent, false, nil
}

// RenderLetter is the letter f describes for claim c, dated date: what
// the claimant is sent, and what a test or an auditor renders again.
func RenderLetter(c claim.Claim, f LetterFacts, date time.Time) (letters.Letter, error) {
	j := f.Law.Jurisdiction
	if f.DecideBy.Before(date) {
		f.DecideBy = time.Time{} // a deadline already past promises nothing
	}
	l, err := letters.Render(f.Kind, letters.Facts{
		ClaimID: c.ID, ClaimantName: c.Claimant.Name, PolicyID: c.PolicyID,
		Jurisdiction: f.Law.Code, JurisdictionName: j.Name, NoticeAt: f.NoticeAt, Date: date,
		Currency: c.Currency, ClaimedMinor: c.AmountMinor, ApprovedMinor: f.ApprovedMinor,
		Reasons: f.Reasons, Provisions: f.Provisions, MoreTimeBecause: f.MoreTimeBecause, DecideBy: f.DecideBy,
		Regulator: j.Regulator, Appeal: j.Appeal, Automated: f.Automated, ReviewWindowDays: j.ReviewWindow.Days, Cite: f.Cite,
	})
	if err != nil {
		// The facts are the workflow's: the same facts are refused again.
		return letters.Letter{}, invalid("letter %s for claim %s: %v", f.Kind, c.ID, err)
	}
	return l, nil
}

// DecisionLetter is the kind of letter an outcome is told in: approval,
// partial (less than claimed was paid) or denial; "" for an outcome that
// is no decision (withdrawn, dead-lettered).
func DecisionLetter(outcome string, claimedMinor, paidMinor int64) letters.Kind {
	switch {
	case outcome == store.StatusPaid && paidMinor < claimedMinor:
		return letters.Partial
	case outcome == store.StatusPaid:
		return letters.Approval
	case outcome == "rejected":
		return letters.Denial
	}
	return ""
}

// checkDecisionLetter refuses a decision letter that does not tell the
// outcome the system of record is closing the claim with.
func checkDecisionLetter(in NotifyInput, c claim.Claim) error {
	want := DecisionLetter(in.Outcome, c.AmountMinor, in.PayoutMinor)
	switch {
	case want == "":
		return invalid("outcome %s is told in a plain e-mail, not a %s letter", in.Outcome, in.Letter.Kind)
	case in.Letter.Kind != want:
		return invalid("outcome %s paying %d of %d is told in a %s letter, not a %s letter", in.Outcome, in.PayoutMinor, c.AmountMinor, want, in.Letter.Kind)
	case want != letters.Denial && in.Letter.ApprovedMinor != in.PayoutMinor:
		return invalid("the %s letter says %d is paid; the outcome pays %d", want, in.Letter.ApprovedMinor, in.PayoutMinor)
	}
	return nil
}
