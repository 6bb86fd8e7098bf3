package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	historypb "go.temporal.io/api/history/v1"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claimfile"
)

// claimFileRun is an Activities that writes claim files, from a history
// that counts how often it is read.
func claimFileRun(t *testing.T) (*Activities, *int) {
	t.Helper()
	a := newActivities(t, nil)
	withBlobs(t, a)
	reads := new(int)
	a.ClaimFiles.History = func(_ context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, error) {
		*reads++
		return nil, nil
	}
	return a, reads
}

// storedFile reads a claim file back from the blob store by the reference
// step 9 answered with: its bytes must hash to the digest the store holds.
func storedFile(t *testing.T, a *Activities, ref *ClaimFileRef) claimfile.File {
	t.Helper()
	require.NotNil(t, ref, "step 9 wrote a claim file")
	held, err := a.Store.ClaimFileOfRun(context.Background(), "claim-0042", testRun)
	require.NoError(t, err)
	assert.Equal(t, held.SHA256, ref.SHA256)
	body, err := a.Blobs.Get(context.Background(), blobs.Ref{URI: ref.URI, SHA256: ref.SHA256, Size: held.Size}, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, ref.SHA256, claimfile.Digest(body))
	var f claimfile.File
	require.NoError(t, json.Unmarshal(body, &f))
	return f
}

// Step 9 writes the run's claim file once: a retry finds it recorded and
// answers with the same file without reading the history again, and the
// file is kept ten years unless the worker says otherwise (claimfile.go,
// writeClaimFile; WriteAudit's History and Blobs condition).
func TestARunWritesOneClaimFileKeptTenYears(t *testing.T) {
	a, reads := claimFileRun(t)
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	closedAs(t, a, c.ID, "rejected")
	in := AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: json.RawMessage(`{"claim_id":"claim-0042","outcome":"rejected"}`)}
	first, err := run[AuditResult](t, a, a.WriteAudit, in)
	require.NoError(t, err)
	f := storedFile(t, a, first.ClaimFile)
	assert.Equal(t, testRun, f.RunID)
	assert.Equal(t, "rejected", f.Outcome)
	assert.Equal(t, first.SHA256, f.RecordSHA256)
	assert.Equal(t, DefaultClaimFileRetention, f.RetainUntil.Sub(f.WrittenAt))

	again, err := run[AuditResult](t, a, a.WriteAudit, in)
	require.NoError(t, err)
	assert.Equal(t, first.ClaimFile, again.ClaimFile, "one claim file per run")
	assert.Equal(t, 1, *reads, "a recorded file is answered, not written again")
}

func TestAClaimFileIsKeptAsLongAsTheWorkerSays(t *testing.T) {
	a, _ := claimFileRun(t)
	a.ClaimFiles.Retention = 7 * 365 * 24 * time.Hour
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	closedAs(t, a, c.ID, "rejected")
	res, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID,
		Record: json.RawMessage(`{"claim_id":"claim-0042","outcome":"rejected"}`)})
	require.NoError(t, err)
	f := storedFile(t, a, res.ClaimFile)
	assert.Equal(t, a.ClaimFiles.Retention, f.RetainUntil.Sub(f.WrittenAt))
}

// A history the server cannot give leaves no claim file and a retryable
// error: the next attempt writes it (claimfile.go, the History error).
func TestNoClaimFileWithoutTheRunsHistory(t *testing.T) {
	a, _ := claimFileRun(t)
	a.ClaimFiles.History = func(context.Context, string, string) ([]*historypb.HistoryEvent, error) {
		return nil, errors.New("frontend unavailable")
	}
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	closedAs(t, a, c.ID, "rejected")
	_, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID,
		Record: json.RawMessage(`{"claim_id":"claim-0042","outcome":"rejected"}`)})
	require.Error(t, err)
	assert.False(t, nonRetryableErr(err), "retryable: the next attempt writes it")
	_, err = a.Store.ClaimFileOfRun(context.Background(), c.ID, testRun)
	assert.Error(t, err, "no claim file recorded")
}

// A claim file carries the public key of each receipt that decided it,
// once, with whose it was, so claimsctl verify checks the receipts
// offline; a key the directory no longer lists is not vouched for
// (claimfile.go, receiptKeys).
func TestAClaimFileCarriesTheKeysOfItsReceipts(t *testing.T) {
	a, _ := claimFileRun(t)
	k := keys(t, a)
	k17, k9 := k["adjuster-17"].Key.KeyID, k["adjuster-9"].Key.KeyID
	c := registerFor(t, a, "claim-0042", 64000, testRun)
	closedAs(t, a, c.ID, "paid")
	record := fmt.Sprintf(`{"claim_id":"claim-0042","outcome":"paid","approvals":[`+
		`{"votes":[{"kid":%q},{"kid":%q}],"decision":{"kid":%q}},{"decision":{"kid":"revoked-key"}},{"votes":[{}]}]}`, k17, k9, k17)
	res, err := run[AuditResult](t, a, a.WriteAudit, AuditInput{Key: "claim-0042:step9", ClaimID: c.ID, Record: json.RawMessage(record)})
	require.NoError(t, err)
	f := storedFile(t, a, res.ClaimFile)
	require.Len(t, f.Keys, 2)
	assert.Equal(t, []string{k17, k9}, []string{f.Keys[0].ID, f.Keys[1].ID})
	assert.Equal(t, []string{"adjuster-17", "adjuster-9"}, []string{f.Keys[0].Approver, f.Keys[1].Approver})
	for _, key := range f.Keys {
		var jwk jose.JSONWebKey
		require.NoError(t, jwk.UnmarshalJSON(key.JWK))
		assert.True(t, jwk.IsPublic(), "the public half only")
		assert.Equal(t, key.ID, jwk.KeyID)
	}
}
