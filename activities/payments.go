package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"go.temporal.io/sdk/temporal"
	"golang.org/x/time/rate"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// StripeConfig selects the Stripe API: the real one for a real key, the local
// stripesim otherwise (docs/configuration.md).
type StripeConfig struct {
	SecretKey string // STRIPE_SECRET_KEY, default sk_test_local
	APIBase   string // STRIPE_API_BASE; empty means api.stripe.com for a real key, stripesim otherwise
	// Timeout is how long one call may take (STRIPE_TIMEOUT, default 20 s),
	// from when the rate limit lets it go.
	Timeout time.Duration
	// RequestsPerSecond is the most calls this client makes a second
	// (STRIPE_REQUESTS_PER_SECOND, default 25: Stripe's test-mode limit, a
	// quarter of live mode's). Calls beyond it wait their turn, in order:
	// claims that an outage parked come back at this pace, not in a burst
	// Stripe refuses.
	RequestsPerSecond int
}

// DefaultStripeRequestsPerSecond is a client's rate limit when none is set.
const DefaultStripeRequestsPerSecond = 25

// Defaults for the local Stripe-compatible server.
const (
	LocalStripeKey  = "sk_test_local"
	LocalStripeBase = "http://localhost:12111"
)

// Resolve fills in the defaults and reports the base URL in use.
func (c StripeConfig) Resolve() StripeConfig {
	if c.SecretKey == "" {
		c.SecretKey = LocalStripeKey
	}
	if c.APIBase == "" {
		c.APIBase = stripe.APIURL
		if c.SecretKey == LocalStripeKey {
			c.APIBase = LocalStripeBase
		}
	}
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Second
	}
	if c.RequestsPerSecond == 0 {
		c.RequestsPerSecond = DefaultStripeRequestsPerSecond
	}
	return c
}

// NewStripeClient builds a stripe-go client with its own retries off:
// Temporal retries the activity, and two retry loops stacked would hide
// failures and multiply load.
func NewStripeClient(c StripeConfig) *client.API {
	c = c.Resolve()
	var next http.RoundTripper = http.DefaultTransport
	if telemetry.On() {
		next = stripeTransport(next)
	}
	hc := &http.Client{Transport: newPaced(next, c)}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(c.APIBase),
		HTTPClient:        hc,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		EnableTelemetry:   stripe.Bool(false),
	})
	return client.New(c.SecretKey, &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// paced lets a call go when Stripe is not known to be down and the rate
// limit allows, then gives it timeout, its body included: the time a call
// waits for its turn is not taken from its own (http.Client's Timeout
// would count both).
//
// Its breaker is the worker's memory of an outage. Once its calls find
// Stripe unavailable (stripeTripAfter in a row, or half of them), a call is
// refused at once, without a request and without a place in the rate
// limit's line, except one probe every stripeProbeEvery; the first probe
// Stripe answers closes it. So while Stripe is down a claim's attempts hold
// a worker slot for microseconds, not for their turn in a line of calls
// that will all be refused; and the oldest claim of a sweep, which comes
// first, is the probe that finds Stripe back.
type paced struct {
	next    http.RoundTripper
	limit   *rate.Limiter
	timeout time.Duration
	breaker *gobreaker.TwoStepCircuitBreaker[struct{}]

	mu     sync.Mutex
	opened chan struct{} // closed while the breaker is open
}

// How the Stripe breaker trips and probes: stripeTripAfter failures in a
// row, or half of at least 4×stripeTripAfter calls in the last
// stripeTripWindow, open it for stripeProbeEvery.
const (
	stripeTripAfter  = 5
	stripeTripWindow = 30 * time.Second
	stripeProbeEvery = 5 * time.Second
)

// errStripeCircuitOpen refuses a call without making it: the worker's last
// calls found Stripe unavailable. It is unavailable() like a network error,
// so a step that waits out outages hands its wait back after OutageAfter.
var errStripeCircuitOpen = fmt.Errorf("stripe: not called: the last calls found it unavailable (circuit open; one probe every %s)", stripeProbeEvery)

func newPaced(next http.RoundTripper, c StripeConfig) *paced {
	p := &paced{
		next:    next,
		limit:   rate.NewLimiter(rate.Limit(c.RequestsPerSecond), c.RequestsPerSecond),
		timeout: c.Timeout,
		opened:  make(chan struct{}),
	}
	p.breaker = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:         "stripe",
		MaxRequests:  1, // one probe at a time while half-open
		Timeout:      stripeProbeEvery,
		Interval:     stripeTripWindow,
		BucketPeriod: stripeTripWindow / 6,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= stripeTripAfter || // down
				c.Requests >= 4*stripeTripAfter && c.TotalFailures*2 >= c.Requests // half its calls failing (creates, say, and not reads)
		},
		// A call its caller gave up (RoundTrip marks it) says nothing
		// about Stripe.
		IsExcluded: func(err error) bool { return errors.Is(err, errNotAsked) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			slog.Warn("stripe circuit", "from", from.String(), "to", to.String())
			p.mu.Lock()
			defer p.mu.Unlock()
			switch {
			case to == gobreaker.StateOpen:
				close(p.opened)
			case from == gobreaker.StateOpen:
				p.opened = make(chan struct{})
			}
		},
	})
	return p
}

