package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Model is the claims model behind steps 2 and 4. Its answers are not
// deterministic in general, which is why it is only ever called from an
// activity: the answer is recorded in history and a resumed run reads it.
type Model interface {
	Name() string
	Triage(ctx context.Context, c claim.Claim) (Triage, Usage, error)
	Assess(ctx context.Context, req AssessRequest) (Assessment, Usage, error)
}

// Usage is what a call cost.
type Usage struct {
	TokensIn  int64 `json:"tokens_in"`
	TokensOut int64 `json:"tokens_out"`
}

// Triage classifies a claim and lists fraud signals.
type Triage struct {
	Category     string   `json:"category"`
	Severity     string   `json:"severity"`
	FraudSignals []string `json:"fraud_signals,omitempty"`
	// FraudScore is 0–100.
	FraudScore int    `json:"fraud_score"`
	Summary    string `json:"summary"`
}

// AssessRequest is what the assessor sees.
type AssessRequest struct {
	Claim    claim.Claim    `json:"claim"`
	Triage   Triage         `json:"triage"`
	Coverage claim.Coverage `json:"coverage"`
}

// Assessment is the model's recommended payout; the workflow clamps it to
// the coverage, whatever the model says.
type Assessment struct {
	RecommendedMinor int64  `json:"recommended_minor"`
	Rationale        string `json:"rationale"`
	// NeedsReview sends the claim to a human whatever its amount.
	NeedsReview bool `json:"needs_review"`
}

// TriageInput is step 2's input.
type TriageInput struct {
	Key   claim.IdempotencyKey `json:"key"`
	Claim claim.Claim          `json:"claim"`
}

// ModelResult wraps a model answer with what the audit needs.
type ModelResult[T any] struct {
	Output       T      `json:"output"`
	Model        string `json:"model"`
	Usage        Usage  `json:"usage"`
	OutputSHA256 string `json:"output_sha256"`
	Meta
}

// TriageResult is step 2's recorded answer.
type TriageResult = ModelResult[Triage]

// AssessResult is step 4's recorded answer.
type AssessResult = ModelResult[Assessment]

// AssessInput is step 4's input.
type AssessInput struct {
	Key claim.IdempotencyKey `json:"key"`
	AssessRequest
}

// TriageClaim is step 2: the model classifies the claim.
func (a *Activities) TriageClaim(ctx context.Context, in TriageInput) (TriageResult, error) {
	if err := requireKey(in.Key); err != nil {
		return TriageResult{}, err
	}
	return callModel(ctx, a, in.Key, in.Claim.ID, func() (Triage, Usage, error) { return a.Model.Triage(ctx, in.Claim) })
}

// AssessClaim is step 4: the model recommends a payout.
func (a *Activities) AssessClaim(ctx context.Context, in AssessInput) (AssessResult, error) {
	if err := requireKey(in.Key); err != nil {
		return AssessResult{}, err
	}
	return callModel(ctx, a, in.Key, in.Claim.ID, func() (Assessment, Usage, error) { return a.Model.Assess(ctx, in.AssessRequest) })
}

// callModel makes one model call and writes it to the usage ledger, which is
// how tests (and invoices) show a resumed run did not ask again.
func callModel[T any](ctx context.Context, a *Activities, key claim.IdempotencyKey, claimID string, call func() (T, Usage, error)) (ModelResult[T], error) {
	a.fault(ctx, key, BeforeEffect)
	out, usage, err := call()
	if err != nil {
		return ModelResult[T]{}, err
	}
	b, err := json.Marshal(out)
	if err != nil {
		return ModelResult[T]{}, err
	}
	sum := sha256.Sum256(b)
	res := ModelResult[T]{Output: out, Model: a.Model.Name(), Usage: usage, OutputSHA256: hex.EncodeToString(sum[:]), Meta: meta(ctx)}
	if err := a.Store.RecordModelCall(ctx, store.ModelCall{ClaimID: claimID, Key: key, Provider: res.Model, Attempt: attempt(ctx),
		TokensIn: usage.TokensIn, TokensOut: usage.TokensOut, OutputSHA256: res.OutputSHA256}); err != nil {
		return ModelResult[T]{}, err
	}
	a.fault(ctx, key, AfterEffect)
	logger(ctx).Info("model answered", "key", key, "model", res.Model, "output_sha256", res.OutputSHA256[:12])
	return res, nil
}

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
func (RulesModel) Triage(_ context.Context, c claim.Claim) (Triage, Usage, error) {
	desc := strings.ToLower(c.Description)
	t := Triage{Category: "general"}
	for _, cat := range categories {
		if slices.ContainsFunc(cat.words, func(w string) bool { return strings.Contains(desc, w) }) {
			t.Category = cat.name
			break
		}
	}
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
	return t, rulesUsage(c.Description), nil
}

// Assess recommends the covered amount and asks for review on strong fraud
// signals.
func (RulesModel) Assess(_ context.Context, r AssessRequest) (Assessment, Usage, error) {
	as := Assessment{RecommendedMinor: r.Coverage.CoveredMinor}
	as.Rationale = fmt.Sprintf("%s; %s; recommend %s %s", r.Triage.Summary, r.Coverage.Reason,
		claim.FormatAmount(as.RecommendedMinor, r.Claim.Currency), strings.ToUpper(r.Claim.Currency))
	if r.Triage.FraudScore >= 50 {
		as.NeedsReview = true
		as.Rationale += "; fraud score " + fmt.Sprint(r.Triage.FraudScore) + " needs a human"
	}
	return as, rulesUsage(r.Claim.Description), nil
}

// rulesUsage reports a token count as a real model would, roughly one token
// per four characters, so spend accounting is exercised offline too.
func rulesUsage(text string) Usage {
	return Usage{TokensIn: int64(50 + len(text)/4), TokensOut: 40}
}
