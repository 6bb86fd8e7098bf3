package decision

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"go.temporal.io/sdk/temporal"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// A decision receipt is a compact JWS (EdDSA over Ed25519) that proves who
// decided what about which request. The approver is whoever the receipt
// proves, never a name typed into a signal: a receipt is signed by the
// approver's own key (sub must be that approver) or by a service key the
// directory lets vouch for any approver (the adjuster inbox).
//
//	header  {"alg":"EdDSA","kid":"adjuster-17-…","typ":"dc-receipt+jwt"}
//	payload {"aud":"durableclaims","sub":"adjuster-17","claim_id":"claim-0042",
//	         "request_sha256":"<64 hex>","verdict":"approve","amount_minor":150000,
//	         "reason":"…","note":"…","iat":…,"exp":…,"jti":"…"}
//
// Verification is pure (signature, claims, the workflow's own clock), so it
// runs in workflow code: the keys are the directory snapshot recorded in
// history when the approval opened.

// ReceiptType is the JWS "typ" of a decision receipt, so no other token a
// key might sign passes for one.
const ReceiptType = "dc-receipt+jwt"

// ReceiptAudience is the "aud" of receipts for runs started before
// receipts named their deployment.
const ReceiptAudience = "durableclaims"

// Audience is the "aud" a receipt for a claim in this namespace of this
// insurer deployment carries: a receipt signed in staging does not decide a
// claim in production, even where the two share keys and claim IDs.
func Audience(namespace, deployment string) string {
	return ReceiptAudience + "/" + namespace + "/" + deployment
}

// DefaultReceiptTTL is how long a receipt issued by claimsctl or the inbox
// stays valid.
const DefaultReceiptTTL = 15 * time.Minute

// Limits on what a decision may carry: a flood of large decisions must not
// grow a workflow's state without bound.
const (
	MaxReceiptBytes = 4 << 10
	MaxTextBytes    = 1 << 10 // reason, note
)

