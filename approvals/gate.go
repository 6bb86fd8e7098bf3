package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// The gate: the approve and reject signals and the decide update, received
// for the workflow's whole life, each attempt recorded (bounded) and applied.

// Gate receives decisions for a workflow's whole life, so a decision that
// arrives when nothing waits is recorded and refused rather than left in a
// channel to approve a request its sender never saw.
type Gate struct {
	current  *Approval
	past     []*Approval
	wait     Wait
	attempts []Attempt
	refused  int
	dropped  int
	// used holds the jti of every receipt accepted: each is accepted once.
	used map[string]bool
	// hooks are the current wait's; recheck asks it to read the claim
	// again (the changed signal), at most MaxRechecks times a wait.
	hooks    Hooks
	recheck  bool
	rechecks int
	// changed: a vote or hand-off left the open wait open; the wait tells
	// its OnChange hook (only when there is one). rev numbers the changes.
	changed bool
	rev     int64
	// stamp: attempts and decisions name their build and the policy
	// version (Stamp).
	stamp         bool
	policyVersion string
	build         func(workflow.Context) string
	// claimID is the run's claim (its workflow ID), for refusing a
	// receipt for another claim before any wait names it.
	claimID string
}

// MaxRechecks bounds how often one wait reads the claim again on the
// changed signal: anyone may send it, and each read is a step in history.
// Past it, changes are still caught by the read after a decision.
const MaxRechecks = 8

// maxRefused bounds how many refused attempts the trail keeps in full: a
// flood of bad signals cannot grow the workflow's state, its result or its
// audit record past a few tens of KiB. Later ones are counted (Dropped).
// Accepted attempts are always kept: a decision per approver and at most
// MaxHandoffs hand-offs per approval.
const maxRefused = 32

// Listen starts the gate: the approve and reject signals and the decide
// update. Call it once, at the start of the workflow.
func Listen(ctx workflow.Context) (*Gate, error) {
	g := &Gate{used: map[string]bool{}, claimID: workflow.GetInfo(ctx).WorkflowExecution.ID}
	err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateDecide, g.handleDecide, workflow.UpdateHandlerOptions{
		Validator: g.validateDecide,
	})
	if err != nil {
		return nil, err
	}
	workflow.Go(ctx, func(ctx workflow.Context) {
		approve := workflow.GetSignalChannel(ctx, SignalApprove)
		reject := workflow.GetSignalChannel(ctx, SignalReject)
		changed := workflow.GetSignalChannel(ctx, SignalChanged)
		for {
			s := workflow.NewSelector(ctx)
			s.AddReceive(approve, func(c workflow.ReceiveChannel, _ bool) { g.receive(ctx, c, SignalApprove, Approve) })
			s.AddReceive(reject, func(c workflow.ReceiveChannel, _ bool) { g.receive(ctx, c, SignalReject, Reject) })
			s.AddReceive(changed, func(c workflow.ReceiveChannel, _ bool) {
				var ignored converter.RawValue
				c.ReceiveAsync(&ignored)
				if g.current != nil && g.current.Open() && g.hooks.Recheck != nil && g.rechecks < MaxRechecks {
					g.recheck = true
				}
			})
			s.Select(ctx)
		}
	})
	return g, nil
}

// Stamp has every decision attempt from now on, accepted or refused, and
// every decision (a policy's final outcome included) name the build of the
// worker that processed the workflow task it was handled in, and the
// version of the insurer's policy the run follows. build names that build;
// nil is workflow.GetInfo(ctx).GetCurrentBuildID(), which on replay is the
// build the history records for that task, so a replay names the same one.
// (The test environment has no build: tests name one.) A run that never
// calls Stamp records neither, and its records stay as they were.
func (g *Gate) Stamp(policyVersion string, build func(workflow.Context) string) {
	if build == nil {
		build = func(ctx workflow.Context) string { return workflow.GetInfo(ctx).GetCurrentBuildID() }
	}
	g.stamp, g.policyVersion, g.build = true, policyVersion, build
}

