package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"durableclaims.local/peers/seed"
)

func claimOf(id string, amount int64) seed.Claim {
	var c seed.Claim
	c.ClaimID, c.PolicyID, c.AmountMinor, c.Currency, c.Description = id, "pol-1001", amount, "usd", "A burst pipe"
	c.Claimant.Name, c.Claimant.Email, c.Claimant.StripeAccount = "Ada", "ada@example.com", "acct_1Ada"
	return c
}

// runClaim runs ClaimWorkflow with the model recommending recommended; approve,
// when not zero, signals the approval that long after the start.
func runClaim(t *testing.T, c seed.Claim, recommended int64, approve time.Duration) (seed.View, []string, error) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var a *Activities
	var steps []string
	record := func(name string) func(mock.Arguments) { return func(mock.Arguments) { steps = append(steps, name) } }
	env.OnActivity(a.Triage, mock.Anything, mock.Anything).Return(seed.Triage{Category: "water", FraudScore: 3}, nil).Run(record("triage"))
	env.OnActivity(a.Assess, mock.Anything, mock.Anything, mock.Anything, mock.Anything).Return(seed.Assessment{RecommendedMinor: recommended}, nil).Run(record("assess"))
	env.OnActivity(a.Pay, mock.Anything, mock.Anything, mock.Anything).Return("tr_1", nil).Run(record("pay"))
	for name, f := range map[string]any{"notify": a.Notify, "close": a.Close, "audit": a.Audit} {
		env.OnActivity(f, mock.Anything, mock.Anything, mock.Anything).Return(nil).Run(record(name))
	}
	if approve > 0 {
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(approveSig, seed.Approval{Approver: "adjuster-17"}) }, approve)
	}
	env.ExecuteWorkflow(ClaimWorkflow, Input{Claim: c, LimitMinor: 100000, ApprovalTimeout: 24 * time.Hour})
	require.True(t, env.IsWorkflowCompleted())
	if err := env.GetWorkflowError(); err != nil {
		return seed.View{}, steps, err
	}
	var v seed.View
	require.NoError(t, env.GetWorkflowResult(&v))
	return v, steps, nil
}

func TestBelowTheLimitPaysAtOnce(t *testing.T) {
	v, steps, err := runClaim(t, claimOf("c-1", 64000), 64000, 0)
	require.NoError(t, err)
	require.Equal(t, seed.View{ClaimID: "c-1", Status: seed.StatusPaid, PayoutMinor: 64000, TransferID: "tr_1"}, v)
	require.Equal(t, []string{"triage", "assess", "pay", "notify", "close", "audit"}, steps)
}

func TestAboveTheLimitPaysOnceApproved(t *testing.T) {
	v, steps, err := runClaim(t, claimOf("c-2", 184000), 184000, time.Hour)
	require.NoError(t, err)
	require.Equal(t, seed.StatusPaid, v.Status)
	require.Equal(t, int64(184000), v.PayoutMinor)
	require.Contains(t, steps, "pay")
}

func TestUnansweredExpiresWithoutPaying(t *testing.T) {
	v, steps, err := runClaim(t, claimOf("c-3", 184000), 184000, 0)
	require.NoError(t, err)
	require.Equal(t, seed.View{ClaimID: "c-3", Status: seed.StatusExpired}, v)
	require.NotContains(t, steps, "pay")
}

func TestZeroPayoutIsRejected(t *testing.T) {
	v, steps, err := runClaim(t, claimOf("c-4", 5000), -7, 0)
	require.NoError(t, err)
	require.Equal(t, seed.StatusRejected, v.Status)
	require.NotContains(t, steps, "pay")
}

func TestBadClaimFailsAtIntake(t *testing.T) {
	c := claimOf("c-5", 5000)
	c.Claimant.StripeAccount = "../etc/passwd"
	_, steps, err := runClaim(t, c, 5000, 0)
	require.ErrorContains(t, err, "stripe_account")
	require.Empty(t, steps)
}