// Receipt is the signed content of a decision receipt.
type Receipt struct {
	Audience      string  `json:"aud"`
	Subject       string  `json:"sub"`
	ClaimID       string  `json:"claim_id"`
	RequestSHA256 string  `json:"request_sha256"`
	Verdict       Verdict `json:"verdict"`
	// AmountMinor, when set on an approval, is a lower payout than the
	// request's: the approver approves this much and no more.
	AmountMinor int64 `json:"amount_minor,omitempty"`
	// AssignTo is the colleague a hand-off names.
	AssignTo string `json:"assign_to,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Note     string `json:"note,omitempty"`
	IssuedAt int64  `json:"iat"`
	Expiry   int64  `json:"exp"`
	ID       string `json:"jti"`
}

// NewReceipt fills a receipt's times and unique ID, valid for ttl from now,
// and its audience when it names none (ReceiptAudience: set it to the
// audience the claim's status asks for).
func NewReceipt(r Receipt, now time.Time, ttl time.Duration) (Receipt, error) {
	var id [16]byte
	if _, err := io.ReadFull(rand.Reader, id[:]); err != nil {
		return Receipt{}, err
	}
	if r.Audience == "" {
		r.Audience = ReceiptAudience
	}
	r.ID = hex.EncodeToString(id[:])
	r.IssuedAt, r.Expiry = now.Unix(), now.Add(ttl).Unix()
	return r, nil
}

// Sign signs a receipt with a private key file's key.
func Sign(key authority.KeyFile, r Receipt) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key.Key},
		(&jose.SignerOptions{}).WithType(ReceiptType))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// Refusal codes: stable names for why a decision was refused, for the
// audit trail and for alerts.
const (
	CodeUnsigned       = "unsigned"
	CodeMalformed      = "malformed"
	CodeUnknownKey     = "unknown-key"
	CodeBadSignature   = "bad-signature"
	CodeExpired        = "expired"
	CodeNotYetValid    = "not-yet-valid"
	CodeTooLongLived   = "too-long-lived"
	CodeReplayed       = "replayed"
	CodeOtherClaim     = "other-claim"
	CodeStaleHash      = "stale-hash"
	CodeWrongVerdict   = "wrong-verdict"
	CodeNotVouched     = "not-vouched"
	CodeNotWaiting     = "not-waiting"
	CodeUnknown        = "unknown-approver"
	CodeSelfApproval   = "self-approval"
	CodeAmender        = "amended-by-approver"
	CodeNeedSupervisor = "needs-supervisor"
	CodeOverLimit      = "over-limit"
	CodeNeedsReason    = "needs-reason"
	CodeBadAmount      = "bad-amount"
	CodeTooLarge       = "too-large"
	CodeSameApprover   = "same-approver"
	CodeHandedOn       = "handed-on-too-often"
	CodeWrongAudience  = "wrong-audience"
	// CodeNothingToPay: the request pays nothing (a denial a person must
	// decide); it can only be rejected, with a reason.
	CodeNothingToPay = "nothing-to-pay"
)

// codes are the refusal codes, for telling a refused update from another
// failure.
var codes = map[string]bool{CodeUnsigned: true, CodeMalformed: true, CodeUnknownKey: true, CodeBadSignature: true,
	CodeExpired: true, CodeNotYetValid: true, CodeTooLongLived: true, CodeReplayed: true, CodeOtherClaim: true, CodeStaleHash: true,
	CodeWrongVerdict: true, CodeNotVouched: true, CodeNotWaiting: true, CodeUnknown: true, CodeSelfApproval: true, CodeAmender: true,
	CodeNeedSupervisor: true, CodeOverLimit: true, CodeNeedsReason: true, CodeBadAmount: true, CodeTooLarge: true, CodeSameApprover: true,
	CodeHandedOn: true, CodeWrongAudience: true}

// Refusal is why a decision was refused: a code and a sentence.
type Refusal struct {
	Code string
	Msg  string
}

func (r *Refusal) Error() string { return r.Msg }

// Refuse is a refusal with its code and sentence.
func Refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Shown is a name or ID from a decision as a refusal or the trail shows
// it: at most 64 bytes of it.
func Shown(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}

// RefusalCode is the code of a refusal error, or "" for another error: a
// Refusal, or a refused update as its sender receives it (the code is the
// application error's type).
func RefusalCode(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && codes[app.Type()] {
		return app.Type()
	}
	return ""
}

// RefusalMessage is the sentence of a refusal, for a person: without the
// type and retry state an update's error carries for machines.
func RefusalMessage(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Msg
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

// Clock skew allowed between the signer's clock and the workflow's.
const receiptLeeway = 30 * time.Second

var (
	jtiPattern  = regexp.MustCompile(`^[A-Za-z0-9._-]{8,128}$`)
	fullHash    = regexp.MustCompile(`^[0-9a-f]{64}$`)
	receiptAlgs = []jose.SignatureAlgorithm{jose.EdDSA}
)

// Verified is a receipt whose signature and times checked out, with the
// key that signed it.
type Verified struct {
	Receipt Receipt
	Signer  authority.Signer
}

// VerifyReceipt checks a receipt's signature against the directory's keys,
// its audience (empty: ReceiptAudience), its times against now (the
// workflow's clock), and that it is well formed. What the receipt is for
// (this claim, this request, this approver's authority, a fresh jti) is the
// Gate's to check.
func VerifyReceipt(token string, book authority.Book, audience string, now time.Time, maxTTL time.Duration) (Verified, error) {
	if audience == "" {
		audience = ReceiptAudience
	}
	if len(token) > MaxReceiptBytes {
		return Verified{}, Refuse(CodeTooLarge, "receipt is %d bytes, more than %d", len(token), MaxReceiptBytes)
	}
	jws, err := jose.ParseSignedCompact(token, receiptAlgs)
	if err != nil {
		return Verified{}, Refuse(CodeMalformed, "receipt is not a compact EdDSA JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return Verified{}, Refuse(CodeMalformed, "receipt has %d signatures, want 1", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	if typ, _ := h.ExtraHeaders[jose.HeaderType].(string); typ != ReceiptType {
		return Verified{}, Refuse(CodeMalformed, "receipt typ is %q, want %q", typ, ReceiptType)
	}
	signer, ok := book.Signer(h.KeyID)
	if !ok {
		return Verified{}, Refuse(CodeUnknownKey, "receipt is signed by key %q, which the approver directory does not list", Shown(h.KeyID))
	}
	payload, err := jws.Verify(ed25519.PublicKey(signer.Key.PublicKey))
	if err != nil {
		return Verified{}, Refuse(CodeBadSignature, "receipt signature does not verify with key %s", signer.Key.ID)
	}
	var r Receipt
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Verified{}, Refuse(CodeMalformed, "receipt payload: %v", err)
	}
	switch {
	case r.Audience != audience:
		return Verified{}, Refuse(CodeWrongAudience, "receipt audience is %q, this claim's is %q: it was signed for another namespace or deployment",
			Shown(r.Audience), audience)
	case r.Subject == "":
		return Verified{}, Refuse(CodeMalformed, "receipt names no approver (sub)")
	case !jtiPattern.MatchString(r.ID):
		return Verified{}, Refuse(CodeMalformed, "receipt jti must be 8 to 128 letters, digits, '.', '_' or '-'")
	case !fullHash.MatchString(r.RequestSHA256):
		return Verified{}, Refuse(CodeMalformed, "receipt request_sha256 must be the full 64 lowercase hex digits of the request shown")
	case r.Verdict != Approve && r.Verdict != Reject && r.Verdict != Handoff:
		return Verified{}, Refuse(CodeMalformed, "receipt verdict must be %q, %q or %q", Approve, Reject, Handoff)
	case (r.Verdict == Handoff) != (r.AssignTo != ""):
		return Verified{}, Refuse(CodeMalformed, "a hand-off, and only a hand-off, names whom it hands the request to (assign_to)")
	case len(r.Reason) > MaxTextBytes || len(r.Note) > MaxTextBytes:
		return Verified{}, Refuse(CodeTooLarge, "receipt reason and note may be at most %d bytes each", MaxTextBytes)
	case signer.Approver != "" && signer.Approver != r.Subject:
		return Verified{}, Refuse(CodeNotVouched, "receipt for %s is signed with %s's own key %s: an approver's key signs only their own decisions",
			Shown(r.Subject), signer.Approver, signer.Key.ID)
	}
	iat, exp := time.Unix(r.IssuedAt, 0), time.Unix(r.Expiry, 0)
	switch {
	case r.IssuedAt <= 0 || r.Expiry <= r.IssuedAt:
		return Verified{}, Refuse(CodeMalformed, "receipt needs iat and a later exp")
	case exp.Sub(iat) > maxTTL:
		return Verified{}, Refuse(CodeTooLongLived, "receipt is valid for %s, longer than the policy's %s", exp.Sub(iat), maxTTL)
	case now.Add(receiptLeeway).Before(iat):
		return Verified{}, Refuse(CodeNotYetValid, "receipt was issued at %s, in the future", iat.UTC().Format(time.RFC3339))
	case !now.Before(exp.Add(receiptLeeway)):
		return Verified{}, Refuse(CodeExpired, "receipt expired at %s", exp.UTC().Format(time.RFC3339))
	}
	return Verified{Receipt: r, Signer: signer}, nil
}

// PeekReceipt reads what a receipt claims without verifying it: for
// recording a refused attempt, never for deciding anything.
func PeekReceipt(token string) (kid string, r Receipt, ok bool) {
	if len(token) > MaxReceiptBytes {
		return "", r, false
	}
	jws, err := jose.ParseSignedCompact(token, receiptAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return "", r, false
	}
	if json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &r) != nil {
		return jws.Signatures[0].Protected.KeyID, Receipt{}, false
	}
	return jws.Signatures[0].Protected.KeyID, r, true
}
