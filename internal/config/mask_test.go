package config

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	sdklog "go.temporal.io/sdk/log"
)

func TestMask(t *testing.T) {
	for in, want := range map[string]string{
		"ada@example.com": "a***@example.com",
		"to Ada.Lovelace+claims@mail.example.co.uk":  "to A***@mail.example.co.uk",
		"No such destination: 'acct_1AdaLovelace42'": "No such destination: 'acct_…ce42'",
		"claim-0042:step6 and tr_1abc":               "claim-0042:step6 and tr_1abc",
	} {
		assert.Equal(t, want, Mask(in), in)
	}
}

// Whatever logs it, ours or the SDK's, by message, attribute or error, an
// address or account never reaches the log line.
func TestLogsMaskEmailsAndAccounts(t *testing.T) {
	var b bytes.Buffer
	l := slog.New(MaskHandler(slog.NewTextHandler(&b, nil))).With("claimant", "ada@example.com")
	l.Info("notified ada@example.com", "account", "acct_1AdaLovelace42",
		"error", errors.New("stripe 400: No such destination: acct_1AdaLovelace42"),
		slog.Group("claim", "email", "ada@example.com"), "to", []string{"bob@example.com"})
	sdklog.NewStructuredLogger(l).Warn("activity failed", "Error", errors.New("send to ada@example.com refused"))
	out := b.String()
	for _, secret := range []string{"ada@example.com", "bob@example.com", "acct_1AdaLovelace42", "AdaLovelace"} {
		assert.NotContains(t, out, secret)
	}
	assert.Contains(t, out, "a***@example.com")
	assert.Contains(t, out, "acct_…ce42")
}
