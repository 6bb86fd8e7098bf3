package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/metrics"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// Conversation is the triage conversation so far: inline while it is small,
// by reference to the blob store once it passes the inline limit, so a long
// loop does not copy its transcript into every later event.
type Conversation struct {
	Messages []Message  `json:"messages,omitempty"`
	Ref      *blobs.Ref `json:"ref,omitempty"`
}

// TurnInput is one model turn of step 2.
type TurnInput struct {
	Key          claim.IdempotencyKey `json:"key"`
	Claim        claim.Claim          `json:"claim"`
	Turn         int                  `json:"turn"`
	Final        bool                 `json:"final,omitempty"`
	Conversation Conversation         `json:"conversation"`
	// ToolResults answer the previous turn's tool calls.
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	Price       Price        `json:"price"`
	// WaitsForBudget says the workflow waits for model capacity itself
	// (from versionBudget on): see model.WithDurableWait.
	WaitsForBudget bool `json:"waits_for_budget,omitempty"`
	// WaitsOutOutages says the workflow waits for a dependency that is
	// down itself (from versionOutage on): the step hands it back
	// (DependencyDown) after its first attempts. Older runs retry as they did.
	WaitsOutOutages bool `json:"waits_out_outages,omitempty"`
}

// TurnResult is one recorded model turn: what it asked for or concluded,
// the conversation after it, and what it cost.
type TurnResult struct {
	ToolCalls    []ToolCall   `json:"tool_calls,omitempty"`
	Triage       *Triage      `json:"triage,omitempty"`
	Conversation Conversation `json:"conversation"`
	Model        string       `json:"model"`
	// PromptVersion and BuildID: as ModelResult's.
	PromptVersion string `json:"prompt_version,omitempty"`
	BuildID       string `json:"build_id,omitempty"`
	Usage         Usage  `json:"usage"`
	// Deterministic says the provider gives the same answer to the same
	// conversation at no cost (the rules model): asking again after a crash
	// costs nothing, so the workflow need not checkpoint before the next turn.
	Deterministic bool   `json:"deterministic,omitempty"`
	OutputSHA256  string `json:"output_sha256"`
	Meta
}

// Price is a model's price in millionths of a dollar per million tokens.
type Price struct {
	InMicrosPerMTok  int64 `json:"in_micros_per_mtok,omitempty"`
	OutMicrosPerMTok int64 `json:"out_micros_per_mtok,omitempty"`
}

// Cost of one call, in micro-dollars, rounded up so tiny calls still count.
func (p Price) Cost(tokensIn, tokensOut int64) int64 {
	const m = 1_000_000
	return (tokensIn*p.InMicrosPerMTok + tokensOut*p.OutMicrosPerMTok + m - 1) / m
}

// MaxToolCallsPerTurn bounds the tool calls one turn may ask for; the rest
// are answered with an error the model sees.
const MaxToolCallsPerTurn = 8

