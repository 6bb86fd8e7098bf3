package workflows

import (
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
)

// Payloads of every wrong shape, by signal and by update: each is refused
// with a reason; none fails the workflow, and the claim still pays when a
// valid decision follows.
func (s *ClaimSuite) TestDecisionsOfEveryWrongShape() {
	bad := []any{
		42, []int{1, 2}, "approve", true, nil,
		map[string]any{"approver": 7},
		map[string]any{"approver": []string{"a"}},
		map[string]any{"approver": strings.Repeat("x", 2000)},
		map[string]any{"approver": "adjuster-17", "payload_sha256": "ZZZ"},
		map[string]any{"approver": "adjuster-17", "payload_sha256": strings.Repeat("a", 65)},
		map[string]any{"approver": "adjuster-17", "extra": true},
		map[string]any{"approver": "\u0000\u202e"},
	}
	for i, p := range bad {
		s.signal(time.Duration(i+1)*time.Minute, approvals.SignalApprove, p)
	}
	var rejected []error
	for i, p := range append(bad, map[string]any{"approver": "adjuster-17", "decision": "maybe"}) {
		s.env.RegisterDelayedCallback(func() {
			s.env.UpdateWorkflow(approvals.UpdateDecide, "", &testsuite.TestUpdateCallback{
				OnReject:   func(err error) { rejected = append(rejected, err) },
				OnAccept:   func() { s.Fail("a malformed update was accepted", "%v", p) },
				OnComplete: func(any, error) {},
			}, p)
		}, time.Hour+time.Duration(i)*time.Minute)
	}
	s.approve(3*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0080", "1840.00"), Options{})

	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Len(rejected, len(bad)+1, "every malformed update is rejected before history")
	refusals := s.refusals(r)
	s.Len(refusals, len(bad), "every malformed signal is recorded and refused")
	for i, ref := range refusals {
		s.NotEmpty(ref, "signal %d refused without a reason", i)
	}
	for _, a := range r.Attempts {
		s.LessOrEqual(len(a.Approver), 65+len("…"), "approver IDs are trimmed in the trail")
		s.LessOrEqual(len(a.Payload), 256)
	}
}

// A key replayed with different parameters is a bug, not a provider
// problem: the claim is dead-lettered at step 6, never paid twice.
func (s *ClaimSuite) TestIdempotencyConflictDeadLetters() {
	s.calls.payErr = temporal.NewNonRetryableApplicationError(
		"stripe 400 idempotency_error: Keys for idempotent requests can only be used with the same parameters",
		activities.ErrIdempotencyConflict, nil)
	s.start(testClaim("claim-0081", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Equal(activities.ErrIdempotencyConflict, r.DeadLetter.ErrorType)
	s.Equal([]string{"payment claim-0081:step6"}, r.DeadLetter.UnknownEffects)
	s.Len(s.calls.keys["pay"], 1, "not retried")
	s.Empty(s.calls.notices)
}
