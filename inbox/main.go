// Command inbox is the adjusters' web inbox: the claims waiting for the
// signed-in approver, a page per claim with exactly the request they sign,
// and decisions (approve, reject, approve a lower amount, hand to a
// colleague) sent through the claim's decide update as receipts the inbox
// signs with its service key for whoever signed in. Stateless: any number
// of replicas behind a load balancer, sharing INBOX_SESSION_KEY.
//
//	INBOX_ADDR          listen address (default localhost:8088)
//	INBOX_URL           the public address (default http://INBOX_ADDR); sign-in returns to INBOX_URL/callback
//	INBOX_SIGNING_KEY   the inbox's service key file (claimsctl keygen --service inbox); its public half is in the directory
//	                    (default var/keys/inbox.key, when there: make demo's)
//	INBOX_SESSION_KEY   base64 of 32 or more random bytes, the same on every replica
//	OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET   the identity provider
//	INBOX_DEV_LOGIN=1   development only: choose an approver instead of an identity provider (loopback only)
//	JAEGER_QUERY_URL    a Jaeger query service (http://localhost:16686): /traces/{trace_id} draws a claim's trace from it
//	APPROVERS_FILE, BLOB_URL, TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, CODEC_KEYS_FILE   as for the worker
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://

	"github.com/durableclaims/durableclaims/internal/authority"
	"github.com/durableclaims/durableclaims/internal/blobs"
	"github.com/durableclaims/durableclaims/internal/config"
	"github.com/durableclaims/durableclaims/internal/store"
	"github.com/durableclaims/durableclaims/internal/telemetry"
)

