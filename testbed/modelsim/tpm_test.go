package modelsim_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

// fakeClock is the TPM limit's time, moved by the test only.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func tpmServer(t *testing.T, tpm int64) (*modelsim.Server, *fakeClock, string) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	sim := modelsim.New("")
	sim.TokensPerMinute = tpm
	sim.SetClock(clock.now)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return sim, clock, srv.URL + "/v1/chat/completions"
}

// usage reads an answer's token counts.
func usage(t *testing.T, body string) (prompt, total int64) {
	t.Helper()
	var r struct {
		Usage struct {
			Prompt int64 `json:"prompt_tokens"`
			Total  int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	return r.Usage.Prompt, r.Usage.Total
}

func served(calls []modelsim.Call) (tokens int64, limited int) {
	for _, c := range calls {
		tokens += c.Tokens
		if c.RateLimited {
			limited++
		}
	}
	return tokens, limited
}

// A burst beyond the bucket is refused as OpenAI refuses it, and the wait
// it advertises is exactly the one that admits the request again.
func TestTPMRefusesABurstUntilTheAdvertisedWait(t *testing.T) {
	const tpm = 6000 // a bucket of 500 tokens, refilled at 100 a second
	sim, clock, url := tpmServer(t, tpm)
	ctx := context.Background()
	body := chatBody(t, 0)
	prompt := int64(len(body)/4 + 1)

	var answered int
	var resp *http.Response
	var text string
	for {
		var err error
		resp, text, err = post(t, ctx, url, body)
		require.NoError(t, err)
		if resp.StatusCode != http.StatusOK {
			break
		}
		p, total := usage(t, text)
		assert.Equal(t, prompt, p)
		assert.Equal(t, total, sim.Calls()[answered].Tokens, "the call is charged the answer's total_tokens")
		answered++
		require.Less(t, answered, 100, "the burst is never refused")
	}
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, text)
	spent, _ := served(sim.Calls())
	assert.Greater(t, answered, 1, "the bucket starts full")

	// No time has passed: the bucket holds 500-spent tokens exactly.
	level := 500 - spent
	waitMS := ceilDiv((prompt-level)*60_000, tpm)
	resetMS := ceilDiv((500-level)*60_000, tpm)
	wait := time.Duration(waitMS) * time.Millisecond
	assert.Equal(t, strconv.FormatInt(waitMS, 10), resp.Header.Get("retry-after-ms"))
	assert.Equal(t, strconv.FormatInt(max(ceilDiv(waitMS, 1000), 1), 10), resp.Header.Get("Retry-After"), "whole seconds, rounded up")
	assert.Equal(t, "6000", resp.Header.Get("x-ratelimit-limit-tokens"))
	assert.Equal(t, strconv.FormatInt(max(level, 0), 10), resp.Header.Get("x-ratelimit-remaining-tokens"))
	assert.Equal(t, (time.Duration(resetMS) * time.Millisecond).String(), resp.Header.Get("x-ratelimit-reset-tokens"))
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &e), text)
	assert.Equal(t, "tokens", e.Error.Type)
	require.NotNil(t, e.Error.Code)
	assert.Equal(t, "rate_limit_exceeded", *e.Error.Code)
	assert.Equal(t, fmt.Sprintf("Rate limit reached for sim-1 in organization org-modelsim on tokens per min (TPM): "+
		"Limit 6000, Used %d, Requested %d. Please try again in %v.", tpm-level, prompt, wait), e.Error.Message)
	last := sim.Calls()[answered]
	assert.True(t, last.RateLimited)
	assert.Equal(t, "error", last.Answered)
	assert.Zero(t, last.Tokens, "a refused request is charged nothing")

	clock.advance(wait - time.Millisecond)
	resp, _, err := post(t, ctx, url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a millisecond early")
	clock.advance(time.Millisecond)
	resp, text, err = post(t, ctx, url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "admitted after retry-after-ms: %s", text)
}

