package approvals

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
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
	// Quorum is how many approvers must agree: 2 above the four-eyes
	// threshold. Votes are the approvals accepted so far; the wait goes on
	// until Quorum of them agree (a rejection ends it at once).
	Quorum int        `json:"quorum,omitempty"`
	Votes  []Decision `json:"votes,omitempty"`
	// The wait's timeline, as planned when it opened: the reminder (zero
	// when there is none), the escalation to supervisors, and the final
	// outcome. Deadline is the current stage's.
	RemindAt    time.Time `json:"remind_at,omitempty"`
	EscalatesAt time.Time `json:"escalates_at,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitempty"`
	// Handoffs record requests handed to a named colleague; the deadline
	// keeps running.
	Handoffs []HandedOn `json:"handoffs,omitempty"`
	open     bool
}

// HandedOn records an approver handing the request to a named colleague.
type HandedOn struct {
	From      string    `json:"from"`
	To        string    `json:"to"`
	Note      string    `json:"note,omitempty"`
	At        time.Time `json:"at"`
	ReceiptID string    `json:"jti"`
}

// AssignedTo is who the request was last handed to, if anyone.
func (a *Approval) AssignedTo() string {
	if n := len(a.Handoffs); n > 0 {
		return a.Handoffs[n-1].To
	}
	return ""
}

// PayoutMinor is what the approval lets the run pay: the least amount any
// of its approvers approved (an approver may lower it, never raise it).
func (a *Approval) PayoutMinor() int64 {
	amount := a.Request.AmountMinor
	for _, v := range a.Votes {
		if v.AmountMinor > 0 && v.AmountMinor < amount {
			amount = v.AmountMinor
		}
	}
	return amount
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
	// Excluded lists approvers who may not decide this request: whoever
	// amended the claim does not approve it.
	Excluded []string
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
	refused  int
	dropped  int
	// used holds the jti of every receipt accepted: each is accepted once.
	used map[string]bool
}

// maxRefused bounds how many refused attempts the trail keeps in full: a
// flood of bad signals cannot grow the workflow's state, its result or its
// audit record past a few tens of KiB. Later ones are counted (Dropped).
// Accepted attempts are always kept: a decision per approver and at most
// MaxHandoffs hand-offs per approval.
const maxRefused = 32

