// Package modelsim is a local server that speaks the OpenAI Chat Completions
// API (POST /v1/chat/completions: messages, tools and tool calls,
// response_format, usage, error shapes), so the OpenAI-compatible provider
// is exercised end to end with no account and no network.
//
// Behind the wire format it plays the rules model: a triage conversation
// gets the same tool calls and the same classification model.RulesModel
// would give, so claims complete the same way with MODEL_PROVIDER=openai as
// with the default. Unlike the rules model it answers differently on every
// call — tool call IDs, wording and token counts carry the call number — as
// a real model does, so a test can tell a recorded answer from a new one.
//
// Faults are queued and served one per call, in order: 429 with
// Retry-After, 500, a 200 whose body is not JSON, an answer that violates
// the response schema, a slow answer, and the 4xx refusals. ParseFault
// checks every fault queued (by Inject, POST /_sim/faults or the command's
// -faults): an unknown or malformed one is refused, never served as no
// fault. A slow answer stops waiting when its request's context ends — the
// caller hangs up, or the server shuts down (the command cancels every
// request's context on a signal) — and is then answered 503, unprocessed.
//
// TokensPerMinute limits the tokens answered per minute as a provider's TPM
// limit does: a request is refused with 429, Retry-After, retry-after-ms and
// the x-ratelimit-*-tokens headers (an error of type "tokens", code
// "rate_limit_exceeded") until the bucket holds its prompt tokens, and each
// answer is charged the total_tokens its usage reports.
//
// Answers (see ParseAnswers) make it a different model for a known subset
// of claims: for the claims a rule's regexp matches, the assessment's
// recommended_minor or needs_review, or the triage's category or
// fraud_score, are changed as the rule says, and the answer says so.
//
// Request bodies are bounded, a chat completion at 8 MiB and a POST
// /_sim/faults list at 64 KiB; a larger body is refused whole with 413.
package modelsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/model"
)

// Fault is one misbehaviour, served to one call.
type Fault string

// The faults. Slow is "slow:<duration>"; RateLimit is "429" with
// Retry-After: 1, or "429:<seconds>".
const (
	RateLimit     Fault = "429"
	ServerError   Fault = "500"
	Malformed     Fault = "malformed"
	Invalid       Fault = "invalid"
	BadRequest    Fault = "400"
	Unauthorized  Fault = "401"
	NotFound      Fault = "404"
	ContextLength Fault = "context-length"
	// Outage marks a call answered 503 while the server is down (SetDown);
	// it is not one to inject.
	Outage Fault = "outage"
)

const (
	maxSlow        = 10 * time.Minute // the longest slow fault
	maxBodyBytes   = 8 << 20          // a chat completion request
	maxFaultsBytes = 64 << 10         // a POST /_sim/faults list
)

const validFaults = "429, 429:<seconds>, 500, malformed, invalid, slow:<duration>, 400, 401, 404, context-length, " +
	"or a 4xx or 5xx status code"

// ParseFault returns s as a Fault if it is one the server knows: one of the
// constants, "429:<seconds>" with a positive whole number of seconds for
// Retry-After, "slow:<duration>" with a positive Go duration of at most 10
// minutes, or a bare 4xx or 5xx status code (answered with that status).
// Anything else is refused, with the reason.
func ParseFault(s string) (Fault, error) {
	f := Fault(s)
	switch f {
	case RateLimit, ServerError, Malformed, Invalid, BadRequest, Unauthorized, NotFound, ContextLength:
		return f, nil
	}
	if v, ok := strings.CutPrefix(s, "429:"); ok {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 || strconv.Itoa(n) != v {
			return "", fmt.Errorf(`fault %q: Retry-After must be a positive whole number of seconds, as in "429:2"`, s)
		}
		return f, nil
	}
	if v, ok := strings.CutPrefix(s, "slow:"); ok {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 || d > maxSlow {
			return "", fmt.Errorf(`fault %q: the delay must be a positive Go duration of at most %v, as in "slow:2s"`, s, maxSlow)
		}
		return f, nil
	}
	if code, err := strconv.Atoi(s); err == nil && code >= 400 && code <= 599 && strconv.Itoa(code) == s {
		return f, nil
	}
	return "", fmt.Errorf("unknown fault %q (valid: %s)", s, validFaults)
}

