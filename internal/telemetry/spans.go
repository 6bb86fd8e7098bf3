package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/temporal"
)

// The OpenTelemetry GenAI conventions' attributes (gen_ai.*) this project
// sets on model calls and tool calls. Prompt and completion content are
// never recorded: they hold the claimant's words.
const (
	GenAIOperation     = "gen_ai.operation.name"
	GenAIProvider      = "gen_ai.provider.name"
	GenAIRequestModel  = "gen_ai.request.model"
	GenAIResponseModel = "gen_ai.response.model"
	GenAIInputTokens   = "gen_ai.usage.input_tokens"
	GenAIOutputTokens  = "gen_ai.usage.output_tokens"
	GenAIFinishReasons = "gen_ai.response.finish_reasons"
	GenAIToolName      = "gen_ai.tool.name"
	GenAIToolCallID    = "gen_ai.tool.call.id"
	GenAIToolType      = "gen_ai.tool.type"
)

// StartChat starts a model call's span, "chat MODEL", a GenAI client span.
func StartChat(ctx context.Context, provider, model string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, "chat "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String(GenAIOperation, "chat"), attribute.String(GenAIProvider, provider), attribute.String(GenAIRequestModel, model)))
}

// ChatContent records a model call's messages on its span, as JSON
// (gen_ai.input.messages, gen_ai.output.messages), when CaptureContent
// allows it; otherwise it does nothing.
func ChatContent(span trace.Span, input, output any) {
	if !CaptureContent() {
		return
	}
	in, _ := json.Marshal(input)
	out, _ := json.Marshal(output)
	span.SetAttributes(attribute.String("gen_ai.input.messages", string(in)), attribute.String("gen_ai.output.messages", string(out)))
}

// EndChat ends a model call's span with what the provider answered.
func EndChat(span trace.Span, responseModel string, tokensIn, tokensOut int64, finishReasons []string, err error) {
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, "model call failed")
	} else {
		attrs := []attribute.KeyValue{attribute.Int64(GenAIInputTokens, tokensIn), attribute.Int64(GenAIOutputTokens, tokensOut)}
		if responseModel != "" {
			attrs = append(attrs, attribute.String(GenAIResponseModel, responseModel))
		}
		if len(finishReasons) > 0 {
			attrs = append(attrs, attribute.StringSlice(GenAIFinishReasons, finishReasons))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// StartTool starts the span of a tool the triage agent asked for,
// "execute_tool NAME".
func StartTool(ctx context.Context, name, callID string) (context.Context, trace.Span) {
	return Tracer().Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attribute.String(GenAIOperation, "execute_tool"), attribute.String(GenAIToolName, name),
		attribute.String(GenAIToolCallID, callID), attribute.String(GenAIToolType, "function")))
}

// End ends span, marking it failed with a fixed description when err is
// not nil: an error's text can carry claim data, and a span is no place
// for it, so only its Go type is kept (error.type).
func End(span trace.Span, err error, what string) {
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, what)
	}
	span.End()
}

// errorType names an error without its message: a Temporal application
// error by its stable type (IdempotencyConflict, PayeeChanged…), anything
// else by its Go type.
func errorType(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() != "" {
		return app.Type()
	}
	return fmt.Sprintf("%T", err)
}

// scrubbed is a span that keeps errors' types and drops their messages:
// the Temporal interceptor records every failed activity's and workflow's
// error on its span, and an error's text can carry claim data (a payee's
// account in a refusal, a claimant's words quoted by a provider).
type scrubbed struct{ trace.Span }

func (s scrubbed) RecordError(err error, _ ...trace.EventOption) {
	if err == nil {
		return
	}
	s.Span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", errorType(err))))
}

func (s scrubbed) SetStatus(code codes.Code, _ string) {
	if code == codes.Error {
		s.Span.SetStatus(code, "failed")
		return
	}
	s.Span.SetStatus(code, "")
}

// StartBlob starts the span of a blob store operation (put, verify,
// put_record, read; inside a traced operation only, see traced) on the
// object class of key: its first segment
// (claims, claim-files, transcripts…), never the rest of the key, which
// names a claimant's document as they named it.
func StartBlob(ctx context.Context, op, key string) (context.Context, trace.Span) {
	if !On() || !traced(ctx) {
		return ctx, trace.SpanFromContext(context.Background())
	}
	class, _, _ := strings.Cut(key, "/")
	return Tracer().Start(ctx, "blob "+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("blob.operation", op), attribute.String("blob.class", class)))
}

// StartQuery starts the span of a claims store statement (inside a traced
// operation only, see traced): its operation
// and table, and the statement's text with its placeholders, never the
// values bound to them. system is "postgresql" or "sqlite".
func StartQuery(ctx context.Context, system, query string) (context.Context, trace.Span) {
	if !On() || !traced(ctx) {
		return ctx, trace.SpanFromContext(context.Background())
	}
	op, table := statement(query)
	name := "db " + op
	if table != "" {
		name += " " + table
	}
	if len(query) > 1000 {
		query = query[:1000]
	}
	return Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("db.system.name", system), attribute.String("db.operation.name", op),
		attribute.String("db.collection.name", table), attribute.String("db.query.text", query)))
}

// traced says whether ctx is inside a span: a statement or a blob read
// is a span only as part of something traced (a step, an intake, a
// request), never a root of its own, so the worker's periodic sweeps
// start no trace every minute.
func traced(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsValid() }

// statement reads a statement's operation (its first word) and the table
// it names first (after FROM, INTO or UPDATE; a subquery's own).
func statement(q string) (op, table string) {
	words := strings.Fields(q)
	if len(words) == 0 {
		return "", ""
	}
	op = strings.ToUpper(words[0])
	for i, w := range words[:len(words)-1] {
		switch strings.ToUpper(w) {
		case "FROM", "INTO", "UPDATE":
			if strings.HasPrefix(words[i+1], "(") { // a subquery: its own FROM names the table
				continue
			}
			return op, strings.Trim(words[i+1], "),;\"")
		}
	}
	return op, ""
}
