package activities

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
)

func withBlobs(t *testing.T, a *Activities) *blobs.Store {
	t.Helper()
	docs, err := blobs.Open(context.Background(), "file://"+t.TempDir()+"?create_dir=true")
	require.NoError(t, err)
	t.Cleanup(func() { docs.Close() })
	a.Blobs = docs
	return docs
}

// The rules agent's loop, turn by turn through the activities: tools, then
// the answer; every turn ledgered under its own key with its cost.
func TestTriageTurnsAndToolsThroughTheActivities(t *testing.T) {
	a := newActivities(t, nil)
	a.BuildID = "build-7f3a"
	docs := withBlobs(t, a)
	c := sampleClaim(t)
	ref, err := docs.Put(context.Background(), "claims/claim-0042/0-report.txt", strings.NewReader("Plumber's report: the burst pipe under the sink flooded the kitchen."))
	require.NoError(t, err)
	c.Documents = []claim.Document{{Name: "report.txt", URI: ref.URI, SHA256: ref.SHA256, Size: ref.Size}}
	_, _, err = a.Store.PutClaim(context.Background(), c)
	require.NoError(t, err)
	price := Price{InMicrosPerMTok: 2_500_000, OutMicrosPerMTok: 10_000_000}

	key := claim.StepKey(c.ID, claim.StepTriage)
	t1, err := run[TurnResult](t, a, a.TriageTurn, TurnInput{Key: key.Sub("turn1"), Claim: c, Turn: 1, Price: price})
	require.NoError(t, err)
	require.Nil(t, t1.Triage)
	require.Len(t, t1.ToolCalls, 3)
	assert.True(t, t1.Deterministic)
	assert.Equal(t, price.Cost(t1.Usage.TokensIn, t1.Usage.TokensOut), t1.Usage.CostMicros)
	assert.Positive(t, t1.Usage.CostMicros)

	var results []ToolResult
	for _, call := range t1.ToolCalls {
		r, err := run[ToolResult](t, a, a.CallTool, ToolInput{Key: key.Sub("turn1").Sub(call.Name), Scope: ScopeOf(c), Call: call})
		require.NoError(t, err)
		assert.False(t, r.IsError, r.Content)
		results = append(results, r)
	}
	assert.Contains(t, results[0].Content, `"limit":"10000.00"`)
	assert.Contains(t, results[1].Content, `"total":0`)
	assert.Contains(t, results[2].Content, "Plumber's report")

	t2, err := run[TurnResult](t, a, a.TriageTurn, TurnInput{Key: key.Sub("turn2"), Claim: c, Turn: 2, Conversation: t1.Conversation, ToolResults: results, Price: price})
	require.NoError(t, err)
	require.NotNil(t, t2.Triage)
	assert.Equal(t, "water-damage", t2.Triage.Category)
	assert.Contains(t, t2.Triage.Summary, "0 prior claim(s)")

	as, err := run[AssessResult](t, a, a.AssessClaim, AssessInput{Key: claim.StepKey(c.ID, claim.StepAssess), Price: price,
		AssessRequest: AssessRequest{Claim: c, Triage: *t2.Triage, Coverage: claim.Coverage{Covered: true, CoveredMinor: c.AmountMinor}}})
	require.NoError(t, err)
	assert.Equal(t, price.Cost(as.Usage.TokensIn, as.Usage.TokensOut), as.Usage.CostMicros, "the assessment's cost is in its result too")
	assert.Positive(t, as.Usage.CostMicros)
	// Each answer names the model, its prompt version and the build that asked.
	for i, got := range [][3]string{{t1.Model, t1.PromptVersion, t1.BuildID}, {t2.Model, t2.PromptVersion, t2.BuildID}, {as.Model, as.PromptVersion, as.BuildID}} {
		assert.Equal(t, [3]string{"rules/v1", "rules-1", "build-7f3a"}, got, "answer %d", i+1)
	}

	calls, err := a.Store.ModelCalls(context.Background(), c.ID)
	require.NoError(t, err)
	require.Len(t, calls, 3)
	assert.Equal(t, key.Sub("turn1"), calls[0].Key)
	assert.Equal(t, key.Sub("turn2"), calls[1].Key)
}

// Past the inline limit the conversation goes to the blob store and the
// result (so history) carries only its reference; the next turn reads it.
func TestLongConversationsGoToTheBlobStoreByReference(t *testing.T) {
	a := newActivities(t, nil)
	docs := withBlobs(t, a)
	a.TranscriptInlineMax = 300
	c := registered(t, a, sampleClaim(t))
	key := claim.StepKey(c.ID, claim.StepTriage)

	t1, err := run[TurnResult](t, a, a.TriageTurn, TurnInput{Key: key.Sub("turn1"), Claim: c, Turn: 1})
	require.NoError(t, err)
	require.NotNil(t, t1.Conversation.Messages, "the first turn is small")
	big := strings.Repeat("x", 400)
	var results []ToolResult
	for _, call := range t1.ToolCalls {
		results = append(results, ToolResult{CallID: call.ID, Name: call.Name, Content: `{"note":"` + big + `"}`})
	}
	t2, err := run[TurnResult](t, a, a.TriageTurn, TurnInput{Key: key.Sub("turn2"), Claim: c, Turn: 2, Conversation: t1.Conversation, ToolResults: results})
	require.NoError(t, err)
	require.NotNil(t, t2.Conversation.Ref)
	assert.Empty(t, t2.Conversation.Messages)
	require.NoError(t, docs.Verify(context.Background(), *t2.Conversation.Ref))
	b, err := json.Marshal(t2)
	require.NoError(t, err)
	assert.Less(t, len(b), 1200, "the recorded result stays small")

	msgs, err := a.loadConversation(context.Background(), t2.Conversation)
	require.NoError(t, err)
	assert.Len(t, msgs, 1+3+1, "tool calls, three results, the answer")
}