// provenance is what Stamp has attempts and decisions name: the build and
// the policy version (both empty without Stamp).
func (g *Gate) provenance(ctx workflow.Context) (buildID, policyVersion string) {
	if !g.stamp {
		return "", ""
	}
	return g.build(ctx), g.policyVersion
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

// Dropped counts refused attempts beyond the trail's bound (still refused).
func (g *Gate) Dropped() int { return g.dropped }

// receive takes the payload raw, so that no payload, however malformed, is
// dropped silently by the SDK's decoder: it is parsed here and recorded.
func (g *Gate) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string, v Verdict) {
	var raw converter.RawValue
	c.ReceiveAsync(&raw)
	in, shown, err := parse(raw)
	at := Attempt{Channel: "signal", Name: name, Decision: v}
	at.BuildID, at.PolicyVersion = g.provenance(ctx)
	if err != nil {
		at.At, at.Code, at.Refusal, at.Payload = workflow.Now(ctx).UTC(), CodeMalformed, trim(err.Error()), shown
		g.record(at)
		workflow.GetLogger(ctx).Warn("decision refused", "signal", name, "refusal", at.Refusal)
		return
	}
	if _, err := g.decide(ctx, at, v, in); err != nil {
		workflow.GetLogger(ctx).Warn("decision refused", "signal", name, "code", RefusalCode(err), "refusal", trim(err.Error()))
	}
}

// verdict is the verdict a decide update asks for: none ("") when its
// decision field is empty, so the receipt's (a plain decision without one
// is refused by the rules); a field that is neither approve nor reject is
// an error.
func (in DecideInput) verdict() (Verdict, error) {
	switch in.Decision {
	case Approve, Reject, "":
		return in.Decision, nil
	}
	return "", refuse(CodeMalformed, "decision must be %q or %q", Approve, Reject)
}

// CheckDecide is the validator's rule book for a decide update, whose
// first refusal is the real cause: an unsigned body is refused as
// unsigned, a receipt for another claim as that, an approver past their
// limit as over it, before what its decision field or anything else
// gets wrong.
func (g *Gate) CheckDecide(in DecideInput, now time.Time) error {
	v, bad := in.verdict()
	if _, err := g.check(v, in.Input(), now); err != nil {
		if first := g.firstCause(in.Input(), now); first != nil {
			return first
		}
		return err
	}
	return bad
}

func (g *Gate) validateDecide(ctx workflow.Context, in DecideInput) error {
	return answer(g.CheckDecide(in, workflow.Now(ctx)))
}

// answer is how a refused update reads to whoever sent it: the sentence,
// its code as the error's type, and not retryable (the same decision is
// refused again). A client reads the code back with RefusalCode.
func answer(err error) error {
	var r *Refusal
	if errors.As(err, &r) {
		return temporal.NewNonRetryableApplicationError(r.Msg, r.Code, nil)
	}
	return err
}

func (g *Gate) handleDecide(ctx workflow.Context, in DecideInput) (Decision, error) {
	// Re-checked: another decision may have landed between validation and
	// this handler.
	v, err := in.verdict()
	if err != nil {
		return Decision{}, err
	}
	at := Attempt{Channel: "update", Name: UpdateDecide, Decision: in.Decision}
	at.BuildID, at.PolicyVersion = g.provenance(ctx)
	d, err := g.decide(ctx, at, v, in.Input())
	if err != nil {
		return Decision{}, err
	}
	return *d, nil
}

