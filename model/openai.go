package model

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Model error types. The retryable ones carry the provider's Retry-After
// as the next retry delay; the others fail the step at once with a message
// that says what to fix.
const (
	ErrModelRateLimited   = "ModelRateLimited"
	ErrModelUnavailable   = "ModelUnavailable"
	ErrModelTimeout       = "ModelTimeout"
	ErrModelBadResponse   = "ModelBadResponse"
	ErrModelAuth          = "ModelAuth"
	ErrModelNotFound      = "ModelNotFound"
	ErrModelContextLength = "ModelContextLength"
	ErrModelRequest       = "ModelRequestRefused"
)

// OpenAIConfig points the OpenAI-compatible provider at a Chat Completions
// endpoint: OpenAI, Azure OpenAI, Ollama, vLLM, llama.cpp's server.
type OpenAIConfig struct {
	BaseURL string // MODEL_BASE_URL, e.g. http://localhost:11434/v1
	Model   string // MODEL_NAME
	APIKey  string // MODEL_API_KEY
	// Timeout bounds one request (default 60 s); a timeout is retried.
	Timeout time.Duration
	// MaxInvalidAnswers is how many answers that fail the schema are asked
	// again within one call before the claim goes to a human (default 2).
	MaxInvalidAnswers int
	HTTPClient        *http.Client
	// Budget, when set, is the rate limit every worker shares
	// (MODEL_TOKENS_PER_MINUTE); a 429 is waited out, not retried, either
	// way.
	Budget Budget
	// MaxWait is how long a call may hold its worker waiting for capacity
	// (default DefaultMaxWait); past it the wait goes back to the workflow.
	MaxWait time.Duration
	// OnWait, when set, hears of every wait for capacity: why ("budget",
	// "provider", or either with "-handed-back") and how long.
	OnWait func(ctx context.Context, why string, d time.Duration)
	// Prompts, when set, are the system prompts sent instead of the
	// compiled-in ones (DefaultPrompts; the worker's MODEL_PROMPTS_FILE).
	// They are copied when the model is built and must pass Prompts.Check:
	// each keeps the untrusted-data rule word for word.
	Prompts *Prompts
	// Env is the prefix of the variables that set this model, named in the
	// errors that say what to fix: MODEL_ (the default), or
	// MODEL_FALLBACK_ for the fallback.
	Env string
}

// OpenAIModel is the Model behind the Chat Completions API, through the
// official SDK. The SDK's own retries are off: the activity's retry policy
// retries, so every attempt is visible in the workflow's history. A rate
// limit is not a failure: a 429 is waited out within the call (complete),
// and a longer wait goes back to the workflow.
type OpenAIModel struct {
	client openai.Client
	cfg    OpenAIConfig
	// prompts are the system prompts sent, version their prompt version:
	// both fixed when the model is built (zero: the compiled-in ones).
	prompts Prompts
	version string
}

