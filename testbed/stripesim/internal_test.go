package stripesim

import (
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCurrenciesSortedForBinarySearch(t *testing.T) {
	assert.True(t, slices.IsSorted(currencies))
	assert.Equal(t, len(currencies), len(slices.Compact(slices.Clone(currencies))), "no duplicates")
}

func TestMaskKey(t *testing.T) {
	assert.Equal(t, "sk_test_****cdef", maskKey("sk_test_0123456789abcdef"))
	assert.Equal(t, "rk_live_****wxyz", maskKey("rk_live_wxyz0wxyz"))
	assert.Equal(t, "****", maskKey("abc"))
	assert.Equal(t, "****7890", maskKey("garbage1234567890"))
}

func TestFingerprintIgnoresParameterOrder(t *testing.T) {
	a, _ := url.ParseQuery("amount=1&currency=usd&metadata[a]=1&metadata[b]=2")
	b, _ := url.ParseQuery("metadata[b]=2&currency=usd&metadata[a]=1&amount=1")
	c, _ := url.ParseQuery("amount=2&currency=usd&metadata[a]=1&metadata[b]=2")
	assert.Equal(t, fingerprint("POST", "/v1/transfers", a), fingerprint("POST", "/v1/transfers", b))
	assert.NotEqual(t, fingerprint("POST", "/v1/transfers", a), fingerprint("POST", "/v1/transfers", c))
}

func TestFileDatabaseUsesWAL(t *testing.T) {
	s, err := Open(Config{DBPath: filepath.Join(t.TempDir(), "sub.db"), Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer s.Close()
	var mode string
	require.NoError(t, s.store.db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "wal", mode)
	var version int
	require.NoError(t, s.store.db.QueryRow("PRAGMA user_version").Scan(&version))
	assert.Equal(t, schemaVersion, version)
}
