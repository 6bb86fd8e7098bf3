package approvals

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// Approval is one wait: the request, where it stands, and how it ended.
// The workflow's status query reports it as is.
type Approval struct {
	Request       Request   `json:"request"`
	RequestSHA256 string    `json:"request_sha256"`
	RequestedAt   time.Time `json:"requested_at"`
	Stage         Stage     `json:"stage"`
	Deadline      time.Time `json:"deadline"`
	Reminded      bool      `json:"reminded,omitempty"`
	Decision      *Decision `json:"decision,omitempty"`
	// Expired: nobody decided by the second deadline; the policy's final
	// outcome applied (a Decision by "policy" when it approves).
	Expired bool `json:"expired,omitempty"`
	// Capped: the run's age cap ended the wait first.
	Capped bool `json:"capped,omitempty"`
	// Voided says why an accepted approval no longer holds (the claim
	// changed while it waited).
	Voided string `json:"voided,omitempty"`
	open   bool
}

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
	NotAfter time.Time
}

// Hooks let the workflow act on a wait's transitions.
type Hooks struct {
	// OnStage runs when the wait enters a stage: publish it (search
	// attributes) so operators can find waits by stage and deadline.
	OnStage func(ctx workflow.Context, stage Stage, deadline time.Time) error
	// Remind runs once at Policy.ReminderAt of the TTL (nudge the adjusters).
	Remind func(ctx workflow.Context, a *Approval) error
	// Escalate runs once when the TTL expires (notify the supervisors).
	Escalate func(ctx workflow.Context, a *Approval) error
}

// Gate receives decisions for a workflow's whole life, so a decision that
// arrives when nothing waits is recorded and refused rather than left in a
// channel to approve a request its sender never saw.
type Gate struct {
	current  *Approval
	past     []*Approval
	wait     Wait
	attempts []Attempt
	dropped  int
}

// maxAttempts bounds what a flood of bad signals can add to workflow state.
const maxAttempts = 100

// Listen starts the gate: the approve and reject signals and the decide
// update. Call it once, at the start of the workflow.
func Listen(ctx workflow.Context) (*Gate, error) {
	g := &Gate{}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, g.handleDecide, workflow.UpdateHandlerOptions{
		Validator: g.validateDecide,
	})
	if err != nil {
		return nil, err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		approve := workflow.GetSignalChannel(ctx, SignalApprove)
		reject := workflow.GetSignalChannel(ctx, SignalReject)
		for {
			s := workflow.NewSelector(ctx)
			s.AddReceive(approve, func(c workflow.ReceiveChannel, _ bool) { g.receive(ctx, c, SignalApprove, Approve) })
			s.AddReceive(reject, func(c workflow.ReceiveChannel, _ bool) { g.receive(ctx, c, SignalReject, Reject) })
			s.Select(ctx)
		}
	})
	return g, nil
}

// Current is the wait in progress, or the last one; nil if none began.
func (g *Gate) Current() *Approval { return g.current }

// All lists every wait of the run, oldest first (a wait is voided and a new
// one raised when the claim changes while waiting).
func (g *Gate) All() []*Approval { return g.past }

// Attempts is the audit trail: every decision attempt that reached the
// workflow, in order. (Updates refused by the validator never enter history;
// the worker records those in the claims store.)
func (g *Gate) Attempts() []Attempt { return g.attempts }

// Dropped counts attempts beyond the trail's bound (still refused).
func (g *Gate) Dropped() int { return g.dropped }

// receive takes the payload raw, so that no payload, however malformed, is
// dropped silently by the SDK's decoder: it is parsed here and recorded.
func (g *Gate) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string, v Verdict) {
	var raw converter.RawValue
	c.ReceiveAsync(&raw)
	in, shown, err := parse(raw)
	at := Attempt{Channel: "signal", Name: name, Decision: v}
	if err != nil {
		at.At, at.Refusal, at.Payload = workflow.Now(ctx).UTC(), err.Error(), shown
		g.record(at)
		workflow.GetLogger(ctx).Warn("decision refused", "signal", name, "refusal", at.Refusal)
		return
	}
	if _, err := g.decide(ctx, at, v, in); err != nil {
		workflow.GetLogger(ctx).Warn("decision refused", "signal", name, "approver", in.Approver, "refusal", err.Error())
	}
}

