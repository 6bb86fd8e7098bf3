package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/letters"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/statute"
)

// The law's clock (from versionLaw on, where intake recorded a
// jurisdiction's rules; docs/law.md). The rules say by when a claim is
// acknowledged, decided and paid, in calendar or business days of the
// jurisdiction, and how often a claimant waiting for a decision is
// written to. The run keeps the dates (statute.Events) as they happen;
// while a claim waits for a person a goroutine sends the acknowledgment
// and the status letters on durable timers, the wait's own deadlines are
// drawn inside the decision clock, and silence never denies: an
// unanswered wait is held for the supervisors (approvals.Hold). The
// clocks are judged when the claim ends, and every breach is recorded
// (the audit record's law section, a metric, an error in the log).

// lawRun is one run's jurisdiction, its dates and its letters.
type lawRun struct {
	recorded statute.Recorded
	law      statute.Law
	events   statute.Events
	letters  []activities.SentLetter
	// sending: a letter is in flight; a wait that ends lets it finish.
	sending bool
}

// statusLead is how long before a status letter is due the run sends it;
// letterRetry how long it waits to try again a letter that was not sent.
const (
	statusLead  = 24 * time.Hour
	letterRetry = 24 * time.Hour
)

// adoptLaw takes the jurisdiction intake recorded; noticeAt is when the
// system of record registered the claim. Where a jurisdiction's rules
// apply, nobody's silence denies a claim: an unanswered wait is held.
func (r *claimRun) adoptLaw(rec *statute.Recorded, noticeAt time.Time) error {
	if rec == nil {
		return nil
	}
	law, err := rec.Law()
	if err != nil {
		return err
	}
	if noticeAt.IsZero() {
		noticeAt = r.started
	}
	proof := noticeAt
	r.law = &lawRun{recorded: *rec, law: law, events: statute.Events{NoticeAt: noticeAt, ProofOfLossAt: &proof}}
	if r.approval.FinalOutcome != approvals.Approve {
		r.approval.FinalOutcome = approvals.Hold
	}
	return nil
}

// decideDue is when the decision clock runs out as things stand now.
func (l *lawRun) decideDue(now time.Time) time.Time {
	for _, c := range l.law.Clocks(l.events, now) {
		if c.Clock == "decide" && c.DueAt != nil {
			return *c.DueAt
		}
	}
	return time.Time{}
}

// shape draws a wait's deadlines inside the decision clock: the adjusters
// have at most half of what is left, the supervisors a quarter more, so a
// claim nobody took is with the supervisors, flagged, well before the
// regulator's deadline.
func (l *lawRun) shape(w *approvals.Wait, now time.Time) {
	due := l.decideDue(now)
	if due.IsZero() {
		return
	}
	w.DueBy, w.DueUnder = due, l.recorded.Code
	left := due.Sub(now)
	if left <= 0 {
		return
	}
	p := w.Policy.WithDefaults()
	p.TTL, p.EscalationTTL = min(p.TTL, left/2), min(p.EscalationTTL, left/4)
	w.Policy = p
}

// watchLaw writes to the claimant while the claim waits for a person: the
// acknowledgment at once (unless the claim was acknowledged before), then
// a status letter a day before each is due. The returned stop ends the
// watch when the wait ends, after the letter in flight, if any, is sent.
func (r *claimRun) watchLaw(ctx workflow.Context) (stop func(workflow.Context)) {
	l := r.law
	wctx, cancel := workflow.WithCancel(ctx)
	done := false
	workflow.Go(wctx, func(ctx workflow.Context) {
		if l.events.AcknowledgedAt == nil {
			r.sendLetter(ctx, letters.Acknowledgment, "acknowledgment", nil)
		}
		for !done {
			due, ok := l.law.NextStatus(l.events)
			if !ok {
				return
			}
			if wait := due.Add(-statusLead).Sub(workflow.Now(ctx)); wait > 0 {
				if workflow.Sleep(ctx, wait) != nil {
					return // the wait ended
				}
			}
			if done {
				return
			}
			if !r.sendLetter(ctx, letters.Status, fmt.Sprintf("status-%d", len(l.events.StatusLetters)+1), []string{
				"your claim needs the decision of a claims adjuster, as our rules require for a claim like yours, and it is with them now",
			}) {
				// Not sent (a relay down past every retry, the step cap):
				// the claim goes on, the miss will show as a breach, and
				// the letter is tried again a day on, not in a loop.
				if workflow.Sleep(ctx, letterRetry) != nil {
					return
				}
			}
		}
	})
	return func(ctx workflow.Context) {
		done = true
		_ = workflow.Await(ctx, func() bool { return !l.sending })
		cancel()
	}
}

