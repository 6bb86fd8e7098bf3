package modelsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/model"
	"github.com/durableclaims/durableclaims/testbed/modelsim"
)

func ptr[T any](v T) *T { return &v }

func TestParseAnswers(t *testing.T) {
	for _, ok := range []struct {
		spec  string
		rules []modelsim.AnswerRule // Claims is checked apart
		match [][]string            // per rule: claim IDs it matches
		miss  [][]string            // and does not
	}{
		{spec: "", rules: nil},
		{spec: "  ", rules: nil},
		{
			spec:  "claim-00[1-3]:recommend=50%,needs_review=false;claim-9.*:category=fire",
			rules: []modelsim.AnswerRule{{RecommendPercent: ptr[int64](50), NeedsReview: ptr(false)}, {Category: ptr("fire")}},
			match: [][]string{{"claim-001", "claim-003"}, {"claim-9", "claim-99x"}},
			miss:  [][]string{{"claim-004", "claim-0011", "xclaim-001"}, {"claim-19", "a-claim-9"}},
		},
		{
			spec:  " a|b : recommend = 12500 , fraud_score=0 ; c:needs_review=true,category=wear-and-tear,fraud_score=100,recommend=0% ",
			rules: []modelsim.AnswerRule{{RecommendMinor: ptr[int64](12500), FraudScore: ptr(0)}, {NeedsReview: ptr(true), Category: ptr("wear-and-tear"), FraudScore: ptr(100), RecommendPercent: ptr[int64](0)}},
			match: [][]string{{"a", "b"}, {"c"}},
			miss:  [][]string{{"ab", "a|b"}, {"cc"}},
		},
		{
			spec:  "ns:(?:x|y):recommend=1000%",
			rules: []modelsim.AnswerRule{{RecommendPercent: ptr[int64](1000)}},
			match: [][]string{{"ns:x", "ns:y"}},
			miss:  [][]string{{"ns:z"}},
		},
		{
			spec:  "x:recommend=0,category=general",
			rules: []modelsim.AnswerRule{{RecommendMinor: ptr[int64](0), Category: ptr("general")}},
		},
	} {
		rules, err := modelsim.ParseAnswers(ok.spec)
		require.NoError(t, err, ok.spec)
		require.Len(t, rules, len(ok.rules), ok.spec)
		for i, r := range rules {
			require.NotNil(t, r.Claims, ok.spec)
			if i < len(ok.match) {
				for _, id := range ok.match[i] {
					assert.True(t, r.Claims.MatchString(id), "%s: rule %d matches %s", ok.spec, i+1, id)
				}
				for _, id := range ok.miss[i] {
					assert.False(t, r.Claims.MatchString(id), "%s: rule %d does not match %s (anchored)", ok.spec, i+1, id)
				}
			}
			r.Claims = nil
			assert.Equal(t, ok.rules[i], r, ok.spec)
		}
	}
	for _, cat := range modelsim.TriageCategories {
		_, err := modelsim.ParseAnswers("x:category=" + cat)
		assert.NoError(t, err, cat)
	}

	for _, bad := range []struct{ spec, msg string }{
		{"a:category=fire;", `answer rule 2 "": empty rule`},
		{";a:category=fire", `answer rule 1 "": empty rule`},
		{"a:category=fire;;b:category=fire", `answer rule 2 "": empty rule`},
		{"a", `answer rule 1 "a": no changes`},
		{"a:", `answer rule 1 "a:": empty change`},
		{"a:category=fire,", `empty change`},
		{":category=fire", `answer rule 1 ":category=fire": no claim-id regexp`},
		{"a:category=fire;claim-(:recommend=1", `answer rule 2 "claim-(:recommend=1": claim-id regexp "claim-("`},
		{"a)|(b:recommend=1", `claim-id regexp "a)|(b"`},
		{"a:colour=red", `answer rule 1 "a:colour=red": unknown change "colour=red" (valid: recommend=<N>%, recommend=<minor>, needs_review=true|false, category=<name>, fraud_score=<0-100>)`},
		{"a:category", `change "category": want <name>=<value>`},
		{"a:recommend=1001%", `change "recommend=1001%": the percentage must be a whole number from 0 to 1000`},
		{"a:recommend=-5%", "the percentage must be a whole number"},
		{"a:recommend=1.5%", "the percentage must be a whole number"},
		{"a:recommend=%", "the percentage must be a whole number"},
		{"a:recommend=-1", `change "recommend=-1": want a percentage (recommend=50%) or a whole number of minor units`},
		{"a:recommend=+1", "whole number of minor units"},
		{"a:recommend=12.50", "whole number of minor units"},
		{"a:recommend=", "whole number of minor units"},
		{"a:recommend=99999999999999999999", "whole number of minor units"},
		{"a:recommend=5,recommend=10%", `change "recommend=10%": recommend is set twice`},
		{"a:needs_review=yes", `change "needs_review=yes": needs_review is true or false`},
		{"a:needs_review=1", "needs_review is true or false"},
		{"a:needs_review=TRUE", "needs_review is true or false"},
		{"a:category=spaceship", `change "category=spaceship": the category must be one of water-damage, fire, theft, auto, glass, wear-and-tear, general`},
		{"a:category=Fire", "the category must be one of"},
		{"a:fraud_score=101", `change "fraud_score=101": fraud_score must be a whole number from 0 to 100`},
		{"a:fraud_score=-1", "fraud_score must be a whole number from 0 to 100"},
		{"a:fraud_score=high", "fraud_score must be a whole number from 0 to 100"},
	} {
		rules, err := modelsim.ParseAnswers(bad.spec)
		assert.ErrorContains(t, err, bad.msg, bad.spec)
		assert.Nil(t, rules, "%s: refused whole", bad.spec)
	}
}

