package claim

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse: no input panics; anything accepted is valid, and survives a
// round trip through its file form unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{"claim_id":"c","policy_id":"p","claimant":{"name":"n","email":"e@x.io","stripe_account":"acct_1"},"amount":"0.01","currency":"jpy"}`))
	f.Add([]byte(`{"amount":"1e309"}`))
	f.Add([]byte(`{"claim_id":"` + strings.Repeat("x", 1100) + `"}`))
	f.Add([]byte("\xff\xfe{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			var verr ValidationError
			if !errors.As(err, &verr) || len(verr) == 0 {
				t.Fatalf("error is not a field-level ValidationError: %v", err)
			}
			for _, fe := range verr {
				if fe.Field == "" || fe.Reason == "" {
					t.Fatalf("error without field or reason: %+v", fe)
				}
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted claim does not validate: %v", err)
		}
		back, err := c.ToFile().Claim()
		if err != nil {
			t.Fatalf("round trip refused: %v", err)
		}
		if back.ID != c.ID || back.AmountMinor != c.AmountMinor || back.Currency != c.Currency {
			t.Fatalf("round trip changed the claim: %+v → %+v", c, back)
		}
		if c.AmountMinor <= 0 || len(c.ID) > MaxIDLen {
			t.Fatalf("accepted out-of-range claim %+v", c)
		}
	})
}

// FuzzAmount: amounts parse to positive minor units that format back to the
// same value, or are refused; never a panic, never an overflow.
func FuzzAmount(f *testing.F) {
	for _, s := range []string{"1840.00", "0.01", "-1", "1.001", "9223372036854775807", "92233720368547758.08", "1e3", "", ".5", "5.", "٣"} {
		f.Add(s, "usd")
	}
	f.Add("1840", "jpy")
	f.Add("1.5", "xyz")
	f.Fuzz(func(t *testing.T, s, currency string) {
		minor, err := ParseAmount(s, currency)
		if err != nil {
			return
		}
		if minor <= 0 {
			t.Fatalf("ParseAmount(%q) = %d", s, minor)
		}
		again, err := ParseAmount(FormatAmount(minor, currency), currency)
		if err != nil || again != minor {
			t.Fatalf("%q → %d → %q → %d, %v", s, minor, FormatAmount(minor, currency), again, err)
		}
	})
}

// FuzzStepKey: any workflow ID yields a key every receiver accepts:
// non-empty, at most 255 bytes, printable ASCII; the same ID gives the same
// key, and different steps different keys.
func FuzzStepKey(f *testing.F) {
	f.Add("claim-0042")
	f.Add(strings.Repeat("é", 300))
	f.Add("")
	f.Add("claim\x00\n")
	f.Fuzz(func(t *testing.T, id string) {
		k := StepKey(id, StepPay)
		if !k.Valid() || !printableASCII(string(k)) || !utf8.ValidString(string(k)) {
			t.Fatalf("StepKey(%q) = %q is not a usable key", id, k)
		}
		if k != StepKey(id, StepPay) {
			t.Fatal("not deterministic")
		}
		if k == StepKey(id, StepNotify) {
			t.Fatalf("steps 6 and 7 share key %q", k)
		}
	})
}
