package approvals

import (
	"time"

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/decision"
)

// The record of a decision and its signed receipt live in package
// decision, below the claim file that verifies them; approvals names them
// as its own, so the gate, the wait and their callers read as before.
type (
	Verdict  = decision.Verdict
	Stage    = decision.Stage
	Request  = decision.Request
	Decision = decision.Decision
	Attempt  = decision.Attempt
	Approval = decision.Approval
	HandedOn = decision.HandedOn
	Receipt  = decision.Receipt
	Verified = decision.Verified
	Refusal  = decision.Refusal
)

// Verdicts, stages and proofs (package decision).
const (
	Approve              = decision.Approve
	Reject               = decision.Reject
	Handoff              = decision.Handoff
	Hold                 = decision.Hold
	StageWaiting         = decision.StageWaiting
	StageEscalated       = decision.StageEscalated
	ProofReceipt         = decision.ProofReceipt
	ProofUnauthenticated = decision.ProofUnauthenticated
)

// Receipts: their type, audience, life and size (package decision).
const (
	ReceiptType       = decision.ReceiptType
	ReceiptAudience   = decision.ReceiptAudience
	DefaultReceiptTTL = decision.DefaultReceiptTTL
	MaxReceiptBytes   = decision.MaxReceiptBytes
	MaxTextBytes      = decision.MaxTextBytes
)

// Refusal codes (package decision).
const (
	CodeUnsigned       = decision.CodeUnsigned
	CodeMalformed      = decision.CodeMalformed
	CodeUnknownKey     = decision.CodeUnknownKey
	CodeBadSignature   = decision.CodeBadSignature
	CodeExpired        = decision.CodeExpired
	CodeNotYetValid    = decision.CodeNotYetValid
	CodeTooLongLived   = decision.CodeTooLongLived
	CodeReplayed       = decision.CodeReplayed
	CodeOtherClaim     = decision.CodeOtherClaim
	CodeStaleHash      = decision.CodeStaleHash
	CodeWrongVerdict   = decision.CodeWrongVerdict
	CodeNotVouched     = decision.CodeNotVouched
	CodeNotWaiting     = decision.CodeNotWaiting
	CodeUnknown        = decision.CodeUnknown
	CodeSelfApproval   = decision.CodeSelfApproval
	CodeAmender        = decision.CodeAmender
	CodeNeedSupervisor = decision.CodeNeedSupervisor
	CodeOverLimit      = decision.CodeOverLimit
	CodeNeedsReason    = decision.CodeNeedsReason
	CodeBadAmount      = decision.CodeBadAmount
	CodeTooLarge       = decision.CodeTooLarge
	CodeSameApprover   = decision.CodeSameApprover
	CodeHandedOn       = decision.CodeHandedOn
	CodeWrongAudience  = decision.CodeWrongAudience
	CodeNothingToPay   = decision.CodeNothingToPay
)

// Audience is decision.Audience.
func Audience(namespace, deployment string) string { return decision.Audience(namespace, deployment) }

// NewReceipt is decision.NewReceipt.
func NewReceipt(r Receipt, now time.Time, ttl time.Duration) (Receipt, error) {
	return decision.NewReceipt(r, now, ttl)
}

// Sign is decision.Sign.
func Sign(key authority.KeyFile, r Receipt) (string, error) { return decision.Sign(key, r) }

// VerifyReceipt is decision.VerifyReceipt.
func VerifyReceipt(token string, book authority.Book, audience string, now time.Time, maxTTL time.Duration) (Verified, error) {
	return decision.VerifyReceipt(token, book, audience, now, maxTTL)
}

// PeekReceipt is decision.PeekReceipt.
func PeekReceipt(token string) (kid string, r Receipt, ok bool) { return decision.PeekReceipt(token) }

// RefusalCode is decision.RefusalCode.
func RefusalCode(err error) string { return decision.RefusalCode(err) }

// RefusalMessage is decision.RefusalMessage.
func RefusalMessage(err error) string { return decision.RefusalMessage(err) }

func refuse(code, format string, args ...any) *Refusal { return decision.Refuse(code, format, args...) }

func trim(s string) string { return decision.Shown(s) }
