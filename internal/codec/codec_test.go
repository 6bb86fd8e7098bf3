package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"

	"github.com/durableclaims/durableclaims/internal/claim"
)

// Claim data a leak would show.
const (
	claimantName  = "Genoveva Quintanilla-Oyelaran"
	claimantEmail = "genoveva.q@example.org"
	stripeAccount = "acct_1PiiLeakCheck42"
	amountMinor   = int64(1234567)
)

func testClaim() claim.Claim {
	return claim.Claim{
		ID:       "clm-0001",
		PolicyID: "pol-77",
		Claimant: claim.Claimant{
			Name:          claimantName,
			Email:         claimantEmail,
			StripeAccount: stripeAccount,
		},
		AmountMinor: amountMinor,
		Currency:    "EUR",
		Description: "Burst pipe flooded the kitchen of " + claimantName,
	}
}

// key returns a deterministic, recognisable 32-byte key.
func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func ring(active string, ids ...string) *Keyring {
	kr := &Keyring{Active: active, Keys: map[string][]byte{}}
	for i, id := range ids {
		kr.Keys[id] = key(byte(0xA0 + i))
	}
	return kr
}

func mustCodec(t *testing.T, kr *Keyring) *Codec {
	t.Helper()
	c, err := New(kr)
	require.NoError(t, err)
	return c
}

func payloadsOf(t *testing.T, values ...any) []*commonpb.Payload {
	t.Helper()
	ps, err := converter.GetDefaultDataConverter().ToPayloads(values...)
	require.NoError(t, err)
	return ps.GetPayloads()
}

// leakNeedles are the byte strings that must not appear in ciphertext.
func leakNeedles() [][]byte {
	return [][]byte{
		[]byte(claimantName), []byte(claimantEmail), []byte(stripeAccount),
		[]byte("1234567"), []byte("Genoveva"), []byte("example.org"),
		[]byte("json/plain"), []byte("binary/null"), []byte("binary/protobuf"),
	}
}

func assertNoPlaintext(t *testing.T, p *commonpb.Payload) {
	t.Helper()
	raw, err := proto.Marshal(p)
	require.NoError(t, err)
	forms := map[string][]byte{
		"raw":    raw,
		"base64": []byte(base64.StdEncoding.EncodeToString(raw)),
		"hex":    []byte(hex.EncodeToString(raw)),
	}
	for name, hay := range forms {
		for _, n := range leakNeedles() {
			assert.False(t, bytes.Contains(hay, n), "%s form of the encoded payload contains %q", name, n)
			assert.False(t, bytes.Contains(bytes.ToLower(hay), bytes.ToLower(n)), "%s form contains %q (case-folded)", name, n)
		}
	}
}

func TestRoundTripPayloadKinds(t *testing.T) {
	c := mustCodec(t, ring("k1", "k1", "k0"))
	pb := &commonpb.WorkflowExecution{WorkflowId: "claim-" + claimantEmail, RunId: "run-1"}
	in := payloadsOf(t,
		testClaim(),                  // json/plain struct
		claimantName,                 // json/plain string
		amountMinor,                  // json/plain number
		nil,                          // binary/null
		[]byte("raw "+stripeAccount), // binary/plain
		pb,                           // json/protobuf
		map[string]any{"email": claimantEmail, "amount": amountMinor},
		"",
	)
	// A payload carrying extra metadata, and an empty one.
	in = append(in,
		&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain"), "custom": []byte(claimantName)}, Data: []byte(`"x"`)},
		&commonpb.Payload{},
	)

	enc, err := c.Encode(in)
	require.NoError(t, err)
	require.Len(t, enc, len(in))
	for i, p := range enc {
		assert.Equal(t, MetadataEncodingEncrypted, string(p.Metadata["encoding"]), "payload %d", i)
		assert.Equal(t, "k1", string(p.Metadata[MetadataEncryptionKeyID]), "payload %d", i)
		assert.Len(t, p.Metadata, 2, "payload %d: only encoding and key ID are in clear", i)
		assert.GreaterOrEqual(t, len(p.Data), 12+16, "payload %d: nonce and tag", i)
		assertNoPlaintext(t, p)
	}

	dec, err := c.Decode(enc)
	require.NoError(t, err)
	require.Len(t, dec, len(in))
	for i := range in {
		assert.True(t, proto.Equal(in[i], dec[i]), "payload %d: got %v want %v", i, dec[i], in[i])
	}

	// And back into Go values through the default converter.
	var got claim.Claim
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[0], &got))
	assert.Equal(t, testClaim(), got)
	var gotPB commonpb.WorkflowExecution
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[5], &gotPB))
	assert.True(t, proto.Equal(pb, &gotPB))
}

