package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/approvals"
	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/claim"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/workflows"
)

// keygen makes an Ed25519 key pair for an approver (or a service that
// vouches for approvers), writes the private key owner-only, and prints
// the public key as the directory lists it; with --directory it adds it
// there.
func keygen(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	approver := fs.String("approver", "", "the approver the key belongs to (their own key signs only their decisions)")
	service := fs.String("service", "", "or: a service whose key vouches for any approver (the adjuster inbox)")
	path := fs.String("out", "", "where to write the private key (created 0600; never overwritten)")
	directory := fs.String("directory", "", "add the public key to this approver directory file (created from the sample if missing)")
	ledger := fs.String("ledger", "", "or: the name of a ledger key, which signs the claim-file log's checkpoints")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ledger != "" {
		if *approver != "" || *service != "" || *directory != "" || *path == "" || fs.NArg() != 0 {
			return errors.New("usage: claimsctl keygen --ledger NAME --out FILE")
		}
		return ledgerKeygen(*ledger, *path, out)
	}
	if (*approver == "") == (*service == "") || *path == "" || fs.NArg() != 0 {
		return errors.New("usage: claimsctl keygen (--approver ID | --service NAME) --out FILE [--directory approvers.json]")
	}
	owner := *approver + *service
	kf, err := authority.GenerateKey(owner, *service != "")
	if err != nil {
		return err
	}
	if err := kf.Write(*path); err != nil {
		return err
	}
	pub, err := json.Marshal(kf.Public().JWK())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "private key for %s: %s (keep it there: whoever holds it decides as %s)\n", owner, *path, owner)
	if *directory != "" {
		if err := authority.AddKey(*directory, kf); err != nil {
			return err
		}
		fmt.Fprintf(out, "public key %s added to %s\n", kf.Key.KeyID, *directory)
		return nil
	}
	if *service != "" {
		fmt.Fprintf(out, "add to the directory's \"service_keys\": {\"name\":%q,\"key\":%s}\n", owner, pub)
	} else {
		fmt.Fprintf(out, "add to %s's \"keys\" in the directory: %s\n", owner, pub)
	}
	return nil
}

