package claim

import (
	"fmt"
	"math"
	"strings"
)

// exponents lists the currencies claims may be paid in and their number of
// minor-unit digits (ISO 4217). Amounts are kept as integer minor units so no
// float ever touches money.
var exponents = map[string]int{
	"usd": 2, "eur": 2, "gbp": 2, "cad": 2, "aud": 2, "nzd": 2,
	"chf": 2, "sek": 2, "nok": 2, "dkk": 2, "jpy": 0,
}

// CurrencyExponent reports the minor-unit digits of a known currency.
func CurrencyExponent(currency string) (int, bool) {
	e, ok := exponents[currency]
	return e, ok
}

// ParseAmount turns a decimal string such as "1840.00" into minor units of
// currency. It refuses signs, exponents, separators, more decimals than the
// currency has, zero, and values that do not fit in an int64.
func ParseAmount(s, currency string) (int64, error) {
	minor, err := parseMinor(s, currency)
	if err == nil && minor == 0 {
		return 0, fmt.Errorf("must be greater than zero")
	}
	return minor, err
}

// parseMinor is ParseAmount that also accepts zero (a deductible, say).
func parseMinor(s, currency string) (int64, error) {
	exp, ok := exponents[currency]
	if !ok {
		return 0, fmt.Errorf("unknown currency %q", currency)
	}
	if s == "" {
		return 0, fmt.Errorf("is empty")
	}
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") {
		return 0, fmt.Errorf("%q is not a decimal amount like 1840.00", s)
	}
	if len(frac) > exp {
		return 0, fmt.Errorf("%q has more than %d decimal places for %s", s, exp, strings.ToUpper(currency))
	}
	var minor int64
	for _, r := range whole + frac + strings.Repeat("0", exp-len(frac)) {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a decimal amount like 1840.00", s)
		}
		d := int64(r - '0')
		if minor > (math.MaxInt64-d)/10 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		minor = minor*10 + d
	}
	return minor, nil
}

// FormatAmount renders minor units as a decimal string ("184000", "usd" →
// "1840.00"). Unknown currencies are rendered with two decimals.
func FormatAmount(minor int64, currency string) string {
	exp, ok := exponents[currency]
	if !ok {
		exp = 2
	}
	sign := ""
	if minor < 0 {
		sign, minor = "-", -minor
	}
	if exp == 0 {
		return fmt.Sprintf("%s%d", sign, minor)
	}
	div := int64(math.Pow10(exp))
	return fmt.Sprintf("%s%d.%0*d", sign, minor/div, exp, minor%div)
}

// FormatMoney renders minor units for a person to read in a terminal or a
// log: thousands grouped and the currency's code ("125000", "usd" →
// "1,250.00 USD").
func FormatMoney(minor int64, currency string) string {
	s := FormatAmount(minor, currency)
	sign, digits := "", s
	if strings.HasPrefix(s, "-") {
		sign, digits = "-", s[1:]
	}
	whole, frac, _ := strings.Cut(digits, ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return sign + b.String() + " " + strings.ToUpper(currency)
}
