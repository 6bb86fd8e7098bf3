package authority

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	jose "github.com/go-jose/go-jose/v4"
)

// Key is a public Ed25519 key that may sign decision receipts, named by its
// key ID (the JWS "kid"). Rotation adds a key with a new ID beside the old
// one; revocation removes it from the directory.
type Key struct {
	ID        string `json:"kid"`
	PublicKey []byte `json:"ed25519"`
}

// Service is a key allowed to vouch for any approver in the directory: a
// system that authenticates approvers itself (the adjuster inbox signs for
// whoever signed in).
type Service struct {
	Name string `json:"name"`
	Key  Key    `json:"key"`
}

// Signer says who a key ID belongs to.
type Signer struct {
	Key Key
	// Approver is set for an approver's own key: it signs only their own
	// decisions.
	Approver string
	// Service is set for a service key: it vouches for any approver.
	Service string
}

// Signer finds the key with id among the approvers' and service keys.
func (b Book) Signer(id string) (Signer, bool) {
	for _, a := range b.Approvers {
		for _, k := range a.Keys {
			if k.ID == id {
				return Signer{Key: k, Approver: a.ID}, true
			}
		}
	}
	for _, s := range b.Services {
		if s.Key.ID == id {
			return Signer{Key: s.Key, Service: s.Name}, true
		}
	}
	return Signer{}, false
}

// MaxKeyIDLen bounds a key ID.
const MaxKeyIDLen = 128

// parseKey reads a public JWK from the directory file. A private key there
// is refused: private keys stay with the person or service they belong to.
func parseKey(raw json.RawMessage) (Key, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return Key{}, fmt.Errorf("not a JWK: %w", err)
	}
	if !jwk.IsPublic() {
		return Key{}, errors.New("is a private key: the directory holds public keys only")
	}
	pub, ok := jwk.Key.(ed25519.PublicKey)
	if !ok {
		return Key{}, fmt.Errorf("is a %T, want an Ed25519 key (kty OKP, crv Ed25519)", jwk.Key)
	}
	if jwk.KeyID == "" || len(jwk.KeyID) > MaxKeyIDLen {
		return Key{}, fmt.Errorf("needs a kid of 1 to %d characters", MaxKeyIDLen)
	}
	return Key{ID: jwk.KeyID, PublicKey: []byte(pub)}, nil
}

// JWK is the key's public JWK, as the directory file lists it.
func (k Key) JWK() jose.JSONWebKey {
	return jose.JSONWebKey{Key: ed25519.PublicKey(k.PublicKey), KeyID: k.ID, Algorithm: string(jose.EdDSA), Use: "sig"}
}

// KeyFile is a private signing key as it is kept on disk by its owner
// (0600): an approver's own key, or a service's.
type KeyFile struct {
	Approver string          `json:"approver,omitempty"`
	Service  string          `json:"service,omitempty"`
	Key      jose.JSONWebKey `json:"key"`
}

// Public is the key's public half.
func (f KeyFile) Public() Key {
	priv := f.Key.Key.(ed25519.PrivateKey)
	return Key{ID: f.Key.KeyID, PublicKey: []byte(priv.Public().(ed25519.PublicKey))}
}

// GenerateKey makes a new Ed25519 key pair for an approver (service false)
// or a service. Its key ID is the owner's name and the start of the key's
// RFC 7638 thumbprint, so a rotation gets a new ID.
func GenerateKey(owner string, service bool) (KeyFile, error) {
	if owner == "" || len(owner) > 64 || strings.ContainsAny(owner, " /\\\"") {
		return KeyFile{}, fmt.Errorf("key owner %q: want 1 to 64 characters, no spaces, slashes or quotes", owner)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return KeyFile{}, err
	}
	jwk := jose.JSONWebKey{Key: priv, Algorithm: string(jose.EdDSA), Use: "sig"}
	pub := jwk.Public()
	thumb, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return KeyFile{}, err
	}
	jwk.KeyID = owner + "-" + base64.RawURLEncoding.EncodeToString(thumb)[:10]
	f := KeyFile{Key: jwk}
	if service {
		f.Service = owner
	} else {
		f.Approver = owner
	}
	return f, nil
}

// ReadKeyFile reads a private key file. A file that others can read is
// refused: whoever reads it can approve as its owner.
func ReadKeyFile(path string) (KeyFile, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return KeyFile{}, fmt.Errorf("key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return KeyFile{}, fmt.Errorf("key file %s is readable by others (mode %v): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return KeyFile{}, fmt.Errorf("key file: %w", err)
	}
	var f KeyFile
	if err := json.Unmarshal(data, &f); err != nil {
		return KeyFile{}, fmt.Errorf("key file %s: %w", path, err)
	}
	if _, ok := f.Key.Key.(ed25519.PrivateKey); !ok || f.Key.KeyID == "" {
		return KeyFile{}, fmt.Errorf("key file %s: want a private Ed25519 JWK with a kid", path)
	}
	if (f.Approver == "") == (f.Service == "") {
		return KeyFile{}, fmt.Errorf("key file %s: names neither an approver nor a service (or both)", path)
	}
	return f, nil
}

// Write saves the key file owner-only, refusing to overwrite one.
func (f KeyFile) Write(path string) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: a key file is never overwritten (rotate to a new file)", path)
	}
	if err != nil {
		return err
	}
	if _, err := out.Write(append(data, '\n')); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