func TestEncodeUsesFreshNonces(t *testing.T) {
	c := mustCodec(t, ring("k1", "k1"))
	p := payloadsOf(t, testClaim())
	a, err := c.Encode(p)
	require.NoError(t, err)
	b, err := c.Encode(p)
	require.NoError(t, err)
	assert.NotEqual(t, a[0].Data[:12], b[0].Data[:12], "nonce reused")
	assert.NotEqual(t, a[0].Data, b[0].Data)
}

func TestEncodeDoesNotModifyInput(t *testing.T) {
	c := mustCodec(t, ring("k1", "k1"))
	in := payloadsOf(t, testClaim())
	orig := proto.Clone(in[0])
	_, err := c.Encode(in)
	require.NoError(t, err)
	assert.True(t, proto.Equal(orig, in[0]))
}

func TestEmptyAndNil(t *testing.T) {
	c := mustCodec(t, ring("k1", "k1"))
	enc, err := c.Encode(nil)
	require.NoError(t, err)
	assert.Empty(t, enc)
	dec, err := c.Decode([]*commonpb.Payload{nil})
	require.NoError(t, err)
	assert.Equal(t, []*commonpb.Payload{nil}, dec)
}

func TestUnencryptedPayloadsPassThroughDecode(t *testing.T) {
	c := mustCodec(t, ring("k1", "k1"))
	plain := payloadsOf(t, testClaim(), "hello", nil)
	plain = append(plain, &commonpb.Payload{Data: []byte("no metadata at all")})
	enc, err := c.Encode(payloadsOf(t, claimantName))
	require.NoError(t, err)
	mixed := append(append([]*commonpb.Payload{}, plain...), enc[0])

	dec, err := c.Decode(mixed)
	require.NoError(t, err)
	for i := range plain {
		assert.Same(t, plain[i], dec[i], "payload %d must pass through untouched", i)
	}
	var name string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(dec[len(plain)], &name))
	assert.Equal(t, claimantName, name)
}

func TestRotation(t *testing.T) {
	kr := ring("k1", "k1")
	c1 := mustCodec(t, kr)
	old, err := c1.Encode(payloadsOf(t, "written under k1"))
	require.NoError(t, err)

	// Rotate: add k2, make it active, keep k1 for decoding.
	kr.Keys["k2"] = key(0xB2)
	kr.Active = "k2"
	c2 := mustCodec(t, kr)
	assert.Equal(t, "k2", c2.ActiveKeyID())
	cur, err := c2.Encode(payloadsOf(t, "written under k2"))
	require.NoError(t, err)
	assert.Equal(t, "k2", string(cur[0].Metadata[MetadataEncryptionKeyID]))

	dec, err := c2.Decode([]*commonpb.Payload{old[0], cur[0]})
	require.NoError(t, err)
	var a, b string
	dc := converter.GetDefaultDataConverter()
	require.NoError(t, dc.FromPayload(dec[0], &a))
	require.NoError(t, dc.FromPayload(dec[1], &b))
	assert.Equal(t, "written under k1", a)
	assert.Equal(t, "written under k2", b)

	// The old codec cannot read the new key's payloads.
	_, err = c1.Decode(cur)
	require.ErrorIs(t, err, ErrUnknownKey)

	// Retiring k1 too early makes old payloads unreadable, with the key named.
	delete(kr.Keys, "k1")
	c3 := mustCodec(t, kr)
	_, err = c3.Decode(old)
	require.ErrorIs(t, err, ErrUnknownKey)
	assert.Contains(t, err.Error(), `"k1"`)
}

func TestNewCopiesKeys(t *testing.T) {
	kr := ring("k1", "k1")
	c := mustCodec(t, kr)
	enc, err := c.Encode(payloadsOf(t, "x"))
	require.NoError(t, err)
	// Scribbling on the caller's key slice afterwards must not matter.
	for i := range kr.Keys["k1"] {
		kr.Keys["k1"][i] = 0
	}
	_, err = c.Decode(enc)
	require.NoError(t, err)
}

