package claimfile

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/decision"
	"github.com/durableclaims/durableclaims/internal/insurer"
)

// Bundle is what an auditor receives for one claim (claimsctl export).
type Bundle struct {
	File       []byte            // claim-file.json, byte for byte as stored
	Proof      Proof             // proof.json
	Checkpoint []byte            // checkpoint: the signed note
	LedgerKey  string            // ledger.pub: the ledger's public key
	Documents  map[string][]byte // documents/: by the file's document name
}

// Problem is one thing that does not verify: what, where, and, when it is
// one of the checks that prove a claim file is the file the run wrote and
// the log holds, which (Check).
type Problem struct {
	Check string `json:"check,omitempty"`
	Where string `json:"where"`
	What  string `json:"what"`
}

func (p Problem) String() string {
	if p.Check != "" {
		return p.Where + ": " + p.What + " (check " + p.Check + ")"
	}
	return p.Where + ": " + p.What
}

// The checks that prove a claim file is the one the run wrote and the log
// holds. Each overlaps others (a changed byte fails most of them), so each
// is named in the Problem it raises, and each is tested on its own with a
// file that passes all the others.
const (
	// CheckBlobDigest: the file's bytes have the SHA-256 its blob store key
	// names (claim-files/<claim>/<sha256>.json).
	CheckBlobDigest = "blob-digest"
	// CheckStoreDigest: the file's bytes have the SHA-256 the claims
	// store's row records.
	CheckStoreDigest = "store-digest"
	// CheckLogLeaf: the row's log leaf is the file's leaf hash.
	CheckLogLeaf = "log-leaf"
	// CheckRecordHash: the record has the digest record_sha256 declares.
	CheckRecordHash = "record-hash"
	// CheckInclusion: the file is in the log the checkpoint signs (a
	// bundle's inclusion proof; online, the store's leaves have the signed
	// root, and none is missing).
	CheckInclusion = "inclusion"
	// CheckCheckpoint: the checkpoint is signed with the ledger key held.
	CheckCheckpoint = "checkpoint"
	// CheckPayment: the payment the record names is the claim's payout as
	// the claims store holds it (online only: the store is not in a
	// bundle).
	CheckPayment = "payment"
)

// Problems is every check that failed; empty: the bundle verifies.
type Problems []Problem

func (ps *Problems) add(where, format string, args ...any) {
	ps.failed("", where, format, args...)
}

// failed adds the problem of one named check.
func (ps *Problems) failed(check, where, format string, args ...any) {
	*ps = append(*ps, Problem{Check: check, Where: where, What: fmt.Sprintf(format, args...)})
}

// Verify checks a bundle with nothing but what is in it: the checkpoint's
// signature, the claim file's inclusion in the log, the receipts'
// signatures and their binding to the requests shown, the amounts against
// the payment, and the outcome against the rules recorded at intake.
// ledgerKey, when set, is the public key the auditor holds (from the
// insurer, not from the bundle): the bundle's own must equal it.
func Verify(b Bundle, ledgerKey string) (File, Problems) {
	var ps Problems
	var f File
	if err := json.Unmarshal(b.File, &f); err != nil {
		ps.add("claim-file.json", "not a claim file: %v", err)
		return f, ps
	}
	if f.Schema != Schema {
		ps.add("claim-file.json", "schema %q, want %q", f.Schema, Schema)
	}
	if ledgerKey != "" && trimKey(ledgerKey) != trimKey(b.LedgerKey) {
		ps.failed(CheckCheckpoint, "ledger.pub", "is not the ledger key you hold")
	}
	key := b.LedgerKey
	if ledgerKey != "" {
		key = ledgerKey
	}
	cp, err := OpenCheckpoint(b.Checkpoint, Origin(f.Namespace), key)
	switch {
	case err != nil:
		ps.failed(CheckCheckpoint, "checkpoint", "%v", err)
	case b.Proof.Size != cp.Size:
		ps.failed(CheckInclusion, "proof.json", "is for a log of %d claim files, the checkpoint's has %d", b.Proof.Size, cp.Size)
	default:
		hashes, err := b.Proof.Decode()
		if err == nil {
			err = VerifyInclusion(b.File, b.Proof.Index, hashes, cp.Checkpoint)
		}
		if err != nil {
			ps.failed(CheckInclusion, "claim-file.json", "is not claim file %d of the log the checkpoint signs (%d files): %v", b.Proof.Index, cp.Size, err)
		}
	}
	ps = append(ps, f.Check()...)
	for _, d := range f.Documents {
		body, ok := b.Documents[d.Name]
		if !ok {
			continue // documents are optional in a bundle
		}
		if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != d.SHA256 || int64(len(body)) != d.Size {
			ps.add("documents/"+d.Name, "is not the document the claim recorded (SHA-256 %s, %d bytes)", d.SHA256[:12], d.Size)
		}
	}
	return f, ps
}

