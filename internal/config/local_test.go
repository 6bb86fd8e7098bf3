package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The local stack's optional files are defaults once they exist (make
// demo makes them), a variable always wins, and nothing is assumed before.
func TestLocalStackDefaults(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, v := range []string{"CLAIMS_DB", "MAIL_SPOOL", "APPROVERS_FILE", "LEDGER_KEY", "LEDGER_PUBLIC_KEY"} {
		t.Setenv(v, "")
	}
	assert.Equal(t, filepath.Join("var", "claims.db"), ClaimsDB())
	assert.Equal(t, filepath.Join("var", "mail"), MailSpool())
	assert.Empty(t, ApproversFile(), "no directory yet: the sample")
	assert.Empty(t, LedgerKey())
	assert.Empty(t, LedgerPublicKey())

	require.NoError(t, os.MkdirAll("var", 0o700))
	require.NoError(t, os.WriteFile(LocalLedgerKey+".pub", []byte("pub"), 0o600))
	assert.Empty(t, LedgerKey())
	assert.Equal(t, LocalLedgerKey+".pub", LedgerPublicKey(), "a machine that verifies but does not sign")
	for _, f := range []string{LocalApprovers, LocalLedgerKey} {
		require.NoError(t, os.WriteFile(f, []byte("x"), 0o600))
	}
	assert.Equal(t, LocalApprovers, ApproversFile())
	assert.Equal(t, LocalLedgerKey, LedgerKey())
	assert.Equal(t, LocalLedgerKey+".pub", LedgerPublicKey())

	t.Setenv("APPROVERS_FILE", "/etc/claims/approvers.json")
	t.Setenv("LEDGER_KEY", "/etc/claims/ledger.key")
	assert.Equal(t, "/etc/claims/approvers.json", ApproversFile())
	assert.Equal(t, "/etc/claims/ledger.key", LedgerKey())
	assert.Equal(t, "/etc/claims/ledger.key.pub", LedgerPublicKey())
	t.Setenv("LEDGER_PUBLIC_KEY", "/srv/ledger.pub")
	assert.Equal(t, "/srv/ledger.pub", LedgerPublicKey())
}
