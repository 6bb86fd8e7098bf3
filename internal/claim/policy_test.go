package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParsePoliciesReadsTheJurisdiction(t *testing.T) {
	book, err := ParsePolicies([]byte(`{"policies":[
		{"policy_id":"pol-1","currency":"USD","limit":"100.00","deductible":"0.00","jurisdiction":"US-TX"},
		{"policy_id":"pol-2","currency":"usd","limit":"100.00","deductible":"0.00"}]}`))
	require.NoError(t, err)
	assert.Equal(t, "US-TX", book["pol-1"].Jurisdiction)
	assert.Empty(t, book["pol-2"].Jurisdiction, "none named: the rule sets' default applies")
}

func TestParsePoliciesRefusesABadJurisdiction(t *testing.T) {
	for _, code := range []string{"Texas", "us-tx", "USA-TX", "US-"} {
		_, err := ParsePolicies([]byte(`{"policies":[{"policy_id":"pol-1","currency":"usd","limit":"100.00","deductible":"0.00","jurisdiction":"` + code + `"}]}`))
		if assert.Error(t, err, code) {
			assert.Contains(t, err.Error(), "policies[0] (pol-1).jurisdiction:")
			assert.Contains(t, err.Error(), "ISO 3166-2")
		}
	}
}