// wait waits for the call's turn in the rate limit, or until the breaker
// opens: a call in line when Stripe is found down is refused then, not
// when its turn comes.
func (p *paced) wait(r *http.Request) error {
	p.mu.Lock()
	opened := p.opened
	p.mu.Unlock()
	res := p.limit.Reserve()
	d := res.Delay()
	if d == 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-opened:
		res.Cancel()
		return p.refuse(r)
	case <-r.Context().Done():
		res.Cancel()
		return fmt.Errorf("stripe: waiting for the rate limit: %w", r.Context().Err())
	}
}

// errNotAsked marks a call that Stripe did not answer: given up by its
// caller.
var errNotAsked = errors.New("not asked")

func (p *paced) refuse(r *http.Request) error {
	metrics.Activity(r.Context(), metrics.DependencyCallsRefused, map[string]string{"dependency": DependencyStripe, "reason": "circuit_open"})
	return errStripeCircuitOpen
}

func (p *paced) RoundTrip(r *http.Request) (*http.Response, error) {
	// Refused before its turn while the breaker is open, and after it if
	// the breaker opened (or a probe went) while it waited.
	if p.breaker.State() == gobreaker.StateOpen {
		return nil, p.refuse(r)
	}
	if err := p.wait(r); err != nil {
		return nil, err
	}
	done, err := p.breaker.Allow()
	if err != nil {
		return nil, p.refuse(r)
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.timeout)
	resp, err := p.next.RoundTrip(r.WithContext(ctx))
	if err != nil {
		cancel()
		if r.Context().Err() != nil {
			done(errNotAsked) // given up by the caller, not Stripe's answer
		} else {
			done(err)
		}
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		done(fmt.Errorf("stripe answered %d", resp.StatusCode))
	} else {
		done(nil)
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose ends a call's timeout once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// PayInput is step 6's input.
type PayInput struct {
	Key         claim.IdempotencyKey `json:"key"`
	WorkflowID  string               `json:"workflow_id"`
	ClaimID     string               `json:"claim_id"`
	AmountMinor int64                `json:"amount_minor"`
	Currency    string               `json:"currency"`
	Destination string               `json:"destination"`
	// Approval is the decision behind a payout a human had to approve:
	// the payment verifies it again itself (payout.go).
	Approval *PayApproval `json:"approval,omitempty"`
	// WaitsOutOutages: as TurnInput's (Stripe down).
	WaitsOutOutages bool `json:"waits_out_outages,omitempty"`
}

// PayResult is the transfer that paid the claim.
type PayResult struct {
	TransferID  string `json:"transfer_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
	// Replayed means this attempt moved no money: the transfer already
	// existed, found by lookup or returned by Stripe's idempotency cache.
	Replayed bool `json:"replayed"`
	// ReplayedBy is "lookup" (our check-then-act found it by transfer_group)
	// or "stripe" (Idempotent-Replayed: true).
	ReplayedBy string `json:"replayed_by,omitempty"`
	// CreatedAt is when Stripe created the transfer (its "created"): the
	// same however often the payment is asked for, so a record that names
	// it reads the same in any workflow task that writes it.
	CreatedAt time.Time `json:"created_at,omitzero"`
	Meta
}

// PayClaimant is step 6: pay the claimant with a Stripe Transfer.
//
// It pays only what the system of record and the signed decisions allow,
// once per claim ever, whoever asks (authorisePayout). It then looks for a transfer already made under this key (transfer_group =
// claim ID, metadata idempotency_key): that still protects after Stripe
// forgets a key at 24 h. Only then does it create one, with the key as
// Idempotency-Key, so a crash between Stripe committing and this activity
// returning is answered by Stripe's replay rather than a second transfer.
func (a *Activities) PayClaimant(ctx context.Context, in PayInput) (PayResult, error) {
	if err := requireKey(in.Key); err != nil {
		return PayResult{}, err
	}
	if in.AmountMinor <= 0 || in.Destination == "" || in.ClaimID == "" {
		return PayResult{}, invalid("payment for %s needs a positive amount and a destination", in.ClaimID)
	}
	rec, c, err := a.forClaim(ctx, in.ClaimID)
	if err != nil {
		return PayResult{}, err
	}
	if _, err := a.authorisePayout(ctx, c, rec, in); err != nil {
		return PayResult{}, err
	}
	if tr, err := a.findTransfer(ctx, in); err != nil {
		return PayResult{}, a.outage(ctx, DependencyStripe, in.WaitsOutOutages, alertOnConflict(ctx, in.Key, err))
	} else if tr != nil {
		logger(ctx).Info("transfer already made under this key", "key", in.Key, "transfer", tr.ID)
		metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolStripe, "by": "lookup"})
		return a.paid(ctx, in, tr, "lookup")
	}

	params := &stripe.TransferParams{
		Amount:        stripe.Int64(in.AmountMinor),
		Currency:      stripe.String(in.Currency),
		Destination:   stripe.String(in.Destination),
		TransferGroup: stripe.String(in.ClaimID),
		Description:   stripe.String("Claim payout " + in.ClaimID),
	}
	params.SetIdempotencyKey(string(in.Key))
	params.Context = ctx
	params.AddMetadata("workflow_id", in.WorkflowID)
	params.AddMetadata("step", strconv.Itoa(int(claim.StepPay)))
	params.AddMetadata("idempotency_key", string(in.Key))
	tr, err := a.Stripe.Transfers.New(params)
	if err == nil && (tr == nil || tr.ID == "" || tr.Object != "transfer") {
		// A 200 whose body is not a transfer (an error inside, a proxy's
		// page that parsed): Stripe may have made one; the retry's lookup
		// or the key finds it. Never taken for a transfer of nothing.
		err = temporal.NewApplicationError("stripe answered 200 with no transfer in it", errStripeUnavailable)
	}
	if err != nil {
		return PayResult{}, a.outage(ctx, DependencyStripe, in.WaitsOutOutages, alertOnConflict(ctx, in.Key, classifyStripe(err)))
	}
	if err := matches(tr, in); err != nil {
		return PayResult{}, alertOnConflict(ctx, in.Key, err)
	}
	by := ""
	if tr.LastResponse != nil && tr.LastResponse.Header.Get("Idempotent-Replayed") == "true" {
		by = "stripe"
		logger(ctx).Info("stripe replayed the transfer for this key", "key", in.Key, "transfer", tr.ID)
		metrics.Activity(ctx, metrics.IdempotencyReplays, map[string]string{"tool": metrics.ToolStripe, "by": "provider"})
	} else {
		logger(ctx).Info("transfer created", "key", in.Key, "transfer", tr.ID, "amount_minor", tr.Amount, "currency", tr.Currency)
	}
	return a.paid(ctx, in, tr, by)
}

// paid records the transfer on the claim's payout reservation.
func (a *Activities) paid(ctx context.Context, in PayInput, tr *stripe.Transfer, replayedBy string) (PayResult, error) {
	if err := a.Store.MarkPaid(ctx, in.ClaimID, in.Key, tr.ID); err != nil {
		return PayResult{}, err
	}
	return result(ctx, tr, replayedBy), nil
}

func result(ctx context.Context, tr *stripe.Transfer, replayedBy string) PayResult {
	r := PayResult{TransferID: tr.ID, AmountMinor: tr.Amount, Currency: string(tr.Currency), Replayed: replayedBy != "", ReplayedBy: replayedBy, Meta: meta(ctx)}
	if tr.Created > 0 {
		r.CreatedAt = time.Unix(tr.Created, 0).UTC()
	}
	if tr.Destination != nil {
		r.Destination = tr.Destination.ID
	}
	return r
}

// findTransfer is the "check" of check-then-act.
func (a *Activities) findTransfer(ctx context.Context, in PayInput) (*stripe.Transfer, error) {
	params := &stripe.TransferListParams{TransferGroup: stripe.String(in.ClaimID)}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	it := a.Stripe.Transfers.List(params)
	for it.Next() {
		tr := it.Transfer()
		if tr.Metadata["idempotency_key"] != string(in.Key) {
			continue
		}
		if err := matches(tr, in); err != nil {
			return nil, err
		}
		return tr, nil
	}
	if err := it.Err(); err != nil {
		return nil, classifyStripe(err)
	}
	return nil, nil
}

// alertOnConflict raises an alert for a key reused with different
// parameters: never a provider problem, always a bug or tampering, and the
// claim will be dead-lettered with no second transfer made.
func alertOnConflict(ctx context.Context, key claim.IdempotencyKey, err error) error {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == ErrIdempotencyConflict {
		logger(ctx).Error("ALERT: idempotency key reused with different parameters; no transfer made",
			"alert", "idempotency_conflict", "tool", metrics.ToolStripe, "key", key, "error", err)
		metrics.Activity(ctx, metrics.IdempotencyConflicts, map[string]string{"tool": metrics.ToolStripe})
	}
	return err
}

// matches refuses a transfer under our key that pays something else: the
// key was reused for a different payment, which is a bug, never retried.
func matches(tr *stripe.Transfer, in PayInput) error {
	dest := ""
	if tr.Destination != nil {
		dest = tr.Destination.ID
	}
	if tr.Amount != in.AmountMinor || string(tr.Currency) != in.Currency || dest != in.Destination {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("transfer %s under key %s pays %d %s to %s, not %d %s to %s",
				tr.ID, in.Key, tr.Amount, tr.Currency, dest, in.AmountMinor, in.Currency, in.Destination),
			ErrIdempotencyConflict, nil)
	}
	return nil
}

// errStripeUnavailable is the error type of a Stripe answer that says it
// cannot serve now (429, 5xx) or is not an answer (a 200 that holds no
// transfer): retried, and an outage after OutageAfter.
const errStripeUnavailable = "StripeUnavailable"

// classifyStripe decides what a retry can fix. Rate limits, in-flight keys,
// server errors and network failures retry (with the same key); a refusal
// of the request itself does not.
func classifyStripe(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return err // network or timeout: retry, the key makes it safe
	}
	msg := fmt.Sprintf("stripe %d %s", se.HTTPStatusCode, se.Type)
	if se.Code != "" {
		msg += " " + string(se.Code)
	}
	msg += ": " + se.Msg
	switch {
	case se.Type == stripe.ErrorTypeIdempotency:
		return temporal.NewNonRetryableApplicationError(msg, ErrIdempotencyConflict, err)
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden:
		return temporal.NewNonRetryableApplicationError(msg, ErrPaymentConfig, err)
	case se.HTTPStatusCode == http.StatusConflict, se.HTTPStatusCode == http.StatusTooManyRequests, se.HTTPStatusCode >= 500:
		if se.HTTPStatusCode == http.StatusConflict {
			return temporal.NewApplicationError(msg, "StripeKeyInUse", err) // another attempt holds the key: not an outage
		}
		return temporal.NewApplicationError(msg, errStripeUnavailable, err)
	case se.HTTPStatusCode >= 400:
		return temporal.NewNonRetryableApplicationError(msg, ErrPaymentRefused, err)
	}
	return err
}
