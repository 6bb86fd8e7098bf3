package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// No anonymous frontend: the cluster's server checks a JWT on every call,
// with its own claim mapper and authorizer (global.authorization, "default"
// both), and each program that talks to it has an identity of its own, a
// token whose permissions name what its role needs:
//
//	role        permissions                         used by
//	admin       temporal-system:admin, <ns>:admin   this package (namespace, search attributes), operators
//	worker      <ns>:write                          bin/worker
//	starter     <ns>:write                          bin/starter
//	inbox       <ns>:write                          bin/inbox
//	claimsctl   <ns>:write                          bin/claimsctl (list and show read; dlq redrive and schedules write)
//	reader      <ns>:read                           dashboards, the UI, auditors
//
// Temporal's default authorizer does not tell a worker from a starter: any
// writer may poll any task queue and schedule activities there. That is
// why the claims worker's activities check their own authority against
// the claims store (activities/authority.go); this narrows who may try.
//
// The tokens are ES256 JWTs signed by a key this package makes per cluster;
// the server fetches its public half (a JWKS) from a loopback HTTP endpoint
// the cluster serves for its life.

// Roles, one identity per program.
const (
	RoleAdmin     = "admin"
	RoleWorker    = "worker"
	RoleStarter   = "starter"
	RoleInbox     = "inbox"
	RoleClaimsctl = "claimsctl"
	RoleReader    = "reader"
)

// Roles lists every role a cluster issues a token for.
var Roles = []string{RoleAdmin, RoleWorker, RoleStarter, RoleInbox, RoleClaimsctl, RoleReader}

func permissions(role string) []string {
	switch role {
	case RoleAdmin:
		return []string{"temporal-system:admin", Namespace + ":admin"}
	case RoleReader:
		return []string{Namespace + ":read"}
	}
	return []string{Namespace + ":write"}
}

// tokenLife is how long the tokens of a local cluster last.
const tokenLife = 30 * 24 * time.Hour

type issuer struct {
	key    *ecdsa.PrivateKey
	kid    string
	srv    *http.Server
	url    string
	tokens map[string]string
}

// newIssuer makes the cluster's signing key, serves its JWKS on loopback
// and writes one token per role under dir/tokens (owner-only).
func newIssuer(dir string) (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	is := &issuer{key: key, kid: "cluster-" + hex.EncodeToString(id[:]), tokens: map[string]string{}}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: is.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})
	is.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = is.srv.Serve(ln) }()
	is.url = "http://" + ln.Addr().String() + "/jwks.json"

	tdir := filepath.Join(dir, "tokens")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		is.close()
		return nil, err
	}
	for _, role := range Roles {
		tok, err := is.sign(role, time.Now())
		if err != nil {
			is.close()
			return nil, err
		}
		is.tokens[role] = tok
		if err := os.WriteFile(filepath.Join(tdir, role+".jwt"), []byte(tok+"\n"), 0o600); err != nil {
			is.close()
			return nil, err
		}
	}
	return is, nil
}

func (is *issuer) sign(role string, now time.Time) (string, error) {
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		return "", err
	}
	claims := jwt.Claims{Issuer: "durableclaims-cluster", Subject: "durableclaims-" + role,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)), Expiry: jwt.NewNumericDate(now.Add(tokenLife))}
	return jwt.Signed(signer).Claims(claims).Claims(map[string]any{"permissions": permissions(role)}).Serialize()
}

func (is *issuer) close() {
	if is != nil && is.srv != nil {
		_ = is.srv.Close()
	}
}

// Token is the cluster's token for role: the API key (TEMPORAL_API_KEY) of
// the program in that role.
func (c *Cluster) Token(role string) (string, error) {
	if c.auth == nil {
		return "", errors.New("cluster: started without authorization")
	}
	tok, ok := c.auth.tokens[role]
	if !ok {
		return "", fmt.Errorf("cluster: no role %q (roles: %v)", role, Roles)
	}
	return tok, nil
}

// TokensDir holds one token file per role (role.jwt, owner-only).
func (c *Cluster) TokensDir() string { return filepath.Join(c.dir, "tokens") }

// Env is the environment a program in role needs to reach the cluster:
// its address and namespace, and its token sent as an API key over the
// loopback's plaintext (TEMPORAL_TLS=false; in production the frontend
// takes TLS, and TEMPORAL_TLS_* configure it).
func (c *Cluster) Env(role string) []string {
	return append([]string{"TEMPORAL_ADDRESS=" + c.Address(), "TEMPORAL_NAMESPACE=" + Namespace}, c.AuthEnv(role)...)
}

// AuthEnv is the part of Env that carries role's token (nothing without
// authorization).
func (c *Cluster) AuthEnv(role string) []string {
	tok, err := c.Token(role)
	if err != nil {
		return nil
	}
	return []string{"TEMPORAL_API_KEY=" + tok, "TEMPORAL_TLS=false"}
}