// TriageTurn is one model turn of step 2's agent loop.
func (a *Activities) TriageTurn(ctx context.Context, in TurnInput) (TurnResult, error) {
	if err := requireKey(in.Key); err != nil {
		return TurnResult{}, err
	}
	if _, _, err := a.forClaim(ctx, in.Claim.ID); err != nil {
		return TurnResult{}, err // the insurer's model is not anyone's to spend
	}
	msgs, err := a.loadConversation(ctx, in.Conversation)
	if err != nil {
		return TurnResult{}, err
	}
	for _, r := range in.ToolResults {
		msgs = append(msgs, Message{Role: "tool", ToolCallID: r.CallID, Name: r.Name, Content: r.Content})
	}
	ctx = withBudgetKey(ctx, in.Key.String(), attempt(ctx) > 1)
	if in.WaitsForBudget {
		ctx = withDurableWait(ctx)
	}
	m, fallback := a.modelFor(ctx, "triage")
	reply, err := m.TriageTurn(ctx, TurnRequest{Claim: in.Claim, Turn: in.Turn, Messages: msgs, Final: in.Final})
	if err != nil {
		return TurnResult{}, a.outage(ctx, DependencyModel, in.WaitsOutOutages, withAttempt(ctx, err))
	}
	turn := reply.Output
	if len(turn.ToolCalls) > 0 {
		turn.Triage = nil // tools first; the answer comes on a later turn
	}
	msgs = append(msgs, turn.Messages...)
	res := TurnResult{ToolCalls: turn.ToolCalls, Triage: turn.Triage, Model: m.Name(), PromptVersion: m.PromptVersion(),
		BuildID: a.BuildID, Usage: reply.Usage, Deterministic: deterministic(m, fallback), Meta: meta(ctx)}
	res.Usage.CostMicros = in.Price.Cost(res.Usage.TokensIn, res.Usage.TokensOut)
	if res.Conversation, err = a.keepConversation(ctx, in.Key, msgs); err != nil {
		return TurnResult{}, err
	}
	output := struct {
		ToolCalls []ToolCall `json:"tool_calls,omitempty"`
		Triage    *Triage    `json:"triage,omitempty"`
	}{turn.ToolCalls, turn.Triage}
	if res.OutputSHA256, err = a.ledgerModelCall(ctx, in.Claim.ID, in.Key, res.Model, res.Usage, output); err != nil {
		return TurnResult{}, err
	}
	countModelCall(ctx, res.Model, "triage", res.Usage)
	logger(ctx).Info("model turn", "key", in.Key, "model", res.Model, "prompt_version", res.PromptVersion, "tool_calls", len(res.ToolCalls),
		"answered", res.Triage != nil)
	return res, nil
}

// MaxConversationBytes bounds a stored conversation read back from the blob
// store.
const MaxConversationBytes = 4 << 20

func (a *Activities) loadConversation(ctx context.Context, c Conversation) ([]Message, error) {
	if c.Ref == nil {
		return append([]Message(nil), c.Messages...), nil
	}
	if a.Blobs == nil {
		return nil, fmt.Errorf("conversation %s is in a blob store this worker has not opened", c.Ref.URI)
	}
	b, err := a.Blobs.Get(ctx, *c.Ref, MaxConversationBytes)
	if err != nil {
		return nil, fmt.Errorf("conversation: %w", err)
	}
	var msgs []Message
	if err := json.Unmarshal(b, &msgs); err != nil {
		return nil, fmt.Errorf("conversation %s: %w", c.Ref.URI, err)
	}
	return msgs, nil
}

// keepConversation returns the conversation inline while it is within the
// transcript limit, by reference once it is not.
func (a *Activities) keepConversation(ctx context.Context, key claim.IdempotencyKey, msgs []Message) (Conversation, error) {
	b, err := json.Marshal(msgs)
	if err != nil {
		return Conversation{}, err
	}
	if len(b) <= a.transcriptLimit() || a.Blobs == nil {
		return Conversation{Messages: msgs}, nil
	}
	ref, err := a.putTranscript(ctx, key, "conversation-attempt", b)
	if err != nil {
		return Conversation{}, err
	}
	return Conversation{Ref: &ref}, nil
}

// ToolScope is what a tool may see of the claim: its own policy, its own
// documents, its own claimant. A model cannot read another claim's data.
type ToolScope struct {
	ClaimID   string           `json:"claim_id"`
	PolicyID  string           `json:"policy_id"`
	Email     string           `json:"email"`
	Account   string           `json:"account"`
	Documents []claim.Document `json:"documents,omitempty"`
	// DocumentsOf names, for a review claim, the claim whose folder holds
	// its documents (claim.DocumentsOf); empty: the claim's own.
	DocumentsOf string `json:"documents_of,omitempty"`
}

// ScopeOf is the tool scope of a claim.
func ScopeOf(c claim.Claim) ToolScope {
	sc := ToolScope{ClaimID: c.ID, PolicyID: c.PolicyID, Email: c.Claimant.Email, Account: c.Claimant.StripeAccount, Documents: c.Documents}
	if c.ReviewOf != nil {
		sc.DocumentsOf = c.DocumentsOf()
	}
	return sc
}

// ToolInput is one tool call of step 2.
type ToolInput struct {
	Key   claim.IdempotencyKey `json:"key"`
	Scope ToolScope            `json:"scope"`
	Call  ToolCall             `json:"call"`
}

