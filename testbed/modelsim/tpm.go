package modelsim

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// tokenBucket is the state of the tokens-per-minute limit (Server.TokensPerMinute),
// guarded by the server's mutex. It holds up to five seconds' worth of
// tokens and refills continuously; level goes negative when an answer costs
// more than the bucket held, a debt the refill repays before anything else
// is admitted.
type tokenBucket struct {
	level   float64
	at      time.Time // when level was last refilled
	started bool      // the bucket starts full at its first use
}

// slack absorbs float rounding, so that waiting exactly the advertised
// retry-after-ms always admits.
const slack = 1e-6

// rateLimit is a refusal by the TPM limit: what the 429 tells the caller.
type rateLimit struct {
	limit, remaining, used, requested int64
	wait, reset                       time.Duration // until admitted; until the bucket is full
}

// clock is the server's time: now, or time.Now.
func (s *Server) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// capacity is the bucket's size: five seconds of the limit, at least one token.
func (s *Server) capacity() float64 { return float64(max(s.TokensPerMinute/12, 1)) }

// refill brings the bucket up to the present. s.mu is held.
func (s *Server) refill() {
	now, b := s.clock(), &s.tpm
	if !b.started {
		b.level, b.at, b.started = s.capacity(), now, true
		return
	}
	if now.After(b.at) {
		b.level += float64(now.Sub(b.at)) * float64(s.TokensPerMinute) / float64(time.Minute)
		b.at = now
	}
	b.level = min(b.level, s.capacity())
}

// admit reserves a request's prompt tokens, or says why it must wait. The
// bucket must hold the prompt, or be full if the prompt is larger than it
// (else that request could never be answered). Reserving at admission, not
// only charging after the answer, keeps concurrent requests from all being
// admitted on the same tokens while their answers are slow. s.mu is held.
func (s *Server) admit(prompt int64) *rateLimit {
	if s.TokensPerMinute <= 0 {
		return nil
	}
	s.refill()
	b, capacity := &s.tpm, s.capacity()
	need := min(float64(prompt), capacity)
	if b.level >= need-slack {
		b.level -= float64(prompt)
		return nil
	}
	remaining := int64(math.Floor(b.level + slack))
	return &rateLimit{
		limit:     s.TokensPerMinute,
		remaining: max(remaining, 0),
		used:      s.TokensPerMinute - remaining,
		requested: prompt,
		wait:      s.refillTime(need - b.level),
		reset:     s.refillTime(capacity - b.level),
	}
}

// settle charges an admitted request its answer's total tokens, of which
// its prompt was reserved at admission; an admitted request that was not
// answered (total 0: a fault, a cancelled wait) has its reservation back.
// s.mu is held.
func (s *Server) settle(prompt, total int64) {
	if s.TokensPerMinute <= 0 {
		return
	}
	s.refill()
	s.tpm.level = min(s.tpm.level+float64(prompt-total), s.capacity())
}

// refillTime is how long the bucket takes to gain n tokens, rounded up to
// the millisecond.
func (s *Server) refillTime(n float64) time.Duration {
	ms := math.Ceil(n * float64(time.Minute/time.Millisecond) / float64(s.TokensPerMinute))
	return time.Duration(max(ms, 0)) * time.Millisecond
}

// write answers the refusal as OpenAI does.
func (rl *rateLimit) write(w http.ResponseWriter, modelName string) {
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(max(int64(math.Ceil(rl.wait.Seconds())), 1), 10))
	h.Set("retry-after-ms", strconv.FormatInt(rl.wait.Milliseconds(), 10))
	h.Set("x-ratelimit-limit-tokens", strconv.FormatInt(rl.limit, 10))
	h.Set("x-ratelimit-remaining-tokens", strconv.FormatInt(rl.remaining, 10))
	h.Set("x-ratelimit-reset-tokens", rl.reset.String())
	apiError(w, http.StatusTooManyRequests, "tokens", "rate_limit_exceeded", fmt.Sprintf(
		"Rate limit reached for %s in organization org-modelsim on tokens per min (TPM): Limit %d, Used %d, Requested %d. Please try again in %v.",
		modelName, rl.limit, rl.used, rl.requested, rl.wait))
}
