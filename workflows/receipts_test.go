package workflows

import (
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
)

// Keys for the sample approvers and an "inbox" service, made once per test
// process: the mocked OpenApproval hands out the sample directory with
// their public keys, as a worker configured with them would.
var (
	keysOnce sync.Once
	keys     map[string]authority.KeyFile
)

func testKeys() map[string]authority.KeyFile {
	keysOnce.Do(func() {
		keys = map[string]authority.KeyFile{}
		for _, id := range []string{"adjuster-17", "adjuster-9", "supervisor-3", "ada-herself", "euro-only", "mallory"} {
			k, err := authority.GenerateKey(id, false)
			if err != nil {
				panic(err)
			}
			keys[id] = k
		}
		k, err := authority.GenerateKey("inbox", true)
		if err != nil {
			panic(err)
		}
		keys["inbox"] = k
	})
	return keys
}

// withKeys gives each approver of d their key ("mallory" gets none: her key
// is unknown to the directory).
func withKeys(d authority.Directory) authority.Directory {
	out := make(authority.Directory, len(d))
	for i, a := range d {
		if k, ok := testKeys()[a.ID]; ok {
			a.Keys = []authority.Key{k.Public()}
		}
		out[i] = a
	}
	return out
}

// receipt signs a receipt for the request awaiting decision now, as
// signer (an approver, or "inbox" vouching for sub); edit may change it
// before signing.
func (s *ClaimSuite) receipt(signer, sub string, v approvals.Verdict, edit func(*approvals.Receipt)) string {
	st := s.status()
	s.Require().NotNil(st.Approval, "nothing is waiting for a decision")
	r, err := approvals.NewReceipt(approvals.Receipt{Subject: sub, ClaimID: st.ClaimID, RequestSHA256: st.Approval.RequestSHA256,
		Verdict: v, Audience: st.Audience}, s.env.Now(), approvals.DefaultReceiptTTL)
	s.Require().NoError(err)
	if edit != nil {
		edit(&r)
	}
	tok, err := approvals.Sign(testKeys()[signer], r)
	s.Require().NoError(err)
	return tok
}

// approve sends an approve signal with approver's own receipt at a
// workflow time.
func (s *ClaimSuite) approve(after time.Duration, approver string, edit func(*approvals.Receipt)) {
	s.approveAs(after, approver, approver, edit)
}

// approveAs sends an approve signal for sub, signed with signer's key.
func (s *ClaimSuite) approveAs(after time.Duration, signer, sub string, edit func(*approvals.Receipt)) {
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(approvals.SignalApprove, approvals.Input{Receipt: s.receipt(signer, sub, approvals.Approve, edit)})
	}, after)
}

// reject sends a reject signal with approver's own receipt.
func (s *ClaimSuite) reject(after time.Duration, approver, reason string) {
	s.env.RegisterDelayedCallback(func() {
		s.env.SignalWorkflow(approvals.SignalReject, approvals.Input{Receipt: s.receipt(approver, approver, approvals.Reject,
			func(r *approvals.Receipt) { r.Reason = reason })})
	}, after)
}

func note(n string) func(*approvals.Receipt) { return func(r *approvals.Receipt) { r.Note = n } }