// requestBody is a chat completion request for claimID as the OpenAI
// provider writes it: a triage (offering the tools when tools is set) or,
// with coverage, an assessment.
func requestBody(t *testing.T, claimID string, tools bool, coverage *claim.Coverage) string {
	t.Helper()
	c, err := json.Marshal(map[string]any{"claim_id": claimID, "policy_id": "pol-1001", "claimant": "Ada Lovelace",
		"amount_minor": 64001, "currency": "usd", "description": "A burst pipe flooded the kitchen", "documents": []string{"a.jpg"}})
	require.NoError(t, err)
	req := map[string]any{"model": "sim-1"}
	user := "Claim:\n" + string(c)
	if coverage != nil {
		tc, err := json.Marshal(map[string]any{"triage": model.Triage{Category: "water-damage", Severity: "medium", FraudScore: 10,
			Summary: "water damage"}, "coverage": coverage})
		require.NoError(t, err)
		user += "\nTriage and coverage:\n" + string(tc)
		req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "assessment"}}
	} else {
		req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "triage"}}
	}
	if tools {
		var defs []map[string]any
		for _, name := range model.Tools {
			defs = append(defs, map[string]any{"type": "function", "function": map[string]any{"name": name}})
		}
		req["tools"] = defs
	}
	req["messages"] = []map[string]string{{"role": "system", "content": "You are a claims model."}, {"role": "user", "content": user}}
	b, err := json.Marshal(req)
	require.NoError(t, err)
	return string(b)
}

