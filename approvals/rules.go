package approvals

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// The rule book: what makes a decision count (the receipt, the claim, the
// request, the approver's authority), one for signals, the update's
// validator and its handler.

var hashPattern = regexp.MustCompile(`^[0-9a-f]{12,64}$`)

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
	if a == nil || !a.Open() {
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
			return candidate{}, unsigned()
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

// unsigned refuses a decision that carries no receipt.
func unsigned() error {
	return refuse(CodeUnsigned, "unsigned: a decision needs a signed receipt, {\"receipt\":\"…\"} (issue one with claimsctl receipt); a typed approver name proves nothing")
}

// firstCause is, for a decision the rules refuse, the cause no retry can
// fix when there is one, in this order: a receipt for another claim (read
// unverified: refusing needs no proof of who signed it), no receipt where
// one is needed, an approver past their limit. check keeps the order
// recorded runs were refused in, since a signal's refusal is in its run's
// audit record and a replay must write the same; the decide update's
// validator, whose refusals enter no history, asks this first.
func (g *Gate) firstCause(in Input, now time.Time) error {
	a := g.current
	if _, r, ok := PeekReceipt(in.Receipt); in.Receipt != "" && ok && g.claim() != "" && r.ClaimID != g.claim() {
		return refuse(CodeOtherClaim, "receipt is for claim %s, not %s", trim(r.ClaimID), g.claim())
	}
	if a == nil || !a.Open() || g.wait.Trust == nil {
		return nil
	}
	if in.Receipt == "" {
		if !g.wait.Trust.AllowUnsigned {
			return unsigned()
		}
		return nil
	}
	ver, err := VerifyReceipt(in.Receipt, authority.Book{Approvers: g.wait.Approvers, Services: g.wait.Trust.Services},
		g.wait.Trust.Audience, now, g.wait.Trust.ReceiptMaxTTL)
	if err != nil {
		return nil
	}
	r, req := ver.Receipt, a.Request
	ap, ok := g.wait.Approvers.Find(r.Subject)
	if !ok {
		return nil
	}
	amount := req.AmountMinor // what the receipt would pay
	if r.Verdict == Approve && r.AmountMinor > 0 && r.AmountMinor < req.AmountMinor {
		amount = r.AmountMinor
	}
	return overLimit(ap, amount, req)
}

// claim is the claim the gate decides: the waiting request's, else the
// run's.
func (g *Gate) claim() string {
	if g.current != nil {
		return g.current.Request.ClaimID
	}
	return g.claimID
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
	if v != Approve && v != Reject { // an update's with no decision field
		return candidate{}, refuse(CodeMalformed, "decision must be %q or %q", Approve, Reject)
	}
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
	if c.verdict == Approve && a.Request.AmountMinor <= 0 {
		return refuse(CodeNothingToPay, "the request pays nothing: it asks a person to decide a denial, so it can only be rejected, with a reason")
	}
	if err := overLimit(ap, c.amount, a.Request); err != nil {
		return err
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

// overLimit refuses an approver whose limit in the request's currency is
// below amount.
func overLimit(ap authority.Approver, amount int64, req Request) error {
	if limit, ok := ap.Limits[req.Currency]; !ok || limit < amount {
		return refuse(CodeOverLimit, "over limit: %s may decide up to %s %s, the request is %s", ap.ID,
			formatLimit(limit, ok, req.Currency), strings.ToUpper(req.Currency), claim.FormatAmount(amount, req.Currency))
	}
	return nil
}

func formatLimit(limit int64, ok bool, currency string) string {
	if !ok {
		return "nothing in"
	}
	return claim.FormatAmount(limit, currency)
}
