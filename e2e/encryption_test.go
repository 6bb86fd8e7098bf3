package e2e

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/durableclaims/durableclaims/internal/codec"
	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// With codec keys configured, nothing the server stores names the claimant
// or the amount: the raw history, read without the keys, holds only
// ciphertext. The worker and starter still process the claim end to end.
func TestClaimDataIsEncryptedInHistory(t *testing.T) {
	w := newWorld(t)
	kr, keyJSON, err := codec.GenerateKeyring("e2e-2026-11")
	require.NoError(t, err)
	w.env = append(w.env, "CODEC_KEYS="+string(keyJSON))
	worker := testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))

	id := "claim-e2e-secret"
	w.start(w.claimFile(id, "1840.00"))
	w.waitStatusEncrypted(t, id)
	w.approve(id, "adjuster-17")
	out, err := w.ctl("wait", "--closed", "--timeout", "1m", id)
	require.NoError(t, err, out)

	// Read the history raw, as anyone with access to the server would.
	var raw strings.Builder
	it := w.client.GetWorkflowHistory(context.Background(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		require.NoError(t, err)
		b, err := protojson.Marshal(e)
		require.NoError(t, err)
		raw.Write(b)
		raw.WriteByte('\n')
	}
	history := raw.String()
	require.Contains(t, history, base64.StdEncoding.EncodeToString([]byte(codec.MetadataEncodingEncrypted)), "payloads are encrypted")
	for _, secret := range []string{"Ada Lovelace", "ada@example.com", "acct_1Ada", "1840.00", "184000", "sk_test_local"} {
		for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret))} {
			assert.NotContains(t, history, form, "%q in clear in the history", secret)
		}
		assert.NotContains(t, history, base64.StdEncoding.EncodeToString([]byte(`"`+secret)), "%q as a JSON string in the history", secret)
	}

	// The claim went through, decrypted by those holding the key.
	out, err = w.ctl("show", id)
	require.NoError(t, err, out)
	assert.Contains(t, out, id+": paid, 1840.00 usd paid by transfer tr_")
	n, _ := w.transfers(id)
	assert.Equal(t, 1, n)

	// Secrets stay out of the logs too.
	logs := worker.Output()
	for _, k := range kr.Keys {
		assert.NotContains(t, logs, base64.StdEncoding.EncodeToString(k), "codec key material in the worker's logs")
	}
	assert.NotContains(t, logs, "sk_test_local", "Stripe key in the worker's logs")
	assert.Contains(t, logs, "payload encryption on")
}

// waitStatusEncrypted polls the status through claimsctl, which holds the
// keys (the test's own client does not).
func (w *world) waitStatusEncrypted(t *testing.T, id string) {
	out, err := w.ctl("wait", "--status", workflows.StatusWaiting, "--timeout", "1m", id)
	require.NoError(t, err, out)
}