// NewOpenAIModel checks the configuration and builds the client.
func NewOpenAIModel(cfg OpenAIConfig) (*OpenAIModel, error) {
	cfg.Env = cmp.Or(cfg.Env, "MODEL_")
	if cfg.Model == "" {
		return nil, fmt.Errorf("%sNAME is required with %sPROVIDER=openai", cfg.Env, cfg.Env)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.MaxInvalidAnswers <= 0 {
		cfg.MaxInvalidAnswers = 2
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	opts := []option.RequestOption{option.WithMaxRetries(0), option.WithRequestTimeout(cfg.Timeout)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	// Local servers (Ollama, vLLM) take any key but the SDK wants one.
	opts = append(opts, option.WithAPIKey(cmp.Or(cfg.APIKey, "unused")))
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	prompts := DefaultPrompts()
	if cfg.Prompts != nil {
		if err := cfg.Prompts.Check(); err != nil {
			return nil, fmt.Errorf("model prompts: %w", err)
		}
		prompts = *cfg.Prompts // a copy: the caller's may change, what is sent does not
	}
	return &OpenAIModel{client: openai.NewClient(opts...), cfg: cfg, prompts: prompts, version: promptSetFor(prompts).version()}, nil
}

// systemPrompts are the prompts this model sends: those it was built with,
// or the compiled-in ones.
func (m *OpenAIModel) systemPrompts() Prompts {
	if m.prompts == (Prompts{}) {
		return DefaultPrompts()
	}
	return m.prompts
}

// Name identifies the provider and model in the ledger and the audit.
func (m *OpenAIModel) Name() string { return "openai/" + m.cfg.Model }

// The compiled-in system prompts (DefaultPrompts); OpenAIConfig.Prompts
// replaces them.
const triageSystemPrompt = `You triage insurance claims. Check the facts with the tools before you answer:
the policy (lookup_policy), the claimant's prior claims (prior_claims) and the documents (get_document_text).
Use flag_fraud_signal to raise a fraud signal for investigators when the evidence suggests fraud.
` + untrustedRule + `
When you know enough, answer with one JSON object and nothing else:
{"category": one of water-damage|fire|theft|auto|glass|wear-and-tear|general,
 "severity": low|medium|high, "fraud_signals": [short kebab-case strings], "fraud_score": 0-100,
 "summary": one sentence}`

const assessSystemPrompt = `You assess insurance claims. Given the claim, its triage and its coverage, recommend a payout
in minor units of the claim's currency (cents), never more than the covered amount.
` + untrustedRule + ` Answer with one JSON object and nothing else:
{"recommended_minor": integer >= 0, "rationale": a few sentences, "needs_review": true when a human must decide}`

var triageCategories = []string{"water-damage", "fire", "theft", "auto", "glass", "wear-and-tear", "general"}

// The response schemas stay within what every provider's strict mode
// accepts (all fields required, no unknown fields, no numeric bounds);
// parseTriage and parseAssessment check the rest here.
var triageSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"category":      map[string]any{"type": "string", "enum": triageCategories},
		"severity":      map[string]any{"type": "string", "enum": []string{"low", "medium", "high"}},
		"fraud_signals": map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
		"fraud_score":   map[string]any{"type": "integer", "description": "0 to 100"},
		"summary":       map[string]any{"type": "string"},
	},
	"required":             []string{"category", "severity", "fraud_signals", "fraud_score", "summary"},
	"additionalProperties": false,
}

var assessSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"recommended_minor": map[string]any{"type": "integer", "description": "minor units (cents), 0 or more"},
		"rationale":         map[string]any{"type": "string"},
		"needs_review":      map[string]any{"type": "boolean"},
	},
	"required":             []string{"recommended_minor", "rationale", "needs_review"},
	"additionalProperties": false,
}

func object(props map[string]any) shared.FunctionParameters {
	required := make([]string, 0, len(props))
	for k := range props {
		required = append(required, k)
	}
	slices.Sort(required)
	return shared.FunctionParameters{"type": "object", "properties": props, "required": required, "additionalProperties": false}
}

var toolDefinitions = []openai.ChatCompletionToolUnionParam{
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: ToolLookupPolicy, Strict: openai.Bool(true),
		Description: openai.String("The claim's insurance policy: limit, deductible, excluded categories."),
		Parameters:  object(map[string]any{"policy_id": map[string]any{"type": "string"}})}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: ToolGetDocumentText, Strict: openai.Bool(true),
		Description: openai.String("The text of one of the claim's documents, by name (binary documents have none)."),
		Parameters:  object(map[string]any{"name": map[string]any{"type": "string"}})}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: ToolPriorClaims, Strict: openai.Bool(true),
		Description: openai.String("How many other claims this claimant made, and the most recent ones."),
		Parameters:  object(map[string]any{})}),
	openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: ToolFlagFraudSignal, Strict: openai.Bool(true),
		Description: openai.String("Record a fraud signal on this claim for investigators."),
		Parameters:  object(map[string]any{"signal": map[string]any{"type": "string"}, "note": map[string]any{"type": "string"}})}),
}

func responseFormat(name string, schema map[string]any) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: name, Strict: openai.Bool(true), Schema: schema}}}
}

// claimPrompt is the claim as the model reads it: no e-mail, no payout
// account, no document locations.
func claimPrompt(c claim.Claim) string {
	docs := make([]string, 0, len(c.Documents))
	for _, d := range c.Documents {
		docs = append(docs, d.Name)
	}
	b, _ := json.Marshal(map[string]any{"claim_id": c.ID, "policy_id": c.PolicyID, "claimant": c.Claimant.Name,
		"amount": c.Amount(), "amount_minor": c.AmountMinor, "currency": c.Currency, "description": c.Description, "documents": docs})
	return "Claim:\n" + MarkUntrusted("claim", string(b))
}

// assessPrompt is what the assessor reads: the claim, its triage and its
// coverage.
func assessPrompt(r AssessRequest) string {
	in, _ := json.Marshal(map[string]any{"triage": r.Triage, "coverage": r.Coverage})
	return claimPrompt(r.Claim) + "\nTriage and coverage:\n" + string(in)
}

