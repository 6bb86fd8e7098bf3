package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/durableclaims/durableclaims/internal/authority"
)

// Sign-in: OpenID Connect against the insurer's identity provider
// (OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET), authorization code with
// PKCE, state and nonce. The ID token's subject, or its verified e-mail,
// must be an approver in the directory; anyone else sees nothing. For
// development only, INBOX_DEV_LOGIN=1 offers a list of the directory's
// approvers instead, and only when the inbox listens on loopback.

type oidcLogin struct {
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	config   oauth2.Config
}

func newOIDC(ctx context.Context, issuer, clientID, secret, redirect string) (*oidcLogin, error) {
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		return nil, fmt.Errorf("OIDC provider %s: %w", issuer, err)
	}
	return &oidcLogin{provider: p, verifier: p.Verifier(&oidc.Config{ClientID: clientID}),
		config: oauth2.Config{ClientID: clientID, ClientSecret: secret, Endpoint: p.Endpoint(), RedirectURL: redirect,
			Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}}, nil
}

const loginTTL = 10 * time.Minute

// login sends the browser to the identity provider.
func (s *server) login(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		s.devLoginPage(w, r, "")
		return
	}
	st := loginState{State: randomToken(), Nonce: randomToken(), Verifier: oauth2.GenerateVerifier(), Expiry: time.Now().Add(loginTTL).Unix()}
	if err := s.cookies.set(w, "inbox_login", st, loginTTL); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot start the sign-in", err)
		return
	}
	http.Redirect(w, r, s.oidc.config.AuthCodeURL(st.State, oidc.Nonce(st.Nonce), oauth2.S256ChallengeOption(st.Verifier)), http.StatusFound)
}

// callback finishes the OIDC sign-in and maps the person to an approver.
func (s *server) callback(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		http.NotFound(w, r)
		return
	}
	var st loginState
	if err := s.cookies.get(r, "inbox_login", &st, func() int64 { return st.Expiry }); err != nil || !sameToken(r.URL.Query().Get("state"), st.State) {
		s.fail(w, r, http.StatusBadRequest, "the sign-in expired or did not start here: sign in again", nil)
		return
	}
	s.cookies.clear(w, "inbox_login")
	if e := r.URL.Query().Get("error"); e != "" {
		s.fail(w, r, http.StatusUnauthorized, "the identity provider refused the sign-in: "+e, nil)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	tok, err := s.oidc.config.Exchange(ctx, r.URL.Query().Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		s.fail(w, r, http.StatusUnauthorized, "the sign-in could not be completed", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	id, err := s.oidc.verifier.Verify(ctx, raw)
	if err != nil || !sameToken(id.Nonce, st.Nonce) {
		s.fail(w, r, http.StatusUnauthorized, "the identity token did not verify", err)
		return
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified bool   `json:"email_verified"`
	}
	_ = id.Claims(&claims)
	book, err := s.directory()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "the approver directory cannot be read", err)
		return
	}
	ap, ok := approverFor(book.Approvers, id.Subject, claims.Email, claims.EmailVerified)
	if !ok {
		s.log.Warn("sign-in refused: not an approver", "subject", id.Subject)
		s.fail(w, r, http.StatusForbidden, "you are signed in with your identity provider, but you are not an approver here", nil)
		return
	}
	if err := s.cookies.startSession(w, ap.ID, false); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot start the session", err)
		return
	}
	s.log.Info("signed in", "approver", ap.ID)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// approverFor maps an identity to an approver: by subject (the approver's
// ID), or by a verified e-mail address.
func approverFor(d authority.Directory, subject, email string, verified bool) (authority.Approver, bool) {
	if ap, ok := d.Find(subject); ok {
		return ap, true
	}
	if !verified || email == "" {
		return authority.Approver{}, false
	}
	for _, ap := range d {
		if ap.Email != "" && strings.EqualFold(ap.Email, email) {
			return ap, true
		}
	}
	return authority.Approver{}, false
}

// devLoginPage lists the directory's approvers to sign in as: development
// only (INBOX_DEV_LOGIN=1 on a loopback address).
func (s *server) devLoginPage(w http.ResponseWriter, r *http.Request, problem string) {
	book, err := s.directory()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "the approver directory cannot be read", err)
		return
	}
	token := randomToken()
	if err := s.cookies.set(w, "inbox_login", loginState{State: token, Expiry: time.Now().Add(loginTTL).Unix()}, loginTTL); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot start the sign-in", err)
		return
	}
	s.render(w, r, http.StatusOK, "devlogin", page{Title: "Development sign-in", Problem: problem,
		Data: map[string]any{"Approvers": book.Approvers, "Token": token}})
}

func (s *server) devLogin(w http.ResponseWriter, r *http.Request) {
	if s.oidc != nil {
		http.NotFound(w, r)
		return
	}
	var st loginState
	if err := s.cookies.get(r, "inbox_login", &st, func() int64 { return st.Expiry }); err != nil || !sameToken(r.PostFormValue("token"), st.State) {
		s.fail(w, r, http.StatusForbidden, "missing or wrong form token: reload the sign-in page", nil)
		return
	}
	book, err := s.directory()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, "the approver directory cannot be read", err)
		return
	}
	ap, ok := book.Approvers.Find(r.PostFormValue("approver"))
	if !ok {
		s.devLoginPage(w, r, "choose an approver from the list")
		return
	}
	s.cookies.clear(w, "inbox_login")
	if err := s.cookies.startSession(w, ap.ID, true); err != nil {
		s.fail(w, r, http.StatusInternalServerError, "cannot start the session", err)
		return
	}
	s.log.Warn("development sign-in", "approver", ap.ID)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	sess, ok := s.cookies.session(r)
	if ok && !sameToken(r.PostFormValue("csrf"), sess.CSRF) {
		s.fail(w, r, http.StatusForbidden, "missing or wrong form token", nil)
		return
	}
	s.cookies.clear(w, "inbox_session")
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
