package main

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Sessions live in the browser, in a cookie signed (HS256, go-jose) with a
// key every replica shares (INBOX_SESSION_KEY): any replica behind a load
// balancer can serve any request, and nothing is stored server-side. The
// cookie is HttpOnly, SameSite=Lax, and Secure (with the __Host- prefix)
// when the inbox is served over HTTPS. It carries the approver's ID and
// the form token every POST must echo (CSRF).

// sessionTTL is how long a sign-in lasts.
const sessionTTL = 8 * time.Hour

type session struct {
	Approver string `json:"sub"`
	CSRF     string `json:"csrf"`
	Expiry   int64  `json:"exp"`
	// Dev is set for a development sign-in (no identity provider).
	Dev bool `json:"dev,omitempty"`
}

// loginState is what the OIDC round trip must bring back: the state, the
// nonce the ID token must carry, and the PKCE verifier.
type loginState struct {
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Expiry   int64  `json:"exp"`
}

type cookies struct {
	signer jose.Signer
	key    []byte
	secure bool
	now    func() time.Time
}

func newCookies(key []byte, secure bool) (*cookies, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("the session key must be at least 32 bytes, is %d", len(key))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, err
	}
	return &cookies{signer: signer, key: key, secure: secure, now: time.Now}, nil
}

func (c *cookies) name(base string) string {
	if c.secure {
		return "__Host-" + base
	}
	return base
}

func (c *cookies) set(w http.ResponseWriter, base string, v any, ttl time.Duration) error {
	tok, err := jwt.Signed(c.signer).Claims(v).Serialize()
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: c.name(base), Value: tok, Path: "/", MaxAge: int(ttl.Seconds()),
		HttpOnly: true, Secure: c.secure, SameSite: http.SameSiteLaxMode})
	return nil
}

func (c *cookies) clear(w http.ResponseWriter, base string) {
	http.SetCookie(w, &http.Cookie{Name: c.name(base), Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: c.secure,
		SameSite: http.SameSiteLaxMode})
}

var errNoCookie = errors.New("no valid cookie")

// get reads and verifies a cookie into v; exp is the claim's expiry.
func (c *cookies) get(r *http.Request, base string, v any, exp func() int64) error {
	ck, err := r.Cookie(c.name(base))
	if err != nil {
		return errNoCookie
	}
	tok, err := jwt.ParseSigned(ck.Value, []jose.SignatureAlgorithm{jose.HS256})
	if err != nil {
		return errNoCookie
	}
	if err := tok.Claims(c.key, v); err != nil {
		return errNoCookie
	}
	if c.now().Unix() >= exp() {
		return errNoCookie
	}
	return nil
}

func (c *cookies) session(r *http.Request) (session, bool) {
	var s session
	err := c.get(r, "inbox_session", &s, func() int64 { return s.Expiry })
	return s, err == nil && s.Approver != "" && s.CSRF != ""
}

func (c *cookies) startSession(w http.ResponseWriter, approver string, dev bool) error {
	return c.set(w, "inbox_session", session{Approver: approver, CSRF: randomToken(), Expiry: c.now().Add(sessionTTL).Unix(), Dev: dev}, sessionTTL)
}

// sameToken compares a form's token with the session's in constant time.
func sameToken(form, want string) bool {
	return form != "" && subtle.ConstantTimeCompare([]byte(form), []byte(want)) == 1
}

func randomToken() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // the system's randomness failed: nothing safe to do
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// A flash is the outcome of a form, shown once on the page the form
// redirects to: "Approved: receipt … accepted", or the claim's refusal.
// It lives in a signed cookie the inbox sets, bound to that page's path,
// never in the URL: a link cannot put words of its choosing into the
// page's notice or alert.
type flash struct {
	Path    string `json:"path"`
	Notice  string `json:"notice,omitempty"`
	Problem string `json:"problem,omitempty"`
	Expiry  int64  `json:"exp"`
}

// flashTTL is how long an outcome waits for its page: the redirect follows
// at once.
const flashTTL = 2 * time.Minute

// maxFlash bounds a message: a cookie holds about 4 KB.
const maxFlash = 1000

func (c *cookies) setFlash(w http.ResponseWriter, f flash) error {
	for _, m := range []*string{&f.Notice, &f.Problem} {
		if r := []rune(*m); len(r) > maxFlash {
			*m = string(r[:maxFlash]) + "…"
		}
	}
	f.Expiry = c.now().Add(flashTTL).Unix()
	return c.set(w, "inbox_flash", f, flashTTL)
}

// takeFlash returns the outcome waiting for path, and clears it.
func (c *cookies) takeFlash(w http.ResponseWriter, r *http.Request, path string) flash {
	var f flash
	if err := c.get(r, "inbox_flash", &f, func() int64 { return f.Expiry }); err != nil {
		return flash{}
	}
	c.clear(w, "inbox_flash")
	if f.Path != path {
		return flash{}
	}
	return f
}