func (g *Gate) record(at Attempt) {
	if at.Accepted {
		g.attempts = append(g.attempts, at)
		return
	}
	if g.refused >= maxRefused {
		g.dropped++
		return
	}
	g.refused++
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
	shown := string(data[:min(len(data), maxShown)])
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

// maxShown bounds the raw payload a refused attempt keeps.
const maxShown = 128

// trimText bounds free text kept in the trail.
func trimText(s string) string {
	if len(s) > 256 {
		return strings.ToValidUTF8(s[:256], "") + "…"
	}
	return s
}

// decide checks and applies a decision, recording the attempt either way.
func (g *Gate) decide(ctx workflow.Context, at Attempt, v Verdict, in Input) (*Decision, error) {
	now := workflow.Now(ctx).UTC()
	at.At, at.Approver, at.Reason, at.PayloadSHA256 = now, trim(in.Approver), trimText(in.Reason), trim(in.PayloadSHA256)
	if in.Receipt != "" {
		kid, r, _ := PeekReceipt(in.Receipt) // what it claims, for the trail
		at.Approver, at.KeyID, at.ReceiptID, at.Reason = trim(r.Subject), trim(kid), trim(r.ID), trimText(r.Reason)
		if at.Decision == "" {
			at.Decision = r.Verdict
		}
	}
	c, err := g.check(v, in, now)
	at.Role = string(c.approver.Role)
	if err != nil {
		at.Code, at.Refusal = RefusalCode(err), trimText(err.Error())
		g.record(at)
		return nil, err
	}
	at.Accepted, at.Decision = true, c.verdict
	g.record(at)
	a := g.current
	if c.verdict == Handoff {
		h := HandedOn{From: c.approver.ID, To: c.verified.Receipt.AssignTo, Note: c.note, At: now, ReceiptID: c.verified.Receipt.ID}
		a.Handoffs = append(a.Handoffs, h)
		g.used[h.ReceiptID] = true
		g.changed = g.hooks.OnChange != nil
		workflow.GetLogger(ctx).Info("request handed on", "from", h.From, "to", h.To)
		return &Decision{Verdict: Handoff, Approver: h.From, Role: string(c.approver.Role), Note: c.note, Channel: at.Channel,
			Stage: a.Stage, DecidedAt: now, Request: a.Request, RequestSHA256: a.RequestSHA256, HashBound: true, Proof: c.proof,
			KeyID: c.verified.Signer.Key.ID, VouchedBy: c.verified.Signer.Service, ReceiptID: h.ReceiptID, Receipt: c.receipt,
			BuildID: at.BuildID, PolicyVersion: at.PolicyVersion}, nil
	}
	d := Decision{Verdict: c.verdict, Approver: c.approver.ID, Role: string(c.approver.Role), Note: c.note, Reason: c.reason,
		Channel: at.Channel, Stage: a.Stage, DecidedAt: now, Request: a.Request, RequestSHA256: a.RequestSHA256,
		HashBound: c.hashBound, Proof: c.proof, BuildID: at.BuildID, PolicyVersion: at.PolicyVersion}
	if c.verified != nil {
		d.KeyID, d.VouchedBy, d.ReceiptID, d.Receipt = c.verified.Signer.Key.ID, c.verified.Signer.Service, c.verified.Receipt.ID, c.receipt
		g.used[c.verified.Receipt.ID] = true
	}
	if c.proof != ProofNone {
		d.AmountMinor = c.amount
	}
	if c.amount < a.Request.AmountMinor && c.verdict == Approve {
		approved := a.Request
		approved.AmountMinor, approved.Amount = c.amount, claim.FormatAmount(c.amount, approved.Currency)
		approved.Reasons = append(slices.Clip(approved.Reasons), "approved at a lower amount by "+c.approver.ID+": "+c.reason)
		d.Approved, d.ApprovedSHA256 = &approved, approved.SHA256()
	}
	if c.proof != ProofNone && c.verdict == Approve {
		a.Votes = append(a.Votes, d)
	}
	if c.verdict == Approve && len(a.Votes) < a.Quorum {
		g.changed = g.hooks.OnChange != nil
		workflow.GetLogger(ctx).Info("approval recorded; the quorum needs more", "approver", d.Approver, "votes", len(a.Votes), "quorum", a.Quorum)
		return &d, nil
	}
	if c.verdict == Approve && c.proof != ProofNone {
		d.AmountMinor = a.PayoutMinor()
	}
	a.Decision = &d
	a.SetOpen(false)
	workflow.GetLogger(ctx).Info("decision accepted", "channel", at.Channel, "approver", d.Approver, "verdict", d.Verdict, "proof", d.Proof)
	return a.Decision, nil
}