func TestDecodeFailures(t *testing.T) {
	kr := ring("k1", "k1", "k2")
	// "twin" holds the same key bytes as k1: only the additional data
	// (the key ID) tells them apart.
	kr.Keys["twin"] = append([]byte(nil), kr.Keys["k1"]...)
	c := mustCodec(t, kr)
	fresh := func() *commonpb.Payload {
		enc, err := c.Encode(payloadsOf(t, testClaim()))
		require.NoError(t, err)
		return enc[0]
	}

	cases := []struct {
		name    string
		mutate  func(p *commonpb.Payload)
		is      error
		mention string
	}{
		{"flipped ciphertext bit", func(p *commonpb.Payload) { p.Data[len(p.Data)/2] ^= 1 }, ErrDecrypt, `"k1"`},
		{"flipped tag bit", func(p *commonpb.Payload) { p.Data[len(p.Data)-1] ^= 0x80 }, ErrDecrypt, `"k1"`},
		{"flipped nonce bit", func(p *commonpb.Payload) { p.Data[0] ^= 1 }, ErrDecrypt, `"k1"`},
		{"truncated", func(p *commonpb.Payload) { p.Data = p.Data[:20] }, ErrMalformed, `"k1"`},
		{"appended byte", func(p *commonpb.Payload) { p.Data = append(p.Data, 0) }, ErrDecrypt, `"k1"`},
		{"unknown key ID", func(p *commonpb.Payload) { p.Metadata[MetadataEncryptionKeyID] = []byte("2019-01") }, ErrUnknownKey, `"2019-01"`},
		{"relabelled to another key", func(p *commonpb.Payload) { p.Metadata[MetadataEncryptionKeyID] = []byte("k2") }, ErrDecrypt, `"k2"`},
		{"relabelled to a twin key", func(p *commonpb.Payload) { p.Metadata[MetadataEncryptionKeyID] = []byte("twin") }, ErrDecrypt, `"twin"`},
		{"missing key ID", func(p *commonpb.Payload) { delete(p.Metadata, MetadataEncryptionKeyID) }, ErrMalformed, MetadataEncryptionKeyID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fresh()
			tc.mutate(p)
			good := fresh()
			out, err := c.Decode([]*commonpb.Payload{good, p})
			require.Error(t, err)
			assert.Nil(t, out)
			assert.ErrorIs(t, err, tc.is)
			assert.Contains(t, err.Error(), tc.mention)
			assert.Contains(t, err.Error(), "payload 1", "the error says which payload")
			assertNoSecrets(t, err.Error(), kr)
			for _, n := range leakNeedles()[:3] {
				assert.NotContains(t, err.Error(), string(n))
			}
		})
	}
}

func TestInvalidKeyringCodecFailsClosed(t *testing.T) {
	bad := &Keyring{Active: "k1", Keys: map[string][]byte{"k1": key(1)[:16]}}
	_, err := New(bad)
	require.Error(t, err)
	_, err = New(nil)
	require.Error(t, err)

	c := NewCodec(bad)
	out, err := c.Encode(payloadsOf(t, claimantName))
	require.Error(t, err)
	assert.Nil(t, out, "no clear text handed back on failure")
	_, err = c.Decode(payloadsOf(t, claimantName))
	require.Error(t, err)

	_, err = DataConverter(bad).ToPayloads(testClaim())
	require.Error(t, err)
}