// revokeKey removes a key from the approver directory file.
func revokeKey(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("revoke-key", flag.ContinueOnError)
	directory := fs.String("directory", "", "the approver directory file the workers read (APPROVERS_FILE)")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *directory == "" {
		return errors.New("usage: claimsctl revoke-key --directory approvers.json KID")
	}
	if err := authority.RemoveKey(*directory, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Fprintf(out, "key %s removed from %s: approvals opened from now on do not know it, and a decision it signed "+
		"that no claim has acted on yet is voided before the payment\n", fs.Arg(0), *directory)
	return nil
}

// receipt signs a decision receipt for the request a claim is waiting on,
// and prints the signal or update payload: {"receipt":"…"}. The request is
// read from the claim's status query (or given with --request-sha256) and
// shown on stderr, so the approver sees what they sign.
func receipt(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("receipt", flag.ContinueOnError)
	f := receiptFlags(fs)
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 || *f.key == "" {
		return errors.New("usage: claimsctl receipt approve|reject|handoff CLAIM --key FILE [--as APPROVER] [--reason …] [--note …] [--amount 1400.00] [--to COLLEAGUE]")
	}
	_, tok, err := f.sign(ctx, approvals.Verdict(fs.Arg(0)), fs.Arg(1), errOut)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(approvals.Input{Receipt: tok})
}

// signing is what a receipt says beyond its verdict and claim, and the
// key that signs it: the flags of receipt and decide.
type signing struct {
	key, as, reason, note, amount, to, hash, audience *string
	ttl                                               *time.Duration
}

func receiptFlags(fs *flag.FlagSet) signing {
	return signing{
		key:      fs.String("key", "", "the signing key file (claimsctl keygen)"),
		as:       fs.String("as", "", "with a service key: the approver it vouches for"),
		reason:   fs.String("reason", "", "why (required to reject, or to approve a lower amount)"),
		note:     fs.String("note", "", "a note for the audit trail"),
		amount:   fs.String("amount", "", "approve this lower amount instead of the request's (needs --reason)"),
		to:       fs.String("to", "", "handoff: the colleague to hand the request to (send it with the decide update)"),
		hash:     fs.String("request-sha256", "", "the request's full hash, when it was read elsewhere (default: ask the claim)"),
		audience: fs.String("audience", "", "with --request-sha256: the receipt's audience (default: this namespace and INSURER_DEPLOYMENT, as the claim's status names it)"),
		ttl:      fs.Duration("ttl", approvals.DefaultReceiptTTL, "how long the receipt stays valid"),
	}
}

// sign makes and signs the receipt for verdict on claim id, refusing what
// the workflow would refuse before anything is signed; preview says what
// it does (fromClaim).
func (f signing) sign(ctx context.Context, verdict approvals.Verdict, id string, preview io.Writer) (approvals.Receipt, string, error) {
	var r approvals.Receipt
	switch {
	case verdict != approvals.Approve && verdict != approvals.Reject && verdict != approvals.Handoff:
		return r, "", fmt.Errorf("receipt: the verdict is approve, reject or handoff, not %q", verdict)
	case (verdict == approvals.Handoff) != (*f.to != ""):
		return r, "", errors.New("receipt: a handoff names the colleague with --to, and only a handoff does")
	}
	kf, sub, err := signingKey(*f.key, *f.as)
	if err != nil {
		return r, "", err
	}
	// What the workflow would refuse is refused here, before anything is
	// signed: a rejection says why, a lower amount says why and is lower.
	switch {
	case verdict == approvals.Reject && strings.TrimSpace(*f.reason) == "":
		return r, "", errors.New("receipt: a rejection needs a reason (--reason \"…\"): the claimant is told the claim is not paid, and the audit says why")
	case *f.amount != "" && verdict != approvals.Approve:
		return r, "", errors.New("receipt: only an approval may name a lower amount (--amount)")
	case *f.amount != "" && strings.TrimSpace(*f.reason) == "":
		return r, "", errors.New("receipt: approving a lower amount needs a reason (--reason \"…\")")
	}
	r = approvals.Receipt{Subject: sub, ClaimID: id, Verdict: verdict, Reason: *f.reason, Note: *f.note, RequestSHA256: *f.hash, AssignTo: *f.to,
		Audience: *f.audience}
	if r.Audience == "" {
		r.Audience = approvals.Audience(namespace(), config.Get("INSURER_DEPLOYMENT", "local"))
	}
	if r.RequestSHA256 == "" {
		if err := fromClaim(ctx, &r, *f.amount, preview); err != nil {
			return r, "", err
		}
	} else if *f.amount != "" {
		return r, "", errors.New("receipt: --amount needs the request from the claim (leave out --request-sha256)")
	}
	if r, err = approvals.NewReceipt(r, time.Now(), *f.ttl); err != nil {
		return r, "", err
	}
	tok, err := approvals.Sign(kf, r)
	return r, tok, err
}

// signingKey reads the key file and says whom a receipt it signs is for:
// its approver, or, for a service key, the approver it vouches for (as).
func signingKey(path, as string) (authority.KeyFile, string, error) {
	kf, err := authority.ReadKeyFile(path)
	if err != nil {
		return kf, "", err
	}
	switch {
	case kf.Service != "" && as == "":
		return kf, "", fmt.Errorf("receipt: %s is %s's service key: say which approver it vouches for with --as", path, kf.Service)
	case kf.Service != "":
		return kf, as, nil
	case as != "" && as != kf.Approver:
		return kf, "", fmt.Errorf("receipt: %s is %s's own key; it cannot sign for %s", path, kf.Approver, as)
	}
	return kf, kf.Approver, nil
}

// fromClaim asks the claim for the request awaiting decision and binds the
// receipt to it (its hash, its audience, the lower amount if one is
// given), then previews on errOut what the receipt does, so the approver
// sees what they sign.
func fromClaim(ctx context.Context, r *approvals.Receipt, amount string, errOut io.Writer) error {
	id := r.ClaimID
	s, err := claimStatus(ctx, id)
	if err != nil {
		return fmt.Errorf("receipt: asking %s for the request awaiting decision: %w", id, err)
	}
	if s.Approval == nil || s.Approval.Decision != nil || (s.State != workflows.StatusWaiting && s.State != workflows.StatusEscalated) {
		return fmt.Errorf("receipt: %s is %s, not waiting for a decision", id, s.State)
	}
	// The claim says whom a receipt for it must be addressed to (empty
	// for runs before receipts named it).
	req := &s.Approval.Request
	r.RequestSHA256, r.Audience = s.Approval.RequestSHA256, s.Audience
	if amount != "" {
		if r.AmountMinor, err = claim.ParseAmount(amount, req.Currency); err != nil {
			return fmt.Errorf("receipt: --amount: %w", err)
		}
		if r.AmountMinor <= 0 || r.AmountMinor >= req.AmountMinor {
			return fmt.Errorf("receipt: --amount %s must be above 0 and below the request's %s %s", amount, req.Amount, strings.ToUpper(req.Currency))
		}
	}
	money := func(minor int64) string {
		return claim.FormatAmount(minor, req.Currency) + " " + strings.ToUpper(req.Currency)
	}
	switch {
	case r.Verdict == approvals.Reject:
		fmt.Fprintf(errOut, "reject %s as %s: pay nothing (request of %s to %s); reason: %s; request sha256 %s\n", id, r.Subject,
			money(req.AmountMinor), req.PayeeName, r.Reason, r.RequestSHA256)
	case r.Verdict == approvals.Handoff:
		fmt.Fprintf(errOut, "hand %s on to %s, as %s (request of %s to %s); request sha256 %s\n", id, r.AssignTo, r.Subject,
			money(req.AmountMinor), req.PayeeName, r.RequestSHA256)
	case r.AmountMinor > 0:
		fmt.Fprintf(errOut, "approve %s as %s: pay %s, not the %s asked, to %s (%s); reason: %s; request sha256 %s\n", id, r.Subject,
			money(r.AmountMinor), money(req.AmountMinor), req.PayeeName, req.Payee, r.Reason, r.RequestSHA256)
	default:
		fmt.Fprintf(errOut, "approve %s as %s: pay %s to %s (%s); request sha256 %s\n", id, r.Subject, money(req.AmountMinor),
			req.PayeeName, req.Payee, r.RequestSHA256)
	}
	for _, why := range req.Reasons {
		fmt.Fprintf(errOut, "  needs a human: %s\n", why)
	}
	if q := s.Approval.Quorum; q > 1 {
		fmt.Fprintf(errOut, "  four eyes: %d of %d approvals so far\n", len(s.Approval.Votes), q)
	}
	return nil
}
