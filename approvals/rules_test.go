package approvals

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// The rule book on its own (Gate.Check, rules.go's authorise), without a
// workflow: a gate waiting on one request as Await opens it, decided by
// receipts signed with the directory's keys.

// now is when the rule book's gates open and decide.
var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// ruleBook is a directory of approvers with their signing keys:
// adjuster-17 (up to 5,000.00, with a second address and a payout account
// of their own), two senior adjusters and a supervisor.
type ruleBook struct {
	t    *testing.T
	dir  authority.Directory
	keys map[string]authority.KeyFile
	// answers are the decide updates' answers, in order (ruleBook.run).
	answers []updateAnswer
}

const rulesAudience = "durableclaims/default/test"

func newRuleBook(t *testing.T) *ruleBook {
	t.Helper()
	b := &ruleBook{t: t, keys: map[string]authority.KeyFile{}}
	for _, ap := range []authority.Approver{ // sorted by ID, as Find needs
		{ID: "adjuster-17", Role: authority.Adjuster, Email: "adjuster17@insurer.example", Limits: map[string]int64{"usd": 500_000},
			Emails: []string{"seventeen@home.example"}, PayoutAccounts: []string{"acct_1Seventeen"}},
		{ID: "adjuster-21", Role: authority.Adjuster, Email: "adjuster21@insurer.example", Limits: map[string]int64{"usd": 2_000_000}},
		{ID: "adjuster-9", Role: authority.Adjuster, Email: "adjuster9@insurer.example", Limits: map[string]int64{"usd": 2_000_000}},
		{ID: "supervisor-3", Role: authority.Supervisor, Email: "supervisor3@insurer.example", Limits: map[string]int64{"usd": 5_000_000}},
	} {
		kf, err := authority.GenerateKey(ap.ID, false)
		require.NoError(t, err)
		ap.Keys = []authority.Key{kf.Public()}
		b.dir = append(b.dir, ap)
		b.keys[ap.ID] = kf
	}
	return b
}

// wait is a wait for a payout of amount (in USD minor units) to acct_1Ada,
// decided by receipts; edit changes it before it opens.
func (b *ruleBook) wait(amount int64, edit func(*Wait)) Wait {
	w := Wait{Request: Request{ClaimID: "claim-0042", Payee: "acct_1Ada", PayeeName: "Ada Lovelace", AmountMinor: amount, Currency: "usd"},
		Approvers: b.dir, Self: []string{"ada@example.com", "acct_1Ada"},
		Trust: &Trust{ReceiptMaxTTL: DefaultReceiptTTL, FourEyesAboveMinor: 1_000_000, Audience: rulesAudience, Identities: true}}
	if edit != nil {
		edit(&w)
	}
	return w
}

// open is a gate as Await leaves it when w opens.
func (b *ruleBook) open(w Wait) *Gate {
	return &Gate{current: opened(w, w.Policy.WithDefaults(), now, false), wait: w, used: map[string]bool{}}
}

// receipt is approver's signed verdict on the request g waits on; amount,
// when set, approves less than the request.
func (b *ruleBook) receipt(g *Gate, approver string, v Verdict, amount int64) Input {
	b.t.Helper()
	r, err := NewReceipt(Receipt{Audience: rulesAudience, Subject: approver, ClaimID: g.current.Request.ClaimID,
		RequestSHA256: g.current.RequestSHA256, Verdict: v, AmountMinor: amount, Reason: "checked the invoice"}, now, DefaultReceiptTTL)
	require.NoError(b.t, err)
	tok, err := Sign(b.keys[approver], r)
	require.NoError(b.t, err)
	return Input{Receipt: tok}
}

// decides checks approver's verdict and returns the refusal's code, or ""
// when the rules accept it.
func (b *ruleBook) decides(g *Gate, approver string, v Verdict, amount int64) string {
	b.t.Helper()
	ap, err := g.Check(v, b.receipt(g, approver, v, amount), now)
	if err != nil {
		return RefusalCode(err)
	}
	assert.Equal(b.t, approver, ap.ID, "the approver is whoever the receipt proves")
	return ""
}

