package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// A prompt version names what shaped a model's answer other than the claim
// and the model itself: the instructions, the tools offered and the answer's
// schema. Every model answer records it beside the model's name and the
// build of the worker that asked (activities.ModelResult, TurnResult), so an
// answer can be traced to the exact instructions it was given.

// rulesPromptVersion is the rules model's version. The rules model has no
// prompt: its answers are its code (the category words, the severity bands,
// the fraud signals, the agent loop), which the build ID already names. A
// digest of its word table would cover a part of that code and claim to
// cover it all, so its version is a number bumped by hand whenever its
// answers change; TestRulesModelAnswersArePinned fails until it is.
const rulesPromptVersion = "rules-1"

// PromptVersion is the rules model's version (rulesPromptVersion).
func (RulesModel) PromptVersion() string { return rulesPromptVersion }

// PromptVersion is "sha256:" and the hex SHA-256 of everything the provider
// sends that shapes its answers other than the claim (promptSet), with the
// system prompts it was built with (OpenAIConfig.Prompts): the same for
// every deployment of the same prompts, whatever the endpoint, model or
// key, and different as soon as one word of them changes. The compiled-in
// prompts give the version they always gave. It is computed once, in
// NewOpenAIModel.
func (m *OpenAIModel) PromptVersion() string {
	if m.version == "" {
		return defaultPromptVersion()
	}
	return m.version
}

// defaultPromptVersion is the compiled-in prompts' version, for a model
// not built by NewOpenAIModel.
var defaultPromptVersion = sync.OnceValue(func() string { return openAIPrompts().version() })

// promptSet is what the OpenAI-compatible provider's requests hold besides
// the claim, the conversation and the model's name: the system prompts, the
// tool definitions and the response formats exactly as they are sent, and
// the frames the claim, the assessment's input, a tool's answer and a
// request to answer again are put in, rendered around placeholders.
type promptSet struct {
	TriageSystem string `json:"triage_system"`
	AssessSystem string `json:"assess_system"`
	Tools        any    `json:"tools"`
	TriageFormat any    `json:"triage_response_format"`
	AssessFormat any    `json:"assess_response_format"`
	ClaimFrame   string `json:"claim_frame"`
	AssessFrame  string `json:"assess_frame"`
	ToolFrame    string `json:"tool_frame"`
	FixFrame     string `json:"fix_frame"`
}

// openAIPrompts is the provider's promptSet as this build sends it with the
// compiled-in prompts.
func openAIPrompts() promptSet { return promptSetFor(DefaultPrompts()) }

// promptSetFor is the provider's promptSet with the given system prompts.
func promptSetFor(p Prompts) promptSet {
	return promptSet{
		TriageSystem: p.TriageSystem,
		AssessSystem: p.AssessSystem,
		Tools:        toolDefinitions,
		TriageFormat: responseFormat("triage", triageSchema),
		AssessFormat: responseFormat("assessment", assessSchema),
		ClaimFrame:   claimPrompt(claim.Claim{}),
		AssessFrame:  assessPrompt(AssessRequest{}),
		ToolFrame:    toolPrompt("NAME", "CONTENT"),
		FixFrame:     fixPrompt("PROBLEM"),
	}
}

// version digests the set's JSON. encoding/json writes map keys sorted and
// the SDK's parameters write theirs sorted too, so the digest does not
// depend on the order a schema's keys were written in.
func (p promptSet) version() string {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings, schemas and SDK parameters: cannot fail
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
