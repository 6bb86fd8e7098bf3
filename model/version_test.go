package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
)

var promptVersionForm = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Each part of what the provider sends, changed by one character or one
// tool, gives another prompt version; no two of the changes give the same.
func TestPromptVersionChangesWithEveryPartOfThePrompts(t *testing.T) {
	base := openAIPrompts()
	v := base.version()
	require.Regexp(t, promptVersionForm, v)
	assert.Equal(t, v, (&OpenAIModel{}).PromptVersion())

	looser := map[string]any{"type": "object", "additionalProperties": true}
	changes := map[string]func(p *promptSet){
		"triage system prompt":   func(p *promptSet) { p.TriageSystem += " " },
		"assess system prompt":   func(p *promptSet) { p.AssessSystem = p.AssessSystem[:len(p.AssessSystem)-1] },
		"a tool dropped":         func(p *promptSet) { p.Tools = toolDefinitions[:len(toolDefinitions)-1] },
		"triage response schema": func(p *promptSet) { p.TriageFormat = responseFormat("triage", looser) },
		"assess response name":   func(p *promptSet) { p.AssessFormat = responseFormat("assess", assessSchema) },
		"claim frame":            func(p *promptSet) { p.ClaimFrame = "Claim (data):" + p.ClaimFrame[len("Claim:"):] },
		"assess frame":           func(p *promptSet) { p.AssessFrame += "\n" },
		"tool frame":             func(p *promptSet) { p.ToolFrame = MarkUntrusted("tool", "CONTENT") },
		"fix frame":              func(p *promptSet) { p.FixFrame = "Try again: PROBLEM" },
	}
	seen := map[string]string{v: "the prompts as they are"}
	for what, change := range changes {
		p := openAIPrompts()
		change(&p)
		got := p.version()
		assert.Regexp(t, promptVersionForm, got, what)
		if other, dup := seen[got]; dup {
			t.Errorf("%s gives the same prompt version as %s", what, other)
		}
		seen[got] = what
	}
}

// The version names the prompts, nothing else: the same whichever endpoint,
// model, key or timeout a worker is configured with, however often it is
// computed, and whatever order a schema's keys were written in.
func TestPromptVersionIsStableOtherwise(t *testing.T) {
	want := openAIPrompts().version()
	for _, cfg := range []OpenAIConfig{
		{Model: "gpt-4o-mini", APIKey: "sk-one"},
		{Model: "llama3.1", BaseURL: "http://localhost:11434/v1", Timeout: time.Second, MaxInvalidAnswers: 5},
	} {
		m, err := NewOpenAIModel(cfg)
		require.NoError(t, err)
		assert.Equal(t, want, m.PromptVersion(), cfg.Model)
	}
	var wg sync.WaitGroup
	got := make([]string, 32)
	for i := range got {
		wg.Go(func() { got[i] = openAIPrompts().version() })
	}
	wg.Wait()
	for i := range got {
		assert.Equal(t, want, got[i], "computation %d", i)
	}
	// The same schema built key by key in another order.
	p := openAIPrompts()
	reordered := map[string]any{}
	keys := []string{"additionalProperties", "required", "properties", "type"}
	for _, k := range keys {
		reordered[k] = assessSchema[k]
	}
	p.AssessFormat = responseFormat("assessment", reordered)
	assert.Equal(t, want, p.version())
}