// An approver decides up to their limit in the request's currency, and no
// further: at exactly the limit accepted, a cent above refused as over
// limit, whether they approve or reject. The limit is on what they approve,
// so approving a lower amount within it is theirs to do; a currency they
// have no limit in is beyond it.
func TestAnApproverDecidesUpToTheirLimit(t *testing.T) {
	b := newRuleBook(t)
	for _, tc := range []struct {
		name    string
		request int64
		verdict Verdict
		amount  int64 // approved, when lower than the request
		edit    func(*Wait)
		want    string
	}{
		{name: "approve at exactly the limit", request: 500_000, verdict: Approve},
		{name: "approve a cent above it", request: 500_001, verdict: Approve, want: CodeOverLimit},
		{name: "reject at exactly the limit", request: 500_000, verdict: Reject},
		{name: "reject a cent above it", request: 500_001, verdict: Reject, want: CodeOverLimit},
		{name: "approve a lower amount, at the limit", request: 600_000, verdict: Approve, amount: 500_000},
		{name: "approve a lower amount, still above it", request: 600_000, verdict: Approve, amount: 500_001, want: CodeOverLimit},
		{name: "a currency without a limit", request: 100, verdict: Approve, edit: func(w *Wait) { w.Request.Currency = "eur" }, want: CodeOverLimit},
		// A request that pays nothing asks a person to decide a denial:
		// only a rejection (with its reason) answers it.
		{name: "approve a request that pays nothing", request: 0, verdict: Approve, want: CodeNothingToPay},
		{name: "reject a request that pays nothing", request: 0, verdict: Reject},
	} {
		g := b.open(b.wait(tc.request, tc.edit))
		assert.Equal(t, tc.want, b.decides(g, "adjuster-17", tc.verdict, tc.amount), tc.name)
	}
}

// Nobody decides their own claim: an approver is refused where the
// claimant's address or the payee's account is theirs, in any spelling the
// directory's identities cover (case, a +tag, another of their addresses,
// one of their payout accounts), and so is whoever amended the claim. Runs
// from before identities compared the approver's one address as written,
// and replay must decide as they did.
func TestNobodyDecidesTheirOwnClaim(t *testing.T) {
	b := newRuleBook(t)
	self := func(ids ...string) func(*Wait) { return func(w *Wait) { w.Self = ids } }
	for _, tc := range []struct {
		name string
		edit func(*Wait)
		want string
	}{
		{name: "a stranger's claim", want: ""},
		{name: "their address", edit: self("adjuster17@insurer.example", "acct_1Ada"), want: CodeSelfApproval},
		{name: "their address in capitals", edit: self("Adjuster17@Insurer.EXAMPLE", "acct_1Ada"), want: CodeSelfApproval},
		{name: "their address with a +tag", edit: self("adjuster17+claims@insurer.example", "acct_1Ada"), want: CodeSelfApproval},
		{name: "their other address", edit: self("seventeen@home.example", "acct_1Ada"), want: CodeSelfApproval},
		{name: "paid to their account", edit: self("friend@example.com", "acct_1Seventeen"), want: CodeSelfApproval},
		{name: "someone else's +tag", edit: self("adjuster1+7@insurer.example", "acct_1Ada"), want: ""},
		{name: "amended by them", edit: func(w *Wait) { w.Excluded = []string{"Adjuster17+amend@insurer.example"} }, want: CodeAmender},
		{name: "before identities: their address as written", edit: func(w *Wait) {
			w.Trust.Identities, w.Self = false, []string{"ADJUSTER17@insurer.example"}
		}, want: CodeSelfApproval},
		{name: "before identities: a +tag was another address", edit: func(w *Wait) {
			w.Trust.Identities, w.Self = false, []string{"adjuster17+claims@insurer.example"}
		}, want: ""},
		{name: "before identities: accounts were not compared", edit: func(w *Wait) {
			w.Trust.Identities, w.Self = false, []string{"friend@example.com", "acct_1Seventeen"}
		}, want: ""},
	} {
		for _, v := range []Verdict{Approve, Reject} {
			g := b.open(b.wait(120_000, tc.edit))
			assert.Equal(t, tc.want, b.decides(g, "adjuster-17", v, 0), "%s (%s)", tc.name, v)
		}
	}
}

// Above the four-eyes threshold two different approvers must agree, one of
// them a supervisor; at the threshold one is enough.
func TestFourEyesAboveTheThreshold(t *testing.T) {
	b := newRuleBook(t)
	at := b.open(b.wait(1_000_000, nil))
	assert.Equal(t, 1, at.current.Quorum, "at the threshold")
	assert.Empty(t, b.decides(at, "adjuster-9", Approve, 0), "one adjuster decides alone")

	// vote records an accepted approval, as decide does.
	vote := func(g *Gate, approver string) {
		ap, ok := b.dir.Find(approver)
		require.True(t, ok)
		g.current.Votes = append(g.current.Votes, Decision{Verdict: Approve, Approver: ap.ID, Role: string(ap.Role), Proof: ProofReceipt})
	}
	above := b.open(b.wait(1_000_001, nil))
	assert.Equal(t, 2, above.current.Quorum, "a cent above it")
	assert.Empty(t, b.decides(above, "adjuster-9", Approve, 0), "the first vote")
	vote(above, "adjuster-9")
	assert.Equal(t, CodeSameApprover, b.decides(above, "adjuster-9", Approve, 0), "the same approver twice")
	assert.Equal(t, CodeNeedSupervisor, b.decides(above, "adjuster-21", Approve, 0), "two adjusters")
	assert.Empty(t, b.decides(above, "supervisor-3", Approve, 0), "an adjuster and a supervisor")
	assert.Empty(t, b.decides(above, "adjuster-21", Reject, 0), "a rejection needs no second voice")

	first := b.open(b.wait(1_000_001, nil))
	vote(first, "supervisor-3")
	assert.Empty(t, b.decides(first, "adjuster-21", Approve, 0), "the supervisor first, then an adjuster")
}

