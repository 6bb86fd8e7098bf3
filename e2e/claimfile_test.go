package e2e

import (
	"context"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/durableclaims/durableclaims/testbed/testenv"
	"github.com/durableclaims/durableclaims/workflows"
)

// claimFiles lists the claim files stored for id in the world's blob store.
func (w *world) claimFiles(id string) []string {
	files, err := filepath.Glob(filepath.Join(filepath.Dir(w.store), "blobs", "claim-files", id, "*.json"))
	require.NoError(w.t, err)
	return files
}

// Every way a claim ends leaves one claim file that verifies, online
// against the store and the signed log, and offline from the bundle an
// auditor receives; after Temporal forgets the run, claimsctl show tells
// the claim from its file.
func TestEveryOutcomeLeavesOneClaimFileThatVerifies(t *testing.T) {
	w := newWorld(t)
	w.env = append(w.env, "CHECKPOINT_EVERY=1s")
	// An insurer under no jurisdiction's rules may let an unanswered
	// claim expire (docs/law.md); law_test.go holds one for a person.
	expiring := append(append([]string{}, w.env...), "APPROVAL_TTL=2s", "ESCALATION_TTL=2s", "JURISDICTION_RULES_FILE=none", "FINAL_OUTCOME=reject")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	testenv.Supervise(t, append(expiring, "CLAIMS_TASK_QUEUE=claims-expiring"), filepath.Join(w.bin, "worker"))

	auto, approved, quorum, lowered, rejected, withdrawn, expired := "claim-e2e-file-auto", "claim-e2e-file-approved",
		"claim-e2e-file-quorum", "claim-e2e-file-lowered", "claim-e2e-file-rejected", "claim-e2e-file-withdrawn", "claim-e2e-file-expired"
	// One claimant each: the review rules send a claimant's fourth claim in
	// a month to a human.
	by := func(id, amount string) string {
		return w.claimFileBy(id, amount, id+"@example.com", "acct_"+strings.ReplaceAll(strings.TrimPrefix(id, "claim-e2e-file-"), "-", ""))
	}
	w.start(by(auto, "640.00"), by(approved, "1840.00"), by(lowered, "1840.00"), by(rejected, "1840.00"), by(withdrawn, "1840.00"))
	w.start("--four-eyes-above", "1500.00", by(quorum, "1840.00"))
	opts := workflows.StartOptions(expired)
	opts.TaskQueue = "claims-expiring" // its worker's policy: nobody decides within 2 s + 2 s
	_, err := w.client.ExecuteWorkflow(context.Background(), opts, workflows.WorkflowType, workflows.ClaimInput{Claim: w.register(expired, "1840.00")})
	require.NoError(t, err)
	for _, id := range []string{approved, quorum, lowered, rejected, withdrawn} {
		w.waitStatus(id, workflows.StatusWaiting)
	}
	w.approve(approved, "adjuster-17")
	w.approve(quorum, "adjuster-17")
	out, err := w.decideRaw(quorum, w.receipt("approve", quorum, "supervisor-3"))
	require.NoError(t, err, out)
	out, err = w.decideRaw(lowered, w.receipt("approve", lowered, "adjuster-17", "--amount", "1500.00", "--reason", "the invoice says 1500.00"))
	require.NoError(t, err, out)
	out, err = w.decideRaw(rejected, w.receipt("reject", rejected, "supervisor-3", "--reason", "the invoice is for another address"))
	require.NoError(t, err, out)
	out, err = w.ctl("withdraw", withdrawn)
	require.NoError(t, err, out)

	want := map[string]string{auto: workflows.StatusPaid, approved: workflows.StatusPaid, quorum: workflows.StatusPaid, lowered: workflows.StatusPaid,
		rejected: workflows.StatusRejected, withdrawn: workflows.StatusWithdrawn, expired: workflows.StatusExpired}
	for id, status := range want {
		require.Equal(t, status, w.result(id).Status, id)
		files := w.claimFiles(id)
		if assert.Len(t, files, 1, "%s: one claim file", id) {
			fi, err := os.Stat(files[0])
			require.NoError(t, err)
			t.Logf("%s (%s): claim file of %d bytes", id, status, fi.Size())
			assert.Less(t, fi.Size(), int64(256<<10), "documents and long transcripts are by reference")
		}
	}

	// Online: each file against its row, its leaf, the store and the log.
	require.Eventually(t, func() bool {
		out, err = w.ctl("verify", "--all")
		return err == nil && !strings.Contains(out, "note:")
	}, testTimeout, pollEvery, "the worker publishes a checkpoint covering every file: %s", out)
	assert.Contains(t, out, "7 claims, log of 7 files, checkpoints up to 7: verifies")

	// What each file says, in plain words.
	for id, basis := range map[string]string{
		auto:      "Within the auto-approve limit: no human had to approve it.",
		approved:  "Approved by adjuster-17 (adjuster, receipt",
		quorum:    "Approved by supervisor-3 (supervisor, receipt",
		lowered:   "Paid 1500.00 USD by transfer",
		rejected:  "Rejected by supervisor-3 (supervisor, receipt",
		withdrawn: "The claim was withdrawn; nothing was paid.",
		expired:   "Nobody decided the request before it expired",
	} {
		dir := filepath.Join(t.TempDir(), "bundle")
		out, err := w.ctl("export", id, "--out", dir)
		require.NoError(t, err, out)
		out, err = w.ctl("verify", "--bundle", dir, "--ledger-pub", envValue(w.env, "LEDGER_KEY")+".pub")
		assert.NoError(t, err, "%s offline: %s", id, out)
		assert.Contains(t, out, basis, id)
	}
	if t.Failed() {
		return
	}

	// Temporal forgets the run; the claim file still tells it.
	out, err = w.cli("workflow", "delete", "--workflow-id", approved)
	require.NoError(t, err, out)
	require.Eventually(t, func() bool {
		_, err := w.cli("workflow", "describe", "--workflow-id", approved)
		return err != nil
	}, testTimeout, pollEvery, "the run's history is deleted")
	out, err = w.ctl("show", approved)
	require.NoError(t, err, out)
	assert.Contains(t, out, approved+": paid (read from its claim file")
	assert.Contains(t, out, "the run's history is gone from Temporal")
	assert.Contains(t, out, "Approved by adjuster-17")
	assert.Contains(t, out, "PayClaimant")
	out, err = w.ctl("audit", approved)
	require.NoError(t, err, out)
	assert.Contains(t, out, "adjuster-17", "the audit ledger is the claims store's, not Temporal's")
}

