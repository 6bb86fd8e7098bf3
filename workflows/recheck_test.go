package workflows

import (
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
)

// The changed signal (claimsctl withdraw, amend): a waiting claim reads the
// system of record again at once instead of waiting for a decision that can
// no longer count.

func (s *ClaimSuite) TestWithdrawnWhileWaitingEndsAtOnce() {
	s.calls.reread = func(r *activities.LoadClaimResult) { r.Status, r.Version = "withdrawn", 2 }
	started := s.env.Now()
	s.signal(30*time.Minute, approvals.SignalChanged, nil)
	s.start(testClaim("claim-0165", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusWithdrawn, r.Status)
	s.Equal(30*time.Minute, s.env.Now().Sub(started).Round(time.Minute), "ended when told, not at the deadline")
	s.Empty(s.calls.pays)
	s.Empty(s.calls.reminded, "nobody is reminded of a withdrawn claim")
	s.Require().Len(r.Approvals, 1)
	s.True(r.Approvals[0].Interrupted)
	s.Nil(r.Approvals[0].Decision)
	s.Contains(r.Approvals[0].Voided, "withdrawn (version 2)")
	s.Equal(2, s.calls.loads, "intake and the one re-read")
	s.Equal(StatusWithdrawn, s.calls.closes[0].Outcome)
}

func (s *ClaimSuite) TestAmendedWhileWaitingAsksAgainAtOnce() {
	s.calls.reread = func(r *activities.LoadClaimResult) { r.Claim.AmountMinor, r.Version = 210000, 2 }
	s.signal(30*time.Minute, approvals.SignalChanged, nil)
	var at31 Status
	s.env.RegisterDelayedCallback(func() { at31 = s.status() }, 31*time.Minute)
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0166", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().NotNil(at31.Approval)
	s.Equal("2100.00", at31.Approval.Request.Amount, "the new request was open 1 minute after the change")
	s.Require().Len(r.Approvals, 2)
	s.True(r.Approvals[0].Interrupted)
	s.Contains(r.Approvals[0].Voided, "amount 1840.00 usd → 2100.00 usd")
	s.False(r.Approvals[1].Interrupted)
	s.Require().Len(s.calls.pays, 1)
	s.Equal(int64(210000), s.calls.pays[0].AmountMinor)
}

func (s *ClaimSuite) TestAChangedSignalThatChangesNothingKeepsTheWait() {
	s.signal(30*time.Minute, approvals.SignalChanged, nil)
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0167", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(r.Approvals, 1, "the same request, still open")
	s.False(r.Approvals[0].Interrupted)
	s.Equal(3, s.calls.loads, "intake, the recheck, the re-read after the decision")
}

func (s *ClaimSuite) TestAFloodOfChangedSignalsIsBounded() {
	// Signals that arrive together are read once; these come one by one.
	for i := range 100 {
		s.signal(10*time.Minute+time.Duration(i)*time.Second, approvals.SignalChanged, "anything at all")
	}
	s.approve(time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0168", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(1+approvals.MaxRechecks+1, s.calls.loads, "intake, %d rechecks, the re-read after the decision", approvals.MaxRechecks)
}

func (s *ClaimSuite) TestAChangedSignalOutsideAWaitIsIgnored() {
	s.signal(0, approvals.SignalChanged, nil)
	s.start(testClaim("claim-0169", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Equal(1, s.calls.loads)
}
