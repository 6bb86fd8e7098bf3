// Package temporalauth gives each program that talks to a Temporal server
// of the insurer's own an identity: an ES256 JWT, signed by a key whose
// public half the server fetches as a JWKS, whose subject
// (durableclaims-<role>) the server's authorizer reads (temporalserver/authz:
// who may call what) and whose permissions bind it to its namespace. No call
// to such a frontend is anonymous.
//
//	role        permissions                         for
//	admin       temporal-system:admin, <ns>:admin   namespaces, search attributes; an operator too
//	operator    <ns>:admin                          routing a deployment, reset, terminate, delete
//	worker      <ns>:write                          bin/worker: the only one that takes and answers claims' tasks
//	whatif      <ns>:write                          claimsctl whatif: its own what-if's tasks only
//	starter     <ns>:write                          bin/starter: starts claims
//	inbox       <ns>:write                          bin/inbox: the decide update
//	claimsctl   <ns>:write                          bin/claimsctl, temporal workflow signal
//	reader      <ns>:read                           dashboards, the UI, auditors, claimsctl's reads
//
// The activities still check their own authority against the claims store:
// on a server that is not the insurer's own (the dev server, a cloud
// namespace) anyone who reaches the frontend may try.
package temporalauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Roles, one identity per program.
const (
	RoleAdmin     = "admin"
	RoleOperator  = "operator"
	RoleWorker    = "worker"
	RoleWhatIf    = "whatif"
	RoleStarter   = "starter"
	RoleInbox     = "inbox"
	RoleClaimsctl = "claimsctl"
	RoleReader    = "reader"
)

// Roles lists every role an issuer makes a token for.
var Roles = []string{RoleAdmin, RoleOperator, RoleWorker, RoleWhatIf, RoleStarter, RoleInbox, RoleClaimsctl, RoleReader}

// Permissions are the permissions claim of role's token in namespace.
func Permissions(role, namespace string) []string {
	switch role {
	case RoleAdmin:
		return []string{"temporal-system:admin", namespace + ":admin"}
	case RoleOperator:
		return []string{namespace + ":admin"}
	case RoleReader:
		return []string{namespace + ":read"}
	}
	return []string{namespace + ":write"}
}

// Subject is role's identity ("sub") in the server's log and audit.
func Subject(role string) string { return "durableclaims-" + role }

// Issuer signs the tokens.
type Issuer struct {
	key *ecdsa.PrivateKey
	kid string
}

// New makes an issuer with a fresh P-256 key.
func New() (*Issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	return &Issuer{key: key, kid: "durableclaims-" + hex.EncodeToString(id[:])}, nil
}

// Load reads an issuer's private key (a JWK) from path.
func Load(path string) (*Issuer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(b, &jwk); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	key, ok := jwk.Key.(*ecdsa.PrivateKey)
	if !ok || jwk.KeyID == "" {
		return nil, fmt.Errorf("%s: not an ECDSA private JWK with a kid", path)
	}
	return &Issuer{key: key, kid: jwk.KeyID}, nil
}

// Save writes the private key to path, owner-only; an existing file is
// never replaced (its tokens would stop verifying).
func (is *Issuer) Save(path string) error {
	b, err := json.MarshalIndent(jose.JSONWebKey{Key: is.key, KeyID: is.kid, Algorithm: string(jose.ES256), Use: "sig"}, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// KeyID is the key's "kid".
func (is *Issuer) KeyID() string { return is.kid }

// JWKS is the public key set the server fetches (keySourceURIs).
func (is *Issuer) JWKS() ([]byte, error) {
	return json.MarshalIndent(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: string(jose.ES256), Use: "sig"}}}, "", "  ")
}

// Token signs role's token for namespace, valid from now for life.
func (is *Issuer) Token(role, namespace string, now time.Time, life time.Duration) (string, error) {
	if life <= 0 {
		return "", errors.New("temporalauth: a token needs a positive life")
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		return "", err
	}
	claims := jwt.Claims{Issuer: "durableclaims", Subject: Subject(role),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(life))}
	return jwt.Signed(signer).Claims(claims).Claims(map[string]any{"permissions": Permissions(role, namespace)}).Serialize()
}
