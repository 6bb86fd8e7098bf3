package claim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const good = `{"claim_id":"claim-0042","policy_id":"pol-1001",
 "claimant":{"name":"Ada Lovelace","email":"ada@example.com","stripe_account":"acct_1Ada"},
 "amount":"1840.00","currency":"usd","description":"Burst pipe flooded the kitchen",
 "documents":[{"name":"photo.jpg","path":"s3://claims/0042/photo.jpg"}]}`

func TestParseGoodClaim(t *testing.T) {
	c, err := Parse([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, "claim-0042", c.ID)
	assert.Equal(t, int64(184000), c.AmountMinor)
	assert.Equal(t, "1840.00", c.Amount())
	assert.Equal(t, "usd", c.Currency)
	require.NoError(t, c.Validate())
}

func TestParseRefusesWithFieldAndReason(t *testing.T) {
	cases := []struct {
		name, edit, field, reason string
	}{
		{"missing id", `"claim_id":""`, "claim_id", "is required"},
		{"id with colon", `"claim_id":"claim:42"`, "claim_id", "ASCII letters"},
		{"unicode id", `"claim_id":"clâim"`, "claim_id", "ASCII letters"},
		{"a what-if's name", `"claim_id":"whatif-42"`, "claim_id", "what-if runs are named so"},
		{"negative amount", `"amount":"-5.00"`, "amount", "not a decimal amount"},
		{"zero amount", `"amount":"0.00"`, "amount", "greater than zero"},
		{"too many decimals", `"amount":"1.001"`, "amount", "more than 2 decimal places"},
		{"exponent", `"amount":"1e3"`, "amount", "not a decimal amount"},
		{"overflow", `"amount":"99999999999999999999"`, "amount", "too large"},
		{"number not string", `"amount":1840`, "amount", "must be a JSON string"},
		{"unknown currency", `"currency":"xyz"`, "currency", "not a supported currency"},
		{"bad email", `"claimant":{"name":"A","email":"Ada <ada@example.com>","stripe_account":"acct_1"}`, "claimant.email", "plain e-mail"},
		{"bad account", `"claimant":{"name":"A","email":"a@example.com","stripe_account":"ba_1"}`, "claimant.stripe_account", "connected account"},
		{"misspelt field", `"amout":"1.00"`, "amout", "not a claim field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := edit(t, tc.edit)
			_, err := Parse([]byte(doc))
			var verr ValidationError
			require.ErrorAs(t, err, &verr)
			var found bool
			for _, fe := range verr {
				if fe.Field == tc.field {
					found = true
					assert.Contains(t, fe.Reason, tc.reason)
				}
			}
			assert.True(t, found, "no error for %s in %v", tc.field, verr)
		})
	}
}

// edit replaces the field named in repl within the good claim.
func edit(t *testing.T, repl string) string {
	t.Helper()
	name := repl[:strings.Index(repl, ":")]
	for _, line := range []string{`"claim_id":"claim-0042"`, `"amount":"1840.00"`, `"currency":"usd"`,
		`"claimant":{"name":"Ada Lovelace","email":"ada@example.com","stripe_account":"acct_1Ada"}`} {
		if strings.HasPrefix(line, name) {
			return strings.Replace(good, line, repl, 1)
		}
	}
	return strings.Replace(good, `"policy_id"`, repl+`,"policy_id"`, 1)
}

func TestParseRefusesBrokenFiles(t *testing.T) {
	for _, doc := range []string{``, `{`, `[]`, `{"claim_id":"a"} {}`, strings.Repeat(" ", MaxFileBytes+1)} {
		_, err := Parse([]byte(doc))
		var verr ValidationError
		require.ErrorAs(t, err, &verr, "doc %.20q", doc)
		assert.Equal(t, "(file)", verr[0].Field)
	}
}

func TestAmounts(t *testing.T) {
	for _, tc := range []struct {
		in, cur string
		minor   int64
	}{{"1840.00", "usd", 184000}, {"1840", "usd", 184000}, {"0.5", "eur", 50}, {"1840", "jpy", 1840}, {"007.10", "usd", 710}} {
		got, err := ParseAmount(tc.in, tc.cur)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.minor, got, tc.in)
	}
	_, err := ParseAmount("18.5", "jpy")
	assert.ErrorContains(t, err, "more than 0 decimal places")
	_, err = ParseAmount("9223372036854775808", "jpy")
	assert.ErrorContains(t, err, "too large")
	assert.Equal(t, "1840.00", FormatAmount(184000, "usd"))
	assert.Equal(t, "0.05", FormatAmount(5, "usd"))
	assert.Equal(t, "-1.50", FormatAmount(-150, "usd"))
	assert.Equal(t, "1840", FormatAmount(1840, "jpy"))
	for minor, want := range map[int64]string{125000: "1,250.00 USD", 5: "0.05 USD", 99999: "999.99 USD", 123456789: "1,234,567.89 USD",
		-184000: "-1,840.00 USD", 100000000: "1,000,000.00 USD"} {
		assert.Equal(t, want, FormatMoney(minor, "usd"))
	}
	assert.Equal(t, "184,000 JPY", FormatMoney(184000, "jpy"))
}

func TestStepKey(t *testing.T) {
	assert.Equal(t, IdempotencyKey("claim-0042:step6"), StepKey("claim-0042", StepPay))
	assert.Equal(t, IdempotencyKey("claim-0042:step5:escalate"), StepKey("claim-0042", StepApproval).Sub("escalate"))
	step2 := StepKey("claim-0042", StepTriage)
	assert.True(t, step2.Within(step2))
	assert.True(t, step2.Sub("turn1").Sub("lookup_policy").Within(step2))
	assert.False(t, StepKey("claim-0042", 20).Within(step2), "step20 is not within step2")
	assert.False(t, StepKey("claim-00420", StepTriage).Within(step2))
	assert.Equal(t, "pay", StepPay.String())

	long := strings.Repeat("x", 300)
	k := StepKey(long, StepPay)
	assert.Len(t, string(k), MaxKeyLen)
	assert.True(t, k.Valid())
	assert.Equal(t, k, StepKey(long, StepPay), "shortening must be deterministic")
	assert.NotEqual(t, k, StepKey(long, StepNotify), "distinct keys must stay distinct")
	assert.True(t, strings.HasPrefix(string(k), strings.Repeat("x", 100)))

	u := StepKey("clâim-7", StepPay)
	assert.True(t, u.Valid())
	assert.NotContains(t, string(u), "â")
	assert.NotEqual(t, u, StepKey("cl_im-7", StepPay))
	assert.False(t, IdempotencyKey("").Valid())
}
