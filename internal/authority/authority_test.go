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
		"bad email":     `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"emails":["nobody"]}]}`,
		"empty account": `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"payout_accounts":[" "]}]}`,
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}

// A person is the same person however their address is spelt: case, and
// a +tag on the local part; and the directory's other addresses and payout
// accounts are theirs too.
func TestApproversAreIdentifiedByPersonNotSpelling(t *testing.T) {
	b, err := Parse([]byte(`{"approvers":[{"id":"adjuster-17","role":"adjuster","email":"Adjuster17@Insurer.example",
		"emails":["seventeen@home.example"],"payout_accounts":["acct_1Seventeen"],"limits":{"usd":"5000.00"}}]}`))
	require.NoError(t, err)
	a, _ := b.Approvers.Find("adjuster-17")
	for _, same := range []string{"adjuster17@insurer.example", "ADJUSTER17+home@insurer.EXAMPLE", " adjuster17+a+b@insurer.example ",
		"Seventeen+claims@home.example", "acct_1Seventeen", "adjuster-17", "ADJUSTER-17"} {
		assert.True(t, a.Is(same), same)
	}
	for _, other := range []string{"", "adjuster1@insurer.example", "adjuster17@insurer.example.org", "acct_1seventeen", "+adjuster17@insurer.example",
		"seventeen@home.example.com", "adjuster-170"} {
		assert.False(t, a.Is(other), other)
	}
	assert.Equal(t, "adjuster17@insurer.example", CanonicalEmail("Adjuster17+Home@Insurer.Example"))
	assert.Equal(t, "+x@example.com", CanonicalEmail("+x@example.com"), "a local part that is all tag is kept")
}