// Call is what the server saw on one request.
type Call struct {
	N        int    `json:"n"`
	Kind     string `json:"kind"` // triage or assessment
	ClaimID  string `json:"claim_id"`
	Messages int    `json:"messages"`
	Tools    int    `json:"tools"`
	// Answers are the tool call IDs the request's tool results answer;
	// Issued the IDs of the tool calls the response asked for.
	Answers  []string  `json:"answers,omitempty"`
	Issued   []string  `json:"issued,omitempty"`
	Fault    Fault     `json:"fault,omitempty"`
	Answered string    `json:"answered"` // tool_calls, answer, error
	At       time.Time `json:"at"`
	// Waited is the latency the answer was held for (Server.Latency).
	Waited time.Duration `json:"waited_ns,omitempty"`
	// Tokens is the answer's usage.total_tokens, what the TPM limit charged;
	// RateLimited marks a request the TPM limit refused (Answered "error").
	Tokens      int64 `json:"tokens,omitempty"`
	RateLimited bool  `json:"rate_limited,omitempty"`
	// Rule is the answer rule (Server.Answers, from 1) that changed the
	// answer; 0 when none did.
	Rule int `json:"rule,omitempty"`
	// Unread marks a request refused because its body could not be read
	// whole or was not JSON (a client killed while sending it, say; not one
	// refused as too large): it names no claim and was not charged
	// (Answered "error").
	Unread bool `json:"unread,omitempty"`
}

// Server is an http.Handler.
type Server struct {
	// APIKey, when set, is the only bearer token accepted.
	APIKey string
	// Gullible makes the model obey instructions injected into the claim
	// (its description, its documents): the model a prompt injection fools.
	Gullible bool
	// Latency makes every answer take as long as a real model's: a time
	// drawn uniformly from [Min, Max] before it is sent (zero: at once).
	Latency Latency
	// TokensPerMinute, when positive, is a TPM limit: a token bucket holding
	// five seconds' worth (TokensPerMinute/12, at least 1), starting full and
	// refilling continuously. A request is admitted while the bucket holds
	// its prompt tokens (all of it, for a prompt larger than the bucket),
	// else refused with 429; an answer is charged its total_tokens, and may
	// leave the bucket in debt.
	TokensPerMinute int64
	// Answers change the answers for the claims they match (see
	// ParseAnswers): the first rule matching a claim's ID applies. Claims
	// no rule matches are answered as without rules.
	Answers []AnswerRule

	now func() time.Time // the TPM bucket's clock; nil is time.Now

	mu     sync.Mutex
	n      int
	down   bool
	faults []Fault
	calls  []Call
	tpm    tokenBucket
}

// New returns a server with no faults queued.
func New(apiKey string) *Server { return &Server{APIKey: apiKey, now: time.Now} }