func main() {
	config.OwnerOnly()
	logger := config.Logger("inbox")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopTracing, err := telemetry.Main("inbox")
	if err != nil {
		logger.Error("inbox not started", "error", err)
		os.Exit(1)
	}
	err = run(ctx, logger, os.Getenv)
	stopTracing()
	if err != nil {
		logger.Error("inbox stopped", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, getenv func(string) string) error {
	site, err := siteOf(getenv)
	if err != nil {
		return err
	}
	ck, err := sessionCookies(getenv, site, logger)
	if err != nil {
		return err
	}
	key, directory, err := signingKey(getenv)
	if err != nil {
		return err
	}
	c, err := config.Dial(ctx, logger)
	if err != nil {
		return err
	}
	defer c.Close()
	dc, err := config.DataConverter()
	if err != nil {
		return err
	}
	docs, err := blobs.Open(ctx, getenv("BLOB_URL"))
	if err != nil {
		return err
	}
	defer docs.Close()
	// The approval queue the page lists is in the claims store
	// (CLAIMS_DB), which the workflows keep.
	queue, err := store.Open(config.ClaimsDB())
	if err != nil {
		return err
	}
	defer queue.Close()

	s := &server{log: logger, temporal: c, dc: dc, namespace: config.Get("TEMPORAL_NAMESPACE", "default"), blobs: docs,
		queue: queue, cookies: ck, key: key, directory: directory,
		traces: strings.TrimSuffix(getenv("JAEGER_QUERY_URL"), "/"), http: &http.Client{Timeout: 20 * time.Second}}
	if !site.dev {
		if s.oidc, err = newOIDC(ctx, getenv("OIDC_ISSUER"), getenv("OIDC_CLIENT_ID"), getenv("OIDC_CLIENT_SECRET"), site.public+"/callback"); err != nil {
			return err
		}
	} else {
		logger.Warn("DEVELOPMENT SIGN-IN: anyone who reaches this address can sign in as any approver; never for production", "addr", site.addr)
	}
	if s.pages, err = parsePages(); err != nil {
		return err
	}
	s.routes()
	return serve(ctx, s, site, logger)
}

// site is where the inbox listens and how people sign in.
type site struct {
	addr   string // INBOX_ADDR
	public string // INBOX_URL, no trailing slash
	https  bool   // the public address is https: cookies are Secure
	dev    bool   // INBOX_DEV_LOGIN: the development sign-in
}

// siteOf reads the site from the environment, refusing the development
// sign-in anywhere but on loopback.
func siteOf(getenv func(string) string) (site, error) {
	st := site{addr: getenv("INBOX_ADDR"), public: strings.TrimSuffix(getenv("INBOX_URL"), "/"), dev: getenv("INBOX_DEV_LOGIN") == "1"}
	if st.addr == "" {
		st.addr = config.DefaultInboxAddr
	}
	if st.public == "" {
		st.public = "http://" + st.addr
	}
	pu, err := url.Parse(st.public)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return st, fmt.Errorf("INBOX_URL=%q: want http(s)://host[:port]", st.public)
	}
	st.https = pu.Scheme == "https"
	if st.dev && !config.IsLoopback(st.addr) {
		return st, fmt.Errorf("INBOX_DEV_LOGIN=1 lets anyone sign in as any approver: it is refused unless INBOX_ADDR is a loopback address, not %q", st.addr)
	}
	if st.dev && getenv("OIDC_ISSUER") != "" {
		return st, errors.New("INBOX_DEV_LOGIN=1 and OIDC_ISSUER are both set: choose one")
	}
	if !st.dev && (getenv("OIDC_ISSUER") == "" || getenv("OIDC_CLIENT_ID") == "") {
		return st, errors.New("set OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (or, on loopback for development, INBOX_DEV_LOGIN=1)")
	}
	return st, nil
}

// sessionCookies seals sessions with INBOX_SESSION_KEY: required, except
// for the development sign-in, which makes one for this process.
func sessionCookies(getenv func(string) string, st site, logger *slog.Logger) (*cookies, error) {
	sessionKey, err := base64.StdEncoding.DecodeString(getenv("INBOX_SESSION_KEY"))
	switch {
	case err != nil:
		return nil, fmt.Errorf("INBOX_SESSION_KEY: want base64: %w", err)
	case len(sessionKey) == 0 && st.dev:
		sessionKey = make([]byte, 32)
		_, _ = rand.Read(sessionKey)
		logger.Warn("INBOX_SESSION_KEY is not set: a random key for this process only (development); replicas must share one")
	case len(sessionKey) == 0:
		return nil, errors.New("INBOX_SESSION_KEY is required: base64 of 32 random bytes, the same on every replica (openssl rand -base64 32)")
	}
	ck, err := newCookies(sessionKey, st.https)
	if err != nil {
		return nil, fmt.Errorf("INBOX_SESSION_KEY: %w", err)
	}
	return ck, nil
}

// signingKey reads the inbox's service key (INBOX_SIGNING_KEY) and checks
// that the approver directory (APPROVERS_FILE, read again on every
// request) lists it as one: otherwise the claims would refuse every
// decision it signs.
func signingKey(getenv func(string) string) (authority.KeyFile, func() (authority.Book, error), error) {
	keyPath := cmp.Or(getenv("INBOX_SIGNING_KEY"), config.IfExists(config.LocalInboxKey))
	if keyPath == "" {
		return authority.KeyFile{}, nil, errors.New("INBOX_SIGNING_KEY is required: the inbox's service key file (claimsctl keygen --service inbox --out FILE --directory APPROVERS_FILE)")
	}
	key, err := authority.ReadKeyFile(keyPath)
	if err != nil {
		return key, nil, err
	}
	if key.Service == "" {
		return key, nil, fmt.Errorf("INBOX_SIGNING_KEY %s is %s's own key: the inbox signs for whoever signed in, with a service key", keyPath, key.Approver)
	}
	approvers := cmp.Or(getenv("APPROVERS_FILE"), config.IfExists(config.LocalApprovers))
	directory := func() (authority.Book, error) { return authority.Load(approvers) }
	book, err := directory()
	if err != nil {
		return key, nil, err
	}
	if s, ok := book.Signer(key.Key.KeyID); !ok || s.Service != key.Service {
		return key, nil, fmt.Errorf("the approver directory does not list the inbox's key %s as a service key: the claims would refuse every decision it signs", key.Key.KeyID)
	}
	return key, directory, nil
}

// traceRequest says which requests are spans: not a load balancer's
// health check, the static files, or the claim page's polling of its live
// state every few seconds.
func traceRequest(r *http.Request) bool {
	p := r.URL.Path
	return p != "/healthz" && !strings.HasPrefix(p, "/static/") && !strings.HasSuffix(p, "/live")
}

// serve serves the inbox on the site's address until ctx ends, then shuts
// down within 10 s.
func serve(ctx context.Context, s *server, st site, logger *slog.Logger) error {
	ln, err := net.Listen("tcp", st.addr)
	if err != nil {
		return err
	}
	var h http.Handler = s
	if telemetry.On() {
		// Each request a server span (the path, never the query: a
		// sign-in's code is in it); a decision's own span links the
		// claim's trace (telemetry.StartDecision).
		h = otelhttp.NewHandler(s, "inbox", otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			return "inbox " + r.Method
		}), otelhttp.WithFilter(traceRequest))
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	logger.Info("inbox listening", "url", st.public, "addr", ln.Addr().String(), "sign_in", map[bool]string{true: "development", false: "oidc"}[st.dev])
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