// toolPrompt is a tool's answer as the model reads it: untrusted data.
func toolPrompt(name, content string) string { return MarkUntrusted("tool:"+name, content) }

// TriageTurn asks the model for its next move: tool calls, or the triage.
func (m *OpenAIModel) TriageTurn(ctx context.Context, req TurnRequest) (Reply[Turn], error) {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(m.systemPrompts().TriageSystem), openai.UserMessage(claimPrompt(req.Claim))}
	for _, msg := range req.Messages {
		msgs = append(msgs, toParam(msg))
	}
	params := openai.ChatCompletionNewParams{Model: m.cfg.Model, ResponseFormat: responseFormat("triage", triageSchema)}
	if !req.Final {
		params.Tools = toolDefinitions
	}
	var turn Turn
	var usage Usage
	for tries := 1; ; tries++ {
		params.Messages = msgs
		comp, err := m.complete(ctx, params)
		if err != nil {
			return Reply[Turn]{}, err
		}
		usage = addUsage(usage, comp, msgs)
		answer, calls, problem := firstChoice(comp)
		if len(calls) > 0 && !req.Final && problem == "" {
			msg := Message{Role: "assistant", Content: answer, ToolCalls: calls}
			turn.Messages, turn.ToolCalls = append(turn.Messages, msg), calls
			return Reply[Turn]{Output: turn, Usage: usage}, nil
		}
		if len(calls) > 0 {
			problem = "tools are not available on the last turn"
		}
		var t Triage
		if problem == "" {
			t, err = parseTriage(answer)
			if err != nil {
				problem = err.Error()
			}
		}
		turn.Messages = append(turn.Messages, Message{Role: "assistant", Content: answer})
		if problem == "" {
			turn.Triage = &t
			return Reply[Turn]{Output: turn, Usage: usage}, nil
		}
		if tries > m.cfg.MaxInvalidAnswers {
			t := ReviewTriage(fmt.Sprintf("the model gave no valid triage in %d answers (last: %s)", tries, problem))
			turn.Triage = &t
			return Reply[Turn]{Output: turn, Usage: usage}, nil
		}
		fix := Message{Role: "user", Content: fixPrompt(problem)}
		turn.Messages = append(turn.Messages, fix)
		msgs = append(msgs, openai.AssistantMessage(answer), openai.UserMessage(fix.Content))
	}
}

// Triage, for runs started before the agent loop: one turn with no tools.
func (m *OpenAIModel) Triage(ctx context.Context, c claim.Claim) (Reply[Triage], error) {
	r, err := m.TriageTurn(ctx, TurnRequest{Claim: c, Turn: 1, Final: true})
	if err != nil {
		return Reply[Triage]{}, err
	}
	b, _ := json.Marshal(r.Output.Messages)
	return Reply[Triage]{Output: *r.Output.Triage, Usage: r.Usage, Transcript: b}, nil
}

// Assess asks for a payout recommendation. An answer that does not satisfy
// the schema is asked again a bounded number of times; after that the
// claim goes to a human with the covered amount proposed: it is never paid
// on an answer we could not parse.
func (m *OpenAIModel) Assess(ctx context.Context, r AssessRequest) (Reply[Assessment], error) {
	msgs := []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(m.systemPrompts().AssessSystem), openai.UserMessage(assessPrompt(r))}
	params := openai.ChatCompletionNewParams{Model: m.cfg.Model, ResponseFormat: responseFormat("assessment", assessSchema)}
	var usage Usage
	var exchange []Message
	for tries := 1; ; tries++ {
		params.Messages = msgs
		comp, err := m.complete(ctx, params)
		if err != nil {
			return Reply[Assessment]{}, err
		}
		usage = addUsage(usage, comp, msgs)
		answer, calls, problem := firstChoice(comp)
		if problem == "" && len(calls) > 0 {
			problem = "no tools are offered for an assessment"
		}
		var as Assessment
		if problem == "" {
			if as, err = parseAssessment(answer); err != nil {
				problem = err.Error()
			}
		}
		exchange = append(exchange, Message{Role: "assistant", Content: answer})
		transcript, _ := json.Marshal(exchange)
		if problem == "" {
			return Reply[Assessment]{Output: as, Usage: usage, Transcript: transcript}, nil
		}
		if tries > m.cfg.MaxInvalidAnswers {
			as = ReviewAssessment(r.Coverage.CoveredMinor, fmt.Sprintf("the model gave no valid assessment in %d answers (last: %s)", tries, problem))
			return Reply[Assessment]{Output: as, Usage: usage, Transcript: transcript}, nil
		}
		fix := fixPrompt(problem)
		exchange = append(exchange, Message{Role: "user", Content: fix})
		msgs = append(msgs, openai.AssistantMessage(answer), openai.UserMessage(fix))
	}
}