// Check verifies a claim file against itself: the record's digest, every
// receipt against the keys and the request it was shown, the payment
// against the record and the decisions, the outcome against the rules.
func (f File) Check() Problems {
	var ps Problems
	// The record is stored compact in the audit ledger and indented here.
	var compact bytes.Buffer
	_ = json.Compact(&compact, f.Record)
	if sum := sha256.Sum256(compact.Bytes()); hex.EncodeToString(sum[:]) != f.RecordSHA256 {
		ps.failed(CheckRecordHash, "claim-file.json record", "its SHA-256 is not record_sha256 %s", short(f.RecordSHA256))
	}
	var rec audit.Record
	if err := json.Unmarshal(f.Record, &rec); err != nil {
		ps.add("claim-file.json record", "not an audit record: %v", err)
		return ps
	}
	if rec.ClaimID != f.ClaimID || rec.Outcome != f.Outcome {
		ps.add("claim-file.json record", "is for %s (%s), the file says %s (%s)", rec.ClaimID, rec.Outcome, f.ClaimID, f.Outcome)
	}
	book := f.book()
	var approvedBy []decision.Decision
	for i, a := range rec.Approvals {
		decisions := append([]decision.Decision{}, a.Votes...)
		if a.Decision != nil && !slices.ContainsFunc(decisions, func(d decision.Decision) bool { return d.ReceiptID != "" && d.ReceiptID == a.Decision.ReceiptID }) {
			decisions = append(decisions, *a.Decision)
		}
		for _, d := range decisions {
			where := fmt.Sprintf("record approvals[%d] %s by %s", i, d.Verdict, d.Approver)
			ps = append(ps, f.checkDecision(where, book, d)...)
			if a.Voided == "" && d.Verdict == decision.Approve && d.Proof == decision.ProofReceipt {
				approvedBy = append(approvedBy, d)
			}
		}
	}
	ps = append(ps, f.checkPayment(rec, approvedBy)...)
	ps = append(ps, f.checkProvenance(rec)...)
	return ps
}