// answer reads a completion's message: its content and how many tool
// calls it makes.
func answer(t *testing.T, body string) (content string, toolCalls int) {
	t.Helper()
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string           `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &r), body)
	require.Len(t, r.Choices, 1, body)
	m := r.Choices[0].Message
	if m.Content != nil {
		content = *m.Content
	}
	return content, len(m.ToolCalls)
}

// ask posts the same requests, in order, to a server without rules and to
// one with the spec's, and returns both servers' answers' contents.
func ask(t *testing.T, spec string, bodies ...string) (plain, ruled []string, sim *modelsim.Server) {
	t.Helper()
	rules, err := modelsim.ParseAnswers(spec)
	require.NoError(t, err)
	sim = modelsim.New("")
	sim.Answers = rules
	for _, s := range []*modelsim.Server{modelsim.New(""), sim} {
		srv := httptest.NewServer(s)
		var got []string
		for _, b := range bodies {
			resp, body, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", b)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, body)
			content, _ := answer(t, body)
			got = append(got, content)
		}
		srv.Close()
		if s == sim {
			ruled = got
		} else {
			plain = got
		}
	}
	return plain, ruled, sim
}

func TestAnswerRulesChangeTheAssessmentOfTheClaimsTheyMatch(t *testing.T) {
	cov := &claim.Coverage{PolicyID: "pol-1001", Covered: true, Reason: "covered", Currency: "usd", ClaimedMinor: 64001, CoveredMinor: 64001}
	plain, ruled, sim := ask(t, "claim-other:needs_review=true; claim-7\\d\\d:recommend=33%,needs_review=true; claim-.*:recommend=5",
		requestBody(t, "claim-701", false, cov), // rule 2
		requestBody(t, "claim-8", false, cov),   // rule 3
		requestBody(t, "claim-7", false, cov),   // rule 3: rule 2 is anchored
		requestBody(t, "other-1", false, cov),   // no rule
	)
	var p, r model.Assessment
	require.NoError(t, json.Unmarshal([]byte(plain[0]), &p))
	require.NoError(t, json.Unmarshal([]byte(ruled[0]), &r))
	assert.Equal(t, int64(64001), p.RecommendedMinor, "the rules model recommends the covered amount")
	assert.False(t, p.NeedsReview)
	assert.Equal(t, int64(21120), r.RecommendedMinor, "33% of 64001 is 21120.33, rounded down")
	assert.True(t, r.NeedsReview)
	base, ok := strings.CutSuffix(p.Rationale, " (answer 1)")
	require.True(t, ok, p.Rationale)
	assert.Equal(t, base+" (answer rule 2) (answer 1)", r.Rationale)

	for _, i := range []int{1, 2} {
		require.NoError(t, json.Unmarshal([]byte(plain[i]), &p))
		require.NoError(t, json.Unmarshal([]byte(ruled[i]), &r))
		assert.Equal(t, int64(5), r.RecommendedMinor)
		assert.Equal(t, p.NeedsReview, r.NeedsReview, "a change the rule does not make")
		n := fmt.Sprintf(" (answer %d)", i+1)
		assert.Equal(t, strings.TrimSuffix(p.Rationale, n)+" (answer rule 3)"+n, r.Rationale)
	}

	assert.Equal(t, plain[3], ruled[3], "a claim no rule matches is answered exactly as without rules")

	calls := sim.Calls()
	require.Len(t, calls, 4)
	for i, want := range []int{2, 3, 3, 0} {
		assert.Equal(t, want, calls[i].Rule, calls[i].ClaimID)
		assert.Equal(t, "assessment", calls[i].Kind)
	}
}

func TestAnswerRulesChangeTheTriageAnswerNotTheToolCalls(t *testing.T) {
	spec := "claim-a:category=fire,fraud_score=90;claim-b:fraud_score=0;claim-[a-c]:recommend=1%"
	bodies := []string{
		requestBody(t, "claim-a", true, nil),  // asks for tools: unchanged
		requestBody(t, "claim-a", false, nil), // answers: rule 1
		requestBody(t, "claim-b", false, nil), // rule 2
		requestBody(t, "claim-c", false, nil), // rule 3 changes only the assessment
		requestBody(t, "claim-d", false, nil), // no rule
	}
	plain, ruled, sim := ask(t, spec, bodies...)
	assert.Equal(t, plain[0], ruled[0], "a turn that calls tools is not changed")
	assert.Empty(t, ruled[0])

	var p, r model.Triage
	require.NoError(t, json.Unmarshal([]byte(plain[1]), &p))
	require.NoError(t, json.Unmarshal([]byte(ruled[1]), &r))
	assert.Equal(t, "water-damage", p.Category)
	assert.Equal(t, "fire", r.Category)
	assert.Equal(t, 90, r.FraudScore)
	assert.Equal(t, p.Severity, r.Severity)
	assert.Equal(t, p.FraudSignals, r.FraudSignals)
	assert.Equal(t, strings.TrimSuffix(p.Summary, " (answer 2)")+" (answer rule 1) (answer 2)", r.Summary)

	require.NoError(t, json.Unmarshal([]byte(plain[2]), &p))
	require.NoError(t, json.Unmarshal([]byte(ruled[2]), &r))
	assert.Equal(t, p.Category, r.Category)
	assert.Equal(t, 0, r.FraudScore)
	assert.Equal(t, strings.TrimSuffix(p.Summary, " (answer 3)")+" (answer rule 2) (answer 3)", r.Summary)

	assert.Equal(t, plain[3], ruled[3], "a rule with no triage change leaves the triage alone")
	assert.Equal(t, plain[4], ruled[4])

	calls := sim.Calls()
	require.Len(t, calls, 5)
	assert.Equal(t, "tool_calls", calls[0].Answered)
	for i, want := range []int{0, 1, 2, 0, 0} {
		assert.Equal(t, want, calls[i].Rule, "call %d", i+1)
	}

	// GET /_sim/calls shows the rule.
	srv := httptest.NewServer(sim)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/_sim/calls")
	require.NoError(t, err)
	defer resp.Body.Close()
	var listed []map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&listed))
	require.Len(t, listed, 5)
	assert.NotContains(t, listed[0], "rule", "omitted when no rule applied")
	assert.Equal(t, float64(1), listed[1]["rule"])
	assert.Equal(t, float64(2), listed[2]["rule"])
}

func TestAnInvalidAnswerFaultIsNotCreditedToARule(t *testing.T) {
	rules, err := modelsim.ParseAnswers(".*:category=fire")
	require.NoError(t, err)
	sim := modelsim.New("")
	sim.Answers = rules
	sim.Inject(modelsim.Invalid)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	for range 2 {
		resp, body, err := post(t, context.Background(), srv.URL+"/v1/chat/completions", requestBody(t, "claim-a", false, nil))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
	}
	calls := sim.Calls()
	assert.Equal(t, 0, calls[0].Rule, "the schema-breaking answer is the fault's, not the rule's")
	assert.Equal(t, 1, calls[1].Rule)
}

// The categories a rule may set are exactly those the OpenAI provider's
// response schema allows, and the provider accepts each one.
func TestAnswerRuleCategoriesAreTheProvidersCategories(t *testing.T) {
	enums := make(chan []string, len(modelsim.TriageCategories))
	c := claim.Claim{ID: "claim-cat-1", PolicyID: "pol-1001", AmountMinor: 100, Currency: "usd", Description: "A burst pipe"}
	for _, cat := range modelsim.TriageCategories {
		rules, err := modelsim.ParseAnswers("claim-cat-1:category=" + cat)
		require.NoError(t, err)
		sim := modelsim.New("")
		sim.Answers = rules
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			var req struct {
				ResponseFormat struct {
					JSONSchema struct {
						Schema struct {
							Properties struct {
								Category struct {
									Enum []string `json:"enum"`
								} `json:"category"`
							} `json:"properties"`
						} `json:"schema"`
					} `json:"json_schema"`
				} `json:"response_format"`
			}
			if json.Unmarshal(b, &req) == nil {
				select {
				case enums <- req.ResponseFormat.JSONSchema.Schema.Properties.Category.Enum:
				default:
				}
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			sim.ServeHTTP(w, r)
		}))
		m, err := model.NewOpenAIModel(model.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "sim-1", APIKey: "sk-sim", MaxInvalidAnswers: 1})
		require.NoError(t, err)
		turn, err := m.TriageTurn(context.Background(), model.TurnRequest{Claim: c, Turn: 1, Final: true})
		srv.Close()
		require.NoError(t, err, cat)
		require.NotNil(t, turn.Output.Triage, cat)
		assert.Equal(t, cat, turn.Output.Triage.Category, "the provider accepts %s", cat)
		assert.False(t, turn.Output.Triage.NeedsReview, "%s: not refused as invalid", cat)
		assert.Equal(t, 1, sim.Calls()[0].Rule, cat)
	}
	var enum []string
	select { // every request has been answered: a send that never came fails, never waits
	case enum = <-enums:
	default:
	}
	require.NotEmpty(t, enum, "the provider sends its category enum")
	assert.ElementsMatch(t, enum, modelsim.TriageCategories)
}
