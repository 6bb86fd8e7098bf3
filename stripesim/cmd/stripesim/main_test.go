package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseOptionsFlagsOverrideEnv(t *testing.T) {
	env := map[string]string{
		"STRIPESIM_ADDR":     "127.0.0.1:1",
		"STRIPESIM_DB":       "env.db",
		"STRIPESIM_KEY_TTL":  "1h",
		"STRIPESIM_API_KEYS": "sk_test_a, sk_test_b,",
	}
	opts, err := parseOptions([]string{"-db", "flag.db"}, func(k string) string { return env[k] }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{addr: "127.0.0.1:1", db: "flag.db", keyTTL: time.Hour, apiKeys: []string{"sk_test_a", "sk_test_b"}}, opts)

	opts, err = parseOptions(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, options{addr: "localhost:12111", db: "var/stripesim.db", keyTTL: 24 * time.Hour, apiKeys: []string{"sk_test_local"}}, opts)

	_, err = parseOptions(nil, func(k string) string { return map[string]string{"STRIPESIM_KEY_TTL": "soon"}[k] }, io.Discard)
	assert.Error(t, err)
}

func TestRunServesAndShutsDownGracefully(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "nested", "sim.db") // parent dir is created
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", dbPath}, func(string) string { return "" }, pw)
		pw.Close()
	}()

	lines := bufio.NewScanner(pr)
	var base string
	for base == "" && lines.Scan() {
		base, _ = strings.CutPrefix(lines.Text(), "stripesim listening on ")
	}
	require.NotEmpty(t, base, "no listening line")
	go io.Copy(io.Discard, pr) // keep draining JSON logs

	resp, err := http.Get(base + "/_sim/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}
