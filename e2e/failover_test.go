package e2e

import (
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// TestAWorkerFailsOverToItsFallbackModel runs the real worker with a
// primary model that answers every request with a 500 and a fallback
// (MODEL_FALLBACK_*, after one failed attempt): the claim is paid on the
// fallback's answers, and its status, the usage ledger, claimsctl show
// and the worker's metrics name the fallback.
func TestAWorkerFailsOverToItsFallbackModel(t *testing.T) {
	w := newWorld(t)
	primary, fallback := modelsim.New(""), modelsim.New("")
	psrv, fsrv := httptest.NewServer(primary), httptest.NewServer(fallback)
	t.Cleanup(psrv.Close)
	t.Cleanup(fsrv.Close)
	for range 50 {
		primary.Inject(modelsim.ServerError)
	}
	metricsAddr := freePort(t)
	w.env = append(w.env, "MODEL_PROVIDER=openai", "MODEL_BASE_URL="+psrv.URL+"/v1", "MODEL_NAME=primary-1",
		"MODEL_FALLBACK_PROVIDER=openai", "MODEL_FALLBACK_BASE_URL="+fsrv.URL+"/v1", "MODEL_FALLBACK_NAME=fallback-1",
		"MODEL_FALLBACK_AFTER=1", "METRICS_ADDR="+metricsAddr)
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))

	const id = "claim-e2e-failover"
	w.start(w.claimFile(id, "640.00"))
	assert.Equal(t, workflows.StatusPaid, w.result(id).Status)
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)

	st := w.status(id)
	require.Len(t, st.ModelCalls, 3, "two triage turns and the assessment")
	for _, m := range st.ModelCalls {
		assert.Equal(t, "openai/fallback-1", m.Model, "step %d turn %d", m.Step, m.Turn)
		assert.Positive(t, m.CostMicros)
	}
	assert.Len(t, primary.Calls(), 3, "one failed attempt of each call")
	assert.Len(t, fallback.Calls(), 3, "one request each on the second")
	_, ledger := w.ledger(id)
	require.Len(t, ledger, 3)
	for _, c := range ledger {
		assert.Equal(t, "openai/fallback-1", c.Provider)
		assert.Equal(t, 2, c.Attempt)
	}

	out, err := testenv.Run(t, w.env, filepath.Join(w.bin, "claimsctl"), "show", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, "(openai/fallback-1")
	assert.NotContains(t, out, "primary-1")

	text := scrape(t, metricsAddr)
	assert.Equal(t, 3.0, value(text, "model_failovers_total", `from="openai/primary-1"`))
	assert.Equal(t, 3.0, value(text, "model_calls_total", `provider="openai/fallback-1"`))
	assert.Contains(t, worker.Output(), "model failover allowed")
}