// ToolResult is what the tool answered; Content is what the model reads
// (JSON). A call the tool cannot serve (unknown tool, bad arguments, a
// document that is not the claim's) is answered with an error the model
// reads, never a failed workflow.
type ToolResult struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	Meta
}

// MaxToolResultBytes bounds what one tool answers (document text is cut).
const MaxToolResultBytes = 1500

// CallTool runs one tool the triage agent asked for, for the run that owns
// the claim, within the claim's own scope as the system of record holds it
// (never the scope the input names).
func (a *Activities) CallTool(ctx context.Context, in ToolInput) (ToolResult, error) {
	if err := requireKey(in.Key); err != nil {
		return ToolResult{}, err
	}
	rec, _, err := a.forClaim(ctx, in.Scope.ClaimID)
	if err != nil {
		return ToolResult{}, err
	}
	in.Scope = ScopeOf(rec.Claim)
	tctx, span := telemetry.StartTool(ctx, toolLabel(in.Call.Name), in.Call.ID)
	res, err := a.tools().Call(tctx, in)
	span.SetAttributes(attribute.Bool("gen_ai.tool.refused", res.IsError))
	telemetry.End(span, err, "tool failed")
	if err != nil {
		return ToolResult{}, err
	}
	res.Meta = meta(ctx)
	outcome := "ok"
	if res.IsError {
		outcome = "refused"
	}
	metrics.Activity(ctx, metrics.TriageToolCalls, map[string]string{"tool": toolLabel(in.Call.Name), "outcome": outcome})
	logger(ctx).Info("tool called", "key", in.Key, "tool", in.Call.Name, "error", res.IsError)
	return res, nil
}

// toolLabel keeps the metric's label set bounded: a model may ask for any
// name.
func toolLabel(name string) string {
	for _, t := range Tools {
		if t == name {
			return name
		}
	}
	return "unknown"
}

// countModelCall counts one real model call, its tokens and its cost.
func countModelCall(ctx context.Context, provider, step string, u Usage) {
	metrics.Activity(ctx, metrics.ModelCalls, map[string]string{"provider": provider, "step": step})
	metrics.ActivityAdd(ctx, metrics.ModelTokens, u.TokensIn, map[string]string{"provider": provider, "direction": "in"})
	metrics.ActivityAdd(ctx, metrics.ModelTokens, u.TokensOut, map[string]string{"provider": provider, "direction": "out"})
	metrics.ActivityAdd(ctx, metrics.ModelCostMicros, u.CostMicros, map[string]string{"provider": provider})
}

// toolRefusal is a call the tool will not serve; the model is told why.
type toolRefusal struct{ msg string }

func (e *toolRefusal) Error() string { return e.msg }

func refuse(format string, args ...any) error { return &toolRefusal{fmt.Sprintf(format, args...)} }

// tools are the triage tools of the claim workflow: the read tools, with a
// raised fraud signal written to the store.
func (a *Activities) tools() ReadTools {
	return ReadTools{Store: a.Store, Policies: a.Policies, Blobs: a.Blobs, flag: func(ctx context.Context, f store.FraudFlag) error {
		replayed, err := a.Store.FlagFraud(ctx, f)
		if errors.Is(err, store.ErrConflict) {
			return ledgerConflict(ctx, f.Key, err)
		}
		if err == nil && replayed {
			ledgerReplay(ctx)
		}
		return err
	}}
}

// ReadTools answer the triage agent's tools from the system of record
// without changing it: lookup_policy, get_document_text and prior_claims
// read, and flag_fraud_signal is answered as the live tool answers but
// records nothing (a what-if's tools: package whatif). The claim
// workflow's own tools are these with the flag written (CallTool).
type ReadTools struct {
	Store    *store.Store
	Policies map[string]claim.Policy
	Blobs    *blobs.Store
	// flag writes a raised signal; nil: nothing is written.
	flag func(context.Context, store.FraudFlag) error
}

