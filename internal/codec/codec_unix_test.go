//go:build unix

package codec

// Key-file permission checks: Unix permission bits, so these build only
// where they exist (the check itself is off on Windows, keyring.go).

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeKeyFile writes a key file with exactly mode perm (chmod, so the
// umask cannot change it).
func writeKeyFile(t *testing.T, path, content string, perm os.FileMode) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	require.NoError(t, os.Chmod(path, perm))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, perm, fi.Mode().Perm())
}

// A key file group or others may read (or write) is refused, naming the
// file, its mode and the fix; owner-only modes load.
func TestLoadFileRefusesKeyFileOthersCanAccess(t *testing.T) {
	dir := t.TempDir()
	ring := `{"active":"k","keys":{"k":"` + b64(key(0xC3)) + `"}}`

	for _, perm := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o666, 0o620, 0o602, 0o610, 0o601, 0o444, 0o440, 0o404, 0o700 | 0o007} {
		t.Run(fmt.Sprintf("%04o refused", perm), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("keys-%04o.json", perm))
			writeKeyFile(t, path, ring, perm)
			kr, err := LoadFile(path)
			require.Error(t, err)
			assert.Nil(t, kr)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), fmt.Sprintf("%04o", perm))
			assert.Contains(t, err.Error(), "chmod 600 "+path)
			assert.NotContains(t, err.Error(), b64(key(0xC3)))

			t.Setenv(EnvKeysFile, path)
			t.Setenv(EnvKeys, "")
			_, err = LoadFromEnv()
			require.Error(t, err)
			assert.Contains(t, err.Error(), EnvKeysFile)
			assert.Contains(t, err.Error(), "chmod 600")
		})
	}
	for _, perm := range []os.FileMode{0o600, 0o400, 0o700} {
		t.Run(fmt.Sprintf("%04o accepted", perm), func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("ok-%04o.json", perm))
			writeKeyFile(t, path, ring, perm)
			kr, err := LoadFile(path)
			require.NoError(t, err)
			assert.Equal(t, key(0xC3), kr.Keys["k"])
		})
	}
}

// The mode that counts is the file's, not a symlink's (Kubernetes mounts
// secrets through symlinks, which are always 0777).
func TestLoadFileChecksSymlinkTarget(t *testing.T) {
	dir := t.TempDir()
	ring := `{"active":"k","keys":{"k":"` + b64(key(0xC4)) + `"}}`
	target := filepath.Join(dir, "target.json")
	link := filepath.Join(dir, "keys.json")
	writeKeyFile(t, target, ring, 0o600)
	require.NoError(t, os.Symlink(target, link))
	kr, err := LoadFile(link)
	require.NoError(t, err)
	assert.Equal(t, "k", kr.Active)

	require.NoError(t, os.Chmod(target, 0o644))
	_, err = LoadFile(link)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "0644")
}
