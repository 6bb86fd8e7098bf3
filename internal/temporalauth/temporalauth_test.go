package temporalauth

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A token verifies with the published key set and names its role's
// permissions; a saved issuer signs tokens the same key set verifies; the
// key file is never replaced.
func TestTokensVerifyWithTheKeySetAndNameTheirPermissions(t *testing.T) {
	is, err := New()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "signing-key.jwk")
	require.NoError(t, is.Save(path))
	assert.Error(t, is.Save(path), "an issuer's key is never overwritten")
	again, err := Load(path)
	require.NoError(t, err)
	raw, err := again.JWKS()
	require.NoError(t, err)
	var set jose.JSONWebKeySet
	require.NoError(t, json.Unmarshal(raw, &set))
	require.Len(t, set.Keys, 1)
	assert.True(t, set.Keys[0].IsPublic(), "the key set holds the public half only")

	for role, want := range map[string][]string{
		RoleWorker: {"claims:write"}, RoleReader: {"claims:read"}, RoleAdmin: {"temporal-system:admin", "claims:admin"},
	} {
		tok, err := is.Token(role, "claims", time.Now(), time.Hour)
		require.NoError(t, err)
		parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.ES256})
		require.NoError(t, err)
		require.Equal(t, is.KeyID(), parsed.Headers[0].KeyID, "the server finds the key by kid")
		var std jwt.Claims
		var extra struct {
			Permissions []string `json:"permissions"`
		}
		keys := set.Key(parsed.Headers[0].KeyID)
		require.Len(t, keys, 1)
		require.NoError(t, parsed.Claims(keys[0].Key, &std, &extra))
		require.NoError(t, std.Validate(jwt.Expected{Time: time.Now()}))
		assert.Equal(t, Subject(role), std.Subject)
		assert.Equal(t, want, extra.Permissions, role)
	}
	_, err = is.Token(RoleWorker, "claims", time.Now(), 0)
	assert.Error(t, err)
}