// Call answers one tool call within the claim's scope, as CallTool does,
// writing nothing.
func (t ReadTools) Call(ctx context.Context, in ToolInput) (ToolResult, error) {
	content, err := t.answer(ctx, in)
	res := ToolResult{CallID: in.Call.ID, Name: in.Call.Name}
	var refused *toolRefusal
	switch {
	case errors.As(err, &refused):
		res.IsError = true
		content = map[string]string{"error": refused.msg}
	case err != nil:
		return ToolResult{}, err
	}
	b, err := json.Marshal(content)
	if err != nil {
		return ToolResult{}, err
	}
	res.Content = string(b)
	return res, nil
}

func (t ReadTools) answer(ctx context.Context, in ToolInput) (any, error) {
	var args map[string]any
	if strings.TrimSpace(in.Call.Arguments) != "" {
		if err := json.Unmarshal([]byte(in.Call.Arguments), &args); err != nil {
			return nil, refuse("arguments are not a JSON object: %v", err)
		}
	}
	str := func(name string) string { s, _ := args[name].(string); return s }
	sc := in.Scope
	switch in.Call.Name {
	case ToolLookupPolicy:
		id := str("policy_id")
		if id == "" {
			id = sc.PolicyID
		}
		if id != sc.PolicyID {
			return nil, refuse("policy %q is not this claim's policy (%s)", id, sc.PolicyID)
		}
		p, ok := t.Policies[id]
		if !ok {
			return map[string]any{"found": false, "policy_id": id}, nil
		}
		return map[string]any{"found": true, "policy_id": p.ID, "currency": p.Currency,
			"limit": claim.FormatAmount(p.LimitMinor, p.Currency), "deductible": claim.FormatAmount(p.DeductibleMinor, p.Currency),
			"excluded_categories": p.ExcludedCategories}, nil
	case ToolGetDocumentText:
		name := str("name")
		for _, d := range sc.Documents {
			if d.Name == name {
				folder := sc.ClaimID
				if sc.DocumentsOf != "" {
					folder = sc.DocumentsOf
				}
				return documentText(ctx, t.Blobs, folder, d)
			}
		}
		names := make([]string, 0, len(sc.Documents))
		for _, d := range sc.Documents {
			names = append(names, d.Name)
		}
		return nil, refuse("no document %q on this claim; it has %v", name, names)
	case ToolPriorClaims:
		prior, total, capped, err := t.Store.PriorClaims(ctx, sc.ClaimID, sc.Email, sc.Account, 5)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"total": total, "recent": prior}
		if capped {
			out["more_than_total"] = true
		}
		return out, nil
	case ToolFlagFraudSignal:
		signal := str("signal")
		if signal == "" || len(signal) > 200 {
			return nil, refuse("signal must be 1 to 200 characters")
		}
		note := str("note")
		if len(note) > 1000 {
			note = note[:1000]
		}
		if t.flag != nil {
			if err := t.flag(ctx, store.FraudFlag{Key: in.Key, ClaimID: sc.ClaimID, Signal: signal, Note: note}); err != nil {
				return nil, err
			}
		}
		return map[string]any{"flagged": true, "signal": signal}, nil
	}
	return nil, refuse("unknown tool %q; the tools are %v", in.Call.Name, Tools)
}

// documentText is what get_document_text answers: the start of a text
// document, or what kind of file it is when it is not text. Only the
// claim's own documents in the blob store are read, never a path.
func documentText(ctx context.Context, bs *blobs.Store, claimID string, d claim.Document) (any, error) {
	out := map[string]any{"name": d.Name, "size": d.Size}
	if bs == nil || d.URI == "" {
		out["text"] = nil
		out["note"] = "the document is not in the blob store"
		return out, nil
	}
	if err := bs.CheckDocument(claimID, d.URI); err != nil {
		return nil, refuse("document %q is not one of this claim's documents in the blob store", d.Name)
	}
	b, err := bs.Get(ctx, blobs.Ref{URI: d.URI, SHA256: d.SHA256, Size: d.Size}, MaxToolResultBytes)
	if err != nil {
		return nil, err
	}
	truncated := int64(len(b)) < d.Size
	text, ok := asText(b, truncated)
	if !ok {
		out["text"] = nil
		out["note"] = "binary document (an image or a PDF): no text to read"
		return out, nil
	}
	out["text"] = text
	if truncated {
		out["truncated"] = true
	}
	return out, nil
}
