package authority

import (
	"strings"
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
	_, ok = d.Find("zz-sorted-after-everyone")
	assert.False(t, ok, "an ID past the last approver is nobody")
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
		"bad locale":    `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"locale":"not a locale"}]}`,
		"bad time zone": `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"time_zone":"Mars/Olympus_Mons"}]}`,
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}

// Each length limit of the directory admits a value of exactly its length
// and refuses one byte more: an approver's ID, address and payout account.
func TestDirectoryLimitsAreInclusive(t *testing.T) {
	entry := func(field, value string) string {
		return `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},` + field + `:` + value + `}]}`
	}
	email := func(n int) string { return strings.Repeat("e", n-len("@x.example")) + "@x.example" }
	for name, doc := range map[string]func(n int) string{
		"id": func(n int) string {
			return `{"approvers":[{"id":"` + strings.Repeat("a", n) + `","role":"adjuster","limits":{"usd":"1"}}]}`
		},
		"emails":          func(n int) string { return entry(`"emails"`, `["`+email(n)+`"]`) },
		"payout_accounts": func(n int) string { return entry(`"payout_accounts"`, `["`+strings.Repeat("p", n)+`"]`) },
	} {
		_, err := Parse([]byte(doc(MaxIDLen)))
		assert.NoError(t, err, "%s of %d characters", name, MaxIDLen)
		_, err = Parse([]byte(doc(MaxIDLen + 1)))
		assert.Error(t, err, "%s of %d characters", name, MaxIDLen+1)
	}
}

// An approver's locale and time zone, when given, are real ones; the
// directory keeps them as given.
func TestLocaleAndTimeZoneAreKept(t *testing.T) {
	b, err := Parse([]byte(`{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"locale":"de-DE","time_zone":"Europe/Berlin"},
		{"id":"b","role":"adjuster","limits":{"usd":"1"}}]}`))
	require.NoError(t, err)
	a, _ := b.Approvers.Find("a")
	assert.Equal(t, "de-DE", a.Locale)
	assert.Equal(t, "Europe/Berlin", a.TimeZone)
	other, _ := b.Approvers.Find("b")
	assert.Empty(t, other.Locale+other.TimeZone)
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
