package approvals

import (
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// The timeline: one wait for a decision, its reminder, its escalation and
// its final outcome, on durable timers.

// Wait is what Await needs to know.
type Wait struct {
	Request Request
	Policy  Policy
	// Approvers is the directory snapshot the rules check decisions against.
	Approvers authority.Directory
	// Self lists the identities (e-mail, payee account) of the person paid;
	// an approver matching one is refused: nobody approves their own claim.
	Self []string
	// NotAfter, if set, ends the wait (Capped) even before its deadlines.
	// A wait held open past its deadlines (FinalOutcome hold) ends there;
	// without one it ends MaxHold after it became overdue.
	NotAfter time.Time
	// Excluded lists approvers who may not decide this request: whoever
	// amended the claim does not approve it.
	Excluded []string
	// DueBy is the decision's deadline outside the wait, and DueUnder what
	// sets it (Approval.DueBy, Approval.DueUnder).
	DueBy    time.Time
	DueUnder string
	// Trust is how decisions are proven: signed receipts. Nil keeps the
	// rules of runs started before receipts (a plain approver name).
	Trust *Trust
}

// Trust is what proves a decision, recorded with the wait so that a
// replay checks every receipt as the run did.
type Trust struct {
	// Services are the keys allowed to vouch for any approver; approvers'
	// own keys are in the directory.
	Services []authority.Service
	// ReceiptMaxTTL is the longest life a receipt may have.
	ReceiptMaxTTL time.Duration
	// AllowUnsigned is the development switch: a plain decision is
	// accepted and audited as unauthenticated.
	AllowUnsigned bool
	// FourEyesAboveMinor: a request above this amount needs two approvers
	// (0: never).
	FourEyesAboveMinor int64
	// Audience is the receipts' "aud": Audience(namespace, deployment).
	// Empty for runs before receipts named it: ReceiptAudience.
	Audience string
	// Identities: conflicts of interest compare people, not spellings
	// (authority.Approver.Is: canonical e-mail addresses, the directory's
	// other addresses and payout accounts). Off for runs before it, which
	// compared the approver's one address as written.
	Identities bool
}

// Hooks let the workflow act on a wait's transitions.
type Hooks struct {
	// Recheck runs when the system of record says the claim changed while
	// the wait is open (the changed signal): read the claim again and say
	// why the request no longer holds, or "" to go on waiting. At most
	// MaxRechecks times a wait.
	Recheck func(ctx workflow.Context, a *Approval) (voided string, err error)
	// OnStage runs when the wait enters a stage: publish it (search
	// attributes) so operators can find waits by stage and deadline.
	OnStage func(ctx workflow.Context, stage Stage, deadline time.Time) error
	// Remind runs once at Policy.ReminderAt of the TTL (nudge the adjusters).
	Remind func(ctx workflow.Context, a *Approval) error
	// Escalate runs once when the TTL expires (notify the supervisors).
	Escalate func(ctx workflow.Context, a *Approval) error
	// Overdue runs once when the second deadline passes with no decision
	// and the policy holds the wait open (FinalOutcome hold): tell the
	// supervisors and the head of claims that a claim is overdue.
	Overdue func(ctx workflow.Context, a *Approval) error
	// OnChange runs after each change an inbox lists: the wait opened, a
	// vote or a hand-off that leaves it open, its escalation, and its end
	// (a.Open() false). The approval queue is kept this way. Nil for runs
	// before the queue: then nothing wakes the wait early.
	OnChange func(ctx workflow.Context, a *Approval) error
	// TimerFired runs when one of the wait's deadlines (the reminder, the
	// escalation, the expiry) was reached by its timer, before the hook
	// that follows it: the workflow task that started the timer has
	// completed, so everything the workflow did before is in history. Not
	// when a decision or a change woke the wait first (an update; a signal
	// delivered in the same task as the timer's firing is read after it),
	// nor when the deadline had already passed and no timer ran (then
	// nothing says the task before completed).
	TimerFired func()
}

// Await parks the workflow until a decision, reminding the adjusters, then
// escalating at the TTL and applying the policy's final outcome at the
// second deadline. It always ends: with a Decision, Expired, or Capped. The
// timers are durable; the worker holds nothing meanwhile.
func (g *Gate) Await(ctx workflow.Context, w Wait, hooks Hooks) (*Approval, error) {
	pol := w.Policy.WithDefaults()
	a := opened(w, pol, workflow.Now(ctx).UTC(), hooks.Remind != nil)
	g.current, g.wait, g.hooks, g.rechecks, g.recheck, g.changed = a, w, hooks, 0, false, false
	g.past = append(g.past, a)
	err := g.await(ctx, a, w, pol, hooks)
	a.SetOpen(false)
	if err == nil {
		g.change(ctx, a)
	}
	return a, err
}

// opened is the wait Await opens at now: the request and its hash, the
// timeline pol plans (a reminder only where there is one to send), and the
// quorum, two above the four-eyes threshold.
func opened(w Wait, pol Policy, now time.Time, remind bool) *Approval {
	a := &Approval{Request: w.Request, RequestSHA256: w.Request.SHA256(), RequestedAt: now,
		Stage: StageWaiting, Deadline: now.Add(pol.TTL), DueBy: w.DueBy, DueUnder: w.DueUnder}
	a.SetOpen(true)
	a.EscalatesAt, a.ExpiresAt = a.Deadline, a.Deadline.Add(pol.EscalationTTL)
	if pol.ReminderAt < 1 && remind {
		a.RemindAt = now.Add(time.Duration(float64(pol.TTL) * pol.ReminderAt))
	}
	if w.Trust != nil {
		a.Quorum = 1
		if w.Trust.FourEyesAboveMinor > 0 && w.Request.AmountMinor > w.Trust.FourEyesAboveMinor {
			a.Quorum = 2
		}
	}
	return a
}

// change tells the OnChange hook the wait's state at the next revision. A
// failure is logged, not the wait's: the queue is a projection, and the
// next change (or the healer) writes the whole state again.
func (g *Gate) change(ctx workflow.Context, a *Approval) {
	g.changed = false
	if g.hooks.OnChange == nil {
		return
	}
	g.rev++
	a.Rev = g.rev
	if err := g.hooks.OnChange(ctx, a); err != nil {
		workflow.GetLogger(ctx).Warn("approval queue not updated", "rev", a.Rev, "error", err)
	}
}

func (g *Gate) await(ctx workflow.Context, a *Approval, w Wait, pol Policy, hooks Hooks) error {
	if err := onStage(ctx, hooks, a); err != nil {
		return err
	}
	g.change(ctx, a)
	if !a.RemindAt.IsZero() {
		if done, err := g.until(ctx, a, a.RemindAt, w.NotAfter); done || err != nil {
			return err
		}
		// A failed notice does not stop the clock: the failure is in history.
		if err := hooks.Remind(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("reminder failed", "error", err)
		}
		a.Reminded = true
	}
	if done, err := g.until(ctx, a, a.Deadline, w.NotAfter); done || err != nil {
		return err
	}

	a.Stage, a.Deadline = StageEscalated, workflow.Now(ctx).UTC().Add(pol.EscalationTTL)
	a.ExpiresAt = a.Deadline
	if err := onStage(ctx, hooks, a); err != nil {
		return err
	}
	g.change(ctx, a)
	if hooks.Escalate != nil {
		if err := hooks.Escalate(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("escalation notice failed", "error", err)
		}
	}
	if done, err := g.until(ctx, a, a.Deadline, w.NotAfter); done || err != nil {
		return err
	}

	if pol.FinalOutcome == Hold {
		return g.overdue(ctx, a, w, hooks)
	}
	a.Expired = true
	if pol.FinalOutcome == Approve {
		a.Decision = &Decision{Verdict: Approve, Approver: "policy", Channel: "policy", Stage: a.Stage,
			Note:      "approved by the escalation policy's final outcome: nobody decided by the deadline",
			DecidedAt: workflow.Now(ctx).UTC(), Request: a.Request, RequestSHA256: a.RequestSHA256}
		a.Decision.BuildID, a.Decision.PolicyVersion = g.provenance(ctx)
	}
	return nil
}

// MaxHold bounds a wait held open with no age cap to end it: every wait
// ends, and a run's history cannot grow for ever.
const MaxHold = 5 * 365 * 24 * time.Hour

// overdue is the hold: nobody decided by the second deadline, and silence
// may not decide. The wait stays open with the supervisors (the stage
// stays escalated), flagged overdue, until a person decides or the run's
// age cap ends it (Capped).
func (g *Gate) overdue(ctx workflow.Context, a *Approval, w Wait, hooks Hooks) error {
	a.OverdueAt = workflow.Now(ctx).UTC()
	notAfter := w.NotAfter
	if notAfter.IsZero() {
		notAfter = a.OverdueAt.Add(MaxHold)
	}
	a.Deadline, a.ExpiresAt = notAfter, notAfter
	if err := onStage(ctx, hooks, a); err != nil {
		return err
	}
	g.change(ctx, a)
	if hooks.Overdue != nil {
		// A failed notice does not end the hold: the failure is in history.
		if err := hooks.Overdue(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("overdue notice failed", "error", err)
		}
	}
	_, err := g.until(ctx, a, notAfter.Add(time.Nanosecond), notAfter)
	return err
}

// until waits for a decision until t, or notAfter if that comes first. It
// reports whether the wait is over (decided, or capped).
func (g *Gate) until(ctx workflow.Context, a *Approval, t, notAfter time.Time) (bool, error) {
	capped := !notAfter.IsZero() && notAfter.Before(t)
	if capped {
		t = notAfter
	}
	for {
		if a.Decision == nil && !g.recheck && !g.changed {
			if left := t.Sub(workflow.Now(ctx)); left > 0 {
				woke, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return a.Decision != nil || g.recheck || g.changed })
				if err != nil {
					return true, err
				}
				if !woke && g.hooks.TimerFired != nil {
					g.hooks.TimerFired()
				}
			}
		}
		if a.Decision != nil {
			return true, nil
		}
		if g.changed {
			// A vote or a hand-off that leaves the wait open: the queue
			// learns it, and the wait goes on to the same deadline.
			g.change(ctx, a)
			continue
		}
		if !g.recheck || g.hooks.Recheck == nil {
			break
		}
		// The claim changed in the system of record while nobody decided:
		// read it again; a request it no longer matches ends the wait.
		g.recheck = false
		g.rechecks++
		why, err := g.hooks.Recheck(ctx, a)
		if err != nil {
			return true, err
		}
		if a.Decision != nil {
			// A decision came while the claim was read: the read after a
			// decision judges it.
			return true, nil
		}
		if why != "" {
			a.Voided, a.Interrupted = why, true
			return true, nil
		}
	}
	if capped {
		a.Capped = true
		return true, nil
	}
	return false, nil
}

func onStage(ctx workflow.Context, hooks Hooks, a *Approval) error {
	if hooks.OnStage == nil {
		return nil
	}
	return hooks.OnStage(ctx, a.Stage, a.Deadline)
}
