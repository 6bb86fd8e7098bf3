package workflows

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/claim"
)

// The caps at their edges, each on its own: what a run at exactly a cap
// does, and what a step that fails on its own does when no cap cut it.

// A payout of exactly the run's cap is paid; a cent above it is not
// (TestPayoutCap).
func (s *ClaimSuite) TestAPayoutOfExactlyTheCapIsPaid() {
	s.start(testClaim("claim-0081", "640.00"), Options{Caps: Caps{MaxPayoutMinor: 64_000}})
	r := s.result()
	s.Equal(StatusPaid, r.Status)
	s.Require().Len(s.calls.pays, 1)
	s.Equal(int64(64_000), s.calls.pays[0].AmountMinor)
}

// Spending exactly the spend cap ends the model's part: no further turn
// and no assessment; the claim goes to a human.
func (s *ClaimSuite) TestSpendingExactlyTheCapStopsTheModel() {
	s.calls.tokens = 1_000_000 // turn 1 costs 2,500,400 micro-dollars at the default price
	rules := suiteRules()
	rules.MaxTriageTokens, rules.MaxModelSpendMicros = 10_000_000, 2_500_400
	s.calls.rules = &rules
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0082", "640.00"), Options{})
	s.Equal(StatusWaiting, waiting.State)
	s.Equal(int64(2_500_400), waiting.ModelSpendMicros)
	s.Len(s.calls.keys["triage"], 1, "no turn once the cap is reached")
	s.Empty(s.calls.keys["assess"], "no assessment once the cap is reached")
	s.Equal(StatusPaid, s.result().Status)
}