// checkProvenance holds what the record says made its decisions to the
// history beside it: the policy version is the digest of the policy intake
// recorded; every decision follows that policy; a decision's build is one
// that completed a workflow task of the run (the timeline's); each model
// answer's model, prompt version and build are those its step recorded; and
// the outcome rests on answers the record lists. Records from before
// provenance was recorded name none of it, and are not held to it.
func (f File) checkProvenance(rec audit.Record) Problems {
	var ps Problems
	if rec.PolicyVersion != "" {
		var in struct {
			Rules         json.RawMessage `json:"rules"`
			PolicyVersion string          `json:"policy_version"`
		}
		for _, s := range f.Steps {
			if s.Activity == "LoadClaim" && s.Outcome == "completed" {
				_ = json.Unmarshal(s.Output, &in)
				break
			}
		}
		switch got := insurer.VersionOfJSON(in.Rules); {
		case len(in.Rules) == 0:
			ps.add("steps LoadClaim", "intake recorded no rules, the record names policy %s", shortVersion(rec.PolicyVersion))
		case got != rec.PolicyVersion:
			ps.add("record policy_version", "is %s, the rules intake recorded digest to %s", shortVersion(rec.PolicyVersion), shortVersion(got))
		case in.PolicyVersion != "" && in.PolicyVersion != got:
			ps.add("steps LoadClaim", "records policy_version %s for rules that digest to %s", shortVersion(in.PolicyVersion), shortVersion(got))
		}
	}
	builds := map[string]bool{}
	for _, e := range f.Timeline {
		if e.BuildID != "" {
			builds[e.BuildID] = true
		}
	}
	// A dead letter's file may be written in the very task that decided
	// (a cap that stops the payment): its build is not in the timeline yet.
	checkBuilds := len(builds) > 0 && rec.Outcome != "dead-lettered"
	decision := func(where, build, policy string) {
		if policy != "" && rec.PolicyVersion != "" && policy != rec.PolicyVersion {
			ps.add(where, "follows policy %s, the run follows %s", shortVersion(policy), shortVersion(rec.PolicyVersion))
		}
		if checkBuilds && build != "" && !builds[build] {
			ps.add(where, "names build %s, which completed no workflow task of the run", build)
		}
	}
	for i, a := range rec.Approvals {
		for _, v := range a.Votes {
			decision(fmt.Sprintf("record approvals[%d] vote by %s", i, v.Approver), v.BuildID, v.PolicyVersion)
		}
		if d := a.Decision; d != nil {
			decision(fmt.Sprintf("record approvals[%d] %s by %s", i, d.Verdict, d.Approver), d.BuildID, d.PolicyVersion)
		}
	}
	answers := map[string]bool{}
	recorded := f.modelSteps()
	for _, m := range rec.Models {
		answers[m.OutputSHA256] = true
		if m.PromptVersion == "" && m.BuildID == "" {
			continue
		}
		got, ok := recorded[m.OutputSHA256]
		if ok && (got.Model != m.Model || got.PromptVersion != m.PromptVersion || got.BuildID != m.BuildID) {
			ps.add(fmt.Sprintf("record models step %d turn %d", m.Step, m.Turn), "names %s, prompt %s, build %s; the step recorded %s, prompt %s, build %s",
				m.Model, shortVersion(m.PromptVersion), m.BuildID, got.Model, shortVersion(got.PromptVersion), got.BuildID)
		}
	}
	if d := rec.Decided; d != nil {
		decision("record decided", d.BuildID, d.PolicyVersion)
		for _, sum := range d.ModelAnswers {
			if !answers[sum] {
				ps.add("record decided", "rests on model answer %s, which the record's models do not list", short(sum))
			}
		}
	}
	return ps
}

// modelSteps are the model answers the history recorded, by output digest.
func (f File) modelSteps() map[string]audit.ModelUse {
	out := map[string]audit.ModelUse{}
	for _, s := range f.Steps {
		if s.Outcome != "completed" || (s.Activity != "TriageTurn" && s.Activity != "AssessClaim" && s.Activity != "TriageClaim") {
			continue
		}
		var m audit.ModelUse
		if json.Unmarshal(s.Output, &m) == nil && m.OutputSHA256 != "" {
			out[m.OutputSHA256] = m
		}
	}
	return out
}

// book is the directory as far as the file's keys go: who each key
// belonged to when it verified a receipt.
func (f File) book() authority.Book {
	var b authority.Book
	for _, k := range f.Keys {
		var jwk jose.JSONWebKey
		if jwk.UnmarshalJSON(k.JWK) != nil || !jwk.IsPublic() {
			continue
		}
		pub, ok := jwk.Key.(ed25519.PublicKey)
		if !ok || jwk.KeyID != k.ID {
			continue
		}
		key := authority.Key{ID: k.ID, PublicKey: pub}
		if k.Service != "" {
			b.Services = append(b.Services, authority.Service{Name: k.Service, Key: key})
		} else {
			b.Approvers = append(b.Approvers, authority.Approver{ID: k.Approver, Keys: []authority.Key{key}})
		}
	}
	return b
}

