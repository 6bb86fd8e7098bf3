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
