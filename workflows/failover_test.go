package workflows

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

// failoverActivities are a worker's model activities for real, where the
// insurer allows failover: a primary that answers every request with a
// 500, and a fallback, each a modelsim, under the test environment's
// retries. c is registered to the test environment's run.
func (s *ClaimSuite) failoverActivities(c claim.Claim) (primary, fallback *modelsim.Server) {
	st, err := store.Open(filepath.Join(s.T().TempDir(), "claims.db"))
	s.Require().NoError(err)
	s.T().Cleanup(func() { st.Close() })
	ctx := context.Background()
	_, _, err = st.PutClaim(ctx, c)
	s.Require().NoError(err)
	_, err = st.TakeClaim(ctx, c.ID, "default-test-run-id")
	s.Require().NoError(err)

	openai := func(name, env string) (*model.OpenAIModel, *modelsim.Server) {
		sim := modelsim.New("")
		srv := httptest.NewServer(sim)
		s.T().Cleanup(srv.Close)
		m, err := model.NewOpenAIModel(model.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: name, Env: env, Timeout: 5 * time.Second})
		s.Require().NoError(err)
		return m, sim
	}
	a := &activities.Activities{Store: st, FallbackAfter: 3}
	a.Model, primary = openai("primary-1", "MODEL_")
	a.Fallback, fallback = openai("fallback-1", "MODEL_FALLBACK_")
	for range 100 {
		primary.Inject(modelsim.ServerError)
	}
	s.calls.acts = a
	return primary, fallback
}

// The primary is down: every model call of the claim fails over after
// three attempts, the claim completes on the fallback's answers, and the
// status and the audit record name the fallback for each of them. The
// workflow schedules what it always does: the switch is inside the
// activities.
func (s *ClaimSuite) TestAClaimCompletesOnTheFallbackModel() {
	c := testClaim("claim-0310", "640.00")
	primary, fallback := s.failoverActivities(c)
	var running Status
	s.env.RegisterDelayedCallback(func() { running = s.status() }, time.Hour)
	s.start(c, Options{})

	res := s.result()
	s.Equal(StatusPaid, res.Status, "within the auto-approve limit, no review reason: the rules pay")
	s.Require().Len(s.calls.pays, 1)
	s.Equal(int64(64000), s.calls.pays[0].AmountMinor)
	var keys []claim.IdempotencyKey
	for _, k := range []claim.IdempotencyKey{"claim-0310:step2:turn1", "claim-0310:step2:turn2", "claim-0310:step4"} {
		keys = append(keys, k, k, k, k)
	}
	s.Equal(keys, append(s.calls.keys["triage"], s.calls.keys["assess"]...),
		"the activities the workflow always schedules, each for four attempts under its step's key, the fourth answered by the fallback")

	s.Require().Len(s.calls.audits, 1)
	models := s.calls.audits[0].Models
	s.Require().Len(models, 3, "two triage turns and the assessment")
	for _, m := range models {
		s.Equal("openai/fallback-1", m.Model, "step %d turn %d", m.Step, m.Turn)
		s.NotEmpty(m.OutputSHA256)
		s.Positive(m.CostMicros, "the fallback's cost counts against the spend cap like the primary's")
	}
	s.Empty(running.ModelCalls, "the claim was over by then")
	s.Len(primary.Calls(), 9, "three attempts of each call")
	s.Len(fallback.Calls(), 3, "one request each, on the fourth attempt")

	ledger, err := s.calls.acts.Store.ModelCalls(context.Background(), c.ID)
	s.Require().NoError(err)
	s.Require().Len(ledger, 3)
	for _, l := range ledger {
		s.Equal("openai/fallback-1", l.Provider)
		s.Equal(4, l.Attempt)
	}
}

// A fallback's answer is advice like the primary's: above the
// auto-approve limit the claim still waits for a person, and the status
// names the fallback as the model it rests on.
func (s *ClaimSuite) TestAFallbacksAnswerStillGoesToAHuman() {
	c := testClaim("claim-0311", "1840.00")
	s.failoverActivities(c)
	var waiting Status
	s.env.RegisterDelayedCallback(func() { waiting = s.status() }, time.Hour)
	s.reject(2*time.Hour, "adjuster-17", "not covered")
	s.start(c, Options{Approval: approvals.Policy{TTL: 3 * time.Hour, EscalationTTL: time.Hour}})

	s.Equal(StatusWaiting, waiting.State)
	s.Require().NotNil(waiting.Approval)
	s.Require().Len(waiting.ModelCalls, 3)
	for _, m := range waiting.ModelCalls {
		s.Equal("openai/fallback-1", m.Model)
	}
	s.Equal(StatusRejected, s.result().Status)
	s.Empty(s.calls.pays)
}