// A refused decide update names the real cause first, the one no retry
// fixes: an unsigned body is unsigned, whatever its decision field says;
// a receipt for another claim is that, even when nothing waits; an
// approver past their limit is over it, even when their receipt is also
// stale or lacks a reason. Signals keep the rules' recorded order (a
// replay must refuse them in the same words), so there the stale hash
// comes first.
func TestARefusedDecisionNamesItsFirstCause(t *testing.T) {
	b := newRuleBook(t)
	signed := func(g *Gate, approver string, edit func(*Receipt)) DecideInput {
		r, err := NewReceipt(Receipt{Audience: rulesAudience, Subject: approver, ClaimID: g.current.Request.ClaimID,
			RequestSHA256: g.current.RequestSHA256, Verdict: Approve}, now, DefaultReceiptTTL)
		require.NoError(t, err)
		edit(&r)
		tok, err := Sign(b.keys[approver], r)
		require.NoError(t, err)
		return DecideInput{Receipt: tok}
	}
	stale := func(r *Receipt) { r.RequestSHA256 = strings.Repeat("0", 64) }
	refusal := func(err error) string {
		if err == nil {
			return "accepted"
		}
		return RefusalCode(err) + ": " + RefusalMessage(err)
	}

	g := b.open(b.wait(184_000, nil))
	for body, in := range map[string]DecideInput{
		`{"approver":"adjuster-17"}`:                      {Approver: "adjuster-17"},
		`{"approver":"adjuster-17","decision":"maybe"}`:   {Approver: "adjuster-17", Decision: "maybe"},
		`{"approver":"adjuster-17","decision":"approve"}`: {Approver: "adjuster-17", Decision: Approve},
	} {
		assert.True(t, strings.HasPrefix(refusal(g.CheckDecide(in, now)), "unsigned: unsigned: a decision needs a signed receipt"), body)
	}

	other := signed(g, "adjuster-17", func(r *Receipt) { r.ClaimID = "claim-0043"; stale(r) })
	assert.Equal(t, "other-claim: receipt is for claim claim-0043, not claim-0042", refusal(g.CheckDecide(other, now)))
	g.current.SetOpen(false)
	assert.Equal(t, "other-claim: receipt is for claim claim-0043, not claim-0042", refusal(g.CheckDecide(other, now)),
		"nothing waits, and the receipt was never for this claim")
	assert.Equal(t, "not-waiting: claim is not waiting for a decision",
		refusal(g.CheckDecide(signed(g, "adjuster-17", func(*Receipt) {}), now)), "this claim's receipt, when nothing waits")

	g = b.open(b.wait(600_000, nil)) // adjuster-17 may decide up to 5,000.00
	overLimit := "over-limit: over limit: adjuster-17 may decide up to 5000.00 USD, the request is "
	assert.Equal(t, overLimit+"6000.00", refusal(g.CheckDecide(signed(g, "adjuster-17", stale), now)), "a fresh hash would not help")
	_, err := g.Check(Approve, signed(g, "adjuster-17", stale).Input(), now)
	assert.Equal(t, CodeStaleHash, RefusalCode(err), "a signal's refusal keeps the recorded order")
	lower := signed(g, "adjuster-17", func(r *Receipt) { r.AmountMinor = 550_000 })
	assert.Equal(t, overLimit+"5500.00", refusal(g.CheckDecide(lower, now)), "a reason would not help")
	within := signed(g, "adjuster-17", func(r *Receipt) { r.AmountMinor = 450_000 })
	assert.Equal(t, "needs-reason: approving a lower amount needs a reason", refusal(g.CheckDecide(within, now)),
		"within the limit, the missing reason is the cause")
	assert.Equal(t, "accepted", refusal(g.CheckDecide(signed(g, "supervisor-3", func(*Receipt) {}), now)))
}
