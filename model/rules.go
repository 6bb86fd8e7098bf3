package model

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

// RulesModel is the offline, deterministic default: it decides from the
// claim's fields and the words of its description, so the demo and the tests
// need no network and always agree.
type RulesModel struct{}

// Name identifies the provider in the ledger and the audit record.
func (RulesModel) Name() string { return "rules/v1" }

var categories = []struct {
	name  string
	words []string
}{
	{"water-damage", []string{"water", "flood", "leak", "pipe", "burst"}},
	{"fire", []string{"fire", "smoke", "burn"}},
	{"theft", []string{"theft", "stolen", "burglary", "break-in"}},
	{"auto", []string{"collision", "accident", "car", "vehicle"}},
	{"glass", []string{"glass", "window", "windshield"}},
	{"wear-and-tear", []string{"wear", "rust", "old age"}},
}

// Triage classifies by keyword and scores a few classic fraud signals.
func (RulesModel) Triage(ctx context.Context, c claim.Claim) (Reply[Triage], error) {
	t := rulesTriage(c, "")
	prompt := fmt.Sprintf("Classify claim %s (%s %s): %s", c.ID, c.Amount(), c.Currency, c.Description)
	r := Reply[Triage]{Output: t, Usage: rulesUsage(len(c.Description)), Transcript: transcript(prompt, t)}
	traceRules(ctx, r.Usage, "stop", nil)
	return r, nil
}

// traceRules records a rules model call as the GenAI client span a real
// provider's call gets, so a trace reads the same offline.
func traceRules(ctx context.Context, u Usage, finish string, err error) {
	_, span := telemetry.StartChat(ctx, "durableclaims.rules", "rules/v1")
	telemetry.EndChat(span, "rules/v1", u.TokensIn, u.TokensOut, []string{finish}, err)
}

// Deterministic: the rules model answers the same conversation the same way,
// for free.
func (RulesModel) Deterministic() bool { return true }

// rulesTriage classifies from the description, falling back to the text of
// the claim's documents when the description names no category.
func rulesTriage(c claim.Claim, documentText string) Triage {
	t := Triage{Category: "general"}
	for _, text := range []string{c.Description, documentText} {
		text = strings.ToLower(text)
		for _, cat := range categories {
			if slices.ContainsFunc(cat.words, func(w string) bool { return strings.Contains(text, w) }) {
				t.Category = cat.name
				break
			}
		}
		if t.Category != "general" {
			break
		}
	}
	desc := strings.ToLower(c.Description)
	major := c.AmountMinor
	if exp, _ := claim.CurrencyExponent(c.Currency); exp > 0 {
		for range exp {
			major /= 10
		}
	}
	switch {
	case major < 500:
		t.Severity = "low"
	case major < 5000:
		t.Severity = "medium"
	default:
		t.Severity = "high"
	}
	if len(strings.TrimSpace(c.Description)) < 20 {
		t.FraudSignals = append(t.FraudSignals, "thin-description")
	}
	if major >= 1000 && major%1000 == 0 {
		t.FraudSignals = append(t.FraudSignals, "round-amount")
	}
	if strings.Contains(desc, "cash") || strings.Contains(desc, "urgent") || strings.Contains(desc, "wire") {
		t.FraudSignals = append(t.FraudSignals, "pressure-language")
	}
	if len(c.Documents) == 0 {
		t.FraudSignals = append(t.FraudSignals, "no-documents")
	}
	t.FraudScore = min(100, 25*len(t.FraudSignals))
	t.Summary = fmt.Sprintf("%s claim, %s severity, %d fraud signal(s)", t.Category, t.Severity, len(t.FraudSignals))
	return t
}

// Assess recommends the covered amount and asks for review on strong fraud
// signals.
func (RulesModel) Assess(ctx context.Context, r AssessRequest) (Reply[Assessment], error) {
	as := Assessment{RecommendedMinor: r.Coverage.CoveredMinor}
	as.Rationale = fmt.Sprintf("%s; %s; recommend %s %s", r.Triage.Summary, r.Coverage.Reason,
		claim.FormatAmount(as.RecommendedMinor, r.Claim.Currency), strings.ToUpper(r.Claim.Currency))
	if r.Triage.FraudScore >= 50 {
		as.NeedsReview = true
		as.Rationale += "; fraud score " + fmt.Sprint(r.Triage.FraudScore) + " needs a human"
	}
	prompt := fmt.Sprintf("Recommend a payout for claim %s: %s; coverage: %s", r.Claim.ID, r.Triage.Summary, r.Coverage.Reason)
	reply := Reply[Assessment]{Output: as, Usage: rulesUsage(len(r.Claim.Description)), Transcript: transcript(prompt, as)}
	traceRules(ctx, reply.Usage, "stop", nil)
	return reply, nil
}

// rulesUsage reports a token count as a real model would, roughly one token
// per four characters, so spend accounting is exercised offline too.
func rulesUsage(chars int) Usage {
	return Usage{TokensIn: int64(50 + chars/4), TokensOut: 40}
}

// transcript is the exchange the rules model had with itself: what it was
// asked and what it answered, in the shape a real model's would take.
func transcript(prompt string, answer any) []byte {
	b, _ := json.Marshal(struct {
		Prompt   string `json:"prompt"`
		Response any    `json:"response"`
	}{prompt, answer})
	return b
}
