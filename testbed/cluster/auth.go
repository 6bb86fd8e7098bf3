package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
)

// No anonymous frontend: the cluster's server checks a JWT on every call
// with its own claim mapper and authorizer, and each program that talks to
// it has an identity of its own (internal/temporalauth: one token per role,
// signed by a key made per cluster). The server fetches the key's JWKS from
// a loopback HTTP endpoint the cluster serves for its life.

// tokenLife is how long the tokens of a local cluster last.
const tokenLife = 30 * 24 * time.Hour

type issuer struct {
	srv    *http.Server
	url    string
	tokens map[string]string
}

// newIssuer makes the cluster's signing key, serves its JWKS on loopback
// and writes one token per role under dir/tokens (owner-only).
func newIssuer(dir string) (_ *issuer, err error) {
	is, err := temporalauth.New()
	if err != nil {
		return nil, err
	}
	jwks, err := is.JWKS()
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
	out := &issuer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, url: "http://" + ln.Addr().String() + "/jwks.json",
		tokens: map[string]string{}}
	go func() { _ = out.srv.Serve(ln) }()
	defer func() {
		if err != nil {
			out.close()
		}
	}()
	tdir := filepath.Join(dir, "tokens")
	if err := os.MkdirAll(tdir, 0o700); err != nil {
		return nil, err
	}
	for _, role := range temporalauth.Roles {
		tok, err := is.Token(role, Namespace, time.Now(), tokenLife)
		if err != nil {
			return nil, err
		}
		out.tokens[role] = tok
		if err := os.WriteFile(filepath.Join(tdir, role+".jwt"), []byte(tok+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	return out, nil
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
		return "", fmt.Errorf("cluster: no role %q (roles: %v)", role, temporalauth.Roles)
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
