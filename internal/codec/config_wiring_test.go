package codec_test

import (
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/internal/config"
)

// noKeysGiven runs t in an empty directory, with no key file or keys in
// the environment, and the Temporal frontend on this machine.
func noKeysGiven(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv(codec.EnvKeysFile, "")
	t.Setenv(codec.EnvKeys, "")
	t.Setenv("TEMPORAL_ADDRESS", "")
}

// The binaries get their data converter from internal/config; check the
// wiring from here (internal/config has no test of its own for it).
func TestConfigDataConverter(t *testing.T) {
	t.Run("encryption on by default, keys made once on this machine", func(t *testing.T) {
		noKeysGiven(t)
		dc, err := config.DataConverter()
		require.NoError(t, err)
		p, err := dc.ToPayload(map[string]string{"email": "someone@example.org"})
		require.NoError(t, err)
		assert.Equal(t, codec.MetadataEncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
		assert.NotContains(t, string(p.Data), "someone@example.org")
		fi, err := os.Stat(config.DefaultKeysFile)
		require.NoError(t, err, "the key file is made beside the default claims store")
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		again, err := config.DataConverter() // another program, the same file
		require.NoError(t, err)
		var back map[string]string
		require.NoError(t, again.FromPayload(p, &back))
		assert.Equal(t, "someone@example.org", back["email"])
	})
	t.Run("a frontend elsewhere needs the keys given", func(t *testing.T) {
		noKeysGiven(t)
		t.Setenv("TEMPORAL_ADDRESS", "temporal.internal:7233")
		_, err := config.DataConverter()
		require.Error(t, err)
		assert.Contains(t, err.Error(), codec.EnvKeysFile)
		_, err = os.Stat(config.DefaultKeysFile)
		assert.ErrorIs(t, err, fs.ErrNotExist, "no key is made for a frontend on another machine")
	})
	t.Run("encryption off", func(t *testing.T) {
		noKeysGiven(t)
		t.Setenv("PAYLOAD_ENCRYPTION", "off")
		dc, err := config.DataConverter()
		require.NoError(t, err)
		assert.Same(t, converter.GetDefaultDataConverter(), dc)
	})
	t.Run("encryption on", func(t *testing.T) {
		_, js, err := codec.GenerateKeyring("2026-11")
		require.NoError(t, err)
		t.Setenv(codec.EnvKeysFile, "")
		t.Setenv(codec.EnvKeys, string(js))
		dc, err := config.DataConverter()
		require.NoError(t, err)
		p, err := dc.ToPayload(map[string]string{"email": "someone@example.org"})
		require.NoError(t, err)
		assert.Equal(t, codec.MetadataEncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
		assert.NotContains(t, string(p.Data), "someone@example.org")
		var back map[string]string
		require.NoError(t, dc.FromPayload(p, &back))
		assert.Equal(t, "someone@example.org", back["email"])
	})
	t.Run("bad keys stop Dial before it connects", func(t *testing.T) {
		short := base64.StdEncoding.EncodeToString([]byte("sixteen byte key"))
		t.Setenv(codec.EnvKeysFile, "")
		t.Setenv(codec.EnvKeys, `{"active":"k","keys":{"k":"`+short+`"}}`)
		_, err := config.DataConverter()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "16 bytes")
		assert.NotContains(t, err.Error(), short)

		t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // never reached
		c, err := config.Dial(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		require.Error(t, err)
		assert.Nil(t, c)
		assert.True(t, strings.Contains(err.Error(), "payload encryption keys"), err.Error())
	})
}
