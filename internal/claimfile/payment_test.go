package claimfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/decision"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// The checks File.Check makes of a paid claim, each on its own: the
// receipts in the record (checkDecision) and the money against the record
// and its approvals (checkPayment), on a file that passes every other.

// signers are the approvers whose keys sign the paid claim's receipts.
type signers map[string]authority.KeyFile

func newSigners(t *testing.T, ids ...string) signers {
	t.Helper()
	s := signers{}
	for _, id := range ids {
		k, err := authority.GenerateKey(id, false)
		require.NoError(t, err)
		s[id] = k
	}
	return s
}

var paidAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// paidRequest is the request the paid claim's approval was asked: 5,000.00
// to acct_1Ada, above the default rules' auto-approve limit of 1,000.00.
func paidRequest() decision.Request {
	return decision.Request{ClaimID: "claim-1", Payee: "acct_1Ada", PayeeName: "Ada Lovelace", AmountMinor: 500_000, Amount: "5000.00", Currency: "usd"}
}

// decided is approver's accepted decision on req with a receipt signed by
// their key; editReceipt changes what the receipt says before it is signed.
func (s signers) decided(t *testing.T, approver string, v decision.Verdict, req decision.Request, editReceipt func(*decision.Receipt)) decision.Decision {
	t.Helper()
	r, err := decision.NewReceipt(decision.Receipt{Subject: approver, ClaimID: req.ClaimID, RequestSHA256: req.SHA256(), Verdict: v},
		paidAt, decision.DefaultReceiptTTL)
	require.NoError(t, err)
	if editReceipt != nil {
		editReceipt(&r)
	}
	tok, err := decision.Sign(s[approver], r)
	require.NoError(t, err)
	amount := req.AmountMinor
	if r.AmountMinor != 0 {
		amount = r.AmountMinor
	}
	return decision.Decision{Verdict: v, Approver: approver, Channel: "signal", DecidedAt: paidAt, Request: req, RequestSHA256: req.SHA256(),
		HashBound: true, AmountMinor: amount, Proof: decision.ProofReceipt, KeyID: s[approver].Key.KeyID, ReceiptID: r.ID, Receipt: tok}
}

// paidCase is the paid claim's parts before its file is sealed.
type paidCase struct {
	record audit.Record
	rules  *insurer.Rules
	pays   []Step // PayClaimant steps
	steps  []Step // other steps after intake
	keys   []Key
}

// paidClaim is a claim paid 5,000.00 on adjuster-17's signed approval.
func paidClaim(t *testing.T, s signers) *paidCase {
	t.Helper()
	req := paidRequest()
	d := s.decided(t, "adjuster-17", decision.Approve, req, nil)
	rules := insurer.Defaults()
	c := &paidCase{
		record: audit.Record{ClaimID: "claim-1", WorkflowID: "claim-1", Outcome: "paid", PayoutMinor: 500_000, Currency: "usd", TransferID: "tr_1",
			Coverage: claim.Coverage{Covered: true, Currency: "usd", ClaimedMinor: 525_000, DeductibleMinor: 25_000, LimitMinor: 1_000_000, CoveredMinor: 500_000},
			Approvals: []*decision.Approval{{Request: req, RequestSHA256: req.SHA256(), Stage: decision.StageWaiting, Quorum: 1,
				Votes: []decision.Decision{d}}}},
		rules: &rules,
	}
	c.record.Approvals[0].Decision = &c.record.Approvals[0].Votes[0] // the decision is the one vote, as the gate records it
	c.pays = []Step{c.pay(t, PayOutput{TransferID: "tr_1", AmountMinor: 500_000, Currency: "usd", Destination: "acct_1Ada"}, "completed")}
	for id, k := range s {
		jwk, err := json.Marshal(k.Public().JWK())
		require.NoError(t, err)
		c.keys = append(c.keys, Key{ID: k.Key.KeyID, Approver: id, JWK: jwk})
	}
	return c
}

func (c *paidCase) pay(t *testing.T, out PayOutput, outcome string) Step {
	t.Helper()
	data, err := json.Marshal(out)
	require.NoError(t, err)
	return Step{Activity: "PayClaimant", Outcome: outcome, Output: data}
}

// file seals the case: the record as the ledger holds it, with its digest.
func (c *paidCase) file(t *testing.T) File {
	t.Helper()
	rec, err := json.Marshal(c.record)
	require.NoError(t, err)
	sum := sha256.Sum256(rec)
	intake := map[string]any{"claim": map[string]any{"claim_id": "claim-1"}, "status": "open", "version": 1}
	if c.rules != nil {
		intake["rules"] = c.rules
	}
	in, err := json.Marshal(intake)
	require.NoError(t, err)
	steps := append([]Step{{Activity: "LoadClaim", Local: true, Outcome: "completed", Output: in}}, c.steps...)
	return File{Schema: Schema, ClaimID: c.record.ClaimID, Outcome: c.record.Outcome, Record: rec, RecordSHA256: hex.EncodeToString(sum[:]),
		Steps: append(steps, c.pays...), Keys: c.keys}
}

