package authority

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key pair from GenerateKey, written owner-only, read back, and added to
// a directory made from the sample: the directory then names who signs.
func TestKeysRoundTripThroughFilesAndTheDirectory(t *testing.T) {
	dir := t.TempDir()
	k, err := GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(k.Key.KeyID, "adjuster-17-"), k.Key.KeyID)
	path := filepath.Join(dir, "keys", "adjuster-17.key")
	require.NoError(t, k.Write(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.ErrorContains(t, k.Write(path), "never overwritten")

	back, err := ReadKeyFile(path)
	require.NoError(t, err)
	assert.Equal(t, k.Public(), back.Public())

	svc, err := GenerateKey("inbox", true)
	require.NoError(t, err)
	directory := filepath.Join(dir, "approvers.json")
	require.NoError(t, AddKey(directory, k))
	require.NoError(t, AddKey(directory, svc))
	assert.ErrorContains(t, AddKey(directory, svc), "has a key")
	stranger, err := GenerateKey("nobody", false)
	require.NoError(t, err)
	assert.ErrorContains(t, AddKey(directory, stranger), `no approver "nobody"`)

	b, err := Load(directory)
	require.NoError(t, err)
	s, ok := b.Signer(k.Key.KeyID)
	require.True(t, ok)
	assert.Equal(t, "adjuster-17", s.Approver)
	s, ok = b.Signer(svc.Key.KeyID)
	require.True(t, ok)
	assert.Equal(t, "inbox", s.Service)
	_, ok = b.Signer(stranger.Key.KeyID)
	assert.False(t, ok)
	data, err := os.ReadFile(directory)
	require.NoError(t, err)
	assert.NotContains(t, string(data), `"d"`, "no private key material in the directory")

	require.NoError(t, RemoveKey(directory, k.Key.KeyID))
	require.NoError(t, RemoveKey(directory, svc.Key.KeyID))
	assert.ErrorContains(t, RemoveKey(directory, k.Key.KeyID), "no key")
	b, err = Load(directory)
	require.NoError(t, err)
	_, ok = b.Signer(k.Key.KeyID)
	assert.False(t, ok, "revoked")
	assert.Empty(t, b.Services)
}

func TestKeyFilesReadableByOthersAreRefused(t *testing.T) {
	k, err := GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "k.key")
	require.NoError(t, k.Write(path))
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = ReadKeyFile(path)
	assert.ErrorContains(t, err, "readable by others")
}

func TestDirectoryKeysAreChecked(t *testing.T) {
	k, err := GenerateKey("a", false)
	require.NoError(t, err)
	private, err := json.Marshal(k.Key)
	require.NoError(t, err)
	public, err := json.Marshal(k.Public().JWK())
	require.NoError(t, err)
	entry := func(keys ...string) string {
		return `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"keys":[` + strings.Join(keys, ",") + `]}]}`
	}
	_, err = Parse([]byte(entry(string(public))))
	require.NoError(t, err)
	for name, doc := range map[string]string{
		"private key":   entry(string(private)),
		"duplicate kid": entry(string(public), string(public)),
		"not a JWK":     entry(`{"kty":"OKP"}`),
		"RSA-ish":       entry(`{"kty":"oct","k":"c2VjcmV0","kid":"x"}`),
		"no kid":        entry(strings.Replace(string(public), `"kid":"`+k.Key.KeyID+`",`, "", 1)),
		"service twice": `{"approvers":[],"service_keys":[{"name":"s","key":` + string(public) + `},{"name":"s","key":` + string(public) + `}]}`,
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}

// Each check of a service key and a key ID on its own, with every other
// part of the entry valid: a service needs a name of its own, of at most
// MaxIDLen characters, and a key ID is at most MaxKeyIDLen characters.
func TestServiceNamesAndKeyIDsAreCheckedOneByOne(t *testing.T) {
	jwk := func(kid string) string {
		k, err := GenerateKey("s", true)
		require.NoError(t, err)
		pub := k.Public().JWK()
		if kid != "" {
			pub.KeyID = kid
		}
		data, err := json.Marshal(pub)
		require.NoError(t, err)
		return string(data)
	}
	services := func(names ...string) string {
		var list []string
		for _, n := range names {
			list = append(list, `{"name":"`+n+`","key":`+jwk("")+`}`)
		}
		return `{"approvers":[],"service_keys":[` + strings.Join(list, ",") + `]}`
	}
	b, err := Parse([]byte(services("inbox", strings.Repeat("s", MaxIDLen))))
	require.NoError(t, err)
	assert.Len(t, b.Services, 2)
	for name, doc := range map[string]string{
		"no name":       services(""),
		"long name":     services(strings.Repeat("s", MaxIDLen+1)),
		"same name":     services("inbox", "inbox"),
		"long kid":      `{"approvers":[],"service_keys":[{"name":"s","key":` + jwk(strings.Repeat("k", MaxKeyIDLen+1)) + `}]}`,
		"long kid (ap)": `{"approvers":[{"id":"a","role":"adjuster","limits":{"usd":"1"},"keys":[` + jwk(strings.Repeat("k", MaxKeyIDLen+1)) + `]}]}`,
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
	_, err = Parse([]byte(`{"approvers":[],"service_keys":[{"name":"s","key":` + jwk(strings.Repeat("k", MaxKeyIDLen)) + `}]}`))
	assert.NoError(t, err, "a kid of exactly %d characters", MaxKeyIDLen)
}

// A key's owner becomes the start of its key ID: 1 to 64 characters, none
// of them a space, slash or quote.
func TestKeyOwnersAreNamesOfAtMost64Characters(t *testing.T) {
	k, err := GenerateKey(strings.Repeat("o", 64), false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(k.Key.KeyID, strings.Repeat("o", 64)+"-"))
	for _, owner := range []string{"", strings.Repeat("o", 65), "two words", "a/b", `a"b`} {
		_, err := GenerateKey(owner, false)
		assert.Error(t, err, "%q", owner)
	}
}

// A key file is a private key with a kid, for one approver or one service:
// a public key, a key without a kid, or a file for both or neither is
// refused, so nobody signs with a file that cannot sign or names no owner.
func TestKeyFilesAreOnePrivateKeyForOneOwner(t *testing.T) {
	k, err := GenerateKey("adjuster-17", false)
	require.NoError(t, err)
	write := func(f any) string {
		data, err := json.Marshal(f)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "k.key")
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return path
	}
	back, err := ReadKeyFile(write(k))
	require.NoError(t, err)
	assert.Equal(t, "adjuster-17", back.Approver)

	noKid := k
	noKid.Key.KeyID = ""
	both := k
	both.Service = "inbox"
	neither := k
	neither.Approver = ""
	for name, f := range map[string]any{
		"public key": map[string]any{"approver": "adjuster-17", "key": k.Public().JWK()},
		"no kid":     noKid,
		"both":       both,
		"neither":    neither,
	} {
		_, err := ReadKeyFile(write(f))
		assert.Error(t, err, name)
	}
}
