package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/model"
)

// A dependency that fails at start is an error the worker exits on, never
// a panic, and what was opened before it is closed again.
func TestNewActivitiesFailsCleanly(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Setenv("CLAIMS_DB", "postgres://nobody@127.0.0.1:1/claims?sslmode=disable&connect_timeout=1")
	_, _, err := newActivities(log)
	require.Error(t, err, "no store")

	t.Setenv("CLAIMS_DB", filepath.Join(t.TempDir(), "claims.db"))
	t.Setenv("BLOB_URL", "file://"+t.TempDir())
	t.Setenv("APPROVERS_FILE", filepath.Join(t.TempDir(), "missing.json"))
	_, _, err = newActivities(log)
	require.ErrorContains(t, err, "missing.json", "a broken directory, after the store and the blob store opened")

	t.Setenv("APPROVERS_FILE", "")
	for _, bad := range []string{"0", "-5", "fast"} {
		t.Setenv("STRIPE_REQUESTS_PER_SECOND", bad)
		_, _, err = newActivities(log)
		require.ErrorContains(t, err, "STRIPE_REQUESTS_PER_SECOND", "a rate limit of %q", bad)
	}
	t.Setenv("STRIPE_REQUESTS_PER_SECOND", "")
	acts, closeAll, err := newActivities(log)
	require.NoError(t, err)
	require.NotNil(t, acts.Store)
	closeAll()
}

// MODEL_PROMPTS_FILE gives the OpenAI-compatible provider its system
// prompts, and so its prompt version; the rules model has none, so a
// worker asked to use one with it refuses to start.
func TestModelPromptsFile(t *testing.T) {
	for _, name := range []string{"MODEL_BASE_URL", "MODEL_API_KEY", "MODEL_TIMEOUT", "MODEL_MAX_INVALID_ANSWERS",
		"MODEL_MAX_WAIT", "MODEL_TOKENS_PER_MINUTE", "MODEL_BUDGET"} {
		t.Setenv(name, "")
	}
	example := filepath.Join("..", "examples", "prompts.json")

	t.Setenv("MODEL_PROVIDER", "")
	t.Setenv("MODEL_PROMPTS_FILE", example)
	_, err := newModel(nil)
	require.EqualError(t, err, "MODEL_PROMPTS_FILE needs MODEL_PROVIDER=openai: the rules model has no prompt", "rules is the default provider")
	t.Setenv("MODEL_PROVIDER", "rules")
	_, err = newModel(nil)
	require.EqualError(t, err, "MODEL_PROMPTS_FILE needs MODEL_PROVIDER=openai: the rules model has no prompt")

	t.Setenv("MODEL_PROVIDER", "openai")
	t.Setenv("MODEL_NAME", "gpt-4o-mini")
	t.Setenv("MODEL_PROMPTS_FILE", "")
	compiledIn, err := newModel(nil)
	require.NoError(t, err)
	t.Setenv("MODEL_PROMPTS_FILE", example)
	fromExample, err := newModel(nil)
	require.NoError(t, err)
	assert.Equal(t, compiledIn.PromptVersion(), fromExample.PromptVersion(), "the example file is the compiled-in prompts")

	candidate := model.DefaultPrompts()
	candidate.AssessSystem += "\nPrefer needs_review when the documents disagree."
	b, err := json.Marshal(candidate)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "candidate.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	t.Setenv("MODEL_PROMPTS_FILE", path)
	fromCandidate, err := newModel(nil)
	require.NoError(t, err)
	assert.NotEqual(t, compiledIn.PromptVersion(), fromCandidate.PromptVersion())

	broken := filepath.Join(t.TempDir(), "broken.json")
	require.NoError(t, os.WriteFile(broken, []byte(`{"triage_system":"Classify the claim.","assess_system":"Pay it."}`), 0o600))
	t.Setenv("MODEL_PROMPTS_FILE", broken)
	_, err = newModel(nil)
	require.ErrorContains(t, err, "MODEL_PROMPTS_FILE")
	require.ErrorContains(t, err, broken)
	require.ErrorContains(t, err, "untrusted-data rule")

	t.Setenv("MODEL_PROMPTS_FILE", filepath.Join(t.TempDir(), "missing.json"))
	_, err = newModel(nil)
	require.ErrorContains(t, err, "missing.json")
}