func TestDataConverterRoundTrip(t *testing.T) {
	dc := DataConverter(ring("k1", "k1"))
	type payout struct {
		Claim    claim.Claim
		Approved bool
		Notes    []string
	}
	in := payout{Claim: testClaim(), Approved: true, Notes: []string{"call " + claimantEmail}}

	ps, err := dc.ToPayloads(in, claimantEmail, amountMinor)
	require.NoError(t, err)
	require.Len(t, ps.Payloads, 3)
	for _, p := range ps.Payloads {
		assert.Equal(t, MetadataEncodingEncrypted, string(p.Metadata["encoding"]))
		assertNoPlaintext(t, p)
	}
	// What the server would show without the codec.
	for _, s := range converter.GetDefaultDataConverter().ToStrings(ps) {
		assert.NotContains(t, s, claimantName)
	}

	var out payout
	var email string
	var amount int64
	require.NoError(t, dc.FromPayloads(ps, &out, &email, &amount))
	assert.Equal(t, in, out)
	assert.Equal(t, claimantEmail, email)
	assert.Equal(t, amountMinor, amount)

	// Single payload API, and decoding a pre-encryption payload.
	p, err := dc.ToPayload(testClaim())
	require.NoError(t, err)
	var c claim.Claim
	require.NoError(t, dc.FromPayload(p, &c))
	assert.Equal(t, testClaim(), c)

	legacy, err := converter.GetDefaultDataConverter().ToPayload(testClaim())
	require.NoError(t, err)
	c = claim.Claim{}
	require.NoError(t, dc.FromPayload(legacy, &c))
	assert.Equal(t, testClaim(), c)

	// ToString (used by the CLI / tctl-like tools) decodes too.
	assert.Contains(t, dc.ToString(p), claimantName)
}

// assertNoSecrets checks that s holds no key of kr in any usual rendering.
func assertNoSecrets(t *testing.T, s string, kr *Keyring) {
	t.Helper()
	for id, k := range kr.Keys {
		for _, form := range []string{
			string(k),
			base64.StdEncoding.EncodeToString(k),
			base64.RawStdEncoding.EncodeToString(k),
			base64.URLEncoding.EncodeToString(k),
			hex.EncodeToString(k),
			strings.ToUpper(hex.EncodeToString(k)),
			fmt.Sprint(k),                                   // [160 160 ...]
			fmt.Sprint(k[:4])[1 : len(fmt.Sprint(k[:4]))-1], // "160 160 160 160"
			fmt.Sprintf("%q", k),
		} {
			assert.NotContains(t, s, form, "key %q leaked", id)
		}
	}
}

func TestKeyringNeverPrintsKeys(t *testing.T) {
	_, js, err := GenerateKeyring("2026-11")
	require.NoError(t, err)
	kr, err := Parse(js)
	require.NoError(t, err)
	kr.Keys["2026-10"] = key(0x41) // 'A'*32: easy to spot as text too

	renders := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T %v"} {
		renders[verb+" value"] = fmt.Sprintf(verb, *kr)
		renders[verb+" pointer"] = fmt.Sprintf(verb, kr)
	}
	renders["String"] = kr.String()
	renders["GoString"] = kr.GoString()
	renders["nested"] = fmt.Sprintf("%+v", struct{ K *Keyring }{kr})
	renders["errorf"] = fmt.Errorf("boom: %v", kr).Error()
	mj, err := json.Marshal(kr)
	require.NoError(t, err)
	renders["json pointer"] = string(mj)
	mj, err = json.Marshal(struct{ K Keyring }{*kr})
	require.NoError(t, err)
	renders["json nested"] = string(mj)

	for _, format := range []string{"text", "json"} {
		var buf bytes.Buffer
		var h slog.Handler = slog.NewTextHandler(&buf, nil)
		if format == "json" {
			h = slog.NewJSONHandler(&buf, nil)
		}
		slog.New(h).Info("keys loaded", "keyring", kr, "value", *kr)
		renders["slog "+format] = buf.String()
	}

	for name, s := range renders {
		assertNoSecrets(t, s, kr)
		assert.NotContains(t, s, "AAAAAAAA", name)
		if !strings.HasPrefix(name, "%T") {
			assert.Contains(t, s, "2026-11", "%s should still show the key IDs: %s", name, s)
			assert.Contains(t, s, "2026-10", "%s should still show the key IDs: %s", name, s)
		}
	}
	t.Logf("%%+v renders as %+v", kr)

	// The redacted JSON cannot be mistaken for a key file.
	mj, err = json.Marshal(kr)
	require.NoError(t, err)
	_, err = Parse(mj)
	require.Error(t, err)

	// A panic with the key ring prints only IDs.
	func() {
		defer func() {
			r := recover()
			assertNoSecrets(t, fmt.Sprint(r), kr)
		}()
		panic(kr)
	}()
}