func (g *Gate) validateDecide(ctx workflow.Context, in DecideInput) error {
	if in.Decision != Approve && in.Decision != Reject {
		return fmt.Errorf("decision must be %q or %q", Approve, Reject)
	}
	_, err := g.Check(in.Decision, in.Input())
	return err
}

func (g *Gate) handleDecide(ctx workflow.Context, in DecideInput) (Decision, error) {
	// Re-checked: another decision may have landed between validation and
	// this handler.
	d, err := g.decide(ctx, Attempt{Channel: "update", Name: UpdateDecide, Decision: in.Decision}, in.Decision, in.Input())
	if err != nil {
		return Decision{}, err
	}
	return *d, nil
}

func (g *Gate) record(at Attempt) {
	if len(g.attempts) >= maxAttempts {
		g.dropped++
		return
	}
	g.attempts = append(g.attempts, at)
}

// parse decodes a signal payload into Input, strictly: unknown fields are
// refused so a misspelt "aprover" is reported, not ignored.
func parse(raw converter.RawValue) (Input, string, error) {
	var in Input
	p := raw.Payload()
	if p == nil || len(p.GetData()) == 0 {
		return in, "", fmt.Errorf("empty payload: send JSON like {\"approver\":\"adjuster-17\"}")
	}
	data := p.GetData()
	shown := string(data[:min(len(data), 256)])
	if enc := string(p.GetMetadata()[converter.MetadataEncoding]); enc != converter.MetadataEncodingJSON {
		return in, shown, fmt.Errorf("payload encoding %q, want %s", enc, converter.MetadataEncodingJSON)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Input{}, shown, fmt.Errorf("malformed payload: %v", err)
	}
	return in, shown, nil
}

var hashPattern = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// Check applies the decision rules to an input against the current wait and
// says who the approver is, or why the decision is refused. It is the one
// rule book for signals, the update's validator and its handler.
func (g *Gate) Check(v Verdict, in Input) (authority.Approver, error) {
	a := g.current
	var none authority.Approver
	if a == nil || !a.open {
		return none, fmt.Errorf("claim is not waiting for a decision")
	}
	if strings.TrimSpace(in.Approver) == "" {
		return none, fmt.Errorf("approver is required")
	}
	ap, ok := g.wait.Approvers.Find(in.Approver)
	if !ok {
		return none, fmt.Errorf("unknown approver %q", trim(in.Approver))
	}
	for _, self := range g.wait.Self {
		if self != "" && (strings.EqualFold(self, ap.Email) || strings.EqualFold(self, ap.ID)) {
			return ap, fmt.Errorf("self-approval: %s is the claimant", ap.ID)
		}
	}
	if a.Stage == StageEscalated && ap.Role != authority.Supervisor {
		return ap, fmt.Errorf("the claim is escalated: a supervisor must decide, %s is an %s", ap.ID, ap.Role)
	}
	req := a.Request
	if limit, ok := ap.Limits[req.Currency]; !ok || limit < req.AmountMinor {
		return ap, fmt.Errorf("over limit: %s may decide up to %s %s, the request is %s", ap.ID,
			formatLimit(limit, ok, req.Currency), strings.ToUpper(req.Currency), req.Amount)
	}
	switch {
	case v == Reject && strings.TrimSpace(in.Reason) == "":
		return ap, fmt.Errorf("a rejection needs a reason")
	case in.PayloadSHA256 != "" && !hashPattern.MatchString(in.PayloadSHA256):
		return ap, fmt.Errorf("payload_sha256 must be 12 to 64 lowercase hex digits")
	case in.PayloadSHA256 != "" && !strings.HasPrefix(a.RequestSHA256, in.PayloadSHA256):
		return ap, fmt.Errorf("stale decision: it cites request %s, the request awaiting decision is %s", trim(in.PayloadSHA256), a.RequestSHA256[:12])
	}
	return ap, nil
}