// sendLetter sends an acknowledgment or a status letter and notes its
// date: local in the task that opened the wait or that its timer woke
// (plan.letter), regular when its quick attempts fail. A letter that
// cannot be sent does not stop the claim: it says so, and its clock shows
// the miss when the claim ends.
func (r *claimRun) sendLetter(ctx workflow.Context, kind letters.Kind, name string, because []string) (sent bool) {
	l := r.law
	l.sending = true
	defer func() { l.sending = false }()
	now := workflow.Now(ctx).UTC()
	in := activities.LetterInput{Key: activities.LetterKeyRoot(r.claim.ID).Sub(name), ClaimID: r.claim.ID,
		Facts: activities.LetterFacts{Kind: kind, Law: l.recorded, NoticeAt: l.events.NoticeAt, MoreTimeBecause: because,
			DecideBy: l.decideDue(now), Cite: []string{l.recorded.Jurisdiction.Decide.Cite}}}
	var res activities.LetterResult
	local := plan.letter.runsLocal(r.pending)
	err := r.exec(ctx, plan.letter, a.SendLetter, in, &res)
	if err != nil && local && retryRegular(err) {
		// Its quick local attempts failed (a relay slow or down): the
		// regular form retries without a workflow task each time.
		workflow.GetLogger(ctx).Warn("letter failed locally: sending it as a regular activity", "kind", kind, "error", err)
		err = r.exec(ctx, plan.effect.besideLine(), a.SendLetter, in, &res)
	}
	if err != nil {
		workflow.GetLogger(ctx).Error("letter not sent", "kind", kind, "error", err)
		return false
	}
	l.sent(res.Letter)
	return true
}

// sent notes a letter in the claim's dates.
func (l *lawRun) sent(s activities.SentLetter) {
	l.letters = append(l.letters, s)
	at := s.SentAt
	switch s.Kind {
	case letters.Status:
		l.events.StatusLetters = append(l.events.StatusLetters, at)
	}
	if l.events.AcknowledgedAt == nil {
		// Any letter to the claimant acknowledges the claim; a claim
		// decided without a wait is acknowledged by its decision letter.
		l.events.AcknowledgedAt = &at
	}
}

// decided notes the decision's date, and its acceptance when it pays.
func (l *lawRun) decided(now time.Time, v approvals.Verdict) {
	if l == nil {
		return
	}
	now = now.UTC()
	l.events.DecidedAt = &now
	l.events.Denied = v == approvals.Reject
	if v == approvals.Approve {
		l.events.AcceptedAt = &now
	}
}

// paid notes the payment's date: when the provider made the transfer,
// which every attempt of the payment reports alike. (This task's clock
// would not do: steps 7-9 may run again in a later task after a crash, and
// the record they write must be the same bytes.) now only where the
// provider gave no time.
func (l *lawRun) paid(created, now time.Time) {
	if l == nil {
		return
	}
	at := created
	if at.IsZero() {
		at = now
	}
	at = at.UTC()
	l.events.PaidAt = &at
}

// amended notes a claim changed while it waited: its proof of loss is
// complete again only now.
func (l *lawRun) amended(now time.Time) {
	if l == nil {
		return
	}
	now = now.UTC()
	l.events.ProofOfLossAt = &now
}