// SetDown takes the provider down (every call answered 503 server_error,
// recorded with the fault Outage, charged nothing and serving no queued
// fault) or brings it back.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Inject queues faults, served one per call in order. It panics, queueing
// none, if one is not valid (see ParseFault): that is a programming error.
func (s *Server) Inject(f ...Fault) {
	for _, fault := range f {
		if _, err := ParseFault(string(fault)); err != nil {
			panic("modelsim: Inject: " + err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// Calls lists every call so far.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type request struct {
	Model          string            `json:"model"`
	Messages       []wireMessage     `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	ResponseFormat struct {
		JSONSchema struct {
			Name string `json:"name"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// text reads a message's content, a string or an array of text parts.
func (m wireMessage) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_sim/calls" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Calls())
		return
	case r.URL.Path == "/_sim/faults" && r.Method == http.MethodPost:
		s.serveInject(w, r)
		return
	case r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/chat/completions"):
		apiError(w, http.StatusNotFound, "invalid_request_error", "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var req request
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	// Every request is counted from the moment it arrives, refused or not.
	s.mu.Lock()
	s.n++
	call := Call{N: s.n, Kind: "triage", Messages: len(req.Messages), Tools: len(req.Tools), At: time.Now()}
	if req.ResponseFormat.JSONSchema.Name == "assessment" {
		call.Kind = "assessment"
	}
	idx := len(s.calls)
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	var reserved int64 // the prompt tokens the TPM limit holds for this call
	record := func(answered string) {
		s.mu.Lock()
		if reserved > 0 {
			s.settle(reserved, call.Tokens)
		}
		call.Answered = answered
		s.calls[idx] = call
		s.mu.Unlock()
	}
	if s.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.APIKey {
		record("error")
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
		return
	}
	if tooLarge(w, err) {
		record("error")
		return
	}
	if err != nil || req.Model == "" || len(req.Messages) == 0 {
		call.Unread = err != nil
		record("error")
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "the body must be JSON with model and messages")
		return
	}
	c, rest, extra, err := parsePrompt(req.Messages)
	call.ClaimID = c.ID
	for _, m := range rest {
		if m.Role == "tool" {
			call.Answers = append(call.Answers, m.ToolCallID)
		}
	}
	// A request the TPM limit refuses is not served the next fault: that
	// stays queued for the next call admitted.
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		call.Fault = Outage
		record("error")
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The server is temporarily unavailable.")
		return
	}
	var limited *rateLimit
	if prompt := promptTokens(len(body)); err == nil && s.TokensPerMinute > 0 {
		if limited = s.admit(prompt); limited == nil {
			reserved = prompt
		}
	}
	if limited == nil && len(s.faults) > 0 {
		call.Fault, s.faults = s.faults[0], s.faults[1:]
	}
	s.mu.Unlock()
	if limited != nil {
		call.RateLimited = true
		record("error")
		limited.write(w, req.Model)
		return
	}
	if err != nil {
		record("error")
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	if s.fault(w, r, call.Fault) {
		record("error")
		return
	}
	waited, ok := s.Latency.wait(r.Context())
	call.Waited = waited
	if !ok {
		record("error")
		apiError(w, http.StatusServiceUnavailable, "server_error", "", "The answer was abandoned: the request was cancelled.")
		return
	}
	var content string
	var toolCalls []model.ToolCall
	if call.Kind == "assessment" {
		var tc struct {
			Triage   model.Triage   `json:"triage"`
			Coverage claim.Coverage `json:"coverage"`
		}
		if err := json.Unmarshal([]byte(extra), &tc); err != nil {
			record("error")
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", "assessment prompt without triage and coverage")
			return
		}
		reply, _ := model.RulesModel{}.Assess(r.Context(), model.AssessRequest{Claim: c, Triage: tc.Triage, Coverage: tc.Coverage})
		as := reply.Output
		if in := instructions(c.Description); s.Gullible && in != "" {
			obeyAssessment(&as, in)
		}
		if rule, n := s.answerRule(c.ID); rule.changesAssessment() {
			rule.applyAssessment(&as)
			as.Rationale += fmt.Sprintf(" (answer rule %d)", n)
			call.Rule = n
		}
		as.Rationale += fmt.Sprintf(" (answer %d)", call.N)
		b, _ := json.Marshal(as)
		content = string(b)
	} else {
		// The call number as the turn gives tool call IDs unique per call.
		reply, _ := model.RulesModel{}.TriageTurn(r.Context(), model.TurnRequest{Claim: c, Turn: call.N, Messages: rest, Final: len(req.Tools) == 0})
		if t := reply.Output.Triage; t != nil {
			if in := instructions(append([]string{c.Description}, contents(rest)...)...); s.Gullible && in != "" {
				obeyTriage(t, in)
			}
			if rule, n := s.answerRule(c.ID); rule.changesTriage() {
				rule.applyTriage(t)
				t.Summary += fmt.Sprintf(" (answer rule %d)", n)
				call.Rule = n
			}
			t.Summary += fmt.Sprintf(" (answer %d)", call.N)
			b, _ := json.Marshal(t)
			content = string(b)
		}
		toolCalls = reply.Output.ToolCalls
		for _, tc := range toolCalls {
			call.Issued = append(call.Issued, tc.ID)
		}
	}
	if call.Fault == Invalid { // well-formed JSON that breaks the schema
		content, toolCalls, call.Issued, call.Rule = `{"category":"spaceship","severity":"extreme","fraud_signals":[],"fraud_score":7,"summary":"?"}`, nil, nil, 0
		if call.Kind == "assessment" {
			content = `{"recommended_minor":-1,"rationale":"","needs_review":false}`
		}
	}
	answered := "answer"
	if len(toolCalls) > 0 {
		answered = "tool_calls"
	}
	in, out := promptTokens(len(body)), completionTokens(call.N, content, toolCalls)
	call.Tokens = in + out
	record(answered)
	writeJSON(w, http.StatusOK, completion(call.N, req.Model, content, toolCalls, in, out))
}

// serveInject queues the faults of a POST /_sim/faults, a JSON array: all of
// them if all are valid, else none.
func (s *Server) serveInject(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxFaultsBytes))
	if tooLarge(w, err) {
		return
	}
	var list []string
	if err == nil {
		err = json.Unmarshal(body, &list)
	}
	if err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "body must be a JSON array of faults")
		return
	}
	faults := make([]Fault, len(list))
	for i, v := range list {
		if faults[i], err = ParseFault(v); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request_error", "", fmt.Sprintf("faults[%d]: %v; nothing was queued", i, err))
			return
		}
	}
	s.Inject(faults...)
	writeJSON(w, http.StatusOK, map[string]int{"queued": len(faults)})
}

