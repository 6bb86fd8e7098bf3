package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Step numbers the nine steps of a claim run (docs/design.md).
type Step int

const (
	StepIntake Step = iota + 1
	StepTriage
	StepCoverage
	StepAssess
	StepApproval
	StepPay
	StepNotify
	StepClose
	StepAudit
)

var stepNames = [...]string{"", "intake", "triage", "coverage", "assess", "approval", "pay", "notify", "close", "audit"}

func (s Step) String() string {
	if s < StepIntake || s > StepAudit {
		return "step" + strconv.Itoa(int(s))
	}
	return stepNames[s]
}

// IdempotencyKey identifies one side effect of one claim run. It is derived
// from the workflow ID and the step, never from the attempt, so every retry
// and every resumed run presents the same key to the receiver.
type IdempotencyKey string

// MaxKeyLen is Stripe's limit on Idempotency-Key, and ours everywhere.
const MaxKeyLen = 255

// StepKey returns "<workflowID>:step<N>", shortened deterministically if long.
func StepKey(workflowID string, step Step) IdempotencyKey {
	return shorten(workflowID + ":step" + strconv.Itoa(int(step)))
}

// Sub derives a key for a secondary effect inside a step (an escalation
// e-mail within step 5, say): "<key>:<part>".
func (k IdempotencyKey) Sub(part string) IdempotencyKey {
	return shorten(string(k) + ":" + part)
}

// Within reports whether k is the key parent or a key derived from it with
// Sub: "claim-0042:step2:turn1" is within "claim-0042:step2".
func (k IdempotencyKey) Within(parent IdempotencyKey) bool {
	return k == parent || strings.HasPrefix(string(k), string(parent)+":")
}

// Valid reports whether k could have come from StepKey: non-empty and short
// enough for every receiver. Side-effecting activities refuse anything else.
func (k IdempotencyKey) Valid() bool { return k != "" && len(k) <= MaxKeyLen }

func (k IdempotencyKey) String() string { return string(k) }

// shorten keeps keys within MaxKeyLen and in printable ASCII, which every
// receiver accepts in a header. Any other key becomes a readable prefix (at
// most 190 bytes, other bytes replaced by '_'), '~', and the SHA-256 of the
// whole key: deterministic, distinct keys stay distinct, and the prefix still
// tells a human which claim it belongs to.
func shorten(k string) IdempotencyKey {
	if len(k) <= MaxKeyLen && printableASCII(k) {
		return IdempotencyKey(k)
	}
	prefix := []byte(k[:min(len(k), MaxKeyLen-1-2*sha256.Size)])
	for i, b := range prefix {
		if b <= ' ' || b > '~' {
			prefix[i] = '_'
		}
	}
	sum := sha256.Sum256([]byte(k))
	return IdempotencyKey(string(prefix) + "~" + hex.EncodeToString(sum[:]))
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
