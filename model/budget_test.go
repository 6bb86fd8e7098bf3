package model_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

// A 429 is not a failed attempt: the call waits out the provider's
// Retry-After and asks again, and the caller sees one answer.
func TestOpenAIProviderWaitsOutA429(t *testing.T) {
	m, sim := simModel(t, model.OpenAIConfig{})
	sim.Inject("429")
	begin := time.Now()
	reply, err := m.TriageTurn(context.Background(), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	require.NoError(t, err)
	assert.NotEmpty(t, reply.Output.ToolCalls)
	assert.GreaterOrEqual(t, time.Since(begin), time.Second, "after the Retry-After")
	calls := sim.Calls()
	require.Len(t, calls, 2)
	assert.Equal(t, "error", calls[0].Answered)
	assert.Equal(t, "tool_calls", calls[1].Answered)
}

// A wait longer than the call may hold its worker goes back to the
// workflow: a durable wait where the workflow takes it (WithDurableWait),
// else a retryable rate limit after the wait.
func TestOpenAIProviderHandsALongWaitBack(t *testing.T) {
	m, sim := simModel(t, model.OpenAIConfig{MaxWait: time.Second})
	sim.Inject("429:5")
	_, err := m.TriageTurn(model.WithDurableWait(context.Background()), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelBudgetWait, appErr.Type())
	assert.True(t, appErr.NonRetryable(), "the workflow waits; the activity does not retry")
	var wait time.Duration
	require.NoError(t, appErr.Details(&wait))
	assert.Equal(t, 5*time.Second, wait)

	sim.Inject("429:5")
	_, err = m.TriageTurn(context.Background(), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelRateLimited, appErr.Type())
	assert.False(t, appErr.NonRetryable())
	assert.Equal(t, 5*time.Second, appErr.NextRetryDelay())
}

// Two workers' models on one shared budget stay under it together: the
// tokens the provider serves (it has no limit of its own here) come at the
// budget's rate, not faster, and not much slower.
func TestSharedBudgetHoldsAcrossWorkers(t *testing.T) {
	const budget, burst = 300_000, 1000 // 5,000 tokens a second
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer st.Close()
	var models []*model.OpenAIModel
	_, sim := simModel(t, model.OpenAIConfig{})
	for range 2 {
		b, err := st.ModelBudget(context.Background(), "sim-1", budget, burst)
		require.NoError(t, err)
		m, _ := simModelAt(t, sim, model.OpenAIConfig{Budget: b})
		models = append(models, m)
	}
	begin := time.Now()
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 6 {
				_, err := models[i%2].TriageTurn(context.Background(), model.TurnRequest{Claim: waterClaim(), Turn: 1})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(begin)
	var tokens int64
	for _, c := range sim.Calls() {
		tokens += c.Tokens
	}
	rate := float64(tokens-burst) / took.Minutes()
	t.Logf("%d calls, %d tokens in %s: %.0f a minute past the burst (budget %d)", len(sim.Calls()), tokens, took.Round(time.Millisecond), rate, budget)
	assert.LessOrEqual(t, rate, budget*1.05, "the workers together keep under the budget")
	assert.GreaterOrEqual(t, rate, budget*0.8, "and use most of it")
}

// Calls handed back together are told turns one after another, in the
// order they asked, and a call back at its turn under its key is served:
// the claims come back in the order the budget refused them, not all at
// once. A call with no key is told the wait behind them all.
func TestBudgetHandsBackTurnsInTheOrderAsked(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "claims.db"))
	require.NoError(t, err)
	defer st.Close()
	b, err := st.ModelBudget(context.Background(), "sim-1", 60_000, 1) // 1,000 tokens a second, no burst to speak of
	require.NoError(t, err)
	m, sim := simModel(t, model.OpenAIConfig{Budget: b, MaxWait: 10 * time.Millisecond})
	handedBack := func(key string) time.Duration {
		t.Helper()
		ctx := model.WithDurableWait(context.Background())
		if key != "" {
			ctx = model.WithBudgetKey(ctx, key, false)
		}
		_, err := m.TriageTurn(ctx, model.TurnRequest{Claim: waterClaim(), Turn: 1})
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), "%s: %v", key, err)
		require.Equal(t, model.ErrModelBudgetWait, appErr.Type())
		var wait time.Duration
		require.NoError(t, appErr.Details(&wait))
		return wait
	}
	_, err = m.TriageTurn(model.WithBudgetKey(context.Background(), "claim-0:step2:turn1", false), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	require.NoError(t, err, "the first is served at once")
	first, second, third := handedBack("claim-1:step2:turn1"), handedBack("claim-2:step2:turn1"), handedBack("claim-3:step2:turn1")
	assert.Greater(t, second, first+100*time.Millisecond, "each its own turn")
	assert.Greater(t, third, second+100*time.Millisecond)
	assert.Greater(t, handedBack(""), third, "no key: behind them all")

	time.Sleep(first)
	_, err = m.TriageTurn(model.WithBudgetKey(context.Background(), "claim-1:step2:turn1", false), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	assert.NoError(t, err, "back at its turn, served")
	assert.Len(t, sim.Calls(), 2, "the provider was asked only by the calls served")
}

// asks is a budget that serves every call at once and records how each
// asked.
type asks struct {
	mu    sync.Mutex
	calls []string
}

func (a *asks) Reserve(_ context.Context, key string, again bool, _ int64, _ time.Duration) (time.Duration, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, fmt.Sprintf("%s again=%v", key, again))
	return 0, true, nil
}
func (*asks) Settle(context.Context, int64) error       { return nil }
func (*asks) Hold(context.Context, time.Duration) error { return nil }

// A step that has had its turn tells the budget so when it asks again (an
// invalid answer asked again, a 429), and so does an activity attempt
// after the first: it books ahead of callers who came later instead of
// going to the back of the line it has been through.
func TestAStepAskingAgainTellsTheBudget(t *testing.T) {
	budget := &asks{}
	m, sim := simModel(t, model.OpenAIConfig{Budget: budget})
	sim.Inject(modelsim.Invalid, "429")
	_, err := m.Assess(model.WithBudgetKey(context.Background(), "claim-1:step4", false), model.AssessRequest{Claim: waterClaim()})
	require.NoError(t, err)
	_, err = m.Assess(model.WithBudgetKey(context.Background(), "claim-2:step4", true), model.AssessRequest{Claim: waterClaim()})
	require.NoError(t, err)
	assert.Equal(t, []string{
		"claim-1:step4 again=false", // its first ask
		"claim-1:step4 again=true",  // the invalid answer asked again
		"claim-1:step4 again=true",  // after the 429
		"claim-2:step4 again=true",  // a second attempt
	}, budget.calls)
}

// A 429 that is not a rate (the account out of credit) fails the step at
// once: waiting would not bring the quota back.
func TestOpenAIProviderFailsAnExhaustedQuota(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"You exceeded your current quota.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
	}))
	defer srv.Close()
	m, err := model.NewOpenAIModel(model.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "sim-1"})
	require.NoError(t, err)
	_, err = m.TriageTurn(context.Background(), model.TurnRequest{Claim: waterClaim(), Turn: 1})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	assert.Equal(t, model.ErrModelQuota, appErr.Type())
	assert.True(t, appErr.NonRetryable())
	assert.Contains(t, appErr.Error(), "check the account's plan and billing")
}