// A tool the model misuses answers with an error the model reads; the
// activity and the workflow carry on.
func TestToolsRefuseWhatIsNotTheClaims(t *testing.T) {
	a := newActivities(t, nil)
	c := registered(t, a, sampleClaim(t))
	key := claim.StepKey(c.ID, claim.StepTriage).Sub("turn1")
	for _, tc := range []struct {
		call ToolCall
		want string
	}{
		{ToolCall{ID: "1", Name: ToolLookupPolicy, Arguments: `{"policy_id":"pol-2002"}`}, `policy \"pol-2002\" is not this claim's policy`},
		{ToolCall{ID: "2", Name: ToolGetDocumentText, Arguments: `{"name":"../../etc/passwd"}`}, `no document \"../../etc/passwd\" on this claim`},
		{ToolCall{ID: "3", Name: "delete_claim", Arguments: `{}`}, `unknown tool \"delete_claim\"`},
		{ToolCall{ID: "4", Name: ToolPriorClaims, Arguments: `not json`}, "arguments are not a JSON object"},
		{ToolCall{ID: "5", Name: ToolFlagFraudSignal, Arguments: `{"signal":""}`}, "signal must be 1 to 200 characters"},
	} {
		r, err := run[ToolResult](t, a, a.CallTool, ToolInput{Key: key.Sub(tc.call.Name), Scope: ScopeOf(c), Call: tc.call})
		require.NoError(t, err, tc.call.Name)
		assert.True(t, r.IsError, tc.call.Name)
		assert.Contains(t, r.Content, tc.want)
		assert.Equal(t, tc.call.ID, r.CallID)
	}
}

// flag_fraud_signal is a side effect: once per key, a replay is harmless,
// and the same key with another signal is a conflict, never a second flag.
func TestFraudFlagsAreIdempotent(t *testing.T) {
	a := newActivities(t, nil)
	c := registered(t, a, sampleClaim(t))
	key := claim.StepKey(c.ID, claim.StepTriage).Sub("turn2").Sub(ToolFlagFraudSignal)
	call := ToolCall{ID: "1", Name: ToolFlagFraudSignal, Arguments: `{"signal":"round-amount","note":"n"}`}
	for range 2 {
		r, err := run[ToolResult](t, a, a.CallTool, ToolInput{Key: key, Scope: ScopeOf(c), Call: call})
		require.NoError(t, err)
		assert.Contains(t, r.Content, `"flagged":true`)
	}
	flags, err := a.Store.FraudFlags(context.Background(), c.ID)
	require.NoError(t, err)
	assert.Len(t, flags, 1)
	call.Arguments = `{"signal":"something-else","note":"n"}`
	_, err = run[ToolResult](t, a, a.CallTool, ToolInput{Key: key, Scope: ScopeOf(c), Call: call})
	assert.ErrorContains(t, err, "already recorded with different content")
	_, err = a.Store.FlagFraud(context.Background(), store.FraudFlag{Key: key, ClaimID: c.ID, Signal: "round-amount", Note: "n"})
	require.NoError(t, err)
}

// promptedModel answers as the rules model does under instructions of its
// own.
type promptedModel struct{ RulesModel }

func (promptedModel) Name() string          { return "prompted" }
func (promptedModel) PromptVersion() string { return "sha256:" + strings.Repeat("ab", 32) }

// The prompt version recorded is the provider's own, asked at each call,
// and a worker that knows no build records none rather than a guess; the
// recorded result carries both by name.
func TestModelResultsNameThePromptVersionAndTheBuild(t *testing.T) {
	a := newActivities(t, nil)
	a.Model = promptedModel{}
	c := registered(t, a, sampleClaim(t))
	key := claim.StepKey(c.ID, claim.StepTriage)
	turn, err := run[TurnResult](t, a, a.TriageTurn, TurnInput{Key: key.Sub("turn1"), Claim: c, Turn: 1})
	require.NoError(t, err)
	assert.Equal(t, "prompted", turn.Model)
	assert.Equal(t, "sha256:"+strings.Repeat("ab", 32), turn.PromptVersion)
	assert.Empty(t, turn.BuildID)

	a.BuildID = "build-2"
	tr, err := run[TriageResult](t, a, a.TriageClaim, TriageInput{Key: key, Claim: c})
	require.NoError(t, err)
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	var recorded map[string]any
	require.NoError(t, json.Unmarshal(b, &recorded))
	assert.Equal(t, "prompted", recorded["model"])
	assert.Equal(t, "sha256:"+strings.Repeat("ab", 32), recorded["prompt_version"])
	assert.Equal(t, "build-2", recorded["build_id"])
}