// Change one byte of a claim file, one amount in the store, one receipt in
// a bundle, swap two leaves, drop a claim file: claimsctl verify fails and
// names what and where; the untouched files verify.
func TestAttackTamperingWithTheClaimFileIsDetected(t *testing.T) {
	w := newWorld(t)
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	ids := []string{"claim-e2e-tamper-a", "claim-e2e-tamper-b", "claim-e2e-tamper-c", "claim-e2e-tamper-d"}
	for _, id := range ids { // one claimant each: a fourth claim in a month goes to a human
		w.start(w.claimFileBy(id, "640.00", id+"@example.com", "acct_"+strings.TrimPrefix(id, "claim-e2e-tamper-")))
	}
	signedID := "claim-e2e-tamper-signed"
	w.start(w.claimFile(signedID, "1840.00"))
	w.waitStatus(signedID, workflows.StatusWaiting)
	w.approve(signedID, "adjuster-17")
	for _, id := range append(ids, signedID) {
		require.Equal(t, workflows.StatusPaid, w.result(id).Status)
	}
	out, err := w.ctl("checkpoint")
	require.NoError(t, err, out)
	out, err = w.ctl("verify", "--all")
	require.NoError(t, err, out)

	verifyFails := func(args ...string) string {
		t.Helper()
		out, err := w.ctl(append([]string{"verify"}, args...)...)
		assert.Equal(t, 3, exitCode(err), out)
		assert.Contains(t, out, "DOES NOT VERIFY")
		return out
	}
	db, err := sql.Open("sqlite", "file:"+w.store)
	require.NoError(t, err)
	defer db.Close()

	// A receipt edited in the bundle an auditor received.
	bundle := filepath.Join(t.TempDir(), "bundle")
	out, err = w.ctl("export", signedID, "--out", bundle)
	require.NoError(t, err, out)
	out, err = w.ctl("verify", "--bundle", bundle)
	require.NoError(t, err, out)
	body, err := os.ReadFile(filepath.Join(bundle, "claim-file.json"))
	require.NoError(t, err)
	i := strings.Index(string(body), `"receipt": "`)
	require.Positive(t, i)
	j := i + len(`"receipt": "`) + 40
	body[j] ^= 1
	require.NoError(t, os.WriteFile(filepath.Join(bundle, "claim-file.json"), body, 0o600))
	out = verifyFails("--bundle", bundle)
	assert.Contains(t, out, "is not claim file")
	assert.Contains(t, out, "receipt")

	// One byte of a stored claim file.
	files := w.claimFiles(ids[0])
	require.Len(t, files, 1)
	stored, err := os.ReadFile(files[0])
	require.NoError(t, err)
	k := strings.Index(string(stored), `"basis": "Paid `) + len(`"basis": "Paid `)
	stored[k] = '9'
	require.NoError(t, os.Chmod(files[0], 0o600))
	require.NoError(t, os.WriteFile(files[0], stored, 0o600))
	out = verifyFails(ids[0])
	assert.Contains(t, out, ids[0]+" file://")
	assert.Contains(t, out, "the claim file was changed")
	out, err = w.ctl("verify", ids[2])
	assert.NoError(t, err, "an untouched claim file still verifies: %s", out)

	// One amount in the store.
	_, err = db.Exec(`UPDATE payouts SET amount_minor = 6400000 WHERE claim_id = ?`, ids[1])
	require.NoError(t, err)
	out = verifyFails(ids[1])
	assert.Contains(t, out, ids[1]+" store payouts: 6400000 by")

	// Two leaves swapped.
	var ia, ib int
	require.NoError(t, db.QueryRow(`SELECT log_index FROM claim_files WHERE claim_id = ?`, ids[2]).Scan(&ia))
	require.NoError(t, db.QueryRow(`SELECT log_index FROM claim_files WHERE claim_id = ?`, ids[3]).Scan(&ib))
	for _, q := range []struct {
		id  string
		idx int
	}{{ids[2], -1}, {ids[3], ia}, {ids[2], ib}} {
		_, err = db.Exec(`UPDATE claim_files SET log_index = ? WHERE claim_id = ?`, q.idx, q.id)
		require.NoError(t, err)
	}
	out = verifyFails("--all")
	assert.Contains(t, out, "store claim_files: its first 5 leaves are not the log checkpoint 5 signed")

	// A claim file dropped from the blob store, and its row.
	require.NoError(t, os.Remove(w.claimFiles(signedID)[0]))
	out = verifyFails(signedID)
	assert.Contains(t, out, signedID+" blob store: the claim file cannot be read")
	_, err = db.Exec(`DELETE FROM claim_files WHERE claim_id = ?`, signedID)
	require.NoError(t, err)
	out = verifyFails("--all")
	assert.Contains(t, out, "store claim_files: holds 4 claim files, checkpoint 5 signed 5: claim files were removed")
}

