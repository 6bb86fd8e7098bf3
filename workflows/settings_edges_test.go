package workflows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// Workflow input may only tighten the insurer's policy: each option equal
// to the policy is no loosening and is kept; one unit looser is refused,
// naming the option.
func TestOptionsEqualToThePolicyAreKept(t *testing.T) {
	p := insurer.Defaults()
	p.FinalOutcome, p.MaxPayout = "reject", "5000"
	equal := Options{AutoApproveLimitMinor: 100_000, FourEyesAboveMinor: 1_000_000,
		Approval: approvals.Policy{TTL: time.Duration(p.ApprovalTTL), EscalationTTL: time.Duration(p.EscalationTTL), ReminderAt: p.ReminderAt},
		Caps: Caps{MaxSteps: p.MaxSteps, MaxModelSpendMicros: p.MaxModelSpendMicros, MaxPayoutMinor: 500_000, MaxAge: time.Duration(p.MaxAge),
			MaxTriageTurns: p.MaxTriageTurns, MaxTriageTokens: p.MaxTriageTokens}, HistoryBudgetBytes: p.HistoryBudgetBytes}
	s, err := policySettings(p, equal, "usd")
	require.NoError(t, err)
	assert.Equal(t, int64(100_000), s.autoApproveMinor)
	assert.Equal(t, equal.Caps, s.caps)
	assert.Equal(t, int64(1_000_000), s.trust.FourEyesAboveMinor)
	assert.Equal(t, p.ReminderAt, s.approval.ReminderAt)

	for name, edit := range map[string]func(*Options){
		"auto_approve_limit_minor": func(o *Options) { o.AutoApproveLimitMinor++ },
		"four_eyes_above_minor":    func(o *Options) { o.FourEyesAboveMinor++ },
		"approval.ttl":             func(o *Options) { o.Approval.TTL++ },
		"approval.reminder_at":     func(o *Options) { o.Approval.ReminderAt += 0.01 },
		"caps.max_steps":           func(o *Options) { o.Caps.MaxSteps++ },
		"caps.max_payout_minor":    func(o *Options) { o.Caps.MaxPayoutMinor++ },
	} {
		o := equal
		edit(&o)
		_, err := policySettings(p, o, "usd")
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), "options."+name, name)
	}
}

// An option left unset takes the policy's value, never "no limit".
func TestUnsetOptionsTakeThePolicy(t *testing.T) {
	p := insurer.Defaults()
	s, err := policySettings(p, Options{}, "usd")
	require.NoError(t, err)
	assert.Equal(t, p.MaxSteps, s.caps.MaxSteps)
	assert.Equal(t, p.MaxTriageTurns, s.caps.MaxTriageTurns)
	assert.Equal(t, time.Duration(p.ApprovalTTL), s.approval.TTL)
	assert.Equal(t, p.ReminderAt, s.approval.ReminderAt)
}

// A policy amount that does not parse refuses the run; it is not read as
// zero.
func TestAMalformedPolicyAmountRefusesTheRun(t *testing.T) {
	p := insurer.Defaults()
	p.AutoApproveLimit = "10.001"
	_, err := policySettings(p, Options{}, "usd")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "auto_approve_limit")
}

// Runs from before the policy was recorded fill an unset auto-approve
// limit and history budget with the defaults.
func TestInputSettingsFillTheDefaults(t *testing.T) {
	s := inputSettings(Options{}, "usd")
	assert.Equal(t, int64(100_000), s.autoApproveMinor, DefaultAutoApproveLimit)
	assert.Equal(t, int64(DefaultHistoryBudgetBytes), s.historyBudget)
	s = inputSettings(Options{AutoApproveLimitMinor: 1, HistoryBudgetBytes: 2}, "usd")
	assert.Equal(t, [2]int64{1, 2}, [2]int64{s.autoApproveMinor, s.historyBudget})
}
