package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const claimBody = `{"model":"sim-1","messages":[{"role":"user","content":"Claim:\n{\"claim_id\":\"claim-cmd-1\",\"amount_minor\":100,\"currency\":\"usd\"}"}]}`

// start runs the command until the returned cancel is called; it returns the
// base URL it listens on and the channel run's result arrives on.
func start(t *testing.T, args ...string) (string, context.CancelFunc, <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw)
		pw.Close()
	}()
	addr := regexp.MustCompile(`msg="modelsim listening" addr=(\S+)`)
	lines := bufio.NewScanner(pr)
	var base string
	for base == "" && lines.Scan() {
		if m := addr.FindStringSubmatch(lines.Text()); m != nil {
			base = "http://" + m[1]
		}
	}
	require.NotEmpty(t, base, "no listening line")
	go io.Copy(io.Discard, pr)
	return base, cancel, done
}

func TestRunRefusesBadFaultsBeforeListening(t *testing.T) {
	for _, faults := range []string{"500,nope", "slow:1h", "429:0", "slow"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var out strings.Builder
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-faults", faults}, &out)
		cancel()
		require.Error(t, err, faults)
		assert.Contains(t, err.Error(), "-faults", faults)
		assert.NotContains(t, out.String(), "modelsim listening", faults)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var out strings.Builder
	err := run(ctx, []string{"-addr", "127.0.0.1:0", "-faults", "500,nope,slow:11m"}, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown fault "nope"`, "every bad fault is reported")
	assert.Contains(t, err.Error(), `"slow:11m"`, "every bad fault is reported")
}

func TestRunServesFaultsThenShutsDownDespiteASlowCall(t *testing.T) {
	base, cancel, done := start(t, "-faults", " 503 , slow:30s,")
	post := func() (*http.Response, error) {
		return http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(claimBody))
	}
	resp, err := post()
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "the first fault")

	type result struct {
		resp *http.Response
		err  error
	}
	slow := make(chan result, 1)
	go func() { resp, err := post(); slow <- result{resp, err} }()
	time.Sleep(200 * time.Millisecond) // let the slow call start waiting
	start := time.Now()
	cancel()
	select {
	case r := <-slow:
		require.NoError(t, r.err)
		r.resp.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, r.resp.StatusCode, "the slow call is abandoned, not answered")
	case <-time.After(4 * time.Second):
		t.Fatal("the slow call held up shutdown")
	}
	select {
	case err := <-done:
		assert.NoError(t, err)
		assert.Less(t, time.Since(start), 2*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancellation")
	}
}

func TestRunRefusesABadTPMBeforeListening(t *testing.T) {
	for _, tpm := range []string{"fast", "-1", "1.5", "1e6", " 100"} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var out strings.Builder
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-tpm", tpm}, &out)
		cancel()
		require.Error(t, err, tpm)
		assert.Contains(t, err.Error(), `-tpm "`+tpm+`": want a whole number of tokens per minute`, tpm)
		assert.NotContains(t, out.String(), "modelsim listening", tpm)
	}
	t.Setenv("MODELSIM_TPM", "lots")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-tpm "lots"`, "MODELSIM_TPM is checked as the flag is")
}

func TestRunLimitsTokensPerMinute(t *testing.T) {
	t.Setenv("MODELSIM_TPM", "999999") // the flag wins over the environment
	base, _, _ := start(t, "-tpm", "600")
	var resp *http.Response
	for range 5 { // a bucket of 50 tokens: one call empties it
		var err error
		resp, err = http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(claimBody))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "600", resp.Header.Get("x-ratelimit-limit-tokens"))
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
}

func TestRunRefusesBadAnswersBeforeListening(t *testing.T) {
	for _, bad := range []struct{ spec, msg string }{
		{"claim-1:category=spaceship", `-answers: answer rule 1 "claim-1:category=spaceship": change "category=spaceship"`},
		{"claim-1:recommend=50%;claim-(:fraud_score=1", `answer rule 2 "claim-(:fraud_score=1": claim-id regexp`},
		{"claim-1:needs_review=true;", `answer rule 2 "": empty rule`},
		{"claim-1:fraud_score=101", "fraud_score must be a whole number from 0 to 100"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var out strings.Builder
		err := run(ctx, []string{"-addr", "127.0.0.1:0", "-answers", bad.spec}, &out)
		cancel()
		require.Error(t, err, bad.spec)
		assert.Contains(t, err.Error(), bad.msg, bad.spec)
		assert.NotContains(t, out.String(), "modelsim listening", bad.spec)
	}
	t.Setenv("MODELSIM_ANSWERS", "claim-1:colour=red")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := run(ctx, []string{"-addr", "127.0.0.1:0"}, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `-answers: answer rule 1 "claim-1:colour=red": unknown change`, "MODELSIM_ANSWERS is checked as the flag is")
}

func TestRunAppliesAnswerRules(t *testing.T) {
	t.Setenv("MODELSIM_ANSWERS", "claim-cmd-1:category=theft") // the flag wins over the environment
	base, _, _ := start(t, "-answers", "other:fraud_score=1; claim-cmd-\\d+ : category=fire, fraud_score=75")
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(claimBody))
	require.NoError(t, err)
	var completion struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&completion))
	resp.Body.Close()
	require.Len(t, completion.Choices, 1)
	var triage struct {
		Category   string `json:"category"`
		FraudScore int    `json:"fraud_score"`
		Summary    string `json:"summary"`
	}
	require.NoError(t, json.Unmarshal([]byte(completion.Choices[0].Message.Content), &triage))
	assert.Equal(t, "fire", triage.Category)
	assert.Equal(t, 75, triage.FraudScore)
	assert.True(t, strings.HasSuffix(triage.Summary, " (answer rule 2) (answer 1)"), triage.Summary)

	resp, err = http.Get(base + "/_sim/calls")
	require.NoError(t, err)
	var calls []struct {
		ClaimID string `json:"claim_id"`
		Rule    int    `json:"rule"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&calls))
	resp.Body.Close()
	require.Len(t, calls, 1)
	assert.Equal(t, "claim-cmd-1", calls[0].ClaimID)
	assert.Equal(t, 2, calls[0].Rule)
}