// On a real S3 server with Object Lock, a claim file is written under
// compliance-mode retention: neither deleted nor shortened before it ends,
// and an overwrite only adds a version, which verify then finds changed.
func TestClaimFilesOnS3AreLockedForTheirRetention(t *testing.T) {
	s3srv := testenv.S3(t)
	w := newWorld(t)
	bucket := s3srv.LockedBucket(t, "claim-files")
	for i, kv := range w.env {
		if strings.HasPrefix(kv, "BLOB_URL=") {
			w.env[i] = "BLOB_URL=" + bucket
		}
	}
	w.env = append(append(w.env, s3srv.Env...), "CLAIM_FILE_LOCK=compliance", "CLAIM_FILE_RETENTION=1h")
	testenv.Supervise(t, w.env, filepath.Join(w.bin, "worker"))
	id := "claim-e2e-s3"
	w.start(w.claimFile(id, "640.00"))
	require.Equal(t, workflows.StatusPaid, w.result(id).Status)
	out, err := w.ctl("checkpoint")
	require.NoError(t, err, out)
	out, err = w.ctl("verify", id)
	require.NoError(t, err, out)

	ctx := context.Background()
	listed, err := s3srv.Client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String("claim-files"), Prefix: aws.String("claim-files/" + id + "/")})
	require.NoError(t, err)
	require.Len(t, listed.Versions, 1, "one claim file")
	key, version := listed.Versions[0].Key, listed.Versions[0].VersionId
	ret, err := s3srv.Client.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: aws.String("claim-files"), Key: key, VersionId: version})
	require.NoError(t, err)
	assert.Equal(t, s3types.ObjectLockRetentionModeCompliance, ret.Retention.Mode)
	assert.WithinDuration(t, time.Now().Add(time.Hour), *ret.Retention.RetainUntilDate, 2*time.Minute)

	_, err = s3srv.Client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("claim-files"), Key: key, VersionId: version})
	assert.ErrorContains(t, err, "AccessDenied", "the locked version cannot be deleted")
	shorter := time.Now().Add(time.Minute)
	_, err = s3srv.Client.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: aws.String("claim-files"), Key: key, VersionId: version,
		Retention:                 &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeGovernance, RetainUntilDate: &shorter},
		BypassGovernanceRetention: aws.Bool(true)})
	assert.ErrorContains(t, err, "AccessDenied", "nor its retention shortened")

	_, err = s3srv.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("claim-files"), Key: key, Body: strings.NewReader(`{"claim_id":"forged"}`)})
	require.NoError(t, err, "S3 takes an overwrite as a new version")
	out, err = w.ctl("verify", id)
	assert.Equal(t, 3, exitCode(err), out)
	assert.Contains(t, out, "the claim file was changed")
	orig, err := s3srv.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("claim-files"), Key: key, VersionId: version})
	require.NoError(t, err, "the locked version is still there")
	body, err := io.ReadAll(orig.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"claim_id": "`+id+`"`)
}