// checkDecision verifies one accepted decision's receipt: signed by a key
// the file lists (as the directory held it), for this claim, for the very
// request recorded beside it, by the approver recorded.
func (f File) checkDecision(where string, book authority.Book, d decision.Decision) Problems {
	var ps Problems
	if got := d.Request.SHA256(); got != d.RequestSHA256 {
		ps.add(where, "the request recorded hashes to %s, the decision says %s", short(got), short(d.RequestSHA256))
	}
	if d.Proof != decision.ProofReceipt {
		if d.Approver != "policy" {
			ps.add(where, "was accepted without a signed receipt (proof %q)", d.Proof)
		}
		return ps
	}
	_, peek, ok := decision.PeekReceipt(d.Receipt)
	if !ok {
		ps.add(where, "its receipt is not a receipt")
		return ps
	}
	v, err := decision.VerifyReceipt(d.Receipt, book, peek.Audience, time.Unix(peek.IssuedAt, 0), time.Duration(math.MaxInt64))
	if err != nil {
		ps.add(where, "receipt %s: %s", short(peek.ID), decision.RefusalMessage(err))
		return ps
	}
	r := v.Receipt
	switch {
	case r.ClaimID != f.ClaimID:
		ps.add(where, "receipt %s is for claim %s", short(r.ID), r.ClaimID)
	case r.RequestSHA256 != d.RequestSHA256:
		ps.add(where, "receipt %s signs request %s, the decision is for %s", short(r.ID), short(r.RequestSHA256), short(d.RequestSHA256))
	case r.Subject != d.Approver:
		ps.add(where, "receipt %s is %s's, the decision says %s", short(r.ID), r.Subject, d.Approver)
	case r.Verdict != d.Verdict:
		ps.add(where, "receipt %s says %s", short(r.ID), r.Verdict)
	case r.ID != d.ReceiptID:
		ps.add(where, "receipt is %s, the decision cites %s", short(r.ID), short(d.ReceiptID))
	case r.AmountMinor != 0 && d.AmountMinor != r.AmountMinor:
		ps.add(where, "receipt %s approves %d, the decision %d", short(r.ID), r.AmountMinor, d.AmountMinor)
	}
	return ps
}