// problemAt says whether ps has a problem at where whose text holds what.
func problemAt(ps Problems, where, what string) bool {
	for _, p := range ps {
		if p.Where == where && strings.Contains(p.What, what) {
			return true
		}
	}
	return false
}

// A paid claim's money is the record's: the one completed transfer the
// record names, of its payout, in its currency, to the payee approved,
// within the coverage; a claim not paid moved none. Each broken alone is a
// problem named where it is.
func TestAPaidClaimsMoneyIsTheRecords(t *testing.T) {
	s := newSigners(t, "adjuster-17", "supervisor-3")
	require.Empty(t, paidClaim(t, s).file(t).Check(), "the honest file")
	for _, tc := range []struct {
		name        string
		edit        func(c *paidCase)
		where, what string // "" : no problem
	}{
		{"another transfer", func(c *paidCase) { c.record.TransferID = "tr_2" }, "record payout", "the payment step made"},
		{"another amount paid", func(c *paidCase) {
			c.pays[0] = c.pay(t, PayOutput{TransferID: "tr_1", AmountMinor: 499_999, Currency: "usd", Destination: "acct_1Ada"}, "completed")
		}, "record payout", "the payment step made 499999"},
		{"another currency paid", func(c *paidCase) {
			c.pays[0] = c.pay(t, PayOutput{TransferID: "tr_1", AmountMinor: 500_000, Currency: "eur", Destination: "acct_1Ada"}, "completed")
		}, "record payout", "500000 eur"},
		{"more than the coverage", func(c *paidCase) { c.record.Coverage.CoveredMinor = 499_999 }, "record payout", "more than the 499999"},
		{"paid twice", func(c *paidCase) { c.pays = append(c.pays, c.pays[0]) }, "steps PayClaimant", "the history has 2"},
		{"a payment that failed is none", func(c *paidCase) {
			c.pays = append([]Step{c.pay(t, PayOutput{}, "failed")}, c.pays...)
		}, "", ""},
		{"rejected, yet paid", func(c *paidCase) { c.record.Outcome = "rejected" }, "steps PayClaimant", "the claim is rejected, yet a transfer tr_1"},
		{"dead-lettered: its payments are the dead letter's", func(c *paidCase) {
			c.record.Outcome = "dead-lettered"
			c.pays = append(c.pays, c.pays[0])
		}, "", ""},
		{"intake recorded no rules", func(c *paidCase) { c.rules = nil }, "steps LoadClaim", "intake recorded no rules"},
		{"paid to another account", func(c *paidCase) {
			c.pays[0] = c.pay(t, PayOutput{TransferID: "tr_1", AmountMinor: 500_000, Currency: "usd", Destination: "acct_1Mallory"}, "completed")
		}, "steps PayClaimant", "paid acct_1Mallory"},
	} {
		c := paidClaim(t, s)
		tc.edit(c)
		ps := c.file(t).Check()
		if tc.where == "" {
			assert.Empty(t, ps, tc.name)
			continue
		}
		assert.True(t, problemAt(ps, tc.where, tc.what), "%s: %v", tc.name, ps)
	}
}

