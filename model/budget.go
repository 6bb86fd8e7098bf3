package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/openai/openai-go/v3"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Budget is the provider's rate limit as every worker shares it: a token
// bucket kept where all workers see it (the claims store), so that the
// workers together stay under the tokens per minute the provider allows,
// and a 429 one of them receives holds back all of them.
type Budget interface {
	// Reserve books tokens and says how long to wait before spending
	// them, in the order the bookings came: fair across claims and
	// workers. A wait longer than most is not booked (ok false), and says
	// how long it would have been. key names the call (its step's
	// idempotency key, or empty): a call refused under a key keeps its
	// place in line for when it asks again under it, ahead of callers
	// who came later. again says the step has had a turn already (asked
	// again after an invalid answer, a 429 or a failed attempt): it too
	// books ahead of callers who came later.
	Reserve(ctx context.Context, key string, again bool, tokens int64, most time.Duration) (wait time.Duration, ok bool, err error)
	// Settle corrects a booking by what the call really used (used minus
	// booked; a call that failed gives back all it booked).
	Settle(ctx context.Context, delta int64) error
	// Hold keeps every worker's calls back for d: the provider said so.
	Hold(ctx context.Context, d time.Duration) error
}

// ErrModelBudgetWait is the error type of a model call that found no
// capacity in time and hands the wait back to its workflow, which waits on
// a durable timer (no worker held) and asks again, without counting the
// wait against the step's retries: see WithDurableWait. Its detail is the
// wait, a time.Duration.
const ErrModelBudgetWait = "ModelBudgetWait"

// ErrModelQuota is a 429 that is not a rate limit: the account's quota is
// used up (OpenAI's insufficient_quota). It fails the step at once.
const ErrModelQuota = "ModelQuotaExhausted"

// MaxBudgetWait bounds one durable wait the workflow takes for capacity;
// the step then asks the budget again.
const MaxBudgetWait = 10 * time.Minute

type durableWaitKey struct{}

// WithDurableWait marks a call whose workflow waits for capacity itself:
// a wait longer than the call may hold a worker ends the call with an
// ErrModelBudgetWait error instead of a retryable rate limit.
func WithDurableWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, durableWaitKey{}, true)
}

// DurableWait reports whether ctx is marked by WithDurableWait.
func DurableWait(ctx context.Context) bool { v, _ := ctx.Value(durableWaitKey{}).(bool); return v }

type budgetCallKey struct{}

// budgetCall is what the shared budget is told of a step's calls: its key,
// and whether it has had a turn already (Budget.Reserve's again).
type budgetCall struct {
	key   string
	again bool
}

// WithBudgetKey names the step's calls for the shared budget
// (Budget.Reserve's key): its idempotency key, the same every time the
// step asks. again says the step has had a turn already (an activity
// attempt after the first); a call of it that books marks the rest so.
func WithBudgetKey(ctx context.Context, key string, again bool) context.Context {
	return context.WithValue(ctx, budgetCallKey{}, &budgetCall{key: key, again: again})
}

func budgetCallOf(ctx context.Context) *budgetCall {
	if c, ok := ctx.Value(budgetCallKey{}).(*budgetCall); ok {
		return c
	}
	return &budgetCall{}
}

// completionAllowance is what a call is booked for beyond its prompt
// before the answer says what it used.
const completionAllowance = 256

// DefaultMaxWait is how long a call may hold its worker for its turn in
// the budget (MODEL_MAX_WAIT). It is also how far ahead the budget hands
// out turns, and what the budget learns after a turn was given (the
// tokens an answer really used, a booking given back) moves only the
// turns given later, while the provider counts it at once: with turns
// 30 s ahead a call sent at its turn found the provider's bucket up to
// ~1,000 tokens short of what the budget held, and three workers on one
// budget drew 19-34 429s in 150 claims; with 5 s and with 2 s, none, at
// the same pace (bin/bench -only ratelimit, 2026-12-07).
const DefaultMaxWait = 5 * time.Second

// holdFloor is the wait after a 429 that gave no Retry-After.
const holdFloor = time.Second

