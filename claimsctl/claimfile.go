package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/activities"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/claimfile"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/workflows"
)

// The claim file's commands (docs/records.md): keygen --ledger, checkpoint,
// verify, export. show falls back to the claim file when the history is gone.

func ledgerKeygen(name, path string, out io.Writer) error {
	private, public, err := claimfile.GenerateLedgerKey(name)
	if err != nil {
		return err
	}
	if err := writeNew(path, []byte(private+"\n"), 0o600); err != nil {
		return err
	}
	if err := writeNew(path+".pub", []byte(public+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "ledger key %s: %s (LEDGER_KEY for the workers; it signs the claim-file log's checkpoints)\n", name, path)
	fmt.Fprintf(out, "public key: %s.pub (publish it; auditors verify with it): %s\n", path, public)
	return nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ledgerPublicKey is the ledger's public key: the flag's file, else
// config.LedgerPublicKey's.
func ledgerPublicKey(flagPath string) (string, error) {
	path := flagPath
	if path == "" {
		path = config.LedgerPublicKey()
	}
	if path == "" {
		return "", fmt.Errorf("no ledger public key: set LEDGER_PUBLIC_KEY (or --ledger-pub FILE); none in %s", config.LocalLedgerKey+".pub")
	}
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

type records struct {
	st *store.Store
	bs *blobs.Store
	ns string
}

func openRecords(ctx context.Context) (*records, error) {
	st, err := openStore()
	if err != nil {
		return nil, err
	}
	bs, err := blobs.Open(ctx, config.Get("BLOB_URL", ""))
	if err == nil {
		bs.LockMode, err = blobs.ParseLockMode(config.Get("CLAIM_FILE_LOCK", ""))
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	return &records{st: st, bs: bs, ns: config.Get("TEMPORAL_NAMESPACE", "default")}, nil
}

func (r *records) Close() { r.st.Close(); r.bs.Close() }

// read returns a claim's file as stored, and its row.
func (r *records) read(ctx context.Context, id string) (store.ClaimFile, []byte, error) {
	row, err := r.st.ClaimFile(ctx, id)
	if err != nil {
		return row, nil, err
	}
	body, err := r.body(ctx, row)
	return row, body, err
}

// body reads the claim file a row names.
func (r *records) body(ctx context.Context, row store.ClaimFile) ([]byte, error) {
	key, ok := r.bs.Key(row.URI)
	if !ok {
		return nil, fmt.Errorf("claim file of %s: %s is not in the blob store %s", row.ClaimID, row.URI, config.Get("BLOB_URL", "(default)"))
	}
	return r.bs.ReadKey(ctx, key, blobs.DefaultMaxSize)
}

// checkpoint signs and publishes the log's checkpoint now.
func checkpoint(ctx context.Context, out io.Writer) error {
	path := config.LedgerKey()
	if path == "" {
		return fmt.Errorf("checkpoint: no ledger key: set LEDGER_KEY, or make %s (claimsctl keygen --ledger NAME --out %[1]s)", config.LocalLedgerKey)
	}
	key, err := claimfile.ReadLedgerKey(path)
	if err != nil {
		return err
	}
	r, err := openRecords(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	retention, err := config.Duration("CLAIM_FILE_RETENTION", activities.DefaultClaimFileRetention)
	if err != nil {
		return err
	}
	cp, published, err := claimfile.Publish(ctx, r.st, r.bs, key, r.ns, time.Now().Add(retention))
	if err != nil {
		return err
	}
	verb := "published"
	if !published {
		verb = "already published"
	}
	fmt.Fprintf(out, "checkpoint of %d claim files %s at %s\n%s", cp.Size, verb, claimfile.CheckpointKey(cp.Size), cp.Note)
	return nil
}

// export writes the bundle an auditor receives for a claim.
func export(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	dir := fs.String("out", "", "the directory to write the bundle to (created; must not exist)")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() != 1 {
		return errors.New("usage: claimsctl export CLAIM --out DIR")
	}
	id := fs.Arg(0)
	pub, err := ledgerPublicKey("")
	if err != nil {
		return err
	}
	r, err := openRecords(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	row, body, err := r.read(ctx, id)
	if err != nil {
		return err
	}
	_, leaves, err := claimfile.Leaves(ctx, r.st)
	if err != nil {
		return err
	}
	sizes, err := claimfile.Published(ctx, r.bs)
	if err != nil {
		return err
	}
	if len(sizes) == 0 || sizes[len(sizes)-1] <= row.LogIndex {
		if err := checkpoint(ctx, io.Discard); err != nil {
			return fmt.Errorf("no published checkpoint covers %s yet (log index %d), and none could be signed here: %w", id, row.LogIndex, err)
		}
		if sizes, err = claimfile.Published(ctx, r.bs); err != nil {
			return err
		}
	}
	size := sizes[len(sizes)-1]
	if size > uint64(len(leaves)) {
		return fmt.Errorf("the latest checkpoint covers %d claim files, the store holds %d: run claimsctl verify --all", size, len(leaves))
	}
	note, err := claimfile.ReadCheckpoint(ctx, r.bs, size)
	if err != nil {
		return err
	}
	hashes, err := claimfile.InclusionProof(leaves, row.LogIndex, size)
	if err != nil {
		return err
	}
	proof, err := claimfile.Encode(claimfile.NewProof(claimfile.Origin(r.ns), row.LogIndex, size, hashes))
	if err != nil {
		return err
	}
	if err := os.Mkdir(*dir, 0o700); err != nil {
		return err
	}
	files := map[string][]byte{"claim-file.json": body, "proof.json": proof, "checkpoint": note, "ledger.pub": []byte(pub + "\n"),
		"README.txt": []byte(bundleReadme(id))}
	var f claimfile.File
	if err := json.Unmarshal(body, &f); err != nil {
		return fmt.Errorf("claim file of %s: %w", id, err)
	}
	for _, d := range f.Documents {
		doc, err := r.bs.Get(ctx, blobs.Ref{URI: d.URI, SHA256: d.SHA256, Size: d.Size}, blobs.DefaultMaxSize)
		if err != nil {
			return fmt.Errorf("document %s: %w", d.Name, err)
		}
		files[filepath.Join("documents", safeDocName(d.Name))] = doc
	}
	for name, b := range files {
		if err := writeNew(filepath.Join(*dir, name), b, 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s: claim file %s (log index %d of %d) with its proof, checkpoint, ledger key and %d documents in %s\n",
		id, row.SHA256[:12], row.LogIndex, size, len(f.Documents), *dir)
	return nil
}

func safeDocName(n string) string {
	n = filepath.Base(filepath.Clean("/" + n))
	if n == "/" || n == "." {
		return "document"
	}
	return n
}

func bundleReadme(id string) string {
	return "The claim file of " + id + ", as durableclaims kept it.\n\n" +
		"  claim-file.json  the dossier, byte for byte as stored (schema durableclaims.claim-file/v1)\n" +
		"  proof.json       its inclusion proof in the claim-file log (RFC 6962)\n" +
		"  checkpoint       the log's signed checkpoint the proof is against (a signed note)\n" +
		"  ledger.pub       the key that signed it: compare it with the one the insurer publishes\n" +
		"  documents/       the claimant's uploads, each checked against the SHA-256 the file records\n\n" +
		"Verify with nothing else: claimsctl verify --bundle DIR --ledger-pub THE_INSURERS_KEY.pub\n"
}

// readBundle reads an exported bundle.
func readBundle(dir string) (claimfile.Bundle, error) {
	var b claimfile.Bundle
	var err error
	if b.File, err = os.ReadFile(filepath.Join(dir, "claim-file.json")); err != nil {
		return b, err
	}
	proof, err := os.ReadFile(filepath.Join(dir, "proof.json"))
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(proof, &b.Proof); err != nil {
		return b, fmt.Errorf("proof.json: %w", err)
	}
	if b.Checkpoint, err = os.ReadFile(filepath.Join(dir, "checkpoint")); err != nil {
		return b, err
	}
	pub, err := os.ReadFile(filepath.Join(dir, "ledger.pub"))
	if err != nil {
		return b, err
	}
	b.LedgerKey = strings.TrimSpace(string(pub))
	b.Documents = map[string][]byte{}
	entries, _ := os.ReadDir(filepath.Join(dir, "documents"))
	for _, e := range entries {
		if doc, err := os.ReadFile(filepath.Join(dir, "documents", e.Name())); err == nil {
			b.Documents[e.Name()] = doc
		}
	}
	return b, nil
}

// verify checks claim files: offline, a bundle (--bundle DIR) with nothing
// but what is in it; online, the claims named (or --all) against the
// store, the blob store and the published checkpoints. Exit 3 when
// anything does not verify, naming what and where.
func verify(ctx context.Context, args []string, out io.Writer) (int, error) {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	bundle := fs.String("bundle", "", "verify an exported bundle, offline")
	all := fs.Bool("all", false, "verify every claim file and the whole log")
	pubPath := fs.String("ledger-pub", "", "the ledger's public key (default LEDGER_PUBLIC_KEY)")
	asJSON := fs.Bool("json", false, "print the problems as JSON")
	if err := parseInterspersed(fs, args); err != nil {
		return 0, err
	}
	if *bundle != "" {
		return verifyBundle(*bundle, *pubPath, *asJSON, out)
	}
	if !*all && fs.NArg() == 0 {
		return 0, errors.New("usage: claimsctl verify CLAIM... | --all | --bundle DIR [--ledger-pub FILE]")
	}
	pub, err := ledgerPublicKey(*pubPath)
	if err != nil {
		return 0, err
	}
	r, err := openRecords(ctx)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	lg, err := r.checkLog(ctx, pub)
	if err != nil {
		return 0, err
	}
	ids := fs.Args()
	if *all {
		ids = lg.claimIDs()
	}
	ps := lg.problems
	var notes []string
	for _, id := range ids {
		ps = append(ps, r.verifyOne(ctx, id)...)
		if row, err := r.st.ClaimFile(ctx, id); err == nil && row.LogIndex >= lg.latest {
			notes = append(notes, fmt.Sprintf("note: %s is claim file %d, after the latest checkpoint (%d files): the next one covers it", id, row.LogIndex, lg.latest))
		}
	}
	if !*asJSON {
		for _, n := range notes {
			fmt.Fprintln(out, n)
		}
	}
	// Claims named are named back ("claim-0042: claim file, log of 3
	// files, …: verifies"); --all counts them.
	what := fmt.Sprintf("%d claims, log of %d files", len(ids), len(lg.leaves))
	if !*all {
		what = fmt.Sprintf("%s: %s, log of %d files", strings.Join(ids, ", "), plural(len(ids), "claim file", "claim files"), len(lg.leaves))
	}
	if len(lg.sizes) > 0 {
		what += fmt.Sprintf(", checkpoints up to %d", lg.sizes[len(lg.sizes)-1])
	}
	return verdict(out, *asJSON, what, ps), nil
}

// verdict prints what was verified and its problems, and returns the exit
// code: 3 if there are any.
func verdict(out io.Writer, asJSON bool, what string, ps claimfile.Problems) int {
	if asJSON {
		_ = json.NewEncoder(out).Encode(map[string]any{"verified": what, "problems": ps})
	} else if len(ps) == 0 {
		fmt.Fprintf(out, "%s: verifies\n", what)
	} else {
		fmt.Fprintf(out, "%s: DOES NOT VERIFY (%d problems)\n", what, len(ps))
		for _, p := range ps {
			fmt.Fprintf(out, "  %s\n", p)
		}
	}
	if len(ps) > 0 {
		return 3
	}
	return 0
}

// verifyBundle verifies an exported bundle, offline: against the ledger
// key given, or else the bundle's own.
func verifyBundle(dir, pubPath string, asJSON bool, out io.Writer) (int, error) {
	b, err := readBundle(dir)
	if err != nil {
		return 0, err
	}
	key := ""
	if pubPath != "" {
		if key, err = ledgerPublicKey(pubPath); err != nil {
			return 0, err
		}
	}
	f, ps := claimfile.Verify(b, key)
	if key == "" && len(ps) == 0 {
		fmt.Fprintln(out, "(checked against the bundle's own ledger.pub: pass --ledger-pub with the key the insurer publishes)")
	}
	return verdict(out, asJSON, fmt.Sprintf("%s (%s): %s", f.ClaimID, f.Outcome, f.Basis), ps), nil
}

// logCheck is what checking the claim-file log against its published
// checkpoints found.
type logCheck struct {
	rows     []store.ClaimFile
	leaves   [][]byte
	sizes    []uint64 // the checkpoints published, by size
	latest   uint64   // the largest checkpoint that proves the log
	problems claimfile.Problems
}

func (lg *logCheck) failed(check, where, format string, a ...any) {
	lg.problems = append(lg.problems, claimfile.Problem{Check: check, Where: where, What: fmt.Sprintf(format, a...)})
}

// claimIDs are the claims the log holds, once each, in log order.
func (lg *logCheck) claimIDs() []string {
	var ids []string
	for _, row := range lg.rows {
		if !slices.Contains(ids, row.ClaimID) {
			ids = append(ids, row.ClaimID)
		}
	}
	return ids
}

// checkLog checks every published checkpoint: signed by the ledger key,
// and the log the store holds extends the log it signed.
func (r *records) checkLog(ctx context.Context, pub string) (*logCheck, error) {
	lg := &logCheck{}
	var err error
	lg.rows, lg.leaves, err = claimfile.Leaves(ctx, r.st)
	if err != nil {
		lg.failed(claimfile.CheckInclusion, "store claim_files", "%v", err)
	}
	if lg.sizes, err = claimfile.Published(ctx, r.bs); err != nil {
		return nil, err
	}
	if len(lg.sizes) == 0 && len(lg.rows) > 0 {
		lg.failed(claimfile.CheckCheckpoint, "checkpoints", "none is published: nothing proves the log (claimsctl checkpoint)")
	}
	for _, size := range lg.sizes {
		note, err := claimfile.ReadCheckpoint(ctx, r.bs, size)
		if err != nil {
			lg.failed(claimfile.CheckCheckpoint, claimfile.CheckpointKey(size), "%v", err)
			continue
		}
		cp, err := claimfile.OpenCheckpoint(note, claimfile.Origin(r.ns), pub)
		switch {
		case err != nil:
			lg.failed(claimfile.CheckCheckpoint, claimfile.CheckpointKey(size), "%v", err)
		case cp.Size != size:
			lg.failed(claimfile.CheckCheckpoint, claimfile.CheckpointKey(size), "says %d claim files", cp.Size)
		case lg.leaves != nil && cp.Size > uint64(len(lg.leaves)):
			lg.failed(claimfile.CheckInclusion, "store claim_files", "holds %d claim files, checkpoint %d signed %d: claim files were removed", len(lg.leaves), size, cp.Size)
		case lg.leaves != nil:
			root, err := claimfile.Root(lg.leaves[:cp.Size])
			if err != nil || !bytes.Equal(root, cp.Hash) {
				lg.failed(claimfile.CheckInclusion, "store claim_files", "its first %d leaves are not the log checkpoint %d signed: a leaf was changed, removed or reordered", cp.Size, size)
			}
			lg.latest = max(lg.latest, cp.Size)
		}
	}
	return lg, nil
}

// verifyOne checks each of a claim's files against its name in the blob
// store, its row, its leaf and itself, and the latest against the system
// of record.
func (r *records) verifyOne(ctx context.Context, id string) claimfile.Problems {
	var ps claimfile.Problems
	failed := func(check, where, format string, a ...any) {
		ps = append(ps, claimfile.Problem{Check: check, Where: id + " " + where, What: fmt.Sprintf(format, a...)})
	}
	add := func(where, format string, a ...any) { failed("", where, format, a...) }
	rows, err := r.st.ClaimFilesOf(ctx, id)
	if err != nil {
		add("store claim_files", "%v", err)
		return ps
	}
	if len(rows) == 0 {
		add("store claim_files", "no claim file is recorded")
		return ps
	}
	var latest claimfile.File
	for _, row := range rows {
		key, _ := r.bs.Key(row.URI)
		body, err := r.body(ctx, row)
		if err != nil {
			add("blob store", "the claim file cannot be read: %v", err)
			continue
		}
		got := claimfile.Digest(body)
		if path.Base(key) != got+".json" {
			failed(claimfile.CheckBlobDigest, row.URI, "SHA-256 is %s, not the one it is stored under: the claim file was moved or changed", got[:12])
		}
		if got != row.SHA256 {
			failed(claimfile.CheckStoreDigest, row.URI, "SHA-256 is %s, the store recorded %s: the claim file was changed", got[:12], short(row.SHA256))
		}
		if leaf := hex.EncodeToString(claimfile.LeafHash(body)); leaf != row.LeafHash {
			failed(claimfile.CheckLogLeaf, "log leaf "+fmt.Sprint(row.LogIndex), "is not this claim file's")
		}
		var f claimfile.File
		if err := json.Unmarshal(body, &f); err != nil {
			add(row.URI, "not a claim file: %v", err)
			continue
		}
		for _, p := range f.Check() {
			failed(p.Check, p.Where, "%s", p.What)
		}
		latest = f
	}
	if latest.ClaimID == "" {
		return ps
	}
	f := latest
	var rec workflows.AuditRecord
	_ = json.Unmarshal(f.Record, &rec)
	held, err := r.st.GetClaim(ctx, id)
	if err != nil {
		add("store claims", "%v", err)
		return ps
	}
	switch {
	case f.Outcome == "dead-lettered" && held.Closed():
		add("store claims", "is closed (%s), the latest claim file says the run was dead-lettered and no file of a later run exists", held.Status)
	case f.Outcome != "dead-lettered" && held.Status != f.Outcome:
		add("store claims", "status is %s, the claim file says %s", held.Status, f.Outcome)
	}
	if c, ok := f.LastRead(); ok && (c.AmountMinor != held.Claim.AmountMinor || c.Claimant.StripeAccount != held.Claim.Claimant.StripeAccount) {
		add("store claims", "amount %d to %s, the run last read %d to %s", held.Claim.AmountMinor, held.Claim.Claimant.StripeAccount,
			c.AmountMinor, c.Claimant.StripeAccount)
	}
	p, err := r.st.Payout(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound) && rec.Outcome == "paid":
		failed(claimfile.CheckPayment, "store payouts", "no payout is recorded for a paid claim")
	case errors.Is(err, store.ErrNotFound) && rec.TransferID != "":
		// The run took a payment result no payment made: nothing was
		// reserved, so no worker paid (a forged completion; the dead
		// letter says which step refused it).
		failed(claimfile.CheckPayment, "store payouts", "none is recorded, yet the claim file names transfer %s: its run took a payment result no payment made", rec.TransferID)
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		add("store payouts", "%v", err)
	case rec.Outcome == "dead-lettered" && rec.TransferID == "":
		// reserved, perhaps paid: the dead letter names it an unknown effect
	case p.AmountMinor != rec.PayoutMinor || p.TransferID != rec.TransferID:
		failed(claimfile.CheckPayment, "store payouts", "%d by %s, the claim file says %d by %s", p.AmountMinor, p.TransferID, rec.PayoutMinor, rec.TransferID)
	}
	return ps
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