// checkPayment holds the money to the record: a paid claim has exactly the
// transfer the record names, of the payout it records, to the payee the
// request named, within the coverage; above the auto-approve limit it was
// approved by as many receipts as the request's quorum, each for at least
// the payout; a claim not paid moved no money.
func (f File) checkPayment(rec audit.Record, approvedBy []decision.Decision) Problems {
	var ps Problems
	if rec.Outcome == "dead-lettered" {
		return ps // stopped mid-way: what it paid, if anything, is in record.transfer_id and the dead letter's unknown effects
	}
	var pays []PayOutput
	for _, s := range f.Steps {
		if s.Activity == "PayClaimant" && s.Outcome == "completed" {
			var p PayOutput
			if json.Unmarshal(s.Output, &p) == nil {
				pays = append(pays, p)
			}
		}
	}
	if rec.Outcome != "paid" {
		if len(pays) > 0 {
			ps.add("steps PayClaimant", "the claim is %s, yet a transfer %s of %d was made", rec.Outcome, pays[0].TransferID, pays[0].AmountMinor)
		}
		return ps
	}
	if len(pays) != 1 {
		ps.add("steps PayClaimant", "a paid claim needs one completed payment, the history has %d", len(pays))
		return ps
	}
	p := pays[0]
	if p.TransferID != rec.TransferID || p.AmountMinor != rec.PayoutMinor || p.Currency != rec.Currency {
		ps.add("record payout", "records %d %s by %s, the payment step made %d %s by %s",
			rec.PayoutMinor, rec.Currency, rec.TransferID, p.AmountMinor, p.Currency, p.TransferID)
	}
	if rec.PayoutMinor > rec.Coverage.CoveredMinor {
		ps.add("record payout", "%d is more than the %d the coverage arithmetic allows", rec.PayoutMinor, rec.Coverage.CoveredMinor)
	}
	rules := f.rules()
	if rules == nil {
		ps.add("steps LoadClaim", "intake recorded no rules")
		return ps
	}
	limit, err := claim.ParseAmount(rules.AutoApproveLimit, rec.Currency)
	if err != nil || rec.PayoutMinor <= limit {
		return ps
	}
	var last *decision.Approval
	if n := len(rec.Approvals); n > 0 {
		last = rec.Approvals[n-1]
	}
	if last == nil || last.Decision == nil || last.Decision.Verdict != decision.Approve {
		ps.add("record approvals", "a payout of %d is above the auto-approve limit %s and no approval decided it", rec.PayoutMinor, rules.AutoApproveLimit)
		return ps
	}
	if last.Request.Payee != p.Destination {
		ps.add("steps PayClaimant", "paid %s, the request approved names %s", p.Destination, last.Request.Payee)
	}
	if last.Decision.Approver == "policy" {
		if rules.FinalOutcome != "approve" {
			ps.add("record approvals", "paid by policy on expiry, but the rules recorded say %s", rules.FinalOutcome)
		}
		return ps
	}
	quorum := max(last.Quorum, 1)
	people := map[string]bool{}
	for _, d := range approvedBy {
		amount := d.AmountMinor
		if amount == 0 {
			amount = d.Request.AmountMinor
		}
		if d.RequestSHA256 == last.RequestSHA256 && amount >= rec.PayoutMinor {
			people[d.Approver] = true
		}
	}
	if len(people) < quorum {
		ps.add("record approvals", "%d different approvers signed for the payout of %d, the request needed %d", len(people), rec.PayoutMinor, quorum)
	}
	return ps
}

// PayOutput is the payment step's recorded result.
type PayOutput struct {
	TransferID  string `json:"transfer_id"`
	AmountMinor int64  `json:"amount_minor"`
	Currency    string `json:"currency"`
	Destination string `json:"destination"`
}

// intake is the intake step's recorded result, the part a verifier reads.
type intake struct {
	Claim  claim.Claim    `json:"claim"`
	Policy *claim.Policy  `json:"policy,omitempty"`
	Rules  *insurer.Rules `json:"rules,omitempty"`
}

// Intake is the first read of the claim: the claim, its policy and the
// insurer's rules as intake recorded them.
func (f File) Intake() (claim.Claim, *claim.Policy, *insurer.Rules, bool) {
	for _, s := range f.Steps {
		if s.Activity == "LoadClaim" && s.Outcome == "completed" {
			var in intake
			if json.Unmarshal(s.Output, &in) == nil {
				return in.Claim, in.Policy, in.Rules, true
			}
		}
	}
	return claim.Claim{}, nil, nil, false
}

func (f File) rules() *insurer.Rules {
	_, _, r, _ := f.Intake()
	return r
}

// Digest is a claim file's SHA-256, as the store and the log name it.
func Digest(file []byte) string {
	sum := sha256.Sum256(file)
	return hex.EncodeToString(sum[:])
}

// shortVersion is a version as a person reads it: "sha256:" and 12 hex
// digits, or a hand-numbered version whole.
func shortVersion(v string) string {
	if rest, ok := strings.CutPrefix(v, "sha256:"); ok {
		return "sha256:" + short(rest)
	}
	return v
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func trimKey(k string) string { return strings.TrimSpace(k) }

// LastRead is the claim as the run last read it from the system of record
// (intake, or the re-read after a wait).
func (f File) LastRead() (claim.Claim, bool) {
	for i := len(f.Steps) - 1; i >= 0; i-- {
		s := f.Steps[i]
		if s.Activity == "LoadClaim" && s.Outcome == "completed" {
			var in intake
			if json.Unmarshal(s.Output, &in) == nil {
				return in.Claim, true
			}
		}
	}
	return claim.Claim{}, false
}
