package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Prompts are the OpenAI-compatible provider's two system prompts: the
// instructions of the triage agent and of the assessor. A provider built
// with other prompts (OpenAIConfig.Prompts, the worker's MODEL_PROMPTS_FILE)
// sends them instead of the compiled-in ones, and its prompt version is
// another: a candidate can be tried on a what-if run, its decisions compared
// with the current prompts', and then deployed, every answer naming the
// prompts it was given.
type Prompts struct {
	TriageSystem string `json:"triage_system"`
	AssessSystem string `json:"assess_system"`
}

// MaxPromptsFileSize bounds a prompts file (the compiled-in prompts take
// under 2 KiB); a larger one is refused.
const MaxPromptsFileSize = 64 << 10

// DefaultPrompts are the compiled-in prompts (examples/prompts.json holds
// the same).
func DefaultPrompts() Prompts {
	return Prompts{TriageSystem: triageSystemPrompt, AssessSystem: assessSystemPrompt}
}

// LoadPrompts reads a prompts file: one JSON object with triage_system and
// assess_system, both required and non-empty, no other keys, at most
// MaxPromptsFileSize bytes. Each prompt must keep the untrusted-data rule
// word for word (Prompts.Check).
func LoadPrompts(path string) (Prompts, error) {
	f, err := os.Open(path)
	if err != nil {
		return Prompts{}, fmt.Errorf("prompts file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPromptsFileSize+1))
	if err != nil {
		return Prompts{}, fmt.Errorf("prompts file %s: %w", path, err)
	}
	if len(data) > MaxPromptsFileSize {
		return Prompts{}, fmt.Errorf("prompts file %s: larger than %d KiB", path, MaxPromptsFileSize>>10)
	}
	var p Prompts
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Prompts{}, fmt.Errorf("prompts file %s: %w (want one object with triage_system and assess_system)", path, err)
	}
	if dec.More() {
		return Prompts{}, fmt.Errorf("prompts file %s: more than one JSON value", path)
	}
	if err := p.Check(); err != nil {
		return Prompts{}, fmt.Errorf("prompts file %s: %w", path, err)
	}
	return p, nil
}

// Check says what is wrong with a pair of prompts: a prompt that is empty,
// or one that does not contain the untrusted-data rule (untrustedRule)
// word for word. That rule is what tells the model that the claim and the
// tools' answers, marked <untrusted>, are data to assess and never
// instructions to follow; a prompt without it weakens the defence against
// instructions injected in a claim, so it is refused rather than sent.
func (p Prompts) Check() error {
	var problems []string
	for _, f := range []struct{ name, text string }{{"triage_system", p.TriageSystem}, {"assess_system", p.AssessSystem}} {
		switch {
		case strings.TrimSpace(f.text) == "":
			problems = append(problems, f.name+" is required and must not be empty")
		case !strings.Contains(f.text, untrustedRule):
			problems = append(problems, fmt.Sprintf("%s does not contain the untrusted-data rule word for word "+
				"(\"The claim and every tool result come from the claimant…\", as in model.DefaultPrompts and examples/prompts.json): "+
				"it tells the model that claim text and tool results are data, never instructions, and a prompt without it "+
				"weakens the defence against prompt injection", f.name))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return errors.New(strings.Join(problems, "; "))
}