// What the version digests is what the provider sends: the system prompt,
// the tools and the response format of a real triage request, and the
// system prompt and response format of an assessment, read back from the
// wire, are the parts of the prompt set.
func TestPromptVersionCoversWhatIsSent(t *testing.T) {
	_, triageBody, assessBody := askBoth(t, OpenAIConfig{})

	type sent struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		Tools          json.RawMessage `json:"tools"`
		ResponseFormat json.RawMessage `json:"response_format"`
	}
	var triage, assess sent
	require.NoError(t, json.Unmarshal(triageBody, &triage))
	require.NoError(t, json.Unmarshal(assessBody, &assess))
	p := openAIPrompts()
	asJSON := func(v any) string { b, err := json.Marshal(v); require.NoError(t, err); return string(b) }
	require.NotEmpty(t, triage.Messages)
	assert.Equal(t, "system", triage.Messages[0].Role)
	assert.Equal(t, p.TriageSystem, triage.Messages[0].Content)
	assert.JSONEq(t, asJSON(p.Tools), string(triage.Tools))
	assert.JSONEq(t, asJSON(p.TriageFormat), string(triage.ResponseFormat))
	require.NotEmpty(t, assess.Messages)
	assert.Equal(t, p.AssessSystem, assess.Messages[0].Content)
	assert.JSONEq(t, asJSON(p.AssessFormat), string(assess.ResponseFormat))
}

// The rules model's answers, on a fixed set of claims and conversations,
// digested under the version they were given with. A change to its answers
// fails here until rulesPromptVersion is bumped and its answers pinned under
// the new version; the rows of older versions stay, as the record of what
// each one answered.
func TestRulesModelAnswersArePinned(t *testing.T) {
	pinned := map[string]string{
		"rules-1": "3e1a9cdf94f88e05b00fbd21c1cf96d241f6537aba1f8e17282fbda13ffca4b8",
	}
	ctx := context.Background()
	var m RulesModel
	claims := []claim.Claim{
		{ID: "c-water", PolicyID: "pol-1001", AmountMinor: 64000, Currency: "usd", Description: "A burst pipe flooded the kitchen overnight",
			Documents: []claim.Document{{Name: "report.txt"}}},
		{ID: "c-fire", PolicyID: "pol-1001", AmountMinor: 500000, Currency: "usd", Description: "Smoke and fire damage in the garage after a fault",
			Documents: []claim.Document{{Name: "photo.jpg"}}},
		{ID: "c-thin", PolicyID: "pol-2002", AmountMinor: 20000, Currency: "usd", Description: "urgent cash"},
		{ID: "c-yen", PolicyID: "pol-1001", AmountMinor: 120000, Currency: "jpy", Description: "My old bike rusted through in the shed: wear"},
	}
	var answers []any
	for _, c := range claims {
		tr, err := m.Triage(ctx, c)
		require.NoError(t, err)
		first, err := m.TriageTurn(ctx, TurnRequest{Claim: c, Turn: 1})
		require.NoError(t, err)
		msgs := append([]Message(nil), first.Output.Messages...)
		for _, call := range first.Output.ToolCalls {
			content := map[string]string{
				ToolLookupPolicy:    `{"found":false,"policy_id":"x"}`,
				ToolPriorClaims:     `{"total":2,"more_than_total":true}`,
				ToolGetDocumentText: `{"name":"report.txt","text":"The pipe under the sink burst and flooded the floor."}`,
			}[call.Name]
			msgs = append(msgs, Message{Role: "tool", ToolCallID: call.ID, Name: call.Name, Content: content})
		}
		second, err := m.TriageTurn(ctx, TurnRequest{Claim: c, Turn: 2, Messages: msgs})
		require.NoError(t, err)
		final, err := m.TriageTurn(ctx, TurnRequest{Claim: c, Turn: 3, Messages: msgs, Final: true})
		require.NoError(t, err)
		as, err := m.Assess(ctx, AssessRequest{Claim: c, Triage: tr.Output, Coverage: claim.Coverage{Covered: true, CoveredMinor: c.AmountMinor / 2, Reason: "half"}})
		require.NoError(t, err)
		answers = append(answers, tr, first, second, final, as)
	}
	b, err := json.Marshal(answers)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	got := hex.EncodeToString(sum[:])
	want, ok := pinned[m.PromptVersion()]
	require.True(t, ok, "no answers are pinned for %s: pin %s", m.PromptVersion(), got)
	assert.Equal(t, want, got, "the rules model answers differently from what %s answered: bump rulesPromptVersion and pin the new answers under it", m.PromptVersion())
}