// A request larger than the bucket waits for it to be full, and is then
// answered, leaving the bucket in debt.
func TestTPMAdmitsARequestLargerThanTheBucketWhenFull(t *testing.T) {
	const tpm = 600 // a bucket of 50 tokens, refilled at 10 a second
	sim, clock, url := tpmServer(t, tpm)
	ctx := context.Background()
	body := chatBody(t, 400) // over 100 prompt tokens

	resp, text, err := post(t, ctx, url, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "a full bucket admits it: %s", text)
	_, total := usage(t, text)

	resp, text, err = post(t, ctx, url, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, text)
	waitMS := ceilDiv(total*60_000, tpm) // from 50-total back to a full 50
	assert.Equal(t, strconv.FormatInt(waitMS, 10), resp.Header.Get("retry-after-ms"))
	assert.Equal(t, strconv.FormatInt(ceilDiv(waitMS, 1000), 10), resp.Header.Get("Retry-After"))
	assert.Equal(t, "0", resp.Header.Get("x-ratelimit-remaining-tokens"), "in debt")
	assert.Equal(t, resp.Header.Get("x-ratelimit-reset-tokens"), (time.Duration(waitMS) * time.Millisecond).String())
	_, msg := apiErr(t, text)
	assert.Contains(t, msg, fmt.Sprintf("Used %d, Requested %d.", tpm-(50-total), len(body)/4+1))

	clock.advance(time.Duration(waitMS)*time.Millisecond - time.Millisecond)
	resp, _, err = post(t, ctx, url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "not yet full")
	clock.advance(time.Millisecond)
	resp, _, err = post(t, ctx, url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	_, limited := served(sim.Calls())
	assert.Equal(t, 2, limited)
}

// Under steady demand above the limit, a minute serves the limit plus the
// bucket it started with, within 10%, and never more.
func TestTPMServesTheLimitUnderSteadyDemand(t *testing.T) {
	const tpm, capacity = 6000, 500
	sim, clock, url := tpmServer(t, tpm)
	ctx := context.Background()
	body := chatBody(t, 0)

	const step = 100 * time.Millisecond
	var tokens, lastCompletion int64
	for elapsed := time.Duration(0); elapsed < time.Minute; elapsed += step {
		for { // as many requests as the bucket admits now
			resp, text, err := post(t, ctx, url, body)
			require.NoError(t, err)
			if resp.StatusCode == http.StatusTooManyRequests {
				break
			}
			require.Equal(t, http.StatusOK, resp.StatusCode, text)
			prompt, total := usage(t, text)
			tokens, lastCompletion = tokens+total, total-prompt
		}
		// Only the last answer's completion may run past what the
		// bucket could have given by now: the debt it leaves.
		allowed := capacity + int64(math.Floor(float64(tpm)*elapsed.Minutes()))
		require.LessOrEqual(t, tokens-lastCompletion, allowed, "at %v", elapsed)
		clock.advance(step)
	}
	spent, limited := served(sim.Calls())
	assert.Equal(t, tokens, spent, "the calls record what the answers' usage says")
	assert.Greater(t, limited, 500, "demand stayed above the limit")
	assert.InEpsilon(t, tpm+capacity, spent, 0.1)
	assert.LessOrEqual(t, spent-lastCompletion, int64(tpm+capacity))
}

// With no limit every request is answered, as before.
func TestTPMZeroIsUnlimited(t *testing.T) {
	sim, _, url := tpmServer(t, 0)
	body := chatBody(t, 4096) // a thousand tokens a request
	for range 50 {
		resp, text, err := post(t, context.Background(), url, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, text)
		assert.Empty(t, resp.Header.Get("x-ratelimit-limit-tokens"))
	}
	spent, limited := served(sim.Calls())
	assert.Zero(t, limited)
	assert.Greater(t, spent, int64(50_000), "tokens are still reported")
}

// A request the limit refuses is not served the next fault.
func TestTPMRefusalKeepsTheFaultQueued(t *testing.T) {
	sim, clock, url := tpmServer(t, 60) // a bucket of 5 tokens
	body := chatBody(t, 0)
	resp, _, err := post(t, context.Background(), url, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sim.Inject(modelsim.ServerError)
	resp, _, err = post(t, context.Background(), url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	clock.advance(time.Hour)
	resp, _, err = post(t, context.Background(), url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode, "the fault goes to the next call admitted")
	calls := sim.Calls()
	assert.Empty(t, calls[1].Fault)
	assert.Equal(t, modelsim.ServerError, calls[2].Fault)
	assert.Zero(t, calls[2].Tokens, "an unanswered call is charged nothing")

	resp, _, err = post(t, context.Background(), url, body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode, "the faulted call's reservation was given back")
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