func TestGenerateKeyring(t *testing.T) {
	kr, js, err := GenerateKeyring("2026-11")
	require.NoError(t, err)
	assert.Equal(t, "2026-11", kr.Active)
	require.Len(t, kr.Keys["2026-11"], KeySize)
	assert.NotEqual(t, make([]byte, KeySize), kr.Keys["2026-11"])

	var f struct {
		Active string            `json:"active"`
		Keys   map[string]string `json:"keys"`
	}
	require.NoError(t, json.Unmarshal(js, &f))
	assert.Equal(t, "2026-11", f.Active)
	raw, err := base64.StdEncoding.DecodeString(f.Keys["2026-11"])
	require.NoError(t, err)
	assert.Equal(t, kr.Keys["2026-11"], raw)

	parsed, err := Parse(js)
	require.NoError(t, err)
	assert.Equal(t, kr.Keys, parsed.Keys)

	kr2, _, err := GenerateKeyring("2026-11")
	require.NoError(t, err)
	assert.NotEqual(t, kr.Keys["2026-11"], kr2.Keys["2026-11"], "keys must be random")

	for _, id := range []string{"", strings.Repeat("x", 65), "bad\nid", "ключ"} {
		_, _, err := GenerateKeyring(id)
		assert.Error(t, err, "id %q", id)
	}
}

func b64(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

func TestParseValidation(t *testing.T) {
	good := b64(key(0xC1))
	cases := []struct {
		name, json, want string
	}{
		{"not JSON", `active=k1`, "syntax error"},
		{"empty", ``, "empty"},
		{"truncated", `{"active":"k1","keys":{"k1":"` + good, "truncated"},
		{"unknown field", `{"Active":"k1","keys":{"k1":"` + good + `"},"key":"x"}`, `unknown field "key"`},
		{"wrong type", `{"active":"k1","keys":{"k1":42}}`, "wrong type"},
		{"no keys", `{"active":"k1","keys":{}}`, "no keys"},
		{"no active", `{"keys":{"k1":"` + good + `"}}`, "no active key"},
		{"active missing", `{"active":"k9","keys":{"k1":"` + good + `"}}`, `active key "k9" is not in the key ring`},
		{"short key", `{"active":"k1","keys":{"k1":"` + b64(key(0xC1)[:16]) + `"}}`, `key "k1": is 16 bytes after base64 decoding, want exactly 32`},
		{"long key", `{"active":"k1","keys":{"k1":"` + b64(append(key(0xC1), 1)) + `"}}`, `is 33 bytes`},
		{"bad base64", `{"active":"k1","keys":{"k1":"@@not base64 but a secret@@"}}`, `key "k1": is not valid base64`},
		{"empty id", `{"active":"k1","keys":{"k1":"` + good + `","":"` + good + `"}}`, "empty key ID"},
		{"long id", `{"active":"k1","keys":{"k1":"` + good + `","` + strings.Repeat("i", 65) + `":"` + good + `"}}`, "longer than 64"},
		{"non-ASCII id", `{"active":"k1","keys":{"k1":"` + good + `","clé":"` + good + `"}}`, "printable ASCII"},
		{"control char id", `{"active":"k1","keys":{"k1":"` + good + `","a\u0007b":"` + good + `"}}`, "printable ASCII"},
		{"trailing data", `{"active":"k1","keys":{"k1":"` + good + `"}} {}`, "unexpected data"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kr, err := Parse([]byte(tc.json))
			require.Error(t, err)
			assert.Nil(t, kr)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), good)
			assert.NotContains(t, err.Error(), "secret")
		})
	}

	// Accepted: unpadded and URL-safe base64, surrounding spaces, 64-char IDs.
	id64 := strings.Repeat("i", 64)
	kr, err := Parse([]byte(`{"active":"` + id64 + `","keys":{"` + id64 + `":" ` + base64.RawURLEncoding.EncodeToString(key(0xFB)) + ` ","k2":"` + good + `"}}`))
	require.NoError(t, err)
	assert.Equal(t, key(0xFB), kr.Keys[id64])
	assert.Equal(t, []string{id64, "k2"}, kr.IDs())
}