// complete makes one chat completion within the shared budget: it books
// the request's tokens, waits its turn, calls, and settles what the answer
// used. A 429 is not an attempt: the provider's Retry-After holds every
// worker back (Hold) and the call asks again, for as long as it may hold a
// worker (cfg.MaxWait, within the activity's deadline); a longer wait is
// handed back to the workflow (budgetWait).
func (m *OpenAIModel) complete(ctx context.Context, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, error) {
	booked := int64(0)
	if m.cfg.Budget != nil {
		b, _ := json.Marshal(params)
		booked = int64(len(b)/4) + completionAllowance
	}
	call := budgetCallOf(ctx)
	queued := false
	for {
		if m.cfg.Budget != nil {
			wait, ok, err := m.cfg.Budget.Reserve(ctx, call.key, call.again, booked, m.mayWait(ctx))
			if err != nil {
				return nil, retryable("the shared model budget is unreadable: "+err.Error(), ErrModelUnavailable, 0)
			}
			if !ok && !queued && wait <= m.mayWait(ctx) {
				// Placed in line behind others the budget handed back,
				// with a turn this call may wait for in its worker: it
				// waits for it once, and asks again from its place.
				queued = true
				if err := m.sleep(ctx, "budget", wait); err != nil {
					return nil, classifyModelError(err, m.cfg.Env)
				}
				continue
			}
			if !ok {
				return nil, m.budgetWait(ctx, "budget", wait, "the shared budget ("+m.cfg.Model+") has no room sooner")
			}
			call.again = true // its turn is had: asked again, it books ahead of later callers
			if err := m.sleep(ctx, "budget", wait); err != nil {
				m.settle(ctx, -booked)
				return nil, classifyModelError(err, m.cfg.Env)
			}
		}
		comp, err := m.chat(ctx, params)
		if err == nil {
			if used := comp.Usage.TotalTokens; used > 0 { // a provider that reports none keeps the booking
				m.settle(ctx, used-booked)
			}
			return comp, nil
		}
		m.settle(ctx, -booked)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
			return nil, classifyModelError(err, m.cfg.Env)
		}
		if apiErr.Code == "insufficient_quota" {
			// Not a rate: the account is out of credit, and waiting will
			// not bring it back.
			return nil, temporal.NewNonRetryableApplicationError(classifyModelError(apiErr, m.cfg.Env).Error()+
				"; the provider's quota is used up: check the account's plan and billing", ErrModelQuota, nil)
		}
		d := max(retryAfter(apiErr.Response), holdFloor)
		if m.cfg.Budget != nil {
			if err := m.cfg.Budget.Hold(ctx, d); err != nil {
				return nil, classifyModelError(apiErr, m.cfg.Env)
			}
			continue // the next booking waits out the hold
		}
		if d > m.mayWait(ctx) {
			return nil, m.budgetWait(ctx, "provider", d, classifyModelError(apiErr, m.cfg.Env).Error())
		}
		// Alone, with no shared budget: wait a little past the provider's
		// word, spread so that the calls refused together do not return
		// together.
		if err := m.sleep(ctx, "provider", d+rand.N(d/4+1)); err != nil {
			return nil, classifyModelError(err, m.cfg.Env)
		}
	}
}

// chat is one request to the provider, as a GenAI client span: the
// models asked and answering, the tokens, why it stopped; never the
// prompt or the answer.
func (m *OpenAIModel) chat(ctx context.Context, params openai.ChatCompletionNewParams) (*openai.ChatCompletion, error) {
	ctx, span := telemetry.StartChat(ctx, "openai", m.cfg.Model)
	comp, err := m.client.Chat.Completions.New(ctx, params)
	if err != nil {
		telemetry.EndChat(span, "", 0, 0, nil, err)
		return nil, err
	}
	var reasons []string
	var answers []openai.ChatCompletionMessage
	for _, ch := range comp.Choices {
		reasons = append(reasons, string(ch.FinishReason))
		answers = append(answers, ch.Message)
	}
	telemetry.ChatContent(span, params.Messages, answers) // off unless a development switch says so
	telemetry.EndChat(span, comp.Model, comp.Usage.PromptTokens, comp.Usage.CompletionTokens, reasons, nil)
	return comp, nil
}

// mayWait is how long a call may hold its worker waiting for capacity:
// cfg.MaxWait, and never so long that the request itself would not fit
// in what is left of the activity's time.
func (m *OpenAIModel) mayWait(ctx context.Context) time.Duration {
	most := m.cfg.MaxWait
	if deadline, ok := ctx.Deadline(); ok {
		most = min(most, time.Until(deadline)-m.cfg.Timeout)
	}
	return max(most, 0)
}

func (m *OpenAIModel) settle(ctx context.Context, delta int64) {
	if m.cfg.Budget != nil && delta != 0 {
		_ = m.cfg.Budget.Settle(context.WithoutCancel(ctx), delta) // a lost correction only errs by one call's tokens
	}
}

func (m *OpenAIModel) sleep(ctx context.Context, why string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if m.cfg.OnWait != nil {
		m.cfg.OnWait(ctx, why, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// budgetWait ends a call that would wait longer than it may hold a worker:
// its workflow waits durably if it can (WithDurableWait), else the
// activity retries after the wait like any rate limit.
func (m *OpenAIModel) budgetWait(ctx context.Context, why string, d time.Duration, cause string) error {
	if m.cfg.OnWait != nil {
		m.cfg.OnWait(ctx, why+"-handed-back", d)
	}
	msg := fmt.Sprintf("no model capacity for %s: %s", d.Round(time.Millisecond), cause)
	if DurableWait(ctx) {
		return temporal.NewNonRetryableApplicationError(msg+"; the claim waits on a durable timer and asks again", ErrModelBudgetWait, nil,
			min(d, MaxBudgetWait))
	}
	return retryable(msg, ErrModelRateLimited, min(d, MaxRetryAfter))
}
