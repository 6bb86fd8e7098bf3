package authority

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSampleDirectory(t *testing.T) {
	b, err := Load("")
	require.NoError(t, err)
	d := b.Approvers
	a, ok := d.Find("adjuster-17")
	require.True(t, ok)
	assert.Equal(t, Adjuster, a.Role)
	assert.Equal(t, int64(500000), a.Limits["usd"])
	_, ok = d.Find("nobody")
	assert.False(t, ok)
	s, ok := d.Find("supervisor-3")
	require.True(t, ok)
	assert.Equal(t, Supervisor, s.Role)
}

func TestParseRefusesBadDirectories(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field": `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1.00"},"level":3}]}`,
		"bad role":      `{"approvers":[{"id":"a","role":"boss","limits":{"usd":"1.00"}}]}`,
		"no limits":     `{"approvers":[{"id":"a","role":"adjuster"}]}`,
		"bad limit":     `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1.001"}}]}`,
		"duplicate":     `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"}},{"id":"a","role":"adjuster","limits":{"usd":"1"}}]}`,
		"no id":         `{"approvers":[{"role":"adjuster","limits":{"usd":"1"}}]}`,
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}