// Above the auto-approve limit a payout needs an approval that decided it:
// as many different approvers as the request's quorum, each with a signed
// receipt for the request approved and for at least the payout; or the
// policy's final outcome, where the rules recorded say approve. At the
// limit, none is needed.
func TestAPayoutAboveTheLimitNeedsItsApprovers(t *testing.T) {
	s := newSigners(t, "adjuster-17", "supervisor-3")
	req := paidRequest()
	const needs = "record approvals"
	for _, tc := range []struct {
		name string
		edit func(c *paidCase)
		what string // "": no problem
	}{
		{"at the limit, nobody", func(c *paidCase) {
			c.record.PayoutMinor, c.record.Approvals = 100_000, nil
			c.pays[0] = c.pay(t, PayOutput{TransferID: "tr_1", AmountMinor: 100_000, Currency: "usd", Destination: "acct_1Ada"}, "completed")
		}, ""},
		{"above it, nobody", func(c *paidCase) { c.record.Approvals = nil }, "no approval decided it"},
		{"an approval nobody decided", func(c *paidCase) {
			c.record.Approvals[0].Decision, c.record.Approvals[0].Votes = nil, nil
		}, "no approval decided it"},
		{"an approval rejected", func(c *paidCase) {
			d := s.decided(t, "adjuster-17", decision.Reject, req, func(r *decision.Receipt) { r.Reason = "not covered" })
			c.record.Approvals[0].Decision, c.record.Approvals[0].Votes = &d, nil
		}, "no approval decided it"},
		{"the policy's outcome, under rules that hold", func(c *paidCase) {
			c.record.Approvals[0].Decision = &decision.Decision{Verdict: decision.Approve, Approver: "policy", Request: req, RequestSHA256: req.SHA256()}
			c.record.Approvals[0].Votes = nil
		}, "paid by policy on expiry, but the rules recorded say hold"},
		{"the policy's outcome, under rules that approve", func(c *paidCase) {
			c.rules.FinalOutcome = "approve"
			c.record.Approvals[0].Decision = &decision.Decision{Verdict: decision.Approve, Approver: "policy", Request: req, RequestSHA256: req.SHA256()}
			c.record.Approvals[0].Votes = nil
		}, ""},
		{"four eyes, one approver", func(c *paidCase) { c.record.Approvals[0].Quorum = 2 }, "1 different approvers signed for the payout of 500000, the request needed 2"},
		{"four eyes, both", func(c *paidCase) {
			a := c.record.Approvals[0]
			a.Quorum = 2
			a.Votes = append(a.Votes, s.decided(t, "supervisor-3", decision.Approve, req, nil))
		}, ""},
		{"four eyes, the second for a voided request", func(c *paidCase) {
			c.record.Approvals[0].Quorum = 2
			earlier := &decision.Approval{Request: req, RequestSHA256: req.SHA256(), Quorum: 2, Voided: "the claim was amended",
				Votes: []decision.Decision{s.decided(t, "supervisor-3", decision.Approve, req, nil)}}
			c.record.Approvals = append([]*decision.Approval{earlier}, c.record.Approvals...)
		}, "1 different approvers"},
		{"four eyes, the second for another request", func(c *paidCase) {
			c.record.Approvals[0].Quorum = 2
			other := req
			other.AmountMinor, other.Amount = 600_000, "6000.00"
			earlier := &decision.Approval{Request: other, RequestSHA256: other.SHA256(), Quorum: 2,
				Votes: []decision.Decision{s.decided(t, "supervisor-3", decision.Approve, other, nil)}}
			c.record.Approvals = append([]*decision.Approval{earlier}, c.record.Approvals...)
		}, "1 different approvers"},
		{"approved for less than the payout", func(c *paidCase) {
			d := s.decided(t, "adjuster-17", decision.Approve, req, func(r *decision.Receipt) { r.AmountMinor, r.Reason = 499_999, "less" })
			c.record.Approvals[0].Decision, c.record.Approvals[0].Votes = &d, []decision.Decision{d}
		}, "0 different approvers"},
		{"a decision that names no amount approved the request's", func(c *paidCase) {
			c.record.Approvals[0].Votes[0].AmountMinor = 0
		}, ""},
	} {
		c := paidClaim(t, s)
		tc.edit(c)
		ps := c.file(t).Check()
		if tc.what == "" {
			assert.Empty(t, ps, tc.name)
			continue
		}
		assert.True(t, problemAt(ps, needs, tc.what), "%s: %v", tc.name, ps)
	}
}

