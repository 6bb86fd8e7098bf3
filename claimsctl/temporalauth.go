package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/durableclaims/durableclaims/internal/temporalauth"
)

// temporalAuth makes (once) the signing key of a Temporal server of the
// insurer's own, writes its public key set for the server to fetch
// (keySourceURIs), and issues one token per program, printed as the lines
// of an .env file:
//
//	claimsctl temporal-auth --dir deploy/auth [--namespace default] [--life 2160h] >> .env
//
// DIR/signing-key.jwk is the private key (owner-only, never replaced: keep
// it like any signing key); DIR/jwks.json its public half. Running it again
// issues new tokens from the same key.
func temporalAuth(args []string, out io.Writer) error {
	flags := flag.NewFlagSet("temporal-auth", flag.ContinueOnError)
	dir := flags.String("dir", "", "where the signing key and the public key set live")
	namespace := flags.String("namespace", namespace(), "the namespace the tokens are for")
	life := flags.Duration("life", 90*24*time.Hour, "how long the tokens stay valid")
	if err := parseInterspersed(flags, args); err != nil {
		return err
	}
	if *dir == "" || flags.NArg() != 0 {
		return errors.New("usage: claimsctl temporal-auth --dir DIR [--namespace default] [--life 2160h]")
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	keyPath := filepath.Join(*dir, "signing-key.jwk")
	is, err := temporalauth.Load(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		if is, err = temporalauth.New(); err == nil {
			err = is.Save(keyPath)
		}
	}
	if err != nil {
		return err
	}
	jwks, err := is.JWKS()
	if err != nil {
		return err
	}
	// World-readable, whatever the umask: the web server that serves it
	// to the Temporal server runs as its own user.
	pub := filepath.Join(*dir, "jwks.json")
	if err := os.WriteFile(pub, append(jwks, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(pub, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "# Temporal tokens for namespace %s, key %s, valid until %s (claimsctl temporal-auth)\n",
		*namespace, is.KeyID(), time.Now().Add(*life).UTC().Format(time.RFC3339))
	for _, role := range temporalauth.Roles {
		tok, err := is.Token(role, *namespace, time.Now(), *life)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "TEMPORAL_%s_TOKEN=%s\n", strings.ToUpper(role), tok)
	}
	return nil
}
