package decision

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/authority"
)

func testBook(t testing.TB) (authority.Book, authority.KeyFile, authority.KeyFile) {
	own, err := authority.GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	svc, err := authority.GenerateKey("inbox", true)
	require.NoError(t, err)
	b := authority.Book{
		Approvers: authority.Directory{{ID: "adjuster-17", Role: authority.Adjuster, Limits: map[string]int64{"usd": 500000},
			Keys: []authority.Key{own.Public()}}},
		Services: []authority.Service{{Name: "inbox", Key: svc.Public()}},
	}
	return b, own, svc
}

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func good(t testing.TB) Receipt {
	r, err := NewReceipt(Receipt{Subject: "adjuster-17", ClaimID: "claim-0042", RequestSHA256: strings.Repeat("ab", 32),
		Verdict: Approve}, now, DefaultReceiptTTL)
	require.NoError(t, err)
	return r
}

func TestReceiptRoundTrip(t *testing.T) {
	b, own, svc := testBook(t)
	tok, err := Sign(own, good(t))
	require.NoError(t, err)
	v, err := VerifyReceipt(tok, b, "", now.Add(time.Minute), time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "adjuster-17", v.Receipt.Subject)
	assert.Equal(t, "adjuster-17", v.Signer.Approver)

	tok, err = Sign(svc, good(t))
	require.NoError(t, err)
	v, err = VerifyReceipt(tok, b, "", now, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, "inbox", v.Signer.Service, "a service key vouches for the approver")

	kid, r, ok := PeekReceipt(tok)
	assert.True(t, ok)
	assert.Equal(t, svc.Key.KeyID, kid)
	assert.Equal(t, "claim-0042", r.ClaimID)
}

func TestReceiptsThatMustNotVerify(t *testing.T) {
	b, own, _ := testBook(t)
	sign := func(edit func(*Receipt)) string {
		r := good(t)
		edit(&r)
		tok, err := Sign(own, r)
		require.NoError(t, err)
		return tok
	}
	valid := sign(func(*Receipt) {})
	parts := strings.Split(valid, ".")
	// The same signature over a payload changed to another claim.
	var payload map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, json.Unmarshal(raw, &payload))
	payload["claim_id"] = "claim-9999"
	changed, _ := json.Marshal(payload)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(changed) + "." + parts[2]
	// An HMAC "signature" keyed with the public key: the classic algorithm confusion.
	hmacSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: own.Public().PublicKey},
		(&jose.SignerOptions{}).WithType(ReceiptType).WithHeader("kid", own.Key.KeyID))
	require.NoError(t, err)
	hs, err := hmacSigner.Sign(raw)
	require.NoError(t, err)
	confused, err := hs.CompactSerialize()
	require.NoError(t, err)
	unsignedHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"` + own.Key.KeyID + `","typ":"dc-receipt+jwt"}`))
	none := unsignedHeader + "." + parts[1] + "."
	untyped, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: own.Key}, nil)
	require.NoError(t, err)
	ut, err := untyped.Sign(raw)
	require.NoError(t, err)
	noTyp, err := ut.CompactSerialize()
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		token string
		code  string
	}{
		"tampered payload": {tampered, CodeBadSignature},
		"HS256 confusion":  {confused, CodeMalformed},
		"alg none":         {none, CodeMalformed},
		"no typ":           {noTyp, CodeMalformed},
		"garbage":          {"a.b.c", CodeMalformed},
		"huge":             {strings.Repeat("a", MaxReceiptBytes+1), CodeTooLarge},
		"expired":          {sign(func(r *Receipt) { r.IssuedAt -= 3600; r.Expiry -= 3600 }), CodeExpired},
		"future":           {sign(func(r *Receipt) { r.IssuedAt += 3600; r.Expiry += 3600 }), CodeNotYetValid},
		"long-lived":       {sign(func(r *Receipt) { r.Expiry = r.IssuedAt + 7200 }), CodeTooLongLived},
		"short hash":       {sign(func(r *Receipt) { r.RequestSHA256 = "abcdef012345" }), CodeMalformed},
		"no subject":       {sign(func(r *Receipt) { r.Subject = "" }), CodeMalformed},
		"other's sub":      {sign(func(r *Receipt) { r.Subject = "supervisor-3" }), CodeNotVouched},
		"bad verdict":      {sign(func(r *Receipt) { r.Verdict = "maybe" }), CodeMalformed},
		"wrong audience":   {sign(func(r *Receipt) { r.Audience = "someone-else" }), CodeWrongAudience},
		"short jti":        {sign(func(r *Receipt) { r.ID = "x" }), CodeMalformed},
		"long reason":      {sign(func(r *Receipt) { r.Reason = strings.Repeat("r", MaxTextBytes+1) }), CodeTooLarge},
		"exp before iat":   {sign(func(r *Receipt) { r.Expiry = r.IssuedAt - 1 }), CodeMalformed},
		"signed by a stranger": {func() string {
			k, err := authority.GenerateKey("adjuster-17", false)
			require.NoError(t, err)
			tok, err := Sign(k, good(t))
			require.NoError(t, err)
			return tok
		}(), CodeUnknownKey},
	} {
		_, err := VerifyReceipt(tc.token, b, "", now, time.Hour)
		require.Error(t, err, name)
		assert.Equal(t, tc.code, RefusalCode(err), "%s: %v", name, err)
	}
}

// FuzzVerifyReceipt: any string is a verified receipt or a refusal with a
// code; none panics, and nothing but a real signature verifies.
func FuzzVerifyReceipt(f *testing.F) {
	b, own, _ := testBook(f)
	tok, err := Sign(own, good(f))
	require.NoError(f, err)
	for _, s := range []string{tok, "", "a.b.c", "..", strings.Repeat(".", 100), tok[:len(tok)-3], tok + "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := VerifyReceipt(s, b, "", now, time.Hour)
		if err == nil && s != tok {
			// Another encoding of the same signed bytes may verify; it must
			// still carry the signed payload.
			if _, r, ok := PeekReceipt(s); !ok || r.ClaimID != "claim-0042" {
				t.Fatalf("%q verified", s)
			}
		}
		if err != nil && RefusalCode(err) == "" {
			t.Fatalf("refusal without a code: %v", err)
		}
		PeekReceipt(s)
	})
}

// A receipt names the namespace and deployment it is for: signed for
// staging, it does not verify in production, though both share its key.
func TestReceiptsAreForOneNamespaceAndDeployment(t *testing.T) {
	b, own, _ := testBook(t)
	r := good(t)
	r.Audience = Audience("staging", "local")
	tok, err := Sign(own, r)
	require.NoError(t, err)
	_, err = VerifyReceipt(tok, b, Audience("staging", "local"), now, time.Hour)
	require.NoError(t, err)
	for _, aud := range []string{Audience("default", "local"), Audience("staging", "eu"), ""} {
		_, err = VerifyReceipt(tok, b, aud, now, time.Hour)
		assert.Equal(t, CodeWrongAudience, RefusalCode(err), aud)
	}
}