func trim(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func formatLimit(limit int64, ok bool, currency string) string {
	if !ok {
		return "nothing in"
	}
	return claim.FormatAmount(limit, currency)
}

// decide checks and applies a decision, recording the attempt either way.
func (g *Gate) decide(ctx workflow.Context, at Attempt, v Verdict, in Input) (*Decision, error) {
	at.At, at.Approver, at.Reason, at.PayloadSHA256 = workflow.Now(ctx).UTC(), trim(in.Approver), in.Reason, in.PayloadSHA256
	ap, err := g.Check(v, in)
	at.Role = string(ap.Role)
	if err != nil {
		at.Refusal = err.Error()
		g.record(at)
		return nil, err
	}
	at.Accepted = true
	g.record(at)
	a := g.current
	a.Decision = &Decision{Verdict: v, Approver: in.Approver, Role: string(ap.Role), Note: in.Note, Reason: in.Reason,
		Channel: at.Channel, Stage: a.Stage, DecidedAt: at.At, Request: a.Request, RequestSHA256: a.RequestSHA256,
		HashBound: in.PayloadSHA256 != ""}
	a.open = false
	workflow.GetLogger(ctx).Info("decision accepted", "channel", at.Channel, "approver", in.Approver, "verdict", v)
	return a.Decision, nil
}

// Await parks the workflow until a decision, reminding the adjusters, then
// escalating at the TTL and applying the policy's final outcome at the
// second deadline. It always ends: with a Decision, Expired, or Capped. The
// timers are durable; the worker holds nothing meanwhile.
func (g *Gate) Await(ctx workflow.Context, w Wait, hooks Hooks) (*Approval, error) {
	pol := w.Policy.WithDefaults()
	now := workflow.Now(ctx).UTC()
	a := &Approval{Request: w.Request, RequestSHA256: w.Request.SHA256(), RequestedAt: now,
		Stage: StageWaiting, Deadline: now.Add(pol.TTL), open: true}
	g.current, g.wait = a, w
	g.past = append(g.past, a)
	defer func() { a.open = false }()

	if err := onStage(ctx, hooks, a); err != nil {
		return a, err
	}
	if pol.ReminderAt < 1 && hooks.Remind != nil {
		at := now.Add(time.Duration(float64(pol.TTL) * pol.ReminderAt))
		if done, err := g.until(ctx, a, at, w.NotAfter); done || err != nil {
			return a, err
		}
		// A failed notice does not stop the clock: the failure is in history.
		if err := hooks.Remind(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("reminder failed", "error", err)
		}
		a.Reminded = true
	}
	if done, err := g.until(ctx, a, a.Deadline, w.NotAfter); done || err != nil {
		return a, err
	}

	a.Stage, a.Deadline = StageEscalated, workflow.Now(ctx).UTC().Add(pol.EscalationTTL)
	if err := onStage(ctx, hooks, a); err != nil {
		return a, err
	}
	if hooks.Escalate != nil {
		if err := hooks.Escalate(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("escalation notice failed", "error", err)
		}
	}
	if done, err := g.until(ctx, a, a.Deadline, w.NotAfter); done || err != nil {
		return a, err
	}

	a.Expired = true
	if pol.FinalOutcome == Approve {
		a.Decision = &Decision{Verdict: Approve, Approver: "policy", Channel: "policy", Stage: a.Stage,
			Note:      "approved by the escalation policy's final outcome: nobody decided by the deadline",
			DecidedAt: workflow.Now(ctx).UTC(), Request: a.Request, RequestSHA256: a.RequestSHA256}
	}
	return a, nil
}

// until waits for a decision until t, or notAfter if that comes first. It
// reports whether the wait is over (decided, or capped).
func (g *Gate) until(ctx workflow.Context, a *Approval, t, notAfter time.Time) (bool, error) {
	capped := !notAfter.IsZero() && notAfter.Before(t)
	if capped {
		t = notAfter
	}
	if a.Decision == nil {
		if left := t.Sub(workflow.Now(ctx)); left > 0 {
			if _, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return a.Decision != nil }); err != nil {
				return true, err
			}
		}
	}
	if a.Decision != nil {
		return true, nil
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