// Every receipt in the record is checked on its own: the request recorded
// beside it is the one it signs, it is a signed receipt by a key the file
// lists, for this claim, by the approver recorded, with the verdict, ID
// and amount the decision records.
func TestEachReceiptInTheRecordIsChecked(t *testing.T) {
	s := newSigners(t, "adjuster-17", "supervisor-3")
	req := paidRequest()
	resign := func(c *paidCase, edit func(*decision.Receipt)) {
		d := s.decided(t, "adjuster-17", decision.Approve, req, edit)
		a := c.record.Approvals[0]
		a.Votes[0].Receipt, a.Votes[0].ReceiptID = d.Receipt, d.ReceiptID
	}
	for _, tc := range []struct {
		name string
		edit func(c *paidCase)
		what string
	}{
		{"the request edited after it was signed", func(c *paidCase) {
			c.record.Approvals[0].Votes[0].Request.PayeeName = "Mallory"
		}, "the request recorded hashes to"},
		{"no receipt", func(c *paidCase) { c.record.Approvals[0].Votes[0].Proof = decision.ProofUnauthenticated }, "was accepted without a signed receipt"},
		{"not a receipt", func(c *paidCase) { c.record.Approvals[0].Votes[0].Receipt = "not.a.receipt" }, "its receipt is not a receipt"},
		{"a key the file does not list", func(c *paidCase) { c.keys = nil }, "which the approver directory does not list"},
		{"a receipt for another claim", func(c *paidCase) { resign(c, func(r *decision.Receipt) { r.ClaimID = "claim-2" }) }, "is for claim claim-2"},
		{"a receipt for another request", func(c *paidCase) {
			resign(c, func(r *decision.Receipt) { r.RequestSHA256 = strings.Repeat("0", 64) })
		}, "signs request 000000000000"},
		{"a receipt for another approver", func(c *paidCase) { c.record.Approvals[0].Votes[0].Approver = "supervisor-3" }, "the decision says supervisor-3"},
		{"a receipt for another verdict", func(c *paidCase) {
			resign(c, func(r *decision.Receipt) { r.Verdict = decision.Reject; r.Reason = "no" })
		}, "says reject"},
		{"another receipt's ID", func(c *paidCase) { c.record.Approvals[0].Votes[0].ReceiptID = "0123456789abcdef" }, "the decision cites 0123456789ab"},
		{"a receipt approving less", func(c *paidCase) {
			resign(c, func(r *decision.Receipt) { r.AmountMinor, r.Reason = 400_000, "less" })
		}, "approves 400000, the decision 500000"},
	} {
		c := paidClaim(t, s)
		tc.edit(c)
		where := "record approvals[0] approve by " + c.record.Approvals[0].Votes[0].Approver
		ps := c.file(t).Check()
		assert.True(t, problemAt(ps, where, tc.what), "%s: %v", tc.name, ps)
	}
}

// The record is the file's: for its claim and with its outcome, each
// compared on its own.
func TestTheRecordIsTheFilesClaimAndOutcome(t *testing.T) {
	s := newSigners(t, "adjuster-17")
	f := paidClaim(t, s).file(t)
	f.ClaimID = "claim-2"
	assert.True(t, problemAt(f.Check(), "claim-file.json record", "is for claim-1 (paid), the file says claim-2 (paid)"))
	f = paidClaim(t, s).file(t)
	f.Outcome = "rejected"
	assert.True(t, problemAt(f.Check(), "claim-file.json record", "the file says claim-1 (rejected)"))
}

// The final decision is checked too when it is not one of the votes: a
// rejection after a first approval, whose receipt is another claim's, is
// a problem.
func TestADecisionAfterTheVotesIsChecked(t *testing.T) {
	s := newSigners(t, "adjuster-17", "supervisor-3")
	c := paidClaim(t, s)
	c.record.Outcome = "rejected"
	c.pays = nil
	a := c.record.Approvals[0]
	a.Quorum = 2
	no := s.decided(t, "supervisor-3", decision.Reject, paidRequest(), func(r *decision.Receipt) { r.ClaimID, r.Reason = "claim-2", "no" })
	a.Decision = &no
	assert.True(t, problemAt(c.file(t).Check(), "record approvals[0] reject by supervisor-3", "is for claim claim-2"))
}

// The file's keys are what they say: a key listed under a kid its JWK
// does not name verifies nothing, and an approver's own key signs only
// their decisions, where a service's key vouches for anyone.
func TestTheFilesKeysAreWhatTheySay(t *testing.T) {
	s := newSigners(t, "adjuster-17", "supervisor-3", "inbox")
	c := paidClaim(t, s)
	for i, k := range c.keys {
		if k.Approver == "adjuster-17" {
			other := s["supervisor-3"].Public().JWK()
			other.Key = s["adjuster-17"].Public().JWK().Key
			jwk, err := json.Marshal(other)
			require.NoError(t, err)
			c.keys[i].JWK = jwk
		}
	}
	assert.True(t, problemAt(c.file(t).Check(), "record approvals[0] approve by adjuster-17", "which the approver directory does not list"),
		"a JWK naming another kid")

	// supervisor-3's decision, its receipt signed with adjuster-17's key.
	c = paidClaim(t, s)
	d := s.decided(t, "adjuster-17", decision.Approve, paidRequest(), func(r *decision.Receipt) { r.Subject = "supervisor-3" })
	d.Approver = "supervisor-3"
	c.record.Approvals[0].Votes[0] = d
	assert.True(t, problemAt(c.file(t).Check(), "record approvals[0] approve by supervisor-3", "own key"), "an approver's key signing for another")

	for i, k := range c.keys {
		if k.Approver == "adjuster-17" {
			c.keys[i].Approver, c.keys[i].Service = "", "inbox"
		}
	}
	assert.Empty(t, c.file(t).Check(), "the same receipt, its key a service's")
}
