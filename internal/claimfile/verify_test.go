package claimfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	deploymentpb "go.temporal.io/api/deployment/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/durableclaims/durableclaims/internal/insurer"
)

// provenanceFile is the claim file of a claim the rules rejected, from a
// run that recorded what made its decisions; edit changes its record (as
// JSON) before the file is sealed with the record's digest.
func provenanceFile(t *testing.T, editRecord func(map[string]any), editIntake func(map[string]any)) File {
	t.Helper()
	rules := insurer.Defaults()
	intake := map[string]any{"claim": map[string]any{"claim_id": "claim-1"}, "status": "open", "version": 1,
		"rules": rules, "policy_version": rules.Version()}
	if editIntake != nil {
		editIntake(intake)
	}
	output := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	record := map[string]any{"claim_id": "claim-1", "outcome": "rejected", "payout_minor": 0, "currency": "usd",
		"policy_version": rules.Version(),
		"models": []map[string]any{
			{"step": 2, "turn": 1, "model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "t1"},
			{"step": 2, "turn": 2, "model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "t2"},
		},
		"decided": map[string]any{"by": "rules", "verdict": "reject", "build_id": "build-B", "policy_version": rules.Version(),
			"model_answers": []string{"t2"}},
	}
	if editRecord != nil {
		editRecord(record)
	}
	rec := output(record)
	sum := sha256.Sum256(rec)
	return File{Schema: Schema, ClaimID: "claim-1", Outcome: "rejected", Record: rec, RecordSHA256: hex.EncodeToString(sum[:]),
		Steps: []Step{
			{Activity: "LoadClaim", Local: true, Outcome: "completed", Output: output(intake)},
			{Activity: "TriageTurn", Local: true, Outcome: "completed",
				Output: output(map[string]any{"model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "t1"})},
			{Activity: "TriageTurn", Local: true, Outcome: "completed",
				Output: output(map[string]any{"model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "t2"})},
		},
		Timeline: []Event{{ID: 4, Type: "WORKFLOW_TASK_COMPLETED", BuildID: "build-A"}, {ID: 12, Type: "WORKFLOW_TASK_COMPLETED", BuildID: "build-B"}},
	}
}

// A claim file whose record names the policy, builds and prompt versions
// its history holds verifies; each of them changed is a problem named.
func TestClaimFilesHoldWhatMadeTheDecisionToTheHistory(t *testing.T) {
	assert.Empty(t, provenanceFile(t, nil, nil).Check(), "the honest file")
	for _, tc := range []struct {
		name         string
		record       func(map[string]any)
		intake       func(map[string]any)
		where, wants string
	}{
		{name: "another policy version in the record", record: func(r map[string]any) { r["policy_version"] = "sha256:" + strings.Repeat("0", 64) },
			where: "record policy_version", wants: "the rules intake recorded digest to"},
		{name: "the rules edited after intake", intake: func(in map[string]any) {
			r := insurer.Defaults()
			r.AutoApproveLimit = "99999"
			in["rules"] = r
		}, where: "record policy_version", wants: "the rules intake recorded digest to"},
		{name: "a decision under another policy", record: func(r map[string]any) {
			r["decided"].(map[string]any)["policy_version"] = "sha256:" + strings.Repeat("1", 64)
		}, where: "record decided", wants: "follows policy sha256:111111111111"},
		{name: "a decision by a build that ran no task", record: func(r map[string]any) { r["decided"].(map[string]any)["build_id"] = "build-Z" },
			where: "record decided", wants: "names build build-Z, which completed no workflow task"},
		{name: "an answer under another prompt", record: func(r map[string]any) {
			r["models"].([]map[string]any)[1]["prompt_version"] = "rules-2"
		}, where: "record models step 2 turn 2", wants: "prompt rules-2"},
		{name: "an answer the record does not list", record: func(r map[string]any) {
			r["decided"].(map[string]any)["model_answers"] = []string{"t9"}
		}, where: "record decided", wants: "rests on model answer t9"},
	} {
		ps := provenanceFile(t, tc.record, tc.intake).Check()
		if assert.NotEmpty(t, ps, tc.name) {
			assert.Equal(t, tc.where, ps[0].Where, tc.name)
			assert.Contains(t, ps[0].What, tc.wants, tc.name)
		}
	}
}

// Files of runs that recorded none of it (every file before) still verify.
func TestOlderClaimFilesNeedNoProvenance(t *testing.T) {
	f := provenanceFile(t, func(r map[string]any) {
		delete(r, "policy_version")
		delete(r, "decided")
		for _, m := range r["models"].([]map[string]any) {
			delete(m, "prompt_version")
			delete(m, "build_id")
		}
	}, func(in map[string]any) { delete(in, "policy_version") })
	f.Timeline = []Event{{ID: 4, Type: "WORKFLOW_TASK_COMPLETED"}}
	assert.Empty(t, f.Check())
}

// The timeline names the build that completed each workflow task, read
// where the server records it.
func TestTheTimelineNamesEachTasksBuild(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	completed := func(id int64, a *historypb.WorkflowTaskCompletedEventAttributes) *historypb.HistoryEvent {
		e := &historypb.HistoryEvent{EventId: id, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED}
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: a}
		return e
	}
	events := []*historypb.HistoryEvent{
		//lint:ignore SA1019 what servers without worker deployments record, as the recorded histories show
		completed(4, &historypb.WorkflowTaskCompletedEventAttributes{WorkerVersion: &commonpb.WorkerVersionStamp{BuildId: "8b62c2a863fe"}}),
		completed(9, &historypb.WorkflowTaskCompletedEventAttributes{DeploymentVersion: &deploymentpb.WorkerDeploymentVersion{BuildId: "v42", DeploymentName: "claims"}}),
		completed(14, &historypb.WorkflowTaskCompletedEventAttributes{}),
		//lint:ignore SA1019 what servers recorded before deployment versions had their own message
		completed(19, &historypb.WorkflowTaskCompletedEventAttributes{WorkerDeploymentVersion: "claims.v43"}),
		//lint:ignore SA1019 a deployment named with no build: the worker version stamp's
		completed(24, &historypb.WorkflowTaskCompletedEventAttributes{WorkerDeploymentVersion: "claims.", WorkerVersion: &commonpb.WorkerVersionStamp{BuildId: "8b62c2a863fe"}}),
	}
	for _, e := range events {
		e.EventTime = timestamppbOf(at)
	}
	var f File
	f.FromHistory(events, converter.GetDefaultDataConverter())
	var builds []string
	for _, e := range f.Timeline {
		builds = append(builds, e.BuildID)
	}
	assert.Equal(t, []string{"8b62c2a863fe", "v42", "", "v43", "8b62c2a863fe"}, builds)
	body, err := Encode(f)
	require.NoError(t, err)
	assert.Equal(t, 4, bytes.Count(body, []byte(`"build_id"`)), "a task with no build names none")
}

func timestamppbOf(t time.Time) *timestamppb.Timestamp { return timestamppb.New(t) }

// bundleOf is f as an auditor receives it: its bytes as logged, leaf 1 of
// a log of three claim files, the checkpoint key signed, the inclusion
// proof against it, and public as the bundle's ledger.pub.
func bundleOf(t *testing.T, f File, key LedgerKey, public string) Bundle {
	t.Helper()
	body, err := Encode(f)
	require.NoError(t, err)
	leaves := [][]byte{LeafHash([]byte(`{"claim_id":"claim-0"}`)), LeafHash(body), LeafHash([]byte(`{"claim_id":"claim-2"}`))}
	origin := Origin(f.Namespace)
	cp, err := key.Sign(origin, leaves)
	require.NoError(t, err)
	hashes, err := InclusionProof(leaves, 1, uint64(len(leaves)))
	require.NoError(t, err)
	return Bundle{File: body, Proof: NewProof(origin, 1, uint64(len(leaves)), hashes), Checkpoint: cp.Note, LedgerKey: public}
}

// checksFailed lists the named checks of ps, each once.
func checksFailed(ps Problems) []string {
	var out []string
	for _, p := range ps {
		if p.Check != "" && !slices.Contains(out, p.Check) {
			out = append(out, p.Check)
		}
	}
	return out
}

// Each check of a bundle an auditor verifies offline fails on its own: a
// bundle that passes every other check (made wrong before it was sealed,
// logged and signed) fails exactly that one, and Verify names it. The
// record hash is File.Check's `sha256(record) != record_sha256`, the
// inclusion proof and the signed checkpoint Verify's. (The checks that
// need the stores, blob and store digests and the log leaf, are claimsctl
// verify's: TestVerifyNamesEachCheckThatFails.)
func TestEachCheckOfABundleFailsOnItsOwn(t *testing.T) {
	key, public := testLedger(t)
	honest := provenanceFile(t, nil, nil)
	_, ps := Verify(bundleOf(t, honest, key, public), public)
	require.Empty(t, ps, "the honest bundle verifies")

	rogue, roguePublic := testLedger(t) // the same name, another key
	for _, tc := range []struct {
		name, check string
		bundle      func() Bundle
	}{
		{"the record edited after the ledger took its digest", CheckRecordHash, func() Bundle {
			f := honest
			var rec map[string]any
			require.NoError(t, json.Unmarshal(f.Record, &rec))
			rec["reason"] = "rejected: written in afterwards"
			f.Record, _ = json.Marshal(rec)
			return bundleOf(t, f, key, public)
		}},
		{"a proof of another leaf", CheckInclusion, func() Bundle {
			b := bundleOf(t, honest, key, public)
			b.Proof.Index = 2
			return b
		}},
		{"a proof for a log of another size", CheckInclusion, func() Bundle {
			b := bundleOf(t, honest, key, public)
			b.Proof.Size++
			return b
		}},
		{"the log signed with another key, the bundle naming it", CheckCheckpoint, func() Bundle {
			return bundleOf(t, honest, rogue, roguePublic)
		}},
		{"the checkpoint's signature altered", CheckCheckpoint, func() Bundle {
			b := bundleOf(t, honest, key, public)
			b.Checkpoint = slices.Clone(b.Checkpoint)
			sig := len(b.Checkpoint) - 8 // a base64 digit of the signature, before its padding
			b.Checkpoint[sig] = map[bool]byte{true: 'B', false: 'A'}[b.Checkpoint[sig] == 'A']
			return b
		}},
	} {
		_, ps := Verify(tc.bundle(), public)
		assert.Equal(t, []string{tc.check}, checksFailed(ps), "%s: %v", tc.name, ps)
		for _, p := range ps {
			assert.Equal(t, tc.check, p.Check, "%s: nothing but the check fails: %v", tc.name, p)
		}
	}
}

// The provenance checks, each at its edge: the intake read is the completed
// one; an intake or a decision that names no policy version, and a file
// whose timeline names no builds or that ends in a dead letter, are not
// held to what they do not record; every model step is compared, whichever
// of the model's activities recorded it, and a model use naming only a
// prompt version is compared too.
func TestProvenanceChecksAtTheirEdges(t *testing.T) {
	output := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b
	}
	for _, tc := range []struct {
		name   string
		record func(map[string]any)
		intake func(map[string]any)
		file   func(*File)
		where  string // "": no problem
		wants  string
	}{
		{name: "a failed intake before the completed one", file: func(f *File) {
			f.Steps = append([]Step{{Activity: "LoadClaim", Local: true, Outcome: "failed", Failure: "store unavailable"}}, f.Steps...)
		}},
		{name: "an intake that names no policy version", intake: func(in map[string]any) { delete(in, "policy_version") }},
		{name: "a decision that names no policy version", record: func(r map[string]any) { delete(r["decided"].(map[string]any), "policy_version") }},
		{name: "a timeline without builds", record: func(r map[string]any) { r["decided"].(map[string]any)["build_id"] = "build-Z" },
			file: func(f *File) { f.Timeline = []Event{{ID: 4, Type: "WORKFLOW_TASK_COMPLETED"}} }},
		{name: "a dead letter decided in its last task", record: func(r map[string]any) {
			r["outcome"] = "dead-lettered"
			r["decided"].(map[string]any)["build_id"] = "build-Z"
		}, file: func(f *File) { f.Outcome = "dead-lettered" }},
		{name: "an answer naming only its prompt", record: func(r map[string]any) {
			m := r["models"].([]map[string]any)[0]
			m["prompt_version"], m["build_id"] = "rules-2", ""
		}, where: "record models step 2 turn 1", wants: "prompt rules-2"},
		{name: "an assessment under another model", record: func(r map[string]any) {
			r["models"] = append(r["models"].([]map[string]any),
				map[string]any{"step": 4, "model": "rules/v2", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "a1"})
		}, file: func(f *File) {
			f.Steps = append(f.Steps, Step{Activity: "AssessClaim", Outcome: "completed",
				Output: output(map[string]any{"model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "a1"})})
		}, where: "record models step 4 turn 0", wants: "names rules/v2"},
		{name: "a one-call triage under another model", record: func(r map[string]any) {
			r["models"] = append(r["models"].([]map[string]any),
				map[string]any{"step": 2, "model": "rules/v2", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "c1"})
		}, file: func(f *File) {
			f.Steps = append(f.Steps, Step{Activity: "TriageClaim", Outcome: "completed",
				Output: output(map[string]any{"model": "rules/v1", "prompt_version": "rules-1", "build_id": "build-A", "output_sha256": "c1"})})
		}, where: "record models step 2 turn 0", wants: "names rules/v2"},
	} {
		f := provenanceFile(t, tc.record, tc.intake)
		if tc.file != nil {
			tc.file(&f)
		}
		ps := f.Check()
		if tc.where == "" {
			assert.Empty(t, ps, tc.name)
			continue
		}
		if assert.NotEmpty(t, ps, tc.name) {
			assert.Equal(t, tc.where, ps[0].Where, tc.name)
			assert.Contains(t, ps[0].What, tc.wants, tc.name)
		}
	}
}

// Offline, the ledger key is the one the auditor holds when they give one
// (else the bundle's own), and each document in the bundle is the one the
// claim recorded, by digest and by size.
func TestVerifyHoldsTheKeyAndTheDocuments(t *testing.T) {
	key, public := testLedger(t)
	_, otherPublic := testLedger(t)
	f := provenanceFile(t, nil, nil)
	body := []byte("%PDF-1.4 the invoice")
	sum := sha256.Sum256(body)
	f.Documents = []Document{{Name: "invoice.pdf", URI: "blob://documents/invoice.pdf", SHA256: hex.EncodeToString(sum[:]), Size: int64(len(body))}}
	b := bundleOf(t, f, key, public)

	_, ps := Verify(b, "")
	assert.Empty(t, ps, "no key held: the bundle's own")
	_, ps = Verify(b, otherPublic)
	assert.Equal(t, []string{CheckCheckpoint}, checksFailed(ps), "%v", ps)
	assert.True(t, problemAt(ps, "ledger.pub", "is not the ledger key you hold"), "%v", ps)

	b.Documents = map[string][]byte{"invoice.pdf": body}
	_, ps = Verify(b, public)
	assert.Empty(t, ps, "the document recorded")
	for name, doc := range map[string][]byte{"other bytes": []byte("%PDF-1.4 the invoicf"), "longer": append(slices.Clone(body), ' ')} {
		b.Documents = map[string][]byte{"invoice.pdf": doc}
		_, ps = Verify(b, public)
		assert.True(t, problemAt(ps, "documents/invoice.pdf", "is not the document the claim recorded"), "%s: %v", name, ps)
	}
	b.Documents = map[string][]byte{"invoice.pdf": body}
	f.Documents[0].Size++
	b2 := bundleOf(t, f, key, public)
	b2.Documents = b.Documents
	_, ps = Verify(b2, public)
	assert.True(t, problemAt(ps, "documents/invoice.pdf", "is not the document"), "the size recorded: %v", ps)
}

// A proof is of a leaf inside a log no larger than the leaves there are,
// and its hashes are SHA-256 digests.
func TestProofsStayInsideTheLog(t *testing.T) {
	leaves := [][]byte{LeafHash([]byte("a")), LeafHash([]byte("b")), LeafHash([]byte("c"))}
	_, err := InclusionProof(leaves, 0, 5)
	assert.Error(t, err, "a log larger than its leaves")
	_, err = InclusionProof(leaves, 3, 3)
	assert.Error(t, err, "a leaf past the log")
	_, err = Proof{Hashes: []string{"c2hvcnQ="}}.Decode()
	assert.Error(t, err, "a hash of 5 bytes")
	hashes, err := Proof{Hashes: []string{base64.StdEncoding.EncodeToString(leaves[0])}}.Decode()
	require.NoError(t, err)
	assert.Equal(t, [][]byte{leaves[0]}, hashes)
}

// A problem reads as where, what, and the check it failed when it is one
// of the named checks.
func TestAProblemNamesItsCheck(t *testing.T) {
	assert.Equal(t, "checkpoint: bad signature (check checkpoint)", Problem{Check: CheckCheckpoint, Where: "checkpoint", What: "bad signature"}.String())
	assert.Equal(t, "steps PayClaimant: paid twice", Problem{Where: "steps PayClaimant", What: "paid twice"}.String())
}

// The claim as the run last read it is the latest completed intake: the
// re-read after a wait, not the first read, and no claim when none completed.
func TestLastReadIsTheLatestCompletedRead(t *testing.T) {
	read := func(version int, outcome string) Step {
		out, err := json.Marshal(map[string]any{"claim": map[string]any{"claim_id": "claim-1", "amount_minor": version * 100}})
		require.NoError(t, err)
		return Step{Activity: "LoadClaim", Outcome: outcome, Output: out}
	}
	f := File{Steps: []Step{read(1, "completed"), {Activity: "PayClaimant", Outcome: "completed", Output: json.RawMessage(`{}`)}, read(2, "completed"), read(3, "failed")}}
	c, ok := f.LastRead()
	require.True(t, ok)
	assert.Equal(t, int64(200), c.AmountMinor)
	_, ok = File{Steps: []Step{read(1, "failed")}}.LastRead()
	assert.False(t, ok)
	c, ok = File{Steps: []Step{read(1, "completed"), {Activity: "PayClaimant", Outcome: "completed"}}}.LastRead()
	require.True(t, ok, "intake, never read again")
	assert.Equal(t, int64(100), c.AmountMinor)
}