// MODEL_FALLBACK_* set the model a step fails over to; unset, there is
// none. A half-set fallback, or one that is the primary again, stops the
// worker rather than leave failover silently off or the claim file unable
// to say which model answered.
func TestModelFallback(t *testing.T) {
	for _, name := range []string{"MODEL_BASE_URL", "MODEL_API_KEY", "MODEL_TIMEOUT", "MODEL_MAX_INVALID_ANSWERS", "MODEL_MAX_WAIT",
		"MODEL_TOKENS_PER_MINUTE", "MODEL_BUDGET", "MODEL_PROMPTS_FILE", "MODEL_FALLBACK_PROVIDER", "MODEL_FALLBACK_BASE_URL",
		"MODEL_FALLBACK_NAME", "MODEL_FALLBACK_API_KEY", "MODEL_FALLBACK_TOKENS_PER_MINUTE", "MODEL_FALLBACK_BUDGET", "MODEL_FALLBACK_AFTER"} {
		t.Setenv(name, "")
	}
	t.Setenv("MODEL_PROVIDER", "openai")
	t.Setenv("MODEL_NAME", "gpt-4o-mini")
	primary, err := newModel(nil)
	require.NoError(t, err)

	fallback, after, err := newFallback(nil, primary)
	require.NoError(t, err)
	assert.Nil(t, fallback, "off by default")
	assert.Zero(t, after)

	t.Setenv("MODEL_FALLBACK_NAME", "llama3.1")
	_, _, err = newFallback(nil, primary)
	require.EqualError(t, err, "MODEL_FALLBACK_NAME is set but MODEL_FALLBACK_PROVIDER is not: set it to rules or openai for failover, or unset MODEL_FALLBACK_NAME")

	t.Setenv("MODEL_FALLBACK_PROVIDER", "openai")
	t.Setenv("MODEL_FALLBACK_BASE_URL", "http://localhost:11434/v1")
	fallback, after, err = newFallback(nil, primary)
	require.NoError(t, err)
	assert.Equal(t, "openai/llama3.1", fallback.Name())
	assert.Equal(t, 3, after)
	assert.Equal(t, primary.PromptVersion(), fallback.PromptVersion(), "the same prompts: the fallback is asked what the primary was")

	t.Setenv("MODEL_FALLBACK_AFTER", "1")
	_, after, err = newFallback(nil, primary)
	require.NoError(t, err)
	assert.Equal(t, 1, after)
	for _, bad := range []string{"0", "-2", "three"} {
		t.Setenv("MODEL_FALLBACK_AFTER", bad)
		_, _, err = newFallback(nil, primary)
		require.ErrorContains(t, err, "MODEL_FALLBACK_AFTER must be a whole number of attempts", bad)
	}
	t.Setenv("MODEL_FALLBACK_AFTER", "")

	t.Setenv("MODEL_FALLBACK_NAME", "")
	_, _, err = newFallback(nil, primary)
	require.EqualError(t, err, "MODEL_FALLBACK_NAME is required with MODEL_FALLBACK_PROVIDER=openai")
	t.Setenv("MODEL_FALLBACK_NAME", "gpt-4o-mini")
	_, _, err = newFallback(nil, primary)
	require.ErrorContains(t, err, "the fallback model is the primary's (openai/gpt-4o-mini)")
	t.Setenv("MODEL_FALLBACK_TOKENS_PER_MINUTE", "lots")
	t.Setenv("MODEL_FALLBACK_NAME", "llama3.1")
	_, _, err = newFallback(nil, primary)
	require.ErrorContains(t, err, "MODEL_FALLBACK_TOKENS_PER_MINUTE must be a whole number of tokens")
	t.Setenv("MODEL_FALLBACK_TOKENS_PER_MINUTE", "")

	t.Setenv("MODEL_FALLBACK_PROVIDER", "rules")
	fallback, _, err = newFallback(nil, primary)
	require.NoError(t, err)
	assert.Equal(t, model.RulesModel{}.Name(), fallback.Name(), "the offline rules model may be the fallback")
	t.Setenv("MODEL_FALLBACK_PROVIDER", "anthropic")
	_, _, err = newFallback(nil, primary)
	require.ErrorContains(t, err, `MODEL_FALLBACK_PROVIDER="anthropic": want rules or openai`)

	// The worker's activities get it.
	t.Setenv("MODEL_FALLBACK_PROVIDER", "openai")
	t.Setenv("MODEL_FALLBACK_AFTER", "2")
	t.Setenv("CLAIMS_DB", filepath.Join(t.TempDir(), "claims.db"))
	t.Setenv("BLOB_URL", "file://"+t.TempDir())
	t.Setenv("APPROVERS_FILE", "")
	acts, closeAll, err := newActivities(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeAll()
	assert.Equal(t, "openai/gpt-4o-mini", acts.Model.Name())
	require.NotNil(t, acts.Fallback)
	assert.Equal(t, "openai/llama3.1", acts.Fallback.Name())
	assert.Equal(t, 2, acts.FallbackAfter)
}