// Listen starts the gate: the approve and reject signals and the decide
// update. Call it once, at the start of the workflow.
func Listen(ctx workflow.Context) (*Gate, error) {
	g := &Gate{used: map[string]bool{}}
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

// Dropped counts refused attempts beyond the trail's bound (still refused).
func (g *Gate) Dropped() int { return g.dropped }

// receive takes the payload raw, so that no payload, however malformed, is
// dropped silently by the SDK's decoder: it is parsed here and recorded.
func (g *Gate) receive(ctx workflow.Context, c workflow.ReceiveChannel, name string, v Verdict) {
	var raw converter.RawValue
	c.ReceiveAsync(&raw)
	in, shown, err := parse(raw)
	at := Attempt{Channel: "signal", Name: name, Decision: v}
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

// verdictOf is the verdict a decide update asks for: the receipt's when
// it carries one (the update's own field may then only repeat it).
func (in DecideInput) verdict() (Verdict, error) {
	switch {
	case in.Decision == Approve || in.Decision == Reject:
		return in.Decision, nil
	case in.Decision == "" && in.Receipt != "":
		return "", nil
	}
	return "", refuse(CodeMalformed, "decision must be %q or %q", Approve, Reject)
}

func (g *Gate) validateDecide(ctx workflow.Context, in DecideInput) error {
	v, err := in.verdict()
	if err != nil {
		return err
	}
	_, err = g.check(v, in.Input(), workflow.Now(ctx))
	return err
}

func (g *Gate) handleDecide(ctx workflow.Context, in DecideInput) (Decision, error) {
	// Re-checked: another decision may have landed between validation and
	// this handler.
	v, err := in.verdict()
	if err != nil {
		return Decision{}, err
	}
	d, err := g.decide(ctx, Attempt{Channel: "update", Name: UpdateDecide, Decision: in.Decision}, v, in.Input())
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

var hashPattern = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

// maxShown bounds the raw payload a refused attempt keeps.
const maxShown = 128

// candidate is a decision that passed the rules, ready to apply.
type candidate struct {
	approver  authority.Approver
	verdict   Verdict
	amount    int64 // the payout approved
	reason    string
	note      string
	hashBound bool
	proof     string
	verified  *Verified
	receipt   string
}

// Check applies the decision rules to an input against the current wait and
// says who the approver is, or why the decision is refused. It is the one
// rule book for signals, the update's validator and its handler.
func (g *Gate) Check(v Verdict, in Input, now time.Time) (authority.Approver, error) {
	c, err := g.check(v, in, now)
	return c.approver, err
}

func (g *Gate) check(v Verdict, in Input, now time.Time) (candidate, error) {
	a := g.current
	if a == nil || !a.open {
		return candidate{}, refuse(CodeNotWaiting, "claim is not waiting for a decision")
	}
	if g.wait.Trust == nil {
		return g.checkPlain(v, in, ProofNone)
	}
	if len(in.Reason) > MaxTextBytes || len(in.Note) > MaxTextBytes || len(in.Approver) > authority.MaxIDLen {
		return candidate{}, refuse(CodeTooLarge, "approver may be at most %d bytes, reason and note %d", authority.MaxIDLen, MaxTextBytes)
	}
	if in.Receipt == "" {
		if !g.wait.Trust.AllowUnsigned {
			return candidate{}, refuse(CodeUnsigned, "unsigned: a decision needs a signed receipt, {\"receipt\":\"…\"} (issue one with claimsctl receipt); a typed approver name proves nothing")
		}
		return g.checkPlain(v, in, ProofUnauthenticated)
	}
	if in.Approver != "" || in.Reason != "" || in.Note != "" || in.PayloadSHA256 != "" {
		return candidate{}, refuse(CodeMalformed, "a decision with a receipt is what the receipt says: send {\"receipt\":\"…\"} alone")
	}
	ver, err := VerifyReceipt(in.Receipt, authority.Book{Approvers: g.wait.Approvers, Services: g.wait.Trust.Services},
		g.wait.Trust.Audience, now, g.wait.Trust.ReceiptMaxTTL)
	if err != nil {
		return candidate{}, err
	}
	r, req := ver.Receipt, a.Request
	switch {
	case r.ClaimID != req.ClaimID:
		return candidate{}, refuse(CodeOtherClaim, "receipt is for claim %s, not %s", trim(r.ClaimID), req.ClaimID)
	case v != "" && r.Verdict != v:
		return candidate{}, refuse(CodeWrongVerdict, "receipt says %s; it cannot %s", r.Verdict, v)
	case g.used[r.ID]:
		return candidate{}, refuse(CodeReplayed, "receipt %s was already used: each receipt decides once", r.ID)
	case r.RequestSHA256 != a.RequestSHA256:
		return candidate{}, refuse(CodeStaleHash, "stale decision: the receipt is for request %s, the request awaiting decision is %s", r.RequestSHA256[:12], a.RequestSHA256[:12])
	}
	amount := req.AmountMinor
	if r.AmountMinor != 0 {
		switch {
		case r.Verdict != Approve:
			return candidate{}, refuse(CodeBadAmount, "only an approval may name an amount")
		case r.AmountMinor < 0 || r.AmountMinor >= req.AmountMinor:
			return candidate{}, refuse(CodeBadAmount, "an approved amount must be above 0 and below the request's %s", req.Amount)
		case strings.TrimSpace(r.Reason) == "":
			return candidate{}, refuse(CodeNeedsReason, "approving a lower amount needs a reason")
		}
		amount = r.AmountMinor
	}
	ap, ok := g.wait.Approvers.Find(r.Subject)
	if !ok {
		return candidate{}, refuse(CodeUnknown, "unknown approver %q", trim(r.Subject))
	}
	c := candidate{approver: ap, verdict: r.Verdict, amount: amount, reason: r.Reason, note: r.Note, hashBound: true,
		proof: ProofReceipt, verified: &ver, receipt: in.Receipt}
	if r.Verdict == Handoff {
		return c, g.checkHandoff(c, r.AssignTo)
	}
	return c, g.authorise(c)
}

// MaxHandoffs bounds how often one request may be handed on. A hand-off is
// an accepted attempt, kept in the wait's state and its history, so without
// a bound two approvers passing a request back and forth would grow both
// until Temporal ended the run. After that many the request is decided, or
// escalates when its deadline passes.
const MaxHandoffs = 8

// checkHandoff: whoever hands a request on could decide it, and so could
// the colleague it goes to; a request is handed on at most MaxHandoffs times.
func (g *Gate) checkHandoff(c candidate, to string) error {
	if n := len(g.current.Handoffs); n >= MaxHandoffs {
		return refuse(CodeHandedOn, "this request has been handed on %d times already: decide it", n)
	}
	if err := g.authorise(candidate{approver: c.approver, verdict: Approve, amount: c.amount}); err != nil {
		return err
	}
	colleague, ok := g.wait.Approvers.Find(to)
	switch {
	case !ok:
		return refuse(CodeUnknown, "cannot hand the request to %q: not an approver", trim(to))
	case colleague.ID == c.approver.ID:
		return refuse(CodeSameApprover, "hand the request to someone else")
	}
	if err := g.authorise(candidate{approver: colleague, verdict: Approve, amount: c.amount}); err != nil {
		return refuse(RefusalCode(err), "cannot hand the request to %s: %v", colleague.ID, err)
	}
	return nil
}

// ProofNone marks decisions of runs started before receipts.
const ProofNone = ""

// checkPlain is the rule book for a plain decision (an approver name):
// runs started before receipts, and the development switch.
func (g *Gate) checkPlain(v Verdict, in Input, proof string) (candidate, error) {
	a := g.current
	if strings.TrimSpace(in.Approver) == "" {
		return candidate{}, refuse(CodeMalformed, "approver is required")
	}
	ap, ok := g.wait.Approvers.Find(in.Approver)
	if !ok {
		return candidate{}, refuse(CodeUnknown, "unknown approver %q", trim(in.Approver))
	}
	c := candidate{approver: ap, verdict: v, amount: a.Request.AmountMinor, reason: in.Reason, note: in.Note,
		hashBound: in.PayloadSHA256 != "", proof: proof}
	if err := g.authorise(c); err != nil {
		return c, err
	}
	switch {
	case in.PayloadSHA256 != "" && !hashPattern.MatchString(in.PayloadSHA256):
		return c, refuse(CodeMalformed, "payload_sha256 must be 12 to 64 lowercase hex digits")
	case in.PayloadSHA256 != "" && !strings.HasPrefix(a.RequestSHA256, in.PayloadSHA256):
		return c, refuse(CodeStaleHash, "stale decision: it cites request %s, the request awaiting decision is %s", trim(in.PayloadSHA256), a.RequestSHA256[:12])
	}
	return c, nil
}

// authorise applies the authority rules to a proven approver: nobody
// decides their own claim or one they amended, escalated claims need a
// supervisor, nobody approves beyond their limit, a rejection says why,
// and above the four-eyes threshold two different approvers agree, one of
// them a supervisor.
func (g *Gate) authorise(c candidate) error {
	a, ap := g.current, c.approver
	is := func(x string) bool { return x != "" && (strings.EqualFold(x, ap.Email) || strings.EqualFold(x, ap.ID)) }
	if g.wait.Trust != nil && g.wait.Trust.Identities {
		is = ap.Is
	}
	for _, self := range g.wait.Self {
		if is(self) {
			return refuse(CodeSelfApproval, "self-approval: %s is the claimant or the payee", ap.ID)
		}
	}
	for _, x := range g.wait.Excluded {
		if is(x) {
			return refuse(CodeAmender, "%s amended this claim and may not decide it", ap.ID)
		}
	}
	if a.Stage == StageEscalated && ap.Role != authority.Supervisor {
		return refuse(CodeNeedSupervisor, "the claim is escalated: a supervisor must decide, %s is an %s", ap.ID, ap.Role)
	}
	req := a.Request
	if limit, ok := ap.Limits[req.Currency]; !ok || limit < c.amount {
		return refuse(CodeOverLimit, "over limit: %s may decide up to %s %s, the request is %s", ap.ID,
			formatLimit(limit, ok, req.Currency), strings.ToUpper(req.Currency), claim.FormatAmount(c.amount, req.Currency))
	}
	if c.verdict == Reject && strings.TrimSpace(c.reason) == "" {
		return refuse(CodeNeedsReason, "a rejection needs a reason")
	}
	if c.verdict == Approve && a.Quorum > 1 {
		for _, v := range a.Votes {
			if v.Approver == ap.ID {
				return refuse(CodeSameApprover, "four eyes: %s already approved; a second approver must agree", ap.ID)
			}
		}
		if len(a.Votes)+1 >= a.Quorum && ap.Role != authority.Supervisor && !slices.ContainsFunc(a.Votes, func(v Decision) bool { return v.Role == string(authority.Supervisor) }) {
			return refuse(CodeNeedSupervisor, "four eyes: one of the approvers must be a supervisor, and %s is an %s", ap.ID, ap.Role)
		}
	}
	return nil
}

func trim(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

// trimText bounds free text kept in the trail.
func trimText(s string) string {
	if len(s) > 256 {
		return strings.ToValidUTF8(s[:256], "") + "…"
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
		workflow.GetLogger(ctx).Info("request handed on", "from", h.From, "to", h.To)
		return &Decision{Verdict: Handoff, Approver: h.From, Role: string(c.approver.Role), Note: c.note, Channel: at.Channel,
			Stage: a.Stage, DecidedAt: now, Request: a.Request, RequestSHA256: a.RequestSHA256, HashBound: true, Proof: c.proof,
			KeyID: c.verified.Signer.Key.ID, VouchedBy: c.verified.Signer.Service, ReceiptID: h.ReceiptID, Receipt: c.receipt}, nil
	}
	d := Decision{Verdict: c.verdict, Approver: c.approver.ID, Role: string(c.approver.Role), Note: c.note, Reason: c.reason,
		Channel: at.Channel, Stage: a.Stage, DecidedAt: now, Request: a.Request, RequestSHA256: a.RequestSHA256,
		HashBound: c.hashBound, Proof: c.proof}
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
		workflow.GetLogger(ctx).Info("approval recorded; the quorum needs more", "approver", d.Approver, "votes", len(a.Votes), "quorum", a.Quorum)
		return &d, nil
	}
	if c.verdict == Approve && c.proof != ProofNone {
		d.AmountMinor = a.PayoutMinor()
	}
	a.Decision = &d
	a.open = false
	workflow.GetLogger(ctx).Info("decision accepted", "channel", at.Channel, "approver", d.Approver, "verdict", d.Verdict, "proof", d.Proof)
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
	a.EscalatesAt, a.ExpiresAt = a.Deadline, a.Deadline.Add(pol.EscalationTTL)
	if pol.ReminderAt < 1 && hooks.Remind != nil {
		a.RemindAt = now.Add(time.Duration(float64(pol.TTL) * pol.ReminderAt))
	}
	if w.Trust != nil {
		a.Quorum = 1
		if w.Trust.FourEyesAboveMinor > 0 && w.Request.AmountMinor > w.Trust.FourEyesAboveMinor {
			a.Quorum = 2
		}
	}
	g.current, g.wait = a, w
	g.past = append(g.past, a)
	defer func() { a.open = false }()

	if err := onStage(ctx, hooks, a); err != nil {
		return a, err
	}
	if !a.RemindAt.IsZero() {
		if done, err := g.until(ctx, a, a.RemindAt, w.NotAfter); done || err != nil {
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
	a.ExpiresAt = a.Deadline
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
