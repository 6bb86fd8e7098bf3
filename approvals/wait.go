package approvals

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Approval is one wait: the request, where it stands, and how it ended.
// The workflow's status query reports it as is.
type Approval struct {
	Request       Request   `json:"request"`
	RequestSHA256 string    `json:"request_sha256"`
	RequestedAt   time.Time `json:"requested_at"`
	Stage         Stage     `json:"stage"`
	Deadline      time.Time `json:"deadline"`
	Decision      *Decision `json:"decision,omitempty"`
	Expired       bool      `json:"expired,omitempty"`
	open          bool
}

// Hooks let the workflow act on a wait's transitions.
type Hooks struct {
	// OnStage runs when the wait enters a stage: publish it (search
	// attributes) so operators can find waits by stage and deadline.
	OnStage func(ctx workflow.Context, stage Stage, deadline time.Time) error
	// Escalate runs once when the TTL expires (notify the supervisors).
	Escalate func(ctx workflow.Context, a *Approval) error
}

// Gate receives decisions for a workflow's whole life, so a decision that
// arrives when nothing waits is recorded and refused rather than left in a
// channel to approve a request its sender never saw.
type Gate struct {
	current  *Approval
	attempts []Attempt
	dropped  int
}

// maxAttempts bounds what a flood of bad signals can add to workflow state.
const maxAttempts = 100

// Listen starts the gate. Call it once, at the start of the workflow.
func Listen(ctx workflow.Context) *Gate {
	g := &Gate{}
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
	return g
}

// Current is the wait in progress, or the last one; nil if none began.
func (g *Gate) Current() *Approval { return g.current }

// Attempts is the audit trail: every decision attempt, in order.
func (g *Gate) Attempts() []Attempt { return g.attempts }

// Dropped counts attempts beyond the trail's bound (still refused).
func (g *Gate) Dropped() int { return g.dropped }

// receive takes the payload raw, so that no payload, however malformed, is
// dropped silently by the SDK's decoder: it is parsed here and recorded.
func (g *Gate) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string, v Verdict) {
	var raw converter.RawValue
	c.ReceiveAsync(&raw)
	in, raw64, err := parse(raw)
	at := Attempt{At: workflow.Now(ctx).UTC(), Channel: "signal", Name: name, Approver: in.Approver}
	if err == nil {
		err = g.decide(ctx, v, in, "signal")
	}
	if err != nil {
		at.Refusal, at.Payload = err.Error(), raw64
		workflow.GetLogger(ctx).Warn("decision refused", "signal", name, "approver", in.Approver, "refusal", at.Refusal)
	} else {
		at.Accepted = true
		workflow.GetLogger(ctx).Info("decision accepted", "signal", name, "approver", in.Approver)
	}
	g.record(at)
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
// returns why it is refused, or nil. One function for every channel.
func (g *Gate) Check(v Verdict, in Input) error {
	a := g.current
	switch {
	case a == nil || !a.open:
		return fmt.Errorf("claim is not waiting for a decision")
	case strings.TrimSpace(in.Approver) == "":
		return fmt.Errorf("approver is required")
	case len(in.Approver) > 128:
		return fmt.Errorf("approver is longer than 128 characters")
	case v == Reject && strings.TrimSpace(in.Reason) == "":
		return fmt.Errorf("a rejection needs a reason")
	case in.PayloadSHA256 != "" && !hashPattern.MatchString(in.PayloadSHA256):
		return fmt.Errorf("payload_sha256 must be 12 to 64 lowercase hex digits")
	case in.PayloadSHA256 != "" && !strings.HasPrefix(a.RequestSHA256, in.PayloadSHA256):
		return fmt.Errorf("stale decision: it cites request %s, the request awaiting decision is %s", in.PayloadSHA256, a.RequestSHA256[:12])
	}
	return nil
}

func (g *Gate) decide(ctx workflow.Context, v Verdict, in Input, channel string) error {
	if err := g.Check(v, in); err != nil {
		return err
	}
	a := g.current
	a.Decision = &Decision{Verdict: v, Approver: in.Approver, Note: in.Note, Reason: in.Reason, Channel: channel,
		Stage: a.Stage, DecidedAt: workflow.Now(ctx).UTC(), Request: a.Request, RequestSHA256: a.RequestSHA256,
		HashBound: in.PayloadSHA256 != ""}
	a.open = false
	return nil
}

// Await parks the workflow until a decision, escalating at the TTL and
// expiring at the second deadline. It always ends: with a Decision, or
// Expired. The timers are durable; the worker holds nothing meanwhile.
func (g *Gate) Await(ctx workflow.Context, req Request, pol Policy, hooks Hooks) (*Approval, error) {
	pol = pol.WithDefaults()
	now := workflow.Now(ctx).UTC()
	a := &Approval{Request: req, RequestSHA256: req.SHA256(), RequestedAt: now, Stage: StageWaiting, Deadline: now.Add(pol.TTL), open: true}
	g.current = a
	defer func() { a.open = false }()
	decided := func() bool { return a.Decision != nil }

	if err := onStage(ctx, hooks, a); err != nil {
		return a, err
	}
	ok, err := workflow.AwaitWithTimeout(ctx, pol.TTL, decided)
	if err != nil || ok {
		return a, err
	}

	a.Stage, a.Deadline = StageEscalated, workflow.Now(ctx).UTC().Add(pol.EscalationTTL)
	if err := onStage(ctx, hooks, a); err != nil {
		return a, err
	}
	if hooks.Escalate != nil {
		// A failed escalation notice does not stop the clock: the claim
		// still expires at its deadline, and the failure is in history.
		if err := hooks.Escalate(ctx, a); err != nil {
			workflow.GetLogger(ctx).Error("escalation notice failed", "error", err)
		}
	}
	if decided() {
		return a, nil
	}
	if left := a.Deadline.Sub(workflow.Now(ctx)); left > 0 {
		if ok, err = workflow.AwaitWithTimeout(ctx, left, decided); err != nil || ok {
			return a, err
		}
	}
	a.Expired = true
	return a, nil
}

func onStage(ctx workflow.Context, hooks Hooks, a *Approval) error {
	if hooks.OnStage == nil {
		return nil
	}
	return hooks.OnStage(ctx, a.Stage, a.Deadline)
}
