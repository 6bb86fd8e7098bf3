package decision

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// tokenOfLength is a compact JWS of exactly n bytes whose header and payload
// are a real receipt's (signed by own) and whose signature is filler: it
// parses, and does not verify.
func tokenOfLength(t *testing.T, own authority.KeyFile, n int) string {
	t.Helper()
	tok, err := Sign(own, good(t))
	require.NoError(t, err)
	header := strings.Split(tok, ".")[0]
	for pad := 0; pad < 64; pad++ {
		r := good(t)
		r.Note = strings.Repeat("n", MaxTextBytes/2+pad)
		data, err := json.Marshal(r)
		require.NoError(t, err)
		payload := base64.RawURLEncoding.EncodeToString(data)
		sig := n - len(header) - len(payload) - 2
		if sig > 0 && sig%4 != 1 { // a base64 length that decodes
			return header + "." + payload + "." + strings.Repeat("A", sig)
		}
	}
	t.Fatalf("no token of %d bytes", n)
	return ""
}

// A receipt of exactly MaxReceiptBytes is read and checked; the limit
// refuses only what is longer. PeekReceipt, which records who a refused
// attempt claimed to be, reads it too.
func TestAReceiptOfExactlyTheLimitIsRead(t *testing.T) {
	b, own, _ := testBook(t)
	tok := tokenOfLength(t, own, MaxReceiptBytes)
	require.Len(t, tok, MaxReceiptBytes)
	_, err := VerifyReceipt(tok, b, "", now, time.Hour)
	assert.Equal(t, CodeBadSignature, RefusalCode(err), "checked, not refused for its size: %v", err)
	kid, r, ok := PeekReceipt(tok)
	require.True(t, ok)
	assert.Equal(t, own.Key.KeyID, kid)
	assert.Equal(t, "claim-0042", r.ClaimID)

	longer := tokenOfLength(t, own, MaxReceiptBytes+1)
	_, err = VerifyReceipt(longer, b, "", now, time.Hour)
	assert.Equal(t, CodeTooLarge, RefusalCode(err))
	_, _, ok = PeekReceipt(longer)
	assert.False(t, ok)
}

// A receipt's times, each at its edge: valid for exactly the policy's
// longest time is allowed; an expiry at (or before) the issue time, or an
// issue time of zero, is malformed whatever the clock says.
func TestReceiptTimesAtTheirEdges(t *testing.T) {
	b, own, _ := testBook(t)
	sign := func(edit func(*Receipt)) string {
		r := good(t)
		edit(&r)
		tok, err := Sign(own, r)
		require.NoError(t, err)
		return tok
	}
	_, err := VerifyReceipt(sign(func(r *Receipt) { r.Expiry = r.IssuedAt + 3600 }), b, "", now, time.Hour)
	assert.NoError(t, err, "valid for exactly the policy's hour")

	for name, tc := range map[string]struct {
		token string
		at    time.Time
	}{
		"exp equal to iat": {sign(func(r *Receipt) { r.Expiry = r.IssuedAt }), now},
		"iat zero":         {sign(func(r *Receipt) { r.IssuedAt, r.Expiry = 0, 60 }), time.Unix(30, 0)},
	} {
		_, err := VerifyReceipt(tc.token, b, "", tc.at, time.Hour)
		assert.Equal(t, CodeMalformed, RefusalCode(err), "%s: %v", name, err)
	}
}

// A reason and a note of exactly MaxTextBytes each are carried; one byte
// more in either is refused.
func TestReceiptTextsAtTheirLimit(t *testing.T) {
	b, own, _ := testBook(t)
	r := good(t)
	r.Verdict, r.Reason, r.Note = Reject, strings.Repeat("r", MaxTextBytes), strings.Repeat("n", MaxTextBytes)
	tok, err := Sign(own, r)
	require.NoError(t, err)
	v, err := VerifyReceipt(tok, b, "", now, time.Hour)
	require.NoError(t, err)
	assert.Len(t, v.Receipt.Note, MaxTextBytes)

	r.Note += "n"
	tok, err = Sign(own, r)
	require.NoError(t, err)
	_, err = VerifyReceipt(tok, b, "", now, time.Hour)
	assert.Equal(t, CodeTooLarge, RefusalCode(err))
}

// A refused update reaches its sender as an application error whose type
// is the refusal's code; any other error has no code.
func TestRefusalCodeOfAnUpdatesError(t *testing.T) {
	assert.Equal(t, CodeOverLimit, RefusalCode(temporal.NewApplicationError("over limit", CodeOverLimit)))
	assert.Equal(t, "", RefusalCode(temporal.NewApplicationError("boom", "SomeOtherFailure")))
	assert.Equal(t, "", RefusalCode(assert.AnError))
	assert.Equal(t, "over limit", RefusalMessage(temporal.NewApplicationError("over limit", CodeOverLimit)))
}

// A name shown in a refusal or the trail is cut after 64 bytes, and only
// then.
func TestShownCutsAfter64Bytes(t *testing.T) {
	s := strings.Repeat("x", 64)
	assert.Equal(t, s, Shown(s))
	assert.Equal(t, s+"…", Shown(s+"y"))
}

// The approval pays the least amount any of its approvers approved: an
// approver may lower it, never raise it, and a vote naming no amount keeps
// the request's.
func TestPayoutIsTheLeastAmountApproved(t *testing.T) {
	a := &Approval{Request: Request{AmountMinor: 500000}}
	assert.Equal(t, int64(500000), a.PayoutMinor())
	a.Votes = []Decision{{AmountMinor: 0}, {AmountMinor: 700000}, {AmountMinor: 500000}}
	assert.Equal(t, int64(500000), a.PayoutMinor(), "no vote lowers it")
	a.Votes = append(a.Votes, Decision{AmountMinor: 420000}, Decision{AmountMinor: 450000})
	assert.Equal(t, int64(420000), a.PayoutMinor())
	a.Votes = append(a.Votes, Decision{AmountMinor: -1})
	assert.Equal(t, int64(420000), a.PayoutMinor(), "a negative amount is no amount")
}

// A hand-off goes to the colleague last named.
func TestAssignedToIsTheLastHandOff(t *testing.T) {
	a := &Approval{}
	assert.Equal(t, "", a.AssignedTo())
	a.Handoffs = []HandedOn{{To: "adjuster-17"}, {To: "supervisor-3"}}
	assert.Equal(t, "supervisor-3", a.AssignedTo())
}

// The inbox's listing shows who voted how, never a receipt or the decision,
// and a long rationale cut to 512 bytes.
func TestListingHidesReceipts(t *testing.T) {
	a := &Approval{Request: Request{Rationale: strings.Repeat("r", 512)},
		Votes:    []Decision{{Verdict: Approve, Approver: "adjuster-17", Receipt: "eyJ…", ReceiptID: "jti-1", AmountMinor: 100}},
		Decision: &Decision{Verdict: Approve, Receipt: "eyJ…"}}
	l := a.Listing()
	assert.Nil(t, l.Decision)
	require.Len(t, l.Votes, 1)
	assert.Equal(t, Decision{Verdict: Approve, Approver: "adjuster-17", AmountMinor: 100}, l.Votes[0])
	assert.Equal(t, a.Request.Rationale, l.Request.Rationale, "512 bytes are shown whole")
	a.Request.Rationale += "s"
	assert.Equal(t, strings.Repeat("r", 512)+"…", a.Listing().Request.Rationale)
	assert.Equal(t, "eyJ…", a.Votes[0].Receipt, "the wait itself keeps its receipts")
}
