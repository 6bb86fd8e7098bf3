package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/store"
)

// archive is what claimsctl verify reads, in a directory of its own: the
// claims store, the blob store and the insurer's ledger key, named by the
// environment as an operator names them.
type archive struct {
	t      *testing.T
	st     *store.Store
	bs     *blobs.Store
	ledger claimfile.LedgerKey
}

const archiveClaim = "claim-0042"

func newArchive(t *testing.T) *archive {
	t.Helper()
	dir := t.TempDir()
	ledger, public := ledgerKey(t)
	t.Setenv("CLAIMS_DB", filepath.Join(dir, "claims.db"))
	t.Setenv("BLOB_URL", "file://"+filepath.Join(dir, "blobs")+"?create_dir=true")
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	t.Setenv("LEDGER_PUBLIC_KEY", public)
	st, err := store.Open(filepath.Join(dir, "claims.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	bs, err := blobs.Open(context.Background(), os.Getenv("BLOB_URL"))
	require.NoError(t, err)
	t.Cleanup(func() { bs.Close() })
	return &archive{t: t, st: st, bs: bs, ledger: ledger}
}

// ledgerKey makes a ledger key pair: the key, and the path of its public
// half.
func ledgerKey(t *testing.T) (claimfile.LedgerKey, string) {
	t.Helper()
	private, public, err := claimfile.GenerateLedgerKey("insurer-claim-files")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ledger.key")
	require.NoError(t, os.WriteFile(path, []byte(private), 0o600))
	require.NoError(t, os.WriteFile(path+".pub", []byte(public+"\n"), 0o644))
	key, err := claimfile.ReadLedgerKey(path)
	require.NoError(t, err)
	return key, path + ".pub"
}

// rejected is the claim file of a rejected claim, sealed with its record's
// digest, the claim closed rejected in the claims store.
func (r *archive) rejected() claimfile.File {
	r.t.Helper()
	ctx := context.Background()
	_, _, err := r.st.PutClaim(ctx, claim.Claim{ID: archiveClaim, PolicyID: "pol-1001", AmountMinor: 184000, Currency: "usd",
		Description: "A burst pipe", Claimant: claim.Claimant{Name: "Ada Lovelace", Email: "ada@example.com", StripeAccount: "acct_1Ada"}})
	require.NoError(r.t, err)
	_, _, err = r.st.CloseClaim(ctx, archiveClaim, claim.StepKey(archiveClaim, claim.StepClose), "rejected", "", 0)
	require.NoError(r.t, err)
	record := []byte(`{"claim_id":"` + archiveClaim + `","outcome":"rejected","reason":"the invoice is for another address","payout_minor":0,"currency":"usd"}`)
	sum := sha256.Sum256(record)
	return claimfile.File{Schema: claimfile.Schema, ClaimID: archiveClaim, Namespace: "default", Outcome: "rejected", Record: record,
		RecordSHA256: hex.EncodeToString(sum[:])}
}

// keep stores f as step 9 does: in the blob store under its digest, and
// logged in the claims store's row; edit changes the blob's key or the row
// first.
func (r *archive) keep(f claimfile.File, edit func(key *string, row *store.ClaimFile)) {
	r.t.Helper()
	ctx := context.Background()
	body, err := claimfile.Encode(f)
	require.NoError(r.t, err)
	sha := claimfile.Digest(body)
	key := activities.ClaimFileKey(f.ClaimID, sha)
	row := store.ClaimFile{ClaimID: f.ClaimID, RunID: "run-1", Key: claim.StepKey(f.ClaimID, claim.StepAudit).Sub("claim-file"), SHA256: sha,
		Size: int64(len(body)), LeafHash: hex.EncodeToString(claimfile.LeafHash(body)), Outcome: f.Outcome, RetainUntil: time.Now().Add(time.Hour)}
	if edit != nil {
		edit(&key, &row)
	}
	ref, err := r.bs.PutRecord(ctx, key, body, row.RetainUntil)
	require.NoError(r.t, err)
	row.URI = ref.URI
	_, _, err = r.st.AppendClaimFile(ctx, row)
	require.NoError(r.t, err)
}

// sign publishes a checkpoint of the log as the claims store holds it,
// signed by key, after edit changes the leaves it signs.
func (r *archive) sign(key claimfile.LedgerKey, edit func(leaves [][]byte)) {
	r.t.Helper()
	ctx := context.Background()
	_, leaves, err := claimfile.Leaves(ctx, r.st)
	require.NoError(r.t, err)
	if edit != nil {
		edit(leaves)
	}
	cp, err := key.Sign(claimfile.Origin("default"), leaves)
	require.NoError(r.t, err)
	_, err = r.bs.PutRecord(ctx, claimfile.CheckpointKey(cp.Size), cp.Note, time.Now().Add(time.Hour))
	require.NoError(r.t, err)
}

// verify runs claimsctl verify --json on the claim and returns its exit
// code and the checks its answer names as failed, each once.
func (r *archive) verify() (int, []string, string) {
	r.t.Helper()
	var stdout, stderr bytes.Buffer
	code := run([]string{"verify", "--json", archiveClaim}, &stdout, &stderr)
	var answer struct {
		Problems claimfile.Problems `json:"problems"`
	}
	require.NoError(r.t, json.Unmarshal(stdout.Bytes(), &answer), "%s%s", stdout.String(), stderr.String())
	var checks []string // a problem of no named check counts as ""
	for _, p := range answer.Problems {
		if !slices.Contains(checks, p.Check) {
			checks = append(checks, p.Check)
		}
	}
	return code, checks, stdout.String()
}

// Each check claimsctl verify makes that a claim file is the one the run
// wrote and the log holds fails on its own: a file that passes every other
// check (made wrong before it was stored, logged and signed) fails exactly
// that one, verify exits 3, and its answer names the check. The lines
// each case guards: the blob digest and the store's digest and the log
// leaf in verifyOne (claimsctl/claimfile.go), the record hash in
// claimfile.File.Check, the inclusion (the store's leaves against the
// signed root) and the signed checkpoint in verify.
func TestVerifyNamesEachCheckThatFails(t *testing.T) {
	honest := newArchive(t)
	honest.keep(honest.rejected(), nil)
	honest.sign(honest.ledger, nil)
	code, checks, out := honest.verify()
	require.Zero(t, code, out)
	require.Empty(t, checks, out)

	another := strings.Repeat("5e", 32)
	for _, tc := range []struct {
		check string
		file  func(*claimfile.File)
		keep  func(key *string, row *store.ClaimFile)
		sign  func(*archive) (claimfile.LedgerKey, func([][]byte))
	}{
		{check: claimfile.CheckRecordHash, file: func(f *claimfile.File) {
			f.Record = []byte(strings.Replace(string(f.Record), "another address", "another claimant", 1)) // after the ledger took its digest
		}},
		{check: claimfile.CheckBlobDigest, keep: func(key *string, _ *store.ClaimFile) {
			*key = activities.ClaimFileKey(archiveClaim, another) // kept under a name that is not its digest
		}},
		{check: claimfile.CheckStoreDigest, keep: func(_ *string, row *store.ClaimFile) { row.SHA256 = another }},
		{check: claimfile.CheckLogLeaf, keep: func(_ *string, row *store.ClaimFile) { row.LeafHash = another }}, // and logged so
		{check: claimfile.CheckInclusion, sign: func(r *archive) (claimfile.LedgerKey, func([][]byte)) {
			return r.ledger, func(leaves [][]byte) { leaves[0], _ = hex.DecodeString(another) } // the log signed held another file
		}},
		{check: claimfile.CheckCheckpoint, sign: func(r *archive) (claimfile.LedgerKey, func([][]byte)) {
			rogue, _ := ledgerKey(t) // the insurer's key's name, not its key
			return rogue, nil
		}},
	} {
		r := newArchive(t)
		f := r.rejected()
		if tc.file != nil {
			tc.file(&f)
		}
		r.keep(f, tc.keep)
		key, leaves := r.ledger, func([][]byte) {}
		if tc.sign != nil {
			key, leaves = tc.sign(r)
		}
		r.sign(key, leaves)
		code, checks, out := r.verify()
		assert.Equal(t, 3, code, "%s: %s", tc.check, out)
		assert.Equal(t, []string{tc.check}, checks, "%s: only that check fails: %s", tc.check, out)
	}
}