// A step that fails retryably until its own retry policy's attempts run
// out, with the step cap leaving it exactly those attempts, dead-letters
// the claim with its own error: the cap did not cut it, so the dead letter
// names no cap. Seven steps run before the payment (TestStepCap): a cap of
// 27 leaves it its policy's 20.
func (s *ClaimSuite) TestAStepThatRunsOutOfItsOwnAttemptsIsNoCap() {
	s.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{serverRetryState()}})
	s.calls.payErr = temporal.NewApplicationError("stripe: 503 from the payment provider", "StripeUnavailable")
	s.start(testClaim("claim-0083", "640.00"), Options{Caps: Caps{MaxSteps: 27}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal("StripeUnavailable", r.DeadLetter.ErrorType, r.DeadLetter.Error)
	s.Empty(r.DeadLetter.Cap)
	s.Len(s.calls.keys["pay"], 20, "its policy's attempts")
	s.Empty(s.calls.pays)
}

// A claim that changes during every approval wait raises a new request at
// most maxApprovalRounds times, then dead-letters naming the cap.
func (s *ClaimSuite) TestAClaimThatKeepsChangingStopsAfterItsApprovalRounds() {
	reads := 0
	s.calls.reread = func(r *activities.LoadClaimResult) {
		reads++
		r.Claim.AmountMinor, r.Version = 184_000+int64(reads)*100, int64(reads+1) // amended again each time
	}
	for i := 1; i <= maxApprovalRounds; i++ {
		s.approve(time.Duration(i)*time.Hour, "adjuster-17", nil)
	}
	s.start(testClaim("claim-0084", "1840.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(CapApprovalRounds, r.DeadLetter.Cap)
	s.Len(r.Approvals, maxApprovalRounds)
	for _, a := range r.Approvals {
		s.Contains(a.Voided, "claim changed while waiting")
	}
	s.Empty(s.calls.pays)
}

// The turn cap allows exactly its turns: with a cap of two, the rules
// model's answer on turn 2 is taken.
func (s *ClaimSuite) TestTheLastTurnTheCapAllowsIsTaken() {
	rules := suiteRules()
	rules.MaxTriageTurns = 2
	s.calls.rules = &rules
	s.start(testClaim("claim-0085", "640.00"), Options{})
	s.Equal(StatusPaid, s.result().Status, "answered within the turns")
	s.Len(s.calls.keys["triage"], 2)
}

// Using exactly the token cap stops the loop: the claim goes to a human.
func (s *ClaimSuite) TestUsingExactlyTheTokenCapStopsTheLoop() {
	s.calls.tokens = 1_000_000 // a turn uses 1,000,040 tokens in and out
	rules := suiteRules()
	rules.MaxTriageTokens, rules.MaxModelSpendMicros = 1_000_040, 1_000_000_000
	s.calls.rules = &rules
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.approve(2*time.Hour, "adjuster-17", nil)
	s.start(testClaim("claim-0086", "640.00"), Options{})
	s.Equal(StatusWaiting, waiting.State)
	s.Require().NotNil(waiting.Approval)
	s.Contains(waiting.Approval.Request.Reasons[0], "1000040 tokens used (the token cap is 1000040)")
	s.Len(s.calls.keys["triage"], 1)
}

// A claim the assessment recommends nothing for is rejected, and says why.
func (s *ClaimSuite) TestANothingAssessmentIsARejectionWithItsReason() {
	s.calls.recommendNothing = true
	s.start(testClaim("claim-0087", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusRejected, r.Status)
	s.Contains(r.Reason, "assessment recommends no payout")
}

// An escalation notice refused for good in its local form is not sent
// again as a regular activity; the wait goes on to its end.
func (s *ClaimSuite) TestANoticeRefusedForGoodIsNotRetriedRegular() {
	s.calls.escalateErr = temporal.NewNonRetryableApplicationError("smtp: 550 mailbox unavailable", "MailRefused", nil)
	got := s.forms()
	s.start(testClaim("claim-0088", "2500.00"), Options{})
	s.Equal(StatusExpired, s.result().Status)
	var escalations []string
	for _, f := range *got {
		if strings.HasPrefix(f, "EscalateApproval") {
			escalations = append(escalations, f)
		}
	}
	s.Equal([]string{"EscalateApproval local"}, escalations)
	s.Empty(s.calls.escalated)
}

// A step waits for model capacity at most a day in all: with waits of
// the longest a provider may ask (10 minutes), the 144th wait reaches 24
// hours and the next hand-back ends the claim with the cap
// (checkpoint.go, waited >= maxBudgetWaitPerStep).
func (s *ClaimSuite) TestModelCapacityWaitsEndAtADay() {
	s.calls.budgetWaits, s.calls.budgetWaitFor = 1000, maxBudgetWait
	s.start(testClaim("claim-0089", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(ErrCap, r.DeadLetter.ErrorType)
	s.Equal(CapModelCapacity, r.DeadLetter.Cap)
	s.Contains(r.DeadLetter.Error, "waited 24h0m0s for model capacity over 144 waits")
	s.Equal(1000-145, s.calls.budgetWaits)
	s.Equal(24*time.Hour, 144*maxBudgetWait)
}

// A regular step refused for good while the step cap leaves it fewer
// attempts than its policy dead-letters the claim with its own error: the
// cap did not cut it (checkpoint.go, attemptsRanOut).
func (s *ClaimSuite) TestARefusalUnderTheStepCapIsNoCap() {
	s.calls.payErr = temporal.NewNonRetryableApplicationError("card declined", "PaymentRefused", nil)
	s.start(testClaim("claim-0091", "640.00"), Options{Caps: Caps{MaxSteps: 10}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal("PaymentRefused", r.DeadLetter.ErrorType, r.DeadLetter.Error)
	s.Empty(r.DeadLetter.Cap)
}

// An hour of Stripe down is waited out, not dead-lettered: the payment
// hands its wait back after its first attempts, the run waits on durable
// timers (30 s doubling to 5 min) holding no worker, says what it waits on
// and since when, and pays once Stripe is back. The attempts the waits
// took stay well inside the step cap.
func (s *ClaimSuite) TestAnHourOfStripeDownIsWaitedOut() {
	begin := s.env.Now()
	s.calls.stripeDownUntil = begin.Add(time.Hour)
	var during Status
	s.env.RegisterDelayedCallback(func() { during = s.status() }, 30*time.Minute)
	s.start(testClaim("claim-0091", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status, r.Reason)
	s.Equal("tr_1", r.TransferID)
	s.Equal(activities.DependencyStripe, during.WaitingOn)
	s.WithinDuration(begin, during.WaitingSince, time.Minute, "waiting since the payment first found Stripe down")
	s.Equal(int(claim.StepPay), during.Step)
	pays := len(s.calls.keys["pay"])
	s.GreaterOrEqual(pays, 12, "a wait of 30 s doubling to 5 min: some 15 in an hour")
	s.LessOrEqual(pays, 20)
	s.Less(r.StepsExecuted, 40, "one attempt a wait counts, not a retry policy's worth")
	s.Less(s.env.Now().Sub(begin), time.Hour+6*time.Minute, "back within a wait of Stripe's return")
	s.Empty(s.status().WaitingOn, "no longer waiting once paid")
}

// A model provider down for an hour is waited out the same way, in the
// assessment.
func (s *ClaimSuite) TestAnHourOfTheModelDownIsWaitedOut() {
	s.calls.modelDownUntil = s.env.Now().Add(time.Hour)
	s.start(testClaim("claim-0092", "640.00"), Options{})
	r := s.result()
	s.Equal(StatusPaid, r.Status, r.Reason)
	s.GreaterOrEqual(len(s.calls.keys["assess"]), 12)
	s.Len(s.calls.pays, 1)
}

// The waits are bounded: a dependency down for good stops the claim after
// a day of waiting in one step, with a cap (dead-lettered, redrivable once
// it is back), not a history that grows until the server ends it.
func (s *ClaimSuite) TestOutageWaitsEndAtADay() {
	s.calls.stripeDownUntil = s.env.Now().Add(1000 * time.Hour)
	s.start(testClaim("claim-0093", "640.00"), Options{Caps: Caps{MaxAge: 30 * 24 * time.Hour}})
	r := s.result()
	s.Equal(StatusDeadLettered, r.Status)
	s.Require().NotNil(r.DeadLetter)
	s.Equal(ErrCap, r.DeadLetter.ErrorType)
	s.Equal(CapDependency, r.DeadLetter.Cap)
	s.Contains(r.DeadLetter.Error, "for stripe over")
	s.Empty(s.calls.pays)
}

// The first waits are for a blip: each claim waits its own tenth longer
// or shorter, the same on every replay, so the claims an outage parked do
// not all come back at once.
func TestOutageBackoffDoublesSpreadByClaim(t *testing.T) {
	now := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	assert.InDelta(t, float64(30*time.Second), float64(outageWake("claim-1", 0, now, now)), float64(3*time.Second))
	assert.InDelta(t, float64(60*time.Second), float64(outageWake("claim-1", 1, now, now)), float64(6*time.Second))
	assert.InDelta(t, float64(4*time.Minute), float64(outageWake("claim-1", 3, now, now)), float64(24*time.Second))
	assert.Equal(t, outageWake("claim-1", 2, now, now), outageWake("claim-1", 2, now, now), "the same on replay")
	spread := map[time.Duration]bool{}
	for i := range 20 {
		spread[outageWake(fmt.Sprintf("claim-%04d", i), 3, now, now)] = true
	}
	assert.Greater(t, len(spread), 10, "claims wait different times")
}

// After the blips, every waiting claim wakes once a tick of a grid they
// share, at a place in the tick's sweep set by how long it has waited:
// when the dependency is back, whoever has waited longest finds it first.
// A thousand claims parked at random through an hour's outage, and the
// dependency back at instants through the next hour: the claims on the
// grid come back within a tick, never sooner than 30 s after a wait began,
// at most once a tick; in each tick oldest first (any two that began
// waiting more than half a minute apart); back between sweeps, all in the
// order they began waiting, and back during one, the claims the sweep had
// passed at the next tick.
func TestOutageWaitsResumeOldestFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 3))
	down := time.Date(2026, 12, 6, 20, 0, 7, 0, time.UTC)
	type parked struct {
		id    string
		since time.Time
		wakes []time.Time
	}
	claims := make([]parked, 1000)
	end := down.Add(3 * time.Hour)
	for i := range claims {
		c := &claims[i]
		c.id = fmt.Sprintf("claim-%04d", i)
		c.since = down.Add(time.Duration(rng.Int64N(int64(time.Hour))))
		now := c.since
		for round := 0; now.Before(end); round++ {
			wait := outageWake(c.id, round, c.since, now)
			require.GreaterOrEqual(t, wait, 27*time.Second, "%s round %d", c.id, round)
			require.LessOrEqual(t, wait, outageTick+minGridWait, "%s round %d", c.id, round)
			now = now.Add(wait)
			c.wakes = append(c.wakes, now)
			if round > gridFromRound {
				prev := c.wakes[len(c.wakes)-2]
				require.NotEqual(t, prev.Truncate(outageTick), now.Truncate(outageTick), "%s wakes twice in a tick", c.id)
			}
			if round >= gridFromRound {
				require.Less(t, now.Sub(now.Truncate(outageTick)), outageSweep+outageTieBreak, "%s wakes in the sweep", c.id)
			}
		}
	}
	between, during := 0, 0
	for back := down.Add(65 * time.Minute); back.Before(down.Add(2 * time.Hour)); back = back.Add(time.Duration(rng.Int64N(int64(3 * time.Minute)))) {
		type resumed struct{ since, at time.Time }
		var order []resumed
		for _, c := range claims {
			for k, at := range c.wakes {
				if !at.Before(back) {
					if k >= gridFromRound {
						order = append(order, resumed{c.since, at})
					}
					assert.Less(t, at.Sub(back), outageTick+minGridWait, "%s back within a tick", c.id)
					break
				}
			}
		}
		require.Greater(t, len(order), 800, "most claims are on the grid an hour in")
		sort.Slice(order, func(i, j int) bool { return order[i].at.Before(order[j].at) })
		inSweep := back.Sub(back.Truncate(outageTick)) < outageSweep
		if inSweep {
			during++
		} else {
			between++
		}
		for i := 1; i < len(order); i++ {
			for j := range i {
				sameTick := order[i].at.Truncate(outageTick).Equal(order[j].at.Truncate(outageTick))
				if (sameTick || !inSweep) && order[j].since.Sub(order[i].since) > 30*time.Second {
					t.Fatalf("back at %s: a claim waiting since %s came back at %s, before one waiting since %s (at %s)",
						back.Format("15:04:05"), order[j].since.Format("15:04:05"), order[j].at.Format("15:04:05.000"),
						order[i].since.Format("15:04:05"), order[i].at.Format("15:04:05.000"))
				}
			}
		}
		if first, last := order[0].at, order[len(order)-1].at; !inSweep {
			assert.Greater(t, last.Sub(first), outageSweep/4, "back at %s: the claims come back through the sweep, not at once", back)
		}
	}
	assert.Positive(t, between)
	assert.Positive(t, during)
}
