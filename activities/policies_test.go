package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/statute"
)

// The sample book's policies name the jurisdictions the example claims are
// handled under, and each has a shipped rule set.
func TestSamplePoliciesNameShippedJurisdictions(t *testing.T) {
	book, err := LoadPolicies("")
	require.NoError(t, err)
	rules := statute.Shipped()
	for id, want := range map[string]string{"pol-1001": "US-CA", "pol-2002": "US-TX", "pol-3003": "US"} {
		p, ok := book[id]
		require.True(t, ok, id)
		rec, err := rules.Record(p.Jurisdiction)
		require.NoError(t, err, id)
		assert.Equal(t, want, rec.Code, id)
	}
	assert.Empty(t, book["pol-3003"].Jurisdiction, "pol-3003 names none: the default applies")
}
