package insurer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The version is the policy's: the same for the same settings, however
// its maps were built, and another for any setting changed.
func TestPolicyVersionNamesTheSettings(t *testing.T) {
	base := Defaults()
	v := base.Version()
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, v)
	assert.Equal(t, v, Defaults().Version())

	rebuilt := Defaults()
	terms := map[string][]string{}
	for _, k := range []string{"water-damage", "theft", "glass", "fire", "wear-and-tear", "auto"} {
		terms[k] = base.ExclusionTerms[k]
	}
	rebuilt.ExclusionTerms = terms
	assert.Equal(t, v, rebuilt.Version(), "map order does not matter")

	changes := map[string]func(r *Rules){
		"auto_approve_limit": func(r *Rules) { r.AutoApproveLimit = "999" },
		"approval_ttl":       func(r *Rules) { r.ApprovalTTL = Duration(71 * time.Hour) },
		"final_outcome":      func(r *Rules) { r.FinalOutcome = "approve" },
		"allow_unsigned":     func(r *Rules) { r.AllowUnsignedDecisions = true },
		"fraud_score_review": func(r *Rules) { r.FraudScoreReview = 49 },
		"exclusion_terms":    func(r *Rules) { r.ExclusionTerms["fire"] = append(r.ExclusionTerms["fire"], "ember") },
		"deployment":         func(r *Rules) { r.Deployment = "production" },
	}
	seen := map[string]string{v: "the defaults"}
	for what, change := range changes {
		r := Defaults()
		change(&r)
		got := r.Version()
		if other, dup := seen[got]; dup {
			t.Errorf("%s gives the same version as %s", what, other)
		}
		seen[got] = what
	}
}

// The version can be recomputed from the policy as a run's history holds
// it: inside the intake result, and indented as a claim file shows it.
func TestPolicyVersionIsThatOfThePolicyAsRecorded(t *testing.T) {
	r := Defaults()
	r.MaxPayout = "5000"
	recorded, err := json.Marshal(struct {
		Status string `json:"status"`
		Rules  *Rules `json:"rules"`
	}{"open", &r})
	require.NoError(t, err)
	var back struct {
		Rules json.RawMessage `json:"rules"`
	}
	require.NoError(t, json.Unmarshal(recorded, &back))
	assert.Equal(t, r.Version(), VersionOfJSON(back.Rules))
	indented, err := json.MarshalIndent(r, "", "  ")
	require.NoError(t, err)
	assert.Equal(t, r.Version(), VersionOfJSON(indented))
	assert.Empty(t, VersionOfJSON([]byte("not json")))
}
