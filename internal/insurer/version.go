package insurer

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Version names the policy: "sha256:" and the hex SHA-256 of its JSON as
// intake records it in a run's history (encoding/json: fields in
// declaration order, map keys sorted). Intake records it beside the policy
// (activities.LoadClaimResult), so the version a run works by is in its
// history, never recomputed by later code; anyone holding the recorded
// policy can recompute it with VersionOfJSON.
func (r Rules) Version() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // plain fields and Durations: cannot fail
	}
	return VersionOfJSON(b)
}

// VersionOfJSON is the version of a policy as recorded: its JSON, compacted
// (a claim file holds it indented), digested. "" if it is not JSON.
func VersionOfJSON(policy []byte) string {
	var compact bytes.Buffer
	if err := json.Compact(&compact, policy); err != nil {
		return ""
	}
	sum := sha256.Sum256(compact.Bytes())
	return "sha256:" + hex.EncodeToString(sum[:])
}