// decisionLetter is what the claimant's e-mail says under the law: the
// decision letter for the outcome, with the reasons and provisions taken
// from the coverage check, the policy and the approver's recorded reason,
// never a model's words. Nil for an outcome that is no decision.
func (r *claimRun) decisionLetter(outcome string) *activities.LetterFacts {
	if r.law == nil {
		return nil
	}
	kind := activities.DecisionLetter(outcome, r.claim.AmountMinor, r.payoutMinor)
	if kind == "" {
		return nil
	}
	f := &activities.LetterFacts{Kind: kind, Law: r.law.recorded, NoticeAt: r.law.events.NoticeAt,
		Provisions: r.provisions(), Automated: r.decided != nil && r.decided.By == DecidedByRules,
		Cite: []string{r.law.recorded.Jurisdiction.Decide.Cite}}
	if kind != letters.Denial {
		f.ApprovedMinor = r.payoutMinor
	}
	cov, cur := r.coverage, r.claim.Currency
	if kind != letters.Approval && cov.Reason != "" && cov.CoveredMinor < r.claim.AmountMinor {
		f.Reasons = append(f.Reasons, cov.Reason)
	}
	if d := r.lastDecision(); d != nil && d.Reason != "" && (kind == letters.Denial || d.AmountMinor > 0) {
		f.Reasons = append(f.Reasons, "the decision of the claims adjuster who reviewed your claim: "+d.Reason)
	}
	if kind == letters.Partial && r.payoutMinor < cov.CoveredMinor {
		f.Reasons = append(f.Reasons, fmt.Sprintf("the loss was assessed at %s %s", claim.FormatAmount(r.payoutMinor, cur), strings.ToUpper(cur)))
	}
	if kind != letters.Approval && len(f.Reasons) == 0 {
		f.Reasons = []string{"the claim was reviewed against the policy's terms"}
	}
	return f
}

// lastDecision is the decision of the run's last wait, if a person made one.
func (r *claimRun) lastDecision() *approvals.Decision {
	if a := r.gate.Current(); a != nil && a.Decision != nil && a.Decision.Channel != "policy" {
		return a.Decision
	}
	return nil
}

// provisions are the policy's terms a decision rests on.
func (r *claimRun) provisions() []string {
	p, cur := r.policy, strings.ToUpper(r.claim.Currency)
	if p == nil {
		return []string{fmt.Sprintf("Policy %s: no such policy is in force with us", r.claim.PolicyID)}
	}
	out := []string{
		fmt.Sprintf("Policy %s: limit %s %s", p.ID, claim.FormatAmount(p.LimitMinor, p.Currency), cur),
		fmt.Sprintf("Policy %s: deductible %s %s", p.ID, claim.FormatAmount(p.DeductibleMinor, p.Currency), cur),
	}
	if len(p.ExcludedCategories) > 0 {
		out = append(out, fmt.Sprintf("Policy %s: excluded categories %s", p.ID, strings.Join(p.ExcludedCategories, ", ")))
	}
	return out
}

// lawRecord judges the clocks at now (the close's recorded time, so the
// record is the same bytes in any task that writes it) and records every
// breach: in the record, a metric and the log.
func (r *claimRun) lawRecord(ctx workflow.Context, now time.Time, count bool) *LawRecord {
	l := r.law
	if l == nil {
		return nil
	}
	e := l.events
	rec := &LawRecord{Jurisdiction: l.recorded.Code, RuleSet: l.recorded.RuleSet, NoticeAt: e.NoticeAt,
		AcknowledgedAt: e.AcknowledgedAt, ProofOfLossAt: e.ProofOfLossAt, DecidedAt: e.DecidedAt, AcceptedAt: e.AcceptedAt,
		PaidAt: e.PaidAt, Clocks: l.law.Clocks(e, now), Letters: l.letters}
	for _, c := range rec.Clocks {
		if !c.Breached {
			continue
		}
		rec.Breaches = append(rec.Breaches, c.Clock)
		if count {
			workflow.GetLogger(ctx).Error("statutory deadline breached", "clock", c.Clock, "jurisdiction", rec.Jurisdiction,
				"due_at", c.DueAt, "met_at", c.MetAt, "cite", c.Cite)
			metrics.Count(ctx, metrics.StatutoryBreaches, map[string]string{"clock": c.Clock, "jurisdiction": rec.Jurisdiction})
		}
	}
	return rec
}
