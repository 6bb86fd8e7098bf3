package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/stripesim"
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

func TestParseOptionsFaults(t *testing.T) {
	env := map[string]string{
		"STRIPESIM_FAULTS": `[{"fault":"slow","delay":"2s","transfer_group":"claim_1","times":-1},
			{"fault":"500-after-commit","method":"POST","key_prefix":"pay-"}]`,
	}
	getenv := func(k string) string { return env[k] }
	opts, err := parseOptions(nil, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []stripesim.FaultRule{
		{Fault: stripesim.FaultSlow, Delay: 2 * time.Second, TransferGroup: "claim_1", Times: -1},
		{Fault: stripesim.FaultErrorAfterCommit, Method: "POST", KeyPrefix: "pay-"},
	}, opts.faults)

	opts, err = parseOptions([]string{"-faults", `[{"fault":"429","times":3}]`}, getenv, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []stripesim.FaultRule{{Fault: stripesim.FaultRateLimit, Times: 3}}, opts.faults, "the flag overrides the env")

	opts, err = parseOptions([]string{"-faults="}, getenv, io.Discard)
	require.NoError(t, err)
	assert.Nil(t, opts.faults, "an empty flag switches env faults off")
	opts, err = parseOptions(nil, func(k string) string { return map[string]string{"STRIPESIM_FAULTS": "[]"}[k] }, io.Discard)
	require.NoError(t, err)
	assert.Nil(t, opts.faults)

	for _, bad := range []struct{ json, msg string }{
		{`{"fault":"429"}`, "JSON array"},
		{`[{"fault":"429"},{"fault":"nope"}]`, "faults[1]: fault rule: unknown fault"},
		{`[{"fault":"slow","delay":"2"}]`, "missing unit"},
		{`[{"fault":"slow","delay":2000000000}]`, "Go duration string"},
		{`[{"fault":"429","transfer-group":"x"}]`, "unknown field"},
		{`[{"fault":"429"},{"fault":"429","path":"/transfers"}]`, "faults[1]: fault rule: path \"/transfers\" must start with /v1/"},
		{`[{"fault":"429","method":"post "}]`, "method"},
	} {
		_, err := parseOptions(nil, func(k string) string { return map[string]string{"STRIPESIM_FAULTS": bad.json}[k] }, io.Discard)
		assert.ErrorContains(t, err, bad.msg, bad.json)
	}
}

func TestRunServesAndShutsDownGracefully(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "nested", "sim.db") // parent dir is created
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		getenv := func(k string) string {
			return map[string]string{"STRIPESIM_FAULTS": `[{"fault":"409","key_prefix":"x-"}]`}[k]
		}
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", dbPath}, getenv, pw)
		pw.Close()
	}()

	lines := bufio.NewScanner(pr)
	var base string
	for base == "" && lines.Scan() { // skip JSON log lines (e.g. "fault injection active")
		if addr, ok := strings.CutPrefix(lines.Text(), "stripesim listening on "); ok {
			base = addr
		}
	}
	require.NotEmpty(t, base, "no listening line")
	go io.Copy(io.Discard, pr) // keep draining JSON logs

	resp, err := http.Get(base + "/_sim/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(base + "/_sim/faults")
	require.NoError(t, err)
	var faults []stripesim.FaultRule
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&faults))
	resp.Body.Close()
	assert.Equal(t, []stripesim.FaultRule{{
		ID: 1, Fault: stripesim.FaultKeyInUse, Method: "POST", Path: "/v1/transfers", KeyPrefix: "x-", Times: 1,
	}}, faults, "STRIPESIM_FAULTS installed at startup")

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

// An invalid rule stops the command before it opens the database or listens.
func TestRunRefusesInvalidFaultsBeforeStarting(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "nested", "sim.db")
	var out strings.Builder
	getenv := func(k string) string {
		return map[string]string{"STRIPESIM_FAULTS": `[{"fault":"429"},{"fault":"slow"}]`}[k]
	}
	err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-db", dbPath}, getenv, &out)
	require.ErrorContains(t, err, "faults[1]: fault rule: \"slow\" needs a positive delay")
	assert.NotContains(t, out.String(), "listening")
	assert.NoDirExists(t, filepath.Dir(dbPath), "nothing was created")
}

// Shutdown does not wait out a slow fault: the sleeping request is answered
// 503 unprocessed and run returns at once.
func TestRunShutdownEndsSlowFaults(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		getenv := func(k string) string {
			return map[string]string{"STRIPESIM_FAULTS": `[{"fault":"slow","delay":"30s"}]`}[k]
		}
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", ":memory:"}, getenv, pw)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var base string
	for base == "" && lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "stripesim listening on "); ok {
			base = addr
		}
	}
	require.NotEmpty(t, base, "no listening line")
	injected := make(chan struct{})
	go func() {
		for lines.Scan() {
			if strings.Contains(lines.Text(), `"msg":"fault injected"`) {
				close(injected)
				break
			}
		}
		io.Copy(io.Discard, pr)
	}()

	type result struct {
		status int
		err    error
	}
	slow := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/transfers", strings.NewReader("amount=1&currency=usd&destination=acct_1"))
		req.Header.Set("Authorization", "Bearer "+stripesim.DefaultAPIKey)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			slow <- result{err: err}
			return
		}
		resp.Body.Close()
		slow <- result{status: resp.StatusCode}
	}()
	select {
	case <-injected:
	case <-time.After(5 * time.Second):
		t.Fatal("the slow fault never fired")
	}

	start := time.Now()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)
	case <-time.After(8 * time.Second):
		t.Fatal("run did not return: shutdown waited for the slow fault")
	}
	r := <-slow
	require.NoError(t, r.err)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
}
