package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// The attributes a payments engineer reads on a Stripe request's span.
const (
	AttrStripeIdempotencyKey = "stripe.idempotency_key"
	AttrStripeReplayed       = "stripe.idempotent_replayed"
	AttrStripeTransferID     = "stripe.transfer_id"
	AttrStripeRequestID      = "stripe.request_id"
)

// stripeTransport is the Stripe client's HTTP transport while tracing is
// on: every request an HTTP client span (otelhttp) with the Idempotency-Key
// it carried, the transfer it created or returned, and whether Stripe
// answered with an earlier result (Idempotent-Replayed). The URL is kept
// without its query: a list's filters can name a payee's account.
func stripeTransport(next http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(stripeAttributes{next},
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "stripe " + r.Method + " " + r.URL.Path }))
}

type stripeAttributes struct{ next http.RoundTripper }

func (s stripeAttributes) RoundTrip(r *http.Request) (*http.Response, error) {
	span := trace.SpanFromContext(r.Context())
	u := *r.URL
	u.RawQuery, u.User = "", nil
	span.SetAttributes(attribute.String("url.full", u.String()))
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		span.SetAttributes(attribute.String(AttrStripeIdempotencyKey, k))
	}
	resp, err := s.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	span.SetAttributes(attribute.String(AttrStripeRequestID, resp.Header.Get("Request-Id")))
	if r.Method == http.MethodPost {
		span.SetAttributes(attribute.Bool(AttrStripeReplayed, resp.Header.Get("Idempotent-Replayed") == "true"))
	}
	if id := transferID(resp); id != "" {
		span.SetAttributes(attribute.String(AttrStripeTransferID, id))
	}
	return resp, nil
}

// transferID reads the ID of a transfer a response holds, leaving its body
// for stripe-go to read as it came.
func transferID(resp *http.Response) string {
	if resp.StatusCode != http.StatusOK || resp.Body == nil {
		return ""
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	var obj struct {
		ID     string `json:"id"`
		Object string `json:"object"`
	}
	if json.Unmarshal(body, &obj) != nil || obj.Object != "transfer" {
		return ""
	}
	return obj.ID
}

// traceSend is the span of an e-mail handed to the mailer (the outbox's
// act): its key and message ID, never its recipient or words.
func traceSend(ctx context.Context, key claim.IdempotencyKey, messageID string) (context.Context, trace.Span) {
	return telemetry.Tracer().Start(ctx, "email send", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("email.idempotency_key", string(key)), attribute.String("email.message_id", messageID)))
}
