package activities

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/store"
)

// Model is the claims model behind steps 2 and 4. Its answers are not
// deterministic in general, which is why it is only ever called from an
// activity: the answer is recorded in history and a resumed run reads it.
type Model interface {
	Name() string
	// Triage classifies in one call (runs started before the agent loop).
	Triage(ctx context.Context, c claim.Claim) (Reply[Triage], error)
	// TriageTurn is one turn of the triage agent loop: the model asks for
	// tools or answers.
	TriageTurn(ctx context.Context, req TurnRequest) (Reply[Turn], error)
	Assess(ctx context.Context, req AssessRequest) (Reply[Assessment], error)
}

// Reply is a model's answer, what it cost, and the exchange that produced
// it (prompt and raw response) for the audit.
type Reply[T any] struct {
	Output     T
	Usage      Usage
	Transcript []byte
}

// Usage is what a call cost.
type Usage struct {
	TokensIn  int64 `json:"tokens_in"`
	TokensOut int64 `json:"tokens_out"`
	// CostMicros is the estimated cost in millionths of a dollar, at the
	// price the run was started with.
	CostMicros int64 `json:"cost_micros,omitempty"`
}

// Triage classifies a claim and lists fraud signals.
type Triage struct {
	Category     string   `json:"category"`
	Severity     string   `json:"severity"`
	FraudSignals []string `json:"fraud_signals,omitempty"`
	// FraudScore is 0–100.
	FraudScore int    `json:"fraud_score"`
	Summary    string `json:"summary"`
	// NeedsReview sends the claim to a human whatever its amount: the
	// model could not classify it (no valid answer, a cap hit).
	NeedsReview  bool   `json:"needs_review,omitempty"`
	ReviewReason string `json:"review_reason,omitempty"`
}