// fixPrompt asks again after an answer that did not satisfy the schema.
func fixPrompt(problem string) string {
	return "Your answer was not valid: " + problem + ". Answer again with only the JSON object the schema asks for."
}

func toParam(m Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case "tool":
		return openai.ToolMessage(toolPrompt(m.Name, m.Content), m.ToolCallID)
	case "user":
		return openai.UserMessage(m.Content)
	}
	if len(m.ToolCalls) == 0 {
		return openai.AssistantMessage(m.Content)
	}
	var p openai.ChatCompletionAssistantMessageParam
	if m.Content != "" {
		p.Content.OfString = openai.String(m.Content)
	}
	for _, tc := range m.ToolCalls {
		p.ToolCalls = append(p.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
			ID: tc.ID, Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments}}})
	}
	return openai.ChatCompletionMessageParamUnion{OfAssistant: &p}
}

// firstChoice reads the answer of the first choice; problem says why it is
// not one (no choice, cut off, refused).
func firstChoice(comp *openai.ChatCompletion) (content string, calls []ToolCall, problem string) {
	if len(comp.Choices) == 0 {
		return "", nil, "the response has no choices"
	}
	ch := comp.Choices[0]
	for _, tc := range ch.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return "", nil, fmt.Sprintf("tool call of unknown type %q", tc.Type)
		}
		calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	switch {
	case ch.Message.Refusal != "":
		return ch.Message.Refusal, nil, "the model refused: " + ch.Message.Refusal
	case ch.FinishReason == "length":
		return ch.Message.Content, nil, "the answer was cut off at the token limit"
	}
	return ch.Message.Content, calls, ""
}

// addUsage adds a response's usage; a server that reports none (some local
// servers) is estimated at four characters a token so the caps still bite.
func addUsage(u Usage, comp *openai.ChatCompletion, sent []openai.ChatCompletionMessageParamUnion) Usage {
	in, out := comp.Usage.PromptTokens, comp.Usage.CompletionTokens
	if in == 0 && out == 0 {
		b, _ := json.Marshal(sent)
		in = int64(len(b)/4 + 1)
		for _, ch := range comp.Choices {
			out += int64(len(ch.Message.Content)/4 + 1)
		}
	}
	u.TokensIn += in
	u.TokensOut += out
	return u
}

// strictDecode decodes one JSON object, refusing unknown fields and
// trailing data. Models often wrap JSON in a Markdown fence: that is
// tolerated.
func strictDecode(answer string, v any) error {
	s := strings.TrimSpace(answer)
	if rest, ok := strings.CutPrefix(s, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "```"))
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("not the JSON object asked for: %v", err)
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

func parseTriage(answer string) (Triage, error) {
	var raw struct {
		Category     *string  `json:"category"`
		Severity     *string  `json:"severity"`
		FraudSignals []string `json:"fraud_signals"`
		FraudScore   *int     `json:"fraud_score"`
		Summary      *string  `json:"summary"`
	}
	if err := strictDecode(answer, &raw); err != nil {
		return Triage{}, err
	}
	switch {
	case raw.Category == nil || !slices.Contains(triageCategories, *raw.Category):
		return Triage{}, fmt.Errorf("category must be one of %v", triageCategories)
	case raw.Severity == nil || !slices.Contains([]string{"low", "medium", "high"}, *raw.Severity):
		return Triage{}, errors.New("severity must be low, medium or high")
	case raw.FraudScore == nil || *raw.FraudScore < 0 || *raw.FraudScore > 100:
		return Triage{}, errors.New("fraud_score must be an integer from 0 to 100")
	case raw.Summary == nil || strings.TrimSpace(*raw.Summary) == "" || len(*raw.Summary) > 2000:
		return Triage{}, errors.New("summary must be 1 to 2000 characters")
	case len(raw.FraudSignals) > 20:
		return Triage{}, errors.New("at most 20 fraud_signals")
	}
	for _, s := range raw.FraudSignals {
		if s == "" || len(s) > 100 {
			return Triage{}, errors.New("each fraud signal must be 1 to 100 characters")
		}
	}
	return Triage{Category: *raw.Category, Severity: *raw.Severity, FraudSignals: raw.FraudSignals,
		FraudScore: *raw.FraudScore, Summary: *raw.Summary}, nil
}