func TestValidateDirect(t *testing.T) {
	assert.Error(t, (&Keyring{}).Validate())
	assert.Error(t, (&Keyring{Active: "a", Keys: map[string][]byte{"b": key(1)}}).Validate())
	assert.Error(t, (&Keyring{Keys: map[string][]byte{"b": key(1)}}).Validate())
	err := (&Keyring{Active: "a", Keys: map[string][]byte{"a": key(0x5A)[:31]}}).Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"a" is 31 bytes`)
	assert.NoError(t, (&Keyring{Active: "a", Keys: map[string][]byte{"a": key(1)}}).Validate())
}

func TestLoadFromEnv(t *testing.T) {
	dir := t.TempDir()
	fileRing := `{"active":"from-file","keys":{"from-file":"` + b64(key(0xF1)) + `"}}`
	envRing := `{"active":"from-env","keys":{"from-env":"` + b64(key(0xE1)) + `","old":"` + b64(key(0xE0)) + `"}}`
	path := filepath.Join(dir, "keys.json")
	require.NoError(t, os.WriteFile(path, []byte(fileRing), 0o600))

	t.Run("neither set: encryption off", func(t *testing.T) {
		t.Setenv(EnvKeysFile, "")
		t.Setenv(EnvKeys, "")
		kr, err := LoadFromEnv()
		require.NoError(t, err)
		assert.Nil(t, kr)
	})
	t.Run("inline", func(t *testing.T) {
		t.Setenv(EnvKeysFile, "")
		t.Setenv(EnvKeys, envRing)
		kr, err := LoadFromEnv()
		require.NoError(t, err)
		assert.Equal(t, "from-env", kr.Active)
		assert.Equal(t, []string{"from-env", "old"}, kr.IDs())
		assert.Equal(t, key(0xE0), kr.Keys["old"])
	})
	t.Run("file", func(t *testing.T) {
		t.Setenv(EnvKeysFile, path)
		t.Setenv(EnvKeys, "")
		kr, err := LoadFromEnv()
		require.NoError(t, err)
		assert.Equal(t, "from-file", kr.Active)
		assert.Equal(t, key(0xF1), kr.Keys["from-file"])
	})
	t.Run("file wins over inline", func(t *testing.T) {
		t.Setenv(EnvKeysFile, path)
		t.Setenv(EnvKeys, envRing)
		kr, err := LoadFromEnv()
		require.NoError(t, err)
		assert.Equal(t, "from-file", kr.Active)
		assert.NotContains(t, kr.Keys, "from-env")
	})
	t.Run("bad file does not fall back to inline", func(t *testing.T) {
		t.Setenv(EnvKeysFile, filepath.Join(dir, "missing.json"))
		t.Setenv(EnvKeys, envRing)
		kr, err := LoadFromEnv()
		require.Error(t, err)
		assert.Nil(t, kr)
		assert.Contains(t, err.Error(), EnvKeysFile)
		assert.Contains(t, err.Error(), "missing.json")
	})
	t.Run("invalid file names the variable and file", func(t *testing.T) {
		bad := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(bad, []byte(`{"active":"k","keys":{"k":"`+b64(key(0xD1)[:24])+`"}}`), 0o600))
		t.Setenv(EnvKeysFile, bad)
		t.Setenv(EnvKeys, "")
		_, err := LoadFromEnv()
		require.Error(t, err)
		assert.Contains(t, err.Error(), EnvKeysFile)
		assert.Contains(t, err.Error(), "bad.json")
		assert.Contains(t, err.Error(), "24 bytes")
		assert.NotContains(t, err.Error(), b64(key(0xD1)[:24]))
	})
	t.Run("invalid inline names the variable", func(t *testing.T) {
		t.Setenv(EnvKeysFile, "")
		t.Setenv(EnvKeys, `{"active":"nope","keys":{"k":"`+b64(key(0xD2))+`"}}`)
		_, err := LoadFromEnv()
		require.Error(t, err)
		assert.Contains(t, err.Error(), EnvKeys)
		assert.Contains(t, err.Error(), `"nope"`)
		assert.NotContains(t, err.Error(), b64(key(0xD2)))
	})
	t.Run("whitespace-only is unset", func(t *testing.T) {
		t.Setenv(EnvKeysFile, "  ")
		t.Setenv(EnvKeys, "\n")
		kr, err := LoadFromEnv()
		require.NoError(t, err)
		assert.Nil(t, kr)
	})
}

func TestErrorsAreDistinct(t *testing.T) {
	assert.False(t, errors.Is(ErrDecrypt, ErrUnknownKey))
	assert.False(t, errors.Is(ErrMalformed, ErrDecrypt))
}
