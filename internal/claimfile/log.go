package claimfile

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"
)

// The claim-file log is an RFC 6962 Merkle tree whose i-th leaf is the
// i-th claim file's bytes. Its checkpoints (origin, size, root) are signed
// notes: the common checkpoint format of transparency logs, signed with the
// ledger key (Ed25519). Every hash, tree and signature here is the
// libraries'.

// Origin names the log in its checkpoints: one log per namespace.
func Origin(namespace string) string { return "durableclaims.claim-files/" + namespace }

// LeafHash is the log's leaf for a claim file's bytes.
func LeafHash(file []byte) []byte { return rfc6962.DefaultHasher.HashLeaf(file) }

var factory = compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}

// Root is the root hash of a log holding leaves (leaf hashes, in order).
func Root(leaves [][]byte) ([]byte, error) {
	if len(leaves) == 0 {
		return rfc6962.DefaultHasher.EmptyRoot(), nil
	}
	return rangeRoot(leaves)
}

func rangeRoot(leaves [][]byte) ([]byte, error) {
	r := factory.NewEmptyRange(0)
	for _, l := range leaves {
		if err := r.Append(l, nil); err != nil {
			return nil, err
		}
	}
	return r.GetRootHash(nil)
}

// InclusionProof proves leaf index is in the log of the first size leaves.
func InclusionProof(leaves [][]byte, index, size uint64) ([][]byte, error) {
	if size > uint64(len(leaves)) || index >= size {
		return nil, fmt.Errorf("claim-file log: leaf %d of %d is not in a log of %d", index, size, len(leaves))
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	hashes := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		begin, end := id.Coverage()
		if hashes[i], err = rangeRoot(leaves[begin:end]); err != nil {
			return nil, err
		}
	}
	return nodes.Rehash(hashes, rfc6962.DefaultHasher.HashChildren)
}

// VerifyInclusion checks that file is leaf index of the log whose
// checkpoint is cp.
func VerifyInclusion(file []byte, index uint64, hashes [][]byte, cp log.Checkpoint) error {
	return proof.VerifyInclusion(rfc6962.DefaultHasher, index, cp.Size, LeafHash(file), hashes, cp.Hash)
}

// Checkpoint is a signed checkpoint and what it says.
type Checkpoint struct {
	log.Checkpoint
	Note []byte // the signed note, as published
}

// LedgerKey signs the log's checkpoints: a note signer key
// ("PRIVATE+KEY+name+hash+…"), kept by the workers and claimsctl only.
type LedgerKey struct{ signer note.Signer }

// GenerateLedgerKey makes a new ledger key pair named name: the private
// key for LEDGER_KEY, the public one to publish (and give to auditors).
func GenerateLedgerKey(name string) (private, public string, err error) {
	return note.GenerateKey(rand.Reader, name)
}

// ReadLedgerKey reads a ledger key file.
func ReadLedgerKey(path string) (LedgerKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return LedgerKey{}, fmt.Errorf("ledger key: %w", err)
	}
	s, err := note.NewSigner(strings.TrimSpace(string(b)))
	if err != nil {
		return LedgerKey{}, fmt.Errorf("ledger key %s: %w", path, err)
	}
	return LedgerKey{signer: s}, nil
}

// Sign makes the signed checkpoint of the log of leaves.
func (k LedgerKey) Sign(origin string, leaves [][]byte) (Checkpoint, error) {
	root, err := Root(leaves)
	if err != nil {
		return Checkpoint{}, err
	}
	cp := log.Checkpoint{Origin: origin, Size: uint64(len(leaves)), Hash: root}
	signed, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, k.signer)
	if err != nil {
		return Checkpoint{}, err
	}
	return Checkpoint{Checkpoint: cp, Note: signed}, nil
}

// OpenCheckpoint checks a published checkpoint's signature with the ledger's
// public key and returns what it says.
func OpenCheckpoint(signed []byte, origin, publicKey string) (Checkpoint, error) {
	v, err := note.NewVerifier(strings.TrimSpace(publicKey))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger public key: %w", err)
	}
	cp, _, _, err := log.ParseCheckpoint(signed, origin, v)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint: %w", err)
	}
	return Checkpoint{Checkpoint: *cp, Note: signed}, nil
}

// Proof is a claim file's inclusion proof: leaf Index of the log of Size
// leaves, as the checkpoint beside it says.
type Proof struct {
	Origin string   `json:"origin"`
	Index  uint64   `json:"index"`
	Size   uint64   `json:"size"`
	Hashes []string `json:"hashes"` // base64, as checkpoints write hashes
}

// NewProof encodes hashes for a bundle.
func NewProof(origin string, index, size uint64, hashes [][]byte) Proof {
	p := Proof{Origin: origin, Index: index, Size: size, Hashes: []string{}}
	for _, h := range hashes {
		p.Hashes = append(p.Hashes, base64.StdEncoding.EncodeToString(h))
	}
	return p
}

// Decode returns the proof's hashes.
func (p Proof) Decode() ([][]byte, error) {
	var out [][]byte
	for i, s := range p.Hashes {
		h, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(h) != rfc6962.DefaultHasher.Size() {
			return nil, fmt.Errorf("proof hash %d is not a base64 SHA-256", i)
		}
		out = append(out, h)
	}
	return out, nil
}

// Encode writes v as the indented JSON every claim-file artefact uses.
func Encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