func parseAssessment(answer string) (Assessment, error) {
	var raw struct {
		RecommendedMinor *json.Number `json:"recommended_minor"`
		Rationale        *string      `json:"rationale"`
		NeedsReview      *bool        `json:"needs_review"`
	}
	if err := strictDecode(answer, &raw); err != nil {
		return Assessment{}, err
	}
	if raw.RecommendedMinor == nil {
		return Assessment{}, errors.New("recommended_minor is required")
	}
	n, err := strconv.ParseInt(raw.RecommendedMinor.String(), 10, 64)
	switch {
	case err != nil || n < 0:
		return Assessment{}, fmt.Errorf("recommended_minor must be a whole number of minor units >= 0, not %s", raw.RecommendedMinor)
	case raw.Rationale == nil || strings.TrimSpace(*raw.Rationale) == "" || len(*raw.Rationale) > 4000:
		return Assessment{}, errors.New("rationale must be 1 to 4000 characters")
	case raw.NeedsReview == nil:
		return Assessment{}, errors.New("needs_review is required")
	}
	return Assessment{RecommendedMinor: n, Rationale: *raw.Rationale, NeedsReview: *raw.NeedsReview}, nil
}

// MaxRetryAfter caps how long a provider may ask us to wait.
const MaxRetryAfter = 2 * time.Minute

// classifyModelError turns a provider error into what the activity's
// retry policy acts on: rate limits, server errors, timeouts and garbled
// responses retry (after the provider's Retry-After when it sent one);
// requests the provider refused fail the step with a message naming the
// setting to fix (env is its prefix: MODEL_ or MODEL_FALLBACK_).
func classifyModelError(err error, env string) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		status := apiErr.StatusCode
		msg := fmt.Sprintf("model provider answered %d %s", status, http.StatusText(status))
		if apiErr.Code != "" {
			msg += " (" + apiErr.Code + ")"
		}
		if apiErr.Message != "" {
			msg += ": " + apiErr.Message
		}
		delay := retryAfter(apiErr.Response)
		switch {
		case status == http.StatusTooManyRequests:
			return retryable(msg, ErrModelRateLimited, delay)
		case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
			return retryable(msg, ErrModelUnavailable, delay)
		case apiErr.Code == "context_length_exceeded" || strings.Contains(strings.ToLower(apiErr.Message), "context length") ||
			strings.Contains(strings.ToLower(apiErr.Message), "maximum context"):
			return temporal.NewNonRetryableApplicationError(msg+"; the conversation no longer fits the model's context window: lower the triage caps or use a model with a longer context", ErrModelContextLength, nil)
		case status == http.StatusUnauthorized || status == http.StatusForbidden:
			return temporal.NewNonRetryableApplicationError(msg+"; check "+env+"API_KEY", ErrModelAuth, nil)
		case status == http.StatusNotFound:
			return temporal.NewNonRetryableApplicationError(msg+"; check "+env+"BASE_URL and "+env+"NAME", ErrModelNotFound, nil)
		default:
			return temporal.NewNonRetryableApplicationError(msg+"; the provider refused the request as sent", ErrModelRequest, nil)
		}
	}
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return retryable("model request timed out: "+err.Error(), ErrModelTimeout, 0)
	}
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &syntaxErr) || errors.As(err, &typeErr) || strings.Contains(err.Error(), "error parsing response json") {
		return retryable("model provider sent a response that is not JSON: "+err.Error(), ErrModelBadResponse, 0)
	}
	return retryable("model provider unreachable: "+err.Error(), ErrModelUnavailable, 0)
}

func retryable(msg, typ string, delay time.Duration) error {
	return temporal.NewApplicationErrorWithOptions(msg, typ, temporal.ApplicationErrorOptions{NextRetryDelay: delay})
}

// retryAfter reads retry-after-ms or Retry-After (seconds or a date), capped.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	var d time.Duration
	if ms, err := strconv.ParseFloat(resp.Header.Get("retry-after-ms"), 64); err == nil && ms > 0 {
		d = time.Duration(ms * float64(time.Millisecond))
	} else if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
			d = time.Duration(s * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = time.Until(t)
		}
	}
	return min(max(d, 0), MaxRetryAfter)
}
