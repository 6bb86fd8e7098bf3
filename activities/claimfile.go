package activities

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/audit"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/store"
)

// ClaimFiles is how this worker keeps claim files (docs/records.md).
type ClaimFiles struct {
	// History reads a run's event history from the Temporal server; nil:
	// no claim file is written (unit tests of other steps).
	History func(ctx context.Context, workflowID, runID string) ([]*historypb.HistoryEvent, error)
	// DataConverter decodes the history's payloads (it decrypts what the
	// codec encrypted).
	DataConverter converter.DataConverter
	// Retention is how long a claim file is kept (under Object Lock on S3).
	Retention time.Duration
}

// DefaultClaimFileRetention is ten years.
const DefaultClaimFileRetention = 10 * 365 * 24 * time.Hour

// ClaimFileKey is where a claim file is stored: named by its own digest, so
// a record is never written over.
func ClaimFileKey(claimID, sha string) string { return "claim-files/" + claimID + "/" + sha + ".json" }

// writeClaimFile writes the claim's dossier once, as part of step 9: from
// the run's history, the audit record the workflow wrote and the keys that
// verified its receipts; stores it in the blob store under its digest and
// appends it to the claim-file log. An attempt that finds the run's file
// recorded already returns that one: a run has one file, ever (a redriven
// claim has its dead-lettered run's and the one of the run that ended it).
func (a *Activities) writeClaimFile(ctx context.Context, c Caller, in AuditInput, recordSHA string) (store.ClaimFile, error) {
	if held, err := a.Store.ClaimFileOfRun(ctx, in.ClaimID, c.RunID); err == nil {
		return held, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return store.ClaimFile{}, err
	}
	events, err := a.ClaimFiles.History(ctx, c.WorkflowID, c.RunID)
	if err != nil {
		return store.ClaimFile{}, fmt.Errorf("claim file of %s: the run's history: %w", in.ClaimID, err)
	}
	var rec audit.Record
	if err := json.Unmarshal(in.Record, &rec); err != nil {
		return store.ClaimFile{}, invalid("claim file of %s: the audit record: %v", in.ClaimID, err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	retention := a.ClaimFiles.Retention
	if retention <= 0 {
		retention = DefaultClaimFileRetention
	}
	f := claimfile.File{Schema: claimfile.Schema, ClaimID: in.ClaimID, Namespace: c.Namespace, WorkflowID: c.WorkflowID, RunID: c.RunID,
		TaskQueue: a.Runs.TaskQueue, Outcome: rec.Outcome, Basis: basis(rec), Record: in.Record, RecordSHA256: recordSHA,
		FinalTask: "notify (step 7), close (step 8) and this file (step 9) ran as local activities of the run's last workflow task: " +
			"their results are in the record (notification_id, closed_at); the history above ends before that task",
		WrittenAt: now, RetainUntil: now.Add(retention)}
	f.FromHistory(events, a.ClaimFiles.DataConverter)
	f.Keys = a.receiptKeys(rec)
	if cl, _, _, ok := f.Intake(); ok {
		for _, d := range cl.Documents {
			f.Documents = append(f.Documents, claimfile.Document{Name: d.Name, URI: d.URI, SHA256: d.SHA256, Size: d.Size})
		}
	}
	if ps := f.Check(); len(ps) > 0 {
		// The run decided this claim; the file says what it decided, and
		// claimsctl verify will name the same problems.
		logger(ctx).Error("ALERT: the claim file does not verify against itself", "alert", "claim_file_check", "problems", fmt.Sprint(ps))
	}
	body, err := claimfile.Encode(f)
	if err != nil {
		return store.ClaimFile{}, err
	}
	sha := claimfile.Digest(body)
	ref, err := a.Blobs.PutRecord(ctx, ClaimFileKey(in.ClaimID, sha), body, f.RetainUntil)
	if errors.Is(err, blobs.ErrExists) {
		ref = blobs.Ref{URI: a.Blobs.URI(ClaimFileKey(in.ClaimID, sha)), SHA256: sha, Size: int64(len(body))}
	} else if err != nil {
		return store.ClaimFile{}, fmt.Errorf("claim file of %s: %w", in.ClaimID, err)
	}
	held, _, err := a.Store.AppendClaimFile(ctx, store.ClaimFile{ClaimID: in.ClaimID, RunID: c.RunID, Key: in.Key.Sub("claim-file"), URI: ref.URI,
		SHA256: sha, Size: ref.Size, LeafHash: hex.EncodeToString(claimfile.LeafHash(body)), Outcome: rec.Outcome, RetainUntil: f.RetainUntil})
	return held, err
}

// basis says in plain words why the claim ended as it did: what the
// claimant's letter says.
func basis(rec audit.Record) string {
	var b strings.Builder
	switch rec.Outcome {
	case "dead-lettered":
		fmt.Fprintf(&b, "The run stopped for good: %s. Nothing after that step was done; the claim stays open for an operator "+
			"(claimsctl dlq), and a redrive that ends it writes its own claim file.", strings.TrimSuffix(rec.Reason, "."))
		if rec.TransferID != "" {
			fmt.Fprintf(&b, " Transfer %s of %s %s was made before it stopped.", rec.TransferID,
				claim.FormatAmount(rec.PayoutMinor, rec.Currency), strings.ToUpper(rec.Currency))
		}
		return b.String()
	case "paid":
		fmt.Fprintf(&b, "Paid %s %s by transfer %s, of %s covered (%s).", claim.FormatAmount(rec.PayoutMinor, rec.Currency),
			strings.ToUpper(rec.Currency), rec.TransferID, claim.FormatAmount(rec.Coverage.CoveredMinor, rec.Currency), rec.Coverage.Reason)
	default:
		fmt.Fprintf(&b, "The claim was %s; nothing was paid.", rec.Outcome)
	}
	if rec.Reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", strings.TrimSuffix(rec.Reason, "."))
	}
	if n := len(rec.Approvals); n > 0 {
		last := rec.Approvals[n-1]
		for _, v := range last.Votes {
			fmt.Fprintf(&b, " Approved by %s (%s, receipt %s).", v.Approver, v.Role, v.ReceiptID)
		}
		if d := last.Decision; d != nil && (d.Verdict != approvals.Approve || len(last.Votes) == 0) {
			what := "Rejected"
			if d.Verdict == approvals.Approve {
				what = "Approved"
			}
			fmt.Fprintf(&b, " %s by %s", what, d.Approver)
			if d.ReceiptID != "" {
				fmt.Fprintf(&b, " (%s, receipt %s)", d.Role, d.ReceiptID)
			}
			if d.Reason != "" {
				fmt.Fprintf(&b, ": %s", d.Reason)
			}
			b.WriteString(".")
		}
		if last.Decision == nil {
			fmt.Fprintf(&b, " Nobody decided the request before it expired at %s.", last.ExpiresAt.UTC().Format(time.RFC3339))
		}
	} else if rec.Outcome == "paid" {
		b.WriteString(" Within the auto-approve limit: no human had to approve it.")
	}
	return b.String()
}

// receiptKeys are the public keys, from the directory as it stands, that
// verify the record's receipts.
func (a *Activities) receiptKeys(rec audit.Record) []claimfile.Key {
	book, err := authority.Load(a.ApproversFile)
	if err != nil {
		return nil
	}
	var keys []claimfile.Key
	seen := map[string]bool{}
	for _, ap := range rec.Approvals {
		ds := append([]approvals.Decision{}, ap.Votes...)
		if ap.Decision != nil {
			ds = append(ds, *ap.Decision)
		}
		for _, d := range ds {
			if d.KeyID == "" || seen[d.KeyID] {
				continue
			}
			seen[d.KeyID] = true
			s, ok := book.Signer(d.KeyID)
			if !ok {
				continue
			}
			jwk, err := json.Marshal(s.Key.JWK())
			if err != nil {
				continue
			}
			keys = append(keys, claimfile.Key{ID: s.Key.ID, Approver: s.Approver, Service: s.Service, JWK: jwk})
		}
	}
	return keys
}
