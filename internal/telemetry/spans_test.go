package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
	"go.temporal.io/sdk/temporal"
)

// A failed step's error can quote claim data (a refusal naming the payee's
// account): the spans the Temporal interceptor and this package end with
// an error keep its type and drop its text.
func TestErrorsOnSpansKeepTheirTypeNotTheirText(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	const secret = "acct_1SecretPayee"
	app := temporal.NewNonRetryableApplicationError("payee changed to "+secret, "PayeeChanged", nil)
	wrapped := fmt.Errorf("step 6: %w", app)
	plain := errors.New("provider said: " + secret + " is closed")

	_, raw := tp.Tracer("t").Start(context.Background(), "RunActivity:PayClaimant")
	s := scrubbed{raw}
	s.RecordError(wrapped)
	s.SetStatus(codes.Error, wrapped.Error())
	s.End()
	_, span := Tracer().Start(context.Background(), "x") // the global no-op one: End must not fail on it
	End(span, plain, "failed")
	_, own := tp.Tracer("t").Start(context.Background(), "email send")
	End(own, plain, "not sent")
	_, chat := tp.Tracer("t").Start(context.Background(), "chat m")
	EndChat(chat, "", 0, 0, nil, plain)

	spans := exp.GetSpans()
	require.Len(t, spans, 3)
	for _, sp := range spans {
		assert.Equal(t, codes.Error, sp.Status.Code, sp.Name)
		assert.NotContains(t, sp.Status.Description, secret, sp.Name)
		for _, kv := range sp.Attributes {
			assert.NotContains(t, kv.Value.String(), secret, sp.Name)
		}
		for _, e := range sp.Events {
			for _, kv := range e.Attributes {
				assert.NotContains(t, kv.Value.String(), secret, sp.Name)
			}
		}
	}
	var typ string
	for _, e := range spans[0].Events {
		for _, kv := range e.Attributes {
			if kv.Key == "exception.type" {
				typ = kv.Value.AsString()
			}
		}
	}
	assert.Equal(t, "PayeeChanged", typ, "an application error by its stable type")
	for _, kv := range spans[1].Attributes {
		if kv.Key == "error.type" {
			assert.True(t, strings.HasPrefix(kv.Value.AsString(), "*errors."), kv.Value.AsString())
		}
	}
}

func TestStatementNamesOperationAndTable(t *testing.T) {
	for q, want := range map[string][2]string{
		"SELECT body, status FROM claims WHERE claim_id = ?":           {"SELECT", "claims"},
		"insert into outbox (key, claim_id) values (?, ?)":             {"INSERT", "outbox"},
		"UPDATE claims SET status = ? WHERE claim_id = ?":              {"UPDATE", "claims"},
		"DELETE FROM model_budget WHERE name = ?":                      {"DELETE", "model_budget"},
		"WITH x AS (SELECT 1) SELECT * FROM (SELECT * FROM x)":         {"WITH", "x"},
		"  \n\tSELECT count(*) FROM\n  approval_queue WHERE stage = ?": {"SELECT", "approval_queue"},
		"": {"", ""},
	} {
		op, table := statement(q)
		assert.Equal(t, want, [2]string{op, table}, q)
	}
}

// Prompts and answers hold the claimant's words: a model span carries them
// only with the development switch on.
func TestChatContentOnlyWithTheSwitch(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	for _, on := range []bool{false, true} {
		capture.Store(on)
		_, span := tp.Tracer("t").Start(context.Background(), "chat m")
		ChatContent(span, []string{"Zqx7 the claimant's words"}, []string{"an answer"})
		span.End()
	}
	capture.Store(false)
	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	assert.Empty(t, spans[0].Attributes, "off by default")
	require.Len(t, spans[1].Attributes, 2)
	assert.Contains(t, spans[1].Attributes[0].Value.AsString(), "Zqx7")
}

// A statement or a blob read is a span only inside a traced operation: the
// worker's sweeps start no trace of their own every minute.
func TestStoreAndBlobSpansOnlyInsideATrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	otel.SetTracerProvider(tp)
	on.Store(true)
	defer func() { on.Store(false); otel.SetTracerProvider(noop.NewTracerProvider()) }()

	_, q := StartQuery(context.Background(), "sqlite", "SELECT 1 FROM claims")
	_, b := StartBlob(context.Background(), "read", "claims/claim-1/0-x.jpg")
	assert.False(t, q.IsRecording() || b.IsRecording(), "no root of their own")
	ctx, step := Tracer().Start(context.Background(), "RunActivity:LoadClaim")
	_, q = StartQuery(ctx, "sqlite", "SELECT body FROM claims WHERE claim_id = ?")
	_, b = StartBlob(ctx, "verify", "claims/claim-1/0-ada_lovelace_passport.jpg")
	q.End()
	b.End()
	step.End()
	names := map[string]map[string]string{}
	for _, s := range exp.GetSpans() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		names[s.Name] = attrs
	}
	assert.Equal(t, "claims", names["db SELECT claims"]["db.collection.name"])
	assert.Equal(t, "claims", names["blob verify"]["blob.class"])
	assert.NotContains(t, fmt.Sprint(names), "lovelace", "a document's own name is never on a span")
}
