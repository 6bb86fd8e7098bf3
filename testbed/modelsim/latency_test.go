package modelsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

func TestEveryAnswerTakesTheConfiguredLatency(t *testing.T) {
	sim := modelsim.New("")
	sim.Latency = modelsim.Latency{Min: 150 * time.Millisecond, Max: 250 * time.Millisecond}
	srv := httptest.NewServer(sim)
	defer srv.Close()
	for range 3 {
		start := time.Now()
		res, body, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", chatBody(t, 0))
		require.NoError(t, err)
		took := time.Since(start)
		assert.Equal(t, http.StatusOK, res.StatusCode, body)
		assert.GreaterOrEqual(t, took, 150*time.Millisecond)
	}

	// A cancelled request stops waiting.
	sim.Latency = modelsim.Latency{Min: time.Minute, Max: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := post(t, ctx, srv.URL+"/v1/chat/completions", chatBody(t, 0))
	assert.Error(t, err)
	assert.Less(t, time.Since(start), 30*time.Second)
}

func TestParseLatency(t *testing.T) {
	for in, want := range map[string]modelsim.Latency{
		"":          {},
		"1.5s":      {Min: 1500 * time.Millisecond, Max: 1500 * time.Millisecond},
		"1s-2s":     {Min: time.Second, Max: 2 * time.Second},
		" 1s - 2s ": {Min: time.Second, Max: 2 * time.Second},
		"0s-100ms":  {Max: 100 * time.Millisecond},
	} {
		got, err := modelsim.ParseLatency(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"fast", "2s-1s", "-1s", "1s-", "11m"} {
		_, err := modelsim.ParseLatency(bad)
		assert.Error(t, err, bad)
	}
}
