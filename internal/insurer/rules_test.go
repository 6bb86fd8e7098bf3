package insurer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The default holds an unanswered claim for a person: no policy the worker
// starts with denies a claim by silence unless someone wrote it down.
func TestDefaultFinalOutcomeHolds(t *testing.T) {
	r, err := Load("", func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, "hold", r.FinalOutcome)
	assert.NoError(t, r.CheckLaw())
}

func TestFinalOutcome(t *testing.T) {
	for _, tc := range []struct {
		value, err, law string
	}{
		{"hold", "", ""},
		{"approve", "", ""},
		{"reject", "", "final_outcome: reject denies an unanswered claim by silence"},
		{"expire", `final_outcome: must be hold, approve or reject, not "expire"`, ""},
	} {
		r, err := Load("", func(k string) string {
			if k == "FINAL_OUTCOME" {
				return tc.value
			}
			return ""
		})
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, tc.value)
			continue
		}
		require.NoError(t, err, tc.value)
		if tc.law == "" {
			assert.NoError(t, r.CheckLaw(), tc.value)
		} else {
			assert.ErrorContains(t, r.CheckLaw(), tc.law, tc.value)
		}
	}
}
