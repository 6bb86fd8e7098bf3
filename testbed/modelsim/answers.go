package modelsim

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/durableclaims/durableclaims/model"
)

// AnswerRule is one rule of an answers spec (see ParseAnswers): the claims
// it matches and the changes it makes, nil where it changes nothing.
type AnswerRule struct {
	// Claims matches the whole claim ID.
	Claims *regexp.Regexp
	// Assessment changes. RecommendPercent is a percentage (0 to 1000) of
	// the rules model's recommended_minor, RecommendMinor an amount; a rule
	// sets at most one.
	RecommendPercent *int64
	RecommendMinor   *int64
	NeedsReview      *bool
	// Triage changes.
	Category   *string
	FraudScore *int
}

// triageCategories are the categories the OpenAI provider accepts (its
// response schema's enum, model/openai.go); the tests check the two agree.
var triageCategories = []string{"water-damage", "fire", "theft", "auto", "glass", "wear-and-tear", "general"}

const validChanges = "recommend=<N>%, recommend=<minor>, needs_review=true|false, category=<name>, fraud_score=<0-100>"

// ParseAnswers reads an answers spec, the rules that make the server a
// different model for a known subset of claims: a "what-if" test runs a
// candidate model that disagrees with the recorded one on exactly those
// claims, and agrees on every other. "" is no rules; otherwise rules are
// separated by ";", each
//
//	<claim-id regexp>:<change>[,<change>...]
//
// The regexp is anchored (it must match the whole claim ID, as
// ^(?:regexp)$) and runs up to the rule's last ":", so it may hold a ":"
// but never a ";". A change is one of:
//
//	recommend=<N>%           the assessment's recommended_minor becomes N percent
//	                         (0 to 1000) of what the rules model recommends, rounded down
//	recommend=<minor>        the assessment's recommended_minor becomes that many minor units
//	needs_review=true|false  the assessment's needs_review
//	category=<name>          the triage's category: water-damage, fire, theft, auto,
//	                         glass, wear-and-tear or general
//	fraud_score=<0-100>      the triage's fraud_score (its fraud_signals are kept)
//
// as in "claim-00[1-3]:recommend=50%,needs_review=false;claim-9.*:category=fire".
// Spaces around rules, changes and values are ignored.
//
// The first rule whose regexp matches a claim's ID applies, with all its
// changes; a claim no rule matches is answered exactly as without rules.
// Triage changes apply to the triage answer (not to a turn that asks for
// tools), assessment changes to the assessment. An answer a rule changed
// says so: " (answer rule N)" is appended to the triage's summary or the
// assessment's rationale, N the rule's place in the spec from 1, and its
// Call records N as Rule.
//
// A spec with any invalid rule — an empty one, a bad regexp, an unknown or
// repeated change, a value out of range — is refused whole, with an error
// naming the rule (its place and text) and why.
func ParseAnswers(spec string) ([]AnswerRule, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var rules []AnswerRule
	for i, text := range strings.Split(spec, ";") {
		r, err := parseAnswerRule(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("answer rule %d %q: %w", i+1, strings.TrimSpace(text), err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseAnswerRule(text string) (AnswerRule, error) {
	var r AnswerRule
	if text == "" {
		return r, fmt.Errorf("empty rule: want <claim-id regexp>:<change>[,<change>...]")
	}
	i := strings.LastIndex(text, ":")
	if i < 0 {
		return r, fmt.Errorf("no changes: want <claim-id regexp>:<change>[,<change>...]")
	}
	expr, changes := strings.TrimSpace(text[:i]), text[i+1:]
	if expr == "" {
		return r, fmt.Errorf("no claim-id regexp before the %q", ":")
	}
	// Compiled alone first, so that no ")" in it can undo the anchoring.
	_, err := regexp.Compile(expr)
	if err != nil {
		return r, fmt.Errorf("claim-id regexp %q: %v", expr, err)
	}
	re := regexp.MustCompile("^(?:" + expr + ")$")
	r.Claims = re
	seen := map[string]bool{}
	for _, change := range strings.Split(changes, ",") {
		change = strings.TrimSpace(change)
		key, value, ok := strings.Cut(change, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case change == "":
			return r, fmt.Errorf("empty change (valid: %s)", validChanges)
		case !ok:
			return r, fmt.Errorf("change %q: want <name>=<value> (valid: %s)", change, validChanges)
		case seen[key]:
			return r, fmt.Errorf("change %q: %s is set twice", change, key)
		}
		seen[key] = true
		switch key {
		case "recommend":
			if pct, isPct := strings.CutSuffix(value, "%"); isPct {
				n, ok := wholeNumber(pct)
				if !ok || n > 1000 {
					return r, fmt.Errorf("change %q: the percentage must be a whole number from 0 to 1000", change)
				}
				r.RecommendPercent = &n
			} else {
				n, ok := wholeNumber(value)
				if !ok {
					return r, fmt.Errorf("change %q: want a percentage (recommend=50%%) or a whole number of minor units (recommend=12500)", change)
				}
				r.RecommendMinor = &n
			}
		case "needs_review":
			if value != "true" && value != "false" {
				return r, fmt.Errorf("change %q: needs_review is true or false", change)
			}
			b := value == "true"
			r.NeedsReview = &b
		case "category":
			if !slices.Contains(triageCategories, value) {
				return r, fmt.Errorf("change %q: the category must be one of %s", change, strings.Join(triageCategories, ", "))
			}
			r.Category = &value
		case "fraud_score":
			n, ok := wholeNumber(value)
			if !ok || n > 100 {
				return r, fmt.Errorf("change %q: fraud_score must be a whole number from 0 to 100", change)
			}
			score := int(n)
			r.FraudScore = &score
		default:
			return r, fmt.Errorf("unknown change %q (valid: %s)", change, validChanges)
		}
	}
	return r, nil
}

// wholeNumber reads a non-negative decimal integer, digits only.
func wholeNumber(s string) (int64, bool) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// changesTriage and changesAssessment say whether the rule changes that
// answer.
func (r AnswerRule) changesTriage() bool { return r.Category != nil || r.FraudScore != nil }

func (r AnswerRule) changesAssessment() bool {
	return r.RecommendPercent != nil || r.RecommendMinor != nil || r.NeedsReview != nil
}

// applyTriage makes the rule's triage changes.
func (r AnswerRule) applyTriage(t *model.Triage) {
	if r.Category != nil {
		t.Category = *r.Category
	}
	if r.FraudScore != nil {
		t.FraudScore = *r.FraudScore
	}
}

// applyAssessment makes the rule's assessment changes.
func (r AnswerRule) applyAssessment(a *model.Assessment) {
	switch {
	case r.RecommendMinor != nil:
		a.RecommendedMinor = *r.RecommendMinor
	case r.RecommendPercent != nil:
		a.RecommendedMinor = percentOf(a.RecommendedMinor, *r.RecommendPercent)
	}
	if r.NeedsReview != nil {
		a.NeedsReview = *r.NeedsReview
	}
}

// percentOf is pct percent of n, rounded down (and within an int64).
func percentOf(n, pct int64) int64 {
	v := new(big.Int).Mul(big.NewInt(n), big.NewInt(pct))
	v.Div(v, big.NewInt(100)) // Euclidean: rounds down for a positive divisor
	switch {
	case v.IsInt64():
		return v.Int64()
	case v.Sign() < 0:
		return math.MinInt64
	}
	return math.MaxInt64
}

// answerRule is the first rule matching the claim ID and its place from 1;
// 0 when none matches.
func (s *Server) answerRule(claimID string) (AnswerRule, int) {
	for i, r := range s.Answers {
		if r.Claims != nil && r.Claims.MatchString(claimID) {
			return r, i + 1
		}
	}
	return AnswerRule{}, 0
}