// tooLarge answers 413 if err is a body going over its limit.
func tooLarge(w http.ResponseWriter, err error) bool {
	var big *http.MaxBytesError
	if !errors.As(err, &big) {
		return false
	}
	apiError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "",
		fmt.Sprintf("Request body too large: the limit is %d bytes.", big.Limit))
	return true
}

// fault serves a fault; false when the call should be answered normally
// (no fault, a delay, or a bad answer to come).
func (s *Server) fault(w http.ResponseWriter, r *http.Request, f Fault) bool {
	switch {
	case f == "", f == Invalid:
		return false
	case strings.HasPrefix(string(f), "slow:"):
		d, _ := time.ParseDuration(strings.TrimPrefix(string(f), "slow:"))
		select {
		case <-time.After(d):
			return false
		case <-r.Context().Done():
			// The caller hung up, or the server is shutting down: stop
			// waiting, and do not answer as if the delay had passed.
			apiError(w, http.StatusServiceUnavailable, "server_error", "",
				"The slow answer was abandoned: the request was cancelled or the server is shutting down.")
		}
	case f == RateLimit || strings.HasPrefix(string(f), "429:"):
		secs := "1"
		if v, ok := strings.CutPrefix(string(f), "429:"); ok {
			secs = v
		}
		w.Header().Set("Retry-After", secs)
		apiError(w, http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached. Please try again in "+secs+"s.")
	case f == ServerError:
		apiError(w, http.StatusInternalServerError, "server_error", "", "The server had an error while processing your request.")
	case f == Malformed:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{"id":"chatcmpl-broken","choices":[{"index":0,"message":{"role":"assis`)
	case f == BadRequest:
		apiError(w, http.StatusBadRequest, "invalid_request_error", "", "Invalid value for 'messages'.")
	case f == Unauthorized:
		apiError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Incorrect API key provided.")
	case f == NotFound:
		apiError(w, http.StatusNotFound, "invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it.")
	case f == ContextLength:
		apiError(w, http.StatusBadRequest, "invalid_request_error", "context_length_exceeded", "This model's maximum context length is 8192 tokens.")
	default:
		if code, err := strconv.Atoi(string(f)); err == nil && code >= 400 {
			apiError(w, code, "server_error", "", http.StatusText(code))
			return true
		}
		return false
	}
	return true
}

// parsePrompt reads the claim from the user message the provider writes
// ("Claim:\n{json}", and for an assessment "\nTriage and coverage:\n{json}"),
// and the conversation after it.
func parsePrompt(msgs []wireMessage) (claim.Claim, []model.Message, string, error) {
	var c claim.Claim
	i := 0
	for i < len(msgs) && msgs[i].Role != "user" {
		i++
	}
	if i == len(msgs) {
		return c, nil, "", fmt.Errorf("no user message")
	}
	text, ok := strings.CutPrefix(msgs[i].text(), "Claim:\n")
	if !ok {
		return c, nil, "", fmt.Errorf("the first user message must start with \"Claim:\"")
	}
	text, extra, _ := strings.Cut(text, "\nTriage and coverage:\n")
	text = model.UnmarkUntrusted(text)
	var p struct {
		ClaimID     string   `json:"claim_id"`
		PolicyID    string   `json:"policy_id"`
		Claimant    string   `json:"claimant"`
		AmountMinor int64    `json:"amount_minor"`
		Currency    string   `json:"currency"`
		Description string   `json:"description"`
		Documents   []string `json:"documents"`
	}
	if err := json.Unmarshal([]byte(text), &p); err != nil {
		return c, nil, "", fmt.Errorf("claim is not JSON: %v", err)
	}
	c = claim.Claim{ID: p.ClaimID, PolicyID: p.PolicyID, Claimant: claim.Claimant{Name: p.Claimant},
		AmountMinor: p.AmountMinor, Currency: p.Currency, Description: p.Description}
	for _, d := range p.Documents {
		c.Documents = append(c.Documents, claim.Document{Name: d})
	}
	var rest []model.Message
	for _, m := range msgs[i+1:] {
		am := model.Message{Role: m.Role, Content: m.text(), ToolCallID: m.ToolCallID}
		if m.Role == "tool" {
			am.Content = model.UnmarkUntrusted(am.Content)
		}
		for _, tc := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, model.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		rest = append(rest, am)
	}
	// Tool results name their call by ID only: recover the tool's name.
	names := map[string]string{}
	for _, m := range rest {
		for _, tc := range m.ToolCalls {
			names[tc.ID] = tc.Name
		}
	}
	for j := range rest {
		if rest[j].Role == "tool" {
			rest[j].Name = names[rest[j].ToolCallID]
		}
	}
	return c, rest, extra, nil
}

// contents lists the messages' text.
func contents(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Content
	}
	return out
}

// promptTokens is what a request body of n bytes counts for: about four
// bytes a token, as for English text.
func promptTokens(n int) int64 { return int64(n/4 + 1) }

// completionTokens is what the n-th answer counts for: its content, ten a
// tool call, and a few that vary with the call.
func completionTokens(n int, content string, calls []model.ToolCall) int64 {
	return int64(len(content)/4 + 10*len(calls) + n%7 + 1)
}

func completion(n int, modelName, content string, calls []model.ToolCall, in, out int64) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	finish := "stop"
	if len(calls) > 0 {
		var tcs []map[string]any
		for _, tc := range calls {
			tcs = append(tcs, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]string{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = tcs
		finish = "tool_calls"
	} else {
		msg["content"] = content
	}
	return map[string]any{
		"id": fmt.Sprintf("chatcmpl-sim-%d", n), "object": "chat.completion", "created": time.Now().Unix(), "model": modelName,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}},
		"usage":   map[string]int64{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out},
	}
}

func apiError(w http.ResponseWriter, status int, typ, code, msg string) {
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Latency is how long each answer takes, drawn uniformly from [Min, Max].
type Latency struct{ Min, Max time.Duration }

// ParseLatency reads "1.5s" (always that long) or "1s-2s" (uniform between).
func ParseLatency(s string) (Latency, error) {
	if s == "" {
		return Latency{}, nil
	}
	lo, hi, ranged := strings.Cut(s, "-")
	if !ranged {
		hi = lo
	}
	minD, err1 := time.ParseDuration(strings.TrimSpace(lo))
	maxD, err2 := time.ParseDuration(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil || minD < 0 || maxD < minD || maxD > maxSlow {
		return Latency{}, fmt.Errorf(`latency %q: want a duration ("1.5s") or a range ("1s-2s"), at most %v`, s, maxSlow)
	}
	return Latency{Min: minD, Max: maxD}, nil
}

// wait sleeps for one answer's latency and says how long; false if ctx
// ended first.
func (l Latency) wait(ctx context.Context) (time.Duration, bool) {
	if l.Max <= 0 {
		return 0, true
	}
	d := l.Min
	if l.Max > l.Min {
		d += time.Duration(rand.Int64N(int64(l.Max - l.Min + 1)))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return d, true
	case <-ctx.Done():
		return d, false
	}
}