// ReviewTriage is the triage of a claim the model could not classify: a
// human decides, and reason says why.
func ReviewTriage(reason string) Triage {
	return Triage{Category: "general", Severity: "unknown", NeedsReview: true, ReviewReason: reason, Summary: reason}
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

// ReviewAssessment proposes the covered amount to a human when the model
// gave no usable assessment; why is appended to the rationale.
func ReviewAssessment(coveredMinor int64, why string) Assessment {
	return Assessment{RecommendedMinor: coveredMinor, NeedsReview: true, Rationale: why + "; the covered amount is proposed for a human to decide"}
}

// TriageInput is step 2's input.
type TriageInput struct {
	Key   claim.IdempotencyKey `json:"key"`
	Claim claim.Claim          `json:"claim"`
}

// ModelResult wraps a model answer with what the audit needs. The
// transcript stays in history only while it is small; past
// TranscriptInlineMax it goes to the blob store and history keeps a
// reference, so a long prompt cannot bloat every claim's checkpoint.
type ModelResult[T any] struct {
	Output        T          `json:"output"`
	Model         string     `json:"model"`
	Usage         Usage      `json:"usage"`
	OutputSHA256  string     `json:"output_sha256"`
	Transcript    string     `json:"transcript,omitempty"`
	TranscriptRef *blobs.Ref `json:"transcript_ref,omitempty"`
	Meta
}

// DefaultTranscriptInlineMax is the largest transcript kept in history.
const DefaultTranscriptInlineMax = 2 << 10

// TriageResult is step 2's recorded answer.
type TriageResult = ModelResult[Triage]

// AssessResult is step 4's recorded answer.
type AssessResult = ModelResult[Assessment]

// AssessInput is step 4's input.
type AssessInput struct {
	Key claim.IdempotencyKey `json:"key"`
	AssessRequest
	// Price estimates the call's cost in its result (zero: not estimated).
	Price Price `json:"price,omitzero"`
}

// TriageClaim is step 2: the model classifies the claim.
func (a *Activities) TriageClaim(ctx context.Context, in TriageInput) (TriageResult, error) {
	if err := requireKey(in.Key); err != nil {
		return TriageResult{}, err
	}
	res, err := callModel(ctx, a, in.Key, in.Claim.ID, func() (Reply[Triage], error) { return a.Model.Triage(ctx, in.Claim) })
	if err == nil {
		countModelCall(ctx, res.Model, "triage", res.Usage)
	}
	return res, err
}

// AssessClaim is step 4: the model recommends a payout.
func (a *Activities) AssessClaim(ctx context.Context, in AssessInput) (AssessResult, error) {
	if err := requireKey(in.Key); err != nil {
		return AssessResult{}, err
	}
	res, err := callModel(ctx, a, in.Key, in.Claim.ID, func() (Reply[Assessment], error) { return a.Model.Assess(ctx, in.AssessRequest) })
	if err != nil {
		return res, err
	}
	res.Usage.CostMicros = in.Price.Cost(res.Usage.TokensIn, res.Usage.TokensOut)
	countModelCall(ctx, res.Model, "assess", res.Usage)
	return res, nil
}

// callModel makes one model call and writes it to the usage ledger, which is
// how tests (and invoices) show a resumed run did not ask again.
func callModel[T any](ctx context.Context, a *Activities, key claim.IdempotencyKey, claimID string, call func() (Reply[T], error)) (ModelResult[T], error) {
	a.fault(ctx, key, BeforeEffect)
	reply, err := call()
	if err != nil {
		return ModelResult[T]{}, err
	}
	res := ModelResult[T]{Output: reply.Output, Model: a.Model.Name(), Usage: reply.Usage, Meta: meta(ctx)}
	if res.Transcript, res.TranscriptRef, err = a.keepTranscript(ctx, key, reply.Transcript); err != nil {
		return ModelResult[T]{}, err
	}
	if res.OutputSHA256, err = a.ledgerModelCall(ctx, claimID, key, res.Model, res.Usage, res.Output); err != nil {
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
func (RulesModel) Triage(_ context.Context, c claim.Claim) (Reply[Triage], error) {
	t := rulesTriage(c, "")
	prompt := fmt.Sprintf("Classify claim %s (%s %s): %s", c.ID, c.Amount(), c.Currency, c.Description)
	return Reply[Triage]{Output: t, Usage: rulesUsage(len(c.Description)), Transcript: transcript(prompt, t)}, nil
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
func (RulesModel) Assess(_ context.Context, r AssessRequest) (Reply[Assessment], error) {
	as := Assessment{RecommendedMinor: r.Coverage.CoveredMinor}
	as.Rationale = fmt.Sprintf("%s; %s; recommend %s %s", r.Triage.Summary, r.Coverage.Reason,
		claim.FormatAmount(as.RecommendedMinor, r.Claim.Currency), strings.ToUpper(r.Claim.Currency))
	if r.Triage.FraudScore >= 50 {
		as.NeedsReview = true
		as.Rationale += "; fraud score " + fmt.Sprint(r.Triage.FraudScore) + " needs a human"
	}
	prompt := fmt.Sprintf("Recommend a payout for claim %s: %s; coverage: %s", r.Claim.ID, r.Triage.Summary, r.Coverage.Reason)
	return Reply[Assessment]{Output: as, Usage: rulesUsage(len(r.Claim.Description)), Transcript: transcript(prompt, as)}, nil
}

// rulesUsage reports a token count as a real model would, roughly one token
// per four characters, so spend accounting is exercised offline too.
func rulesUsage(chars int) Usage {
	return Usage{TokensIn: int64(50 + chars/4), TokensOut: 40}
}

// keepTranscript puts a small transcript in the result (and so in history)
// and a large one in the blob store, by reference.
func (a *Activities) keepTranscript(ctx context.Context, key claim.IdempotencyKey, t []byte) (inline string, ref *blobs.Ref, err error) {
	switch {
	case len(t) <= a.transcriptLimit():
		return string(t), nil, nil
	case a.Blobs == nil:
		return "", nil, nil // unit tests: only small transcripts are kept
	}
	r, err := a.putTranscript(ctx, key, "attempt", t)
	if err != nil {
		return "", nil, err
	}
	return "", &r, nil
}

// transcriptLimit is the largest transcript or conversation kept in history.
func (a *Activities) transcriptLimit() int {
	if a.TranscriptInlineMax > 0 {
		return a.TranscriptInlineMax
	}
	return DefaultTranscriptInlineMax
}

// putTranscript stores a transcript too large for history under
// transcripts/<key>/<name>-<attempt>.json.
func (a *Activities) putTranscript(ctx context.Context, key claim.IdempotencyKey, name string, b []byte) (blobs.Ref, error) {
	return a.Blobs.Put(ctx, fmt.Sprintf("transcripts/%s/%s-%d.json", fileSafe(string(key)), name, attempt(ctx)), bytes.NewReader(b))
}

// ledgerModelCall writes one model call to the usage ledger and returns the
// SHA-256 of its output, which the audit record cites.
func (a *Activities) ledgerModelCall(ctx context.Context, claimID string, key claim.IdempotencyKey, provider string, u Usage, output any) (string, error) {
	b, err := json.Marshal(output)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256(b)
	sum := hex.EncodeToString(h[:])
	if err := a.Store.RecordModelCall(ctx, store.ModelCall{ClaimID: claimID, Key: key, Provider: provider, Attempt: attempt(ctx),
		TokensIn: u.TokensIn, TokensOut: u.TokensOut, OutputSHA256: sum}); err != nil {
		return "", err
	}
	return sum, nil
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
